//===- Bpe.cpp - Text to tokens with GPT-2's byte-level BPE ---------------===//

#include "Bpe.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string_view>

using namespace loom;

namespace {
struct CodePointRange {
  char32_t first, last;
};

#include "UnicodeClasses.inc"

template <size_t N>
bool inRanges(const CodePointRange (&ranges)[N], char32_t c) {
  const CodePointRange *range = std::lower_bound(
      std::begin(ranges), std::end(ranges), c,
      [](const CodePointRange &r, char32_t code) { return r.last < code; });
  return range != std::end(ranges) && range->first <= c;
}

/// What GPT-2's pattern tells code points apart by: \p{L}, \p{N}, \s, and
/// the rest, [^\s\p{L}\p{N}].
enum class CharClass : uint8_t { Letter, Number, Space, Other };

CharClass classify(char32_t c) {
  if (inRanges(WhiteSpace, c))
    return CharClass::Space;
  if (inRanges(Letters, c))
    return CharClass::Letter;
  if (inRanges(Numbers, c))
    return CharClass::Number;
  return CharClass::Other;
}

/// Decodes `text` into its code points and the offset each starts at.
/// Returns the offset of the first sequence that is not UTF-8 (an overlong
/// form, a surrogate, past U+10FFFF, cut short), as Python's decoder
/// rejects them, or npos.
size_t decodeUtf8(const std::string &text, std::vector<char32_t> &points,
                  std::vector<size_t> &starts) {
  for (size_t at = 0; at < text.size();) {
    unsigned char lead = static_cast<unsigned char>(text[at]);
    size_t length;
    char32_t c, least;
    if (lead < 0x80) {
      length = 1, c = lead, least = 0;
    } else if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2, c = lead & 0x1f, least = 0x80;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3, c = lead & 0x0f, least = 0x800;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4, c = lead & 0x07, least = 0x10000;
    } else {
      return at;
    }
    if (text.size() - at < length)
      return at;
    for (size_t i = 1; i < length; ++i) {
      unsigned char next = static_cast<unsigned char>(text[at + i]);
      if ((next & 0xc0) != 0x80)
        return at;
      c = c << 6 | (next & 0x3f);
    }
    if (c < least || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
      return at;
    points.push_back(c);
    starts.push_back(at);
    at += length;
  }
  return std::string::npos;
}

/// The end of the piece of GPT-2's pattern that starts at `at`:
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// The first alternative that matches wins, each as long as it can be.
size_t pieceEnd(const std::vector<char32_t> &text,
                const std::vector<CharClass> &classes, size_t at) {
  size_t n = text.size();
  // The contractions: lower case ASCII only, whatever follows them.
  if (text[at] == '\'' && at + 1 < n) {
    char32_t c = text[at + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
      return at + 2;
    char32_t d = at + 2 < n ? text[at + 2] : 0;
    if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') ||
        (c == 'l' && d == 'l'))
      return at + 3;
  }
  // A run of letters, digits or others, with the one space (U+0020 only)
  // before it; a space before white space starts no such run.
  size_t start = at;
  if (text[at] == ' ' && at + 1 < n && classes[at + 1] != CharClass::Space)
    start = at + 1;
  if (classes[start] != CharClass::Space) {
    size_t end = start + 1;
    while (end < n && classes[end] == classes[start])
      ++end;
    return end;
  }
  // White space: before anything else, the run leaves its last character
  // to go with what follows (\s+(?!\S)); a run of one cannot (\s+).
  size_t end = at + 1;
  while (end < n && classes[end] == CharClass::Space)
    ++end;
  if (end < n && end - at > 1)
    --end;
  return end;
}

uint64_t pairKey(int32_t left, int32_t right) {
  return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
}

std::string hex(const std::string &bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : bytes)
    text += {digits[byte >> 4], digits[byte & 15]};
  return text;
}

} // namespace

bool loom::parseHex(const std::string &text, std::string &bytes) {
  bytes.clear();
  if (text.size() % 2)
    return false;
  for (size_t i = 0; i < text.size(); i += 2) {
    if (!std::isxdigit(static_cast<unsigned char>(text[i])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 1])))
      return false;
    bytes += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
  }
  return true;
}

namespace {
/// bpe.txt, a line at a time, split into fields.
struct LineReader {
  std::string path;
  std::ifstream file;
  std::string line;
  std::vector<std::string_view> fields;
  int64_t number = 0;

