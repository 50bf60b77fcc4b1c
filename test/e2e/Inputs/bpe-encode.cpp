//===- bpe-encode.cpp - Text to tokens through loom-run's BPE encoder -----===//
//
// Test driver for tools/loom-run/Bpe.cpp (check-bpe.py runs it):
//
//   bpe-encode BPE_TXT < LINES
//
// reads the table, then each line of standard input, a text's bytes in
// hexadecimal, and prints its token ids separated by spaces (an empty line
// for no text), or `error: ...` where the encoder refuses it. A table it
// cannot read is reported on standard error, exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Bpe.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bpe-encode BPE_TXT < HEX_LINES\n");
    return 2;
  }
  loom::BpeEncoder encoder;
  if (std::string error = encoder.read(argv[1]); !error.empty()) {
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
