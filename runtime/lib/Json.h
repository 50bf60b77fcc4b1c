//===- Json.h - The part of JSON the runtime reads --------------*- C++ -*-===//
//
// Safetensors headers, Hugging Face shard indexes and prepare-data's
// meta.json: objects, arrays, strings, numbers and literals, with \u
// escapes kept as written (the names these files hold are ASCII).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_JSON_H
#define LOOM_RUNTIME_LIB_JSON_H

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace loom {

/// One JSON value.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *get(const std::string &key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

/// A recursive-descent reader of one JSON text, nested at most 64 deep.
class JsonReader {
public:
  explicit JsonReader(const std::string &text) : text(text) {}

  bool parse(Json &out) {
    if (!value(out, 0))
      return false;
    skipSpace();
    return pos == text.size();
  }
  size_t position() const { return pos; }

private:
  void skipSpace() {
    while (pos < text.size() && std::strchr(" \t\r\n", text[pos]))
      ++pos;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }
  bool string(std::string &out) {
    if (pos >= text.size() || text[pos] != '"')
      return false;
    for (++pos; pos < text.size(); ++pos) {
      char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++pos >= text.size())
        return false;
      const char *escapes = "\"\\/bfnrt", *meanings = "\"\\/\b\f\n\r\t";
      if (const char *e = std::strchr(escapes, text[pos]); e && *e) {
        out += meanings[e - escapes];
      } else if (text[pos] == 'u' && pos + 4 < text.size()) {
        // Names are ASCII in practice; others keep their escape.
        out += text.substr(pos - 1, 6);
        pos += 4;
      } else {
        return false;
      }
    }
    return false;
  }
  bool value(Json &out, int depth) {
    skipSpace();
    if (pos >= text.size() || depth > 64)
      return false;
    char c = text[pos];
    if (c == '{' || c == '[') {
      bool object = c == '{';
      out.kind = object ? Json::Object : Json::Array;
      ++pos;
      skipSpace();
      if (pos < text.size() && text[pos] == (object ? '}' : ']')) {
        ++pos;
        return true;
      }
      for (;;) {
        Json item;
        if (object) {
          std::string key;
          skipSpace();
          if (!string(key))
            return false;
          skipSpace();
          if (pos >= text.size() || text[pos++] != ':' ||
              !value(item, depth + 1))
            return false;
          out.members.emplace_back(std::move(key), std::move(item));
        } else {
          if (!value(item, depth + 1))
            return false;
          out.items.push_back(std::move(item));
        }
        skipSpace();
        if (pos >= text.size())
          return false;
        char next = text[pos++];
        if (next == (object ? '}' : ']'))
          return true;
        if (next != ',')
          return false;
      }
    }
    if (c == '"') {
      out.kind = Json::String;
      return string(out.text);
    }
    if (literal("true") || literal("false")) {
      out.kind = Json::Bool;
      return true;
    }
    if (literal("null"))
      return true;
    char *end = nullptr;
    out.kind = Json::Number;
    out.number = std::strtod(text.c_str() + pos, &end);
    if (end == text.c_str() + pos)
      return false;
    pos = end - text.c_str();
    return true;
  }

  const std::string &text;
  size_t pos = 0;
};

} // namespace loom

#endif // LOOM_RUNTIME_LIB_JSON_H
