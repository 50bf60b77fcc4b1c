//===- Sampler.h - Text from the model's next-token scores ------*- C++ -*-===//
//
// --sample-every and --generate (docs/loom-run.md): tokens drawn one at a
// time from an artifact's logits entry (loomc --logits), greedily or from
// the softmax at a temperature over the k best, from a seed, and turned
// back into text with the vocabulary the data was tokenized with.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_SAMPLER_H
#define LOOM_TOOLS_LOOMRUN_SAMPLER_H

#include "loom/runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct SampleSettings {
  /// 0 draws the most likely token; above, the softmax of scores / t.
  double temperature = 1.0;
  /// Draw among the k most likely tokens only; 0 for all of them.
  long long topK = 0;
  uint64_t seed = 0;
};

/// Generates `count` tokens after `prompt` (which it extends): each from
/// the scores of the last position of the newest `sequence` tokens. ""
/// or what went wrong.
std::string sample(loom_model *model, const loom_model_info &info,
                   const SampleSettings &settings, long long count,
                   std::vector<int32_t> &tokens);

/// How tokens read as text: each token's bytes, from a data directory's
/// vocab.hex (scripts/prepare-data.py writes it: a header line
/// `loom-vocab 1 TOKENS END_OF_TEXT`, then a line of hexadecimal bytes per
/// token) or, for a model trained on bytes, the byte itself.
class Vocabulary {
public:
  /// Bytes as tokens.
  Vocabulary() = default;
  /// Reads `path` (vocab.hex): "" or what is wrong with it.
  std::string read(const std::string &path);
  bool isBytes() const { return bytes.empty(); }
  /// The token each document starts after; -1 for bytes.
  int32_t endOfText() const { return isBytes() ? -1 : endOfText_; }
  int64_t size() const { return static_cast<int64_t>(bytes.size()); }
  /// Each token's bytes, by id.
  const std::vector<std::string> &tokenBytes() const { return bytes; }
  /// The text of `tokens`; bytes no table gives are written as <id>.
  std::string decode(const std::vector<int32_t> &tokens) const;
  /// `text` as tokens where each byte is one: only for bytes.
  std::vector<int32_t> encodeBytes(const std::string &text) const;

private:
  std::vector<std::string> bytes;
  int32_t endOfText_ = -1;
};

/// Text as a terminal shows it: bytes below 0x20 but newline and tab as
/// \xHH, so that a sample cannot move the cursor or clear the screen.
std::string printable(const std::string &text);

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_SAMPLER_H