  bool next() {
    fields.clear();
    if (!std::getline(file, line))
      return false;
    ++number;
    for (size_t at = 0;;) {
      at = line.find_first_not_of(" \t\r", at);
      if (at == std::string::npos)
        break;
      size_t end = std::min(line.find_first_of(" \t\r", at), line.size());
      fields.emplace_back(line.data() + at, end - at);
      at = end;
    }
    return true;
  }
  std::string error(int64_t at, const std::string &message) const {
    return path + ":" + std::to_string(at) + ": " + message;
  }
  std::string error(const std::string &message) const {
    return error(number, message);
  }
};

/// `text` as a decimal integer from 0 to `most`, or -1.
int64_t parseCount(std::string_view text,
                   int64_t most = std::numeric_limits<int64_t>::max()) {
  int64_t value = -1;
  auto [end, failure] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (failure != std::errc() || end != text.data() + text.size() || value < 0 ||
      value > most)
    return -1;
  return value;
}

std::string byteName(int byte) {
  return "byte 0x" + hex(std::string(1, char(byte)));
}

/// bpe.txt's first four lines: `loom-bpe 1 TOKENS`, `pattern gpt2`, `bytes`
/// and each byte's token, `merges COUNT`.
std::string readHeader(LineReader &in, int64_t &size,
                       std::array<int32_t, 256> &byteTokens, int64_t &count) {
  if (!in.next() || in.fields.size() != 3 || in.fields[0] != "loom-bpe")
    return in.error(1, "not a BPE table (expected 'loom-bpe 1 TOKENS', as "
                       "scripts/prepare-data.py writes)");
  if (in.fields[1] != "1")
    return in.error("version " + std::string(in.fields[1]) +
                    " of the format; this loom-run reads version 1");
  // Ids are int32 in the runtime.
  size = parseCount(in.fields[2], int64_t(1) << 31);
  if (size < 1)
    return in.error("not a vocabulary size: '" + std::string(in.fields[2]) +
                    "' (expected 1 to 2^31 tokens)");
  if (!in.next() || in.fields.size() != 2 || in.fields[0] != "pattern")
    return in.error(2, "expected 'pattern NAME'");
  if (in.fields[1] != "gpt2")
    return in.error("pattern '" + std::string(in.fields[1]) +
                    "': this loom-run knows gpt2's only");
  if (!in.next() || in.fields.empty() || in.fields[0] != "bytes")
    return in.error(3, "expected 'bytes' and the token of each byte");
  if (in.fields.size() != 257)
    return in.error(std::to_string(in.fields.size() - 1) +
                    " byte tokens (expected 256, for bytes 0 to 255)");
  for (int byte = 0; byte < 256; ++byte) {
    int64_t token = parseCount(in.fields[byte + 1]);
    if (token < 0 || token >= size)
      return in.error(byteName(byte) + "'s token '" +
                      std::string(in.fields[byte + 1]) +
                      "' is not an id below " + std::to_string(size));
    byteTokens[byte] = int32_t(token);
  }
  if (!in.next() || in.fields.size() != 2 || in.fields[0] != "merges" ||
      (count = parseCount(in.fields[1])) < 0)
    return in.error(4, "expected 'merges COUNT'");
  return "";
}

/// A merge line, `LEFT RIGHT MERGED PRIORITY`, into `ids` and `priority`,
/// its priority no lower than `last`'s (which it becomes).
std::string readMerge(const LineReader &in, int64_t size, int64_t &last,
                      int32_t (&merge)[3]) {
  int64_t ids[3] = {-1, -1, -1}, priority = -1;
  if (in.fields.size() == 4) {
    for (int i = 0; i < 3; ++i)
      ids[i] = parseCount(in.fields[i]);
    priority = parseCount(in.fields[3]);
  }
  if (std::count(std::begin(ids), std::end(ids), -1) || priority < 0)
    return in.error("not a merge (expected 'LEFT RIGHT MERGED PRIORITY', "
                    "four integers from 0)");
  for (int64_t id : ids)
    if (id >= size)
      return in.error("token " + std::to_string(id) +
                      " is outside the vocabulary of " + std::to_string(size) +
                      " the header gives");
  if (priority < last)
    return in.error("priority " + std::to_string(priority) + " after " +
                    std::to_string(last) +
                    ": the merges are listed by priority");
  last = priority;
  for (int i = 0; i < 3; ++i)
    merge[i] = int32_t(ids[i]);
  return "";
}

} // namespace

