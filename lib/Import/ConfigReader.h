//===- ConfigReader.h - Reading JSON model descriptions ---------*- C++ -*-===//
//
// What the readers of a model description's sections share: a reader of one
// JSON object that reports each problem with its field's dotted path and
// remembers the keys it read, and the reader of the architecture, whose keys
// are each model family's Hugging Face config.json keys. Private to the
// LoomImport library.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_CONFIGREADER_H
#define LOOM_IMPORT_CONFIGREADER_H

#include "loom/Import/ModelConfig.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mlir {
namespace loom {
namespace config_reader {
namespace json = llvm::json;
using llvm::StringRef;

/// Describes a JSON value for "expected X, got Y" messages.
inline std::string describe(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return *value.getAsBoolean() ? "true" : "false";
  case json::Value::String:
    return ("the string \"" + *value.getAsString() + "\"").str();
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  case json::Value::Number: {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << value;
    return text;
  }
  }
  llvm_unreachable("unknown JSON kind");
}

/// Reads the fields of one JSON object, remembering which keys were used so
/// that the rest can be reported as unknown.
class ObjectReader {
public:
  ObjectReader(const json::Object &object, StringRef path,
               ConfigDiagnostics &diag)
      : object(object), path(path.str()), diag(diag) {}

  std::string field(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  bool has(StringRef key) const { return object.get(key) != nullptr; }

  /// Returns the value of `key` and marks it used; reports a missing
  /// required key.
  const json::Value *get(StringRef key, bool required) {
    used.insert(key);
    const json::Value *value = object.get(key);
    if (!value && required)
      diag.error("missing required field '" + field(key) + "'");
    return value;
  }

  void error(StringRef key, const llvm::Twine &message) {
    diag.error("field '" + field(key) + "': " + message);
  }

  void mismatch(StringRef key, StringRef expected, const json::Value &got) {
    error(key, "expected " + expected + ", got " + describe(got));
  }

  /// Reads an integer of at least `min` into `out`; leaves `out` alone when
  /// the key is absent. Returns whether the key was present.
  bool readInt(StringRef key, int64_t &out, bool required, int64_t min = 1) {
    const json::Value *value = get(key, required);
    if (!value)
      return false;
    std::optional<int64_t> number = value->getAsInteger();
    if (!number) {
      mismatch(key, min == 1 ? "a positive integer" : "an integer", *value);
      return true;
    }
    if (*number < min) {
      mismatch(key,
               min == 1 ? "a positive integer"
                        : ("an integer of at least " + llvm::Twine(min)).str(),
               *value);
      return true;
    }
    out = *number;
    return true;
  }

  /// Reads a finite number into `out`, checking it with `valid`, which
  /// describes the accepted range in `expected`.
  bool readNumber(StringRef key, double &out, bool required,
                  function_ref<bool(double)> valid, StringRef expected) {
    const json::Value *value = get(key, required);
    if (!value)
      return false;
    std::optional<double> number = value->getAsNumber();
    if (!number || !std::isfinite(*number) || !valid(*number)) {
      mismatch(key, expected, *value);
      return true;
    }
    out = *number;
    return true;
  }

  bool readString(StringRef key, std::string &out, bool required) {
    const json::Value *value = get(key, required);
    if (!value)
      return false;
    std::optional<StringRef> str = value->getAsString();
    if (!str || str->empty()) {
      mismatch(key, "a non-empty string", *value);
      return true;
    }
    out = str->str();
    return true;
  }

  bool readBool(StringRef key, bool &out) {
    const json::Value *value = get(key, /*required=*/false);
    if (!value)
      return false;
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag) {
      mismatch(key, "true or false", *value);
      return true;
    }
    out = *flag;
    return true;
  }

  /// Reads one of the names `symbolize` accepts; `choices` lists them.
  /// Returns whether a valid name was read.
  template <typename EnumT>
  bool readEnum(StringRef key, EnumT &out, bool required,
                std::optional<EnumT> (*symbolize)(StringRef),
                StringRef choices) {
    const json::Value *value = get(key, required);
    if (!value)
      return false;
    std::optional<StringRef> str = value->getAsString();
    std::optional<EnumT> parsed = str ? symbolize(*str) : std::nullopt;
    if (!parsed) {
      mismatch(key, ("one of " + choices).str(), *value);
      return false;
    }
    out = *parsed;
    return true;
  }

  /// Returns the object under `key`, reporting anything else.
  const json::Object *readObject(StringRef key, bool required) {
    const json::Value *value = get(key, required);
    if (!value)
      return nullptr;
    const json::Object *object = value->getAsObject();
    if (!object)
      mismatch(key, "an object", *value);
    return object;
  }

  /// Marks keys that are accepted and deliberately not used.
  void ignore(llvm::ArrayRef<StringRef> keys) {
    for (StringRef key : keys)
      used.insert(key);
  }

  /// Warns about every key that no read asked for, in sorted order.
  void warnUnknown() {
    llvm::SmallVector<std::string> unknown;
    for (const auto &entry : object)
      if (!used.contains(entry.first))
        unknown.push_back(field(entry.first));
    llvm::sort(unknown);
    for (const std::string &key : unknown)
      diag.warning("unknown key '" + key + "' (ignored)");
  }

private:
  const json::Object &object;
  std::string path;
  ConfigDiagnostics &diag;
  llvm::StringSet<> used;
};

inline bool positive(double x) { return x > 0; }
inline bool nonNegative(double x) { return x >= 0; }
inline bool unitInterval(double x) { return x >= 0 && x < 1; }

/// Reads the architecture in the keys of its family's config.json (`object`
/// under `reader`): "gpt2" when model_type is absent, or "llama", "mistral",
/// "qwen2". `positionsRequired` in a Hugging Face file, whose positions
/// Loom's format may leave to the sequence length.
void readAnyArchitecture(ObjectReader &reader, const json::Object &object,
                         ArchitectureConfig &arch, bool positionsRequired,
                         ConfigDiagnostics &diag);

} // namespace config_reader
} // namespace loom
} // namespace mlir

#endif // LOOM_IMPORT_CONFIGREADER_H
