//===- Bpe.h - Text to tokens with GPT-2's byte-level BPE -------*- C++ -*-===//
//
// Text prompts for a model trained on a BPE tokenizer's tokens: the text is
// split as GPT-2's pre-tokenizer splits it and each piece's bytes merged by
// the table scripts/prepare-data.py writes next to vocab.hex (bpe.txt,
// docs/data.md), so that the ids are those the data was tokenized with:
// tiktoken's gpt2 encoding, or a byte-level tokenizer.json's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_BPE_H
#define LOOM_TOOLS_LOOMRUN_BPE_H

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

/// A bpe.txt table: each byte's token and the merges of two adjacent tokens
/// into one, each with a priority. A piece of text starts as its bytes'
/// tokens; the pair with the lowest priority merges first, the leftmost of
/// equals, until no adjacent pair merges.
class BpeEncoder {
public:
  /// Reads `path` (bpe.txt), the merges of the vocabulary whose tokens'
  /// bytes are `tokenBytes` (vocab.hex's): "" or what is wrong with it,
  /// naming the line. After an error the encoder is not to be used.
  std::string read(const std::string &path,
                   const std::vector<std::string> &tokenBytes);
  /// Sets `tokens` to `text`'s: "" or, for text that is not UTF-8 (as
  /// tiktoken and tokenizers take only Unicode text), "not UTF-8 text (byte
  /// N)" with the offset of the first byte that is not, and no tokens.
  /// It changes nothing in the encoder: calls may run concurrently.
  std::string encode(const std::string &text,
                     std::vector<int32_t> &tokens) const;

private:
  struct Merge {
    int64_t priority;
    int32_t merged;
    /// The table's line, for errors.
    int64_t line;
  };
  /// Appends the tokens of one piece's bytes.
  void mergePiece(const char *bytes, size_t count,
                  std::vector<int32_t> &tokens) const;
  /// The merge of `left` then `right`, or null.
  const Merge *find(int32_t left, int32_t right) const;

  std::array<int32_t, 256> byteTokens{};
  std::unordered_map<uint64_t, Merge> merges;
};

/// `text`'s bytes written two hexadecimal digits each (vocab.hex's
/// lines), into `bytes`; false where it is not such digits.
bool parseHex(const std::string &text, std::string &bytes);

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_BPE_H