std::string BpeEncoder::read(const std::string &path,
                             const std::vector<std::string> &tokenBytes) {
  merges.clear();
  LineReader in;
  in.path = path;
  in.file.open(path);
  if (!in.file)
    return path + ": cannot open: " + std::strerror(errno);
  int64_t size = 0, count = 0;
  if (std::string error = readHeader(in, size, byteTokens, count);
      !error.empty())
    return error;
  // The table must be the vocabulary's: its tokens, and each merge making
  // the bytes the vocabulary gives the merged token.
  if (size != static_cast<int64_t>(tokenBytes.size()))
    return in.error(1, "merges for a vocabulary of " + std::to_string(size) +
                           " tokens, and the vocabulary holds " +
                           std::to_string(tokenBytes.size()));
  for (int byte = 0; byte < 256; ++byte)
    if (tokenBytes[byteTokens[byte]] != std::string(1, char(byte)))
      return in.error(3, byteName(byte) + "'s token " +
                             std::to_string(byteTokens[byte]) +
                             " is the vocabulary's bytes " +
                             hex(tokenBytes[byteTokens[byte]]));
  // As many as the header says, within reason: a file could claim any.
  merges.reserve(size_t(std::min<int64_t>(count, 1 << 22)));
  int64_t last = 0, read = 0;
  int32_t ids[3];
  for (; in.next(); ++read) {
    if (std::string error = readMerge(in, size, last, ids); !error.empty())
      return error;
    if (tokenBytes[ids[0]] + tokenBytes[ids[1]] != tokenBytes[ids[2]])
      return in.error("token " + std::to_string(ids[2]) + " is not tokens " +
                      std::to_string(ids[0]) + " and " +
                      std::to_string(ids[1]) +
                      " joined in the vocabulary: not its merges");
    auto [known, added] =
        merges.emplace(pairKey(ids[0], ids[1]), Merge{last, ids[2], in.number});
    if (!added)
      return in.error("merges " + std::to_string(ids[0]) + " and " +
                      std::to_string(ids[1]) + " again, as line " +
                      std::to_string(known->second.line) + " does");
  }
  if (read != count)
    return path + ": " + std::to_string(read) +
           " merges, and its header says " + std::to_string(count);
  return "";
}

const BpeEncoder::Merge *BpeEncoder::find(int32_t left, int32_t right) const {
  auto merge = merges.find(pairKey(left, right));
  return merge == merges.end() ? nullptr : &merge->second;
}

void BpeEncoder::mergePiece(const char *bytes, size_t count,
                            std::vector<int32_t> &tokens) const {
  std::vector<int32_t> parts(count);
  for (size_t i = 0; i < count; ++i)
    parts[i] = byteTokens[static_cast<unsigned char>(bytes[i])];
  // Each adjacent pair's priority, kept so that a merge looks up only the
  // two pairs it changes. A scan for the best makes a piece's merging
  // quadratic in its bytes, as tiktoken's is: pieces are mostly words.
  constexpr int64_t never = std::numeric_limits<int64_t>::max();
  auto priorityAt = [&](size_t i) {
    const Merge *merge = find(parts[i], parts[i + 1]);
    return merge ? merge->priority : never;
  };
  std::vector<int64_t> priorities(count - 1);
  for (size_t i = 0; i + 1 < count; ++i)
    priorities[i] = priorityAt(i);
  while (!priorities.empty()) {
    // min_element: the leftmost of equals.
    size_t best = std::min_element(priorities.begin(), priorities.end()) -
                  priorities.begin();
    if (priorities[best] == never)
      break;
    parts[best] = find(parts[best], parts[best + 1])->merged;
    parts.erase(parts.begin() + best + 1);
    priorities.erase(priorities.begin() + best);
    if (best > 0)
      priorities[best - 1] = priorityAt(best - 1);
    if (best < priorities.size())
      priorities[best] = priorityAt(best);
  }
  tokens.insert(tokens.end(), parts.begin(), parts.end());
}

std::string BpeEncoder::encode(const std::string &text,
                               std::vector<int32_t> &tokens) const {
  tokens.clear();
  std::vector<char32_t> points;
  std::vector<size_t> starts;
  size_t bad = decodeUtf8(text, points, starts);
  if (bad != std::string::npos)
    return "not UTF-8 text (byte " + std::to_string(bad) + ")";
  std::vector<CharClass> classes(points.size());
  std::transform(points.begin(), points.end(), classes.begin(), classify);
  starts.push_back(text.size());
  for (size_t at = 0; at < points.size();) {
    size_t end = pieceEnd(points, classes, at);
    mergePiece(text.data() + starts[at], starts[end] - starts[at], tokens);
    at = end;
  }
  return "";
}
