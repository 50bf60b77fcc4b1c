//===- bpe-encode.cpp - Text to tokens through loom-run's BPE encoder -----===//
//
// Test driver for tools/loom-run/Bpe.cpp (check-bpe.py runs it):
//
//   bpe-encode BPE_TXT VOCAB_HEX < LINES
//
// reads the table and the vocabulary it merges, then each line of standard
// input, a text's bytes in hexadecimal, and prints its token ids separated by
// spaces (an empty line for no text), or `error: ...` where the encoder refuses
// it. A table it cannot read is reported on standard error, exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Bpe.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

/// vocab.hex's tokens' bytes, after its header line; false for a line
/// that is not hexadecimal.
static bool readVocabulary(const char *path, std::vector<std::string> &bytes) {
  std::ifstream file(path);
  std::string line, token;
  if (!std::getline(file, line))
    return false;
  while (std::getline(file, line)) {
    if (!loom::parseHex(line, token))
      return false;
    bytes.push_back(token);
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bpe-encode BPE_TXT VOCAB_HEX < HEX_LINES\n");
    return 2;
  }
  std::vector<std::string> vocabulary;
  if (!readVocabulary(argv[2], vocabulary)) {
    std::fprintf(stderr, "bpe-encode: error: %s: not a vocabulary\n", argv[2]);
    return 1;
  }
  loom::BpeEncoder encoder;
  if (std::string error = encoder.read(argv[1], vocabulary); !error.empty()) {
    std::fprintf(stderr, "bpe-encode: error: %s\n", error.c_str());
    return 1;
  }
  std::string line, text, out;
  std::vector<int32_t> tokens;
  for (long number = 1; std::getline(std::cin, line); ++number) {
    if (!loom::parseHex(line, text)) {
      std::fprintf(stderr, "bpe-encode: error: line %ld: not hexadecimal\n",
                   number);
      return 1;
    }
    if (std::string error = encoder.encode(text, tokens); !error.empty()) {
      std::printf("error: %s\n", error.c_str());
      continue;
    }
    out.clear();
    for (size_t i = 0; i < tokens.size(); ++i)
      out += (i ? " " : "") + std::to_string(tokens[i]);
    std::printf("%s\n", out.c_str());
  }
  return 0;
}
