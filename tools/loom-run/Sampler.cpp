//===- Sampler.cpp - Text from the model's next-token scores --------------===//

#include "Sampler.h"

#include "Bpe.h"

#include "loom/splitmix.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

using namespace loom;

namespace {
/// The runtime's stream, as the data loader shuffles with.
struct Random {
  uint64_t state;
  /// Uniform in [0, 1).
  double uniform() { return (loom_splitmix64(&state) >> 11) * 0x1p-53; }
};

/// One token from `scores` (the vocabulary's, without padding columns).
int32_t draw(const float *scores, int64_t vocab, const SampleSettings &settings,
             Random &random) {
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // By score, ties to the smaller id, so that greedy decoding is defined.
  auto better = [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  if (settings.temperature <= 0)
    return *std::min_element(order.begin(), order.end(), better);
  int64_t keep =
      settings.topK > 0 ? std::min<int64_t>(settings.topK, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), better);
  std::vector<double> weights(keep);
  double top = scores[order[0]], total = 0;
  for (int64_t i = 0; i < keep; ++i)
    total += weights[i] =
        std::exp((scores[order[i]] - top) / settings.temperature);
  double pick = random.uniform() * total;
  for (int64_t i = 0; i < keep; ++i) {
    pick -= weights[i];
    if (pick < 0)
      return order[i];
  }
  return order[keep - 1];
}
} // namespace

std::string loom::sample(loom_model *model, const loom_model_info &info,
                         const SampleSettings &settings, long long count,
                         std::vector<int32_t> &tokens) {
  int64_t rows = info.logits_rows, sequence = info.sequence;
  if (tokens.empty())
    return "nothing to continue: the prompt holds no token";
  std::vector<int32_t> window(rows * sequence, 0);
  std::vector<float> scores(rows * sequence * info.padded_vocab);
  Random random{settings.seed};
  for (long long n = 0; n < count; ++n) {
    // The newest tokens, from the first position: causal attention makes
    // the scores of position p those of tokens 0..p whatever follows.
    int64_t length = std::min<int64_t>(tokens.size(), sequence);
    std::copy(tokens.end() - length, tokens.end(), window.begin());
    if (loom_model_logits(model, window.data(), scores.data()))
      return loom_last_error();
    const float *last = scores.data() + (length - 1) * info.padded_vocab;
    tokens.push_back(draw(last, info.vocab, settings, random));
  }
  return "";
}

std::string Vocabulary::read(const std::string &path) {
  std::ifstream file(path);
  if (!file)
    return path + ": cannot open: " + std::strerror(errno);
  // The header: format, version, tokens, end-of-text token.
  std::string line;
  long long version = 0, count = 0, eot = -1;
  if (!std::getline(file, line) ||
      std::sscanf(line.c_str(), "loom-vocab %lld %lld %lld", &version, &count,
                  &eot) != 3 ||
      version != 1 || count < 1 || eot < 0 || eot >= count)
    return path + ":1: not a vocabulary (expected 'loom-vocab 1 TOKENS "
                  "END_OF_TEXT', as scripts/prepare-data.py writes)";
  for (int64_t number = 2; std::getline(file, line); ++number) {
    std::string text;
    if (!parseHex(line, text))
      return path + ":" + std::to_string(number) +
             ": not a token's bytes in hexadecimal";
    bytes.push_back(std::move(text));
  }
  if (static_cast<long long>(bytes.size()) != count)
    return path + ": " + std::to_string(bytes.size()) +
           " tokens, and its header says " + std::to_string(count);
  endOfText_ = static_cast<int32_t>(eot);
  return "";
}

std::string Vocabulary::decode(const std::vector<int32_t> &tokens) const {
  std::string text;
  for (int32_t token : tokens) {
    if (isBytes() && token < 256)
      text += static_cast<char>(token);
    else if (!isBytes() && token >= 0 &&
             static_cast<size_t>(token) < bytes.size())
      text += bytes[token];
    else
      text += "<" + std::to_string(token) + ">";
  }
  return text;
}

std::vector<int32_t> Vocabulary::encodeBytes(const std::string &text) const {
  std::vector<int32_t> tokens;
  for (unsigned char c : text)
    tokens.push_back(c);
  return tokens;
}

std::string loom::printable(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 || c == '\n' || c == '\t') {
      out += static_cast<char>(c);
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
    out += escaped;
  }
  return out;
}
