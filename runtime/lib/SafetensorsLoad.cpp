//===- SafetensorsLoad.cpp - Parameters from Hugging Face files -----------===//
//
// loom_model_load_safetensors: a model's parameters from a safetensors file,
// or from the shards a Hugging Face index (model.safetensors.index.json)
// names, under the names and layouts the manifest's tensor lines give.
// Every tensor the model needs must be there with its shape; a tensor the
// model does not have is an error too, so that a checkpoint of another
// architecture is never half loaded.
//
//===----------------------------------------------------------------------===//

#include "Error.h"
#include "JobFiles.h"
#include "Json.h"
#include "Manifest.h"
#include "Model.h"
#include "Safetensors.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>

using namespace loom;

namespace {
bool endsWith(const std::string &text, const char *suffix) {
  size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

/// One tensor of a safetensors file: where its bytes lie and how to read
/// them.
struct StoredTensor {
  std::string file, dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; ///< From the start of the file.
  bool used = false;
};

int64_t dtypeBytes(const std::string &dtype) {
  if (dtype == "F32")
    return 4;
  if (dtype == "BF16" || dtype == "F16")
    return 2;
  return 0;
}

/// A safetensors header larger than this is not a model's (100 MiB, as
/// the format's reference reader allows).
constexpr uint64_t kMaxHeader = 100 << 20;

/// Reads the header of the safetensors file `path` into `tensors`.
bool readHeader(const std::string &path,
                std::map<std::string, StoredTensor> &tensors) {
  if (!checkRegularFile(path.c_str()))
    return false;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return setError("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  uint64_t fileSize = static_cast<uint64_t>(in.tellg());
  unsigned char length[8];
  in.seekg(0);
  if (fileSize < 8 || !in.read(reinterpret_cast<char *>(length), 8))
    return setError("%s: not a safetensors file: shorter than its 8-byte "
                    "header length",
                    path.c_str());
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i)
    size = size << 8 | length[i];
  if (size > kMaxHeader || size > fileSize - 8)
    return setError("%s: not a safetensors file: a header of %llu bytes in "
                    "a file of %llu",
                    path.c_str(), static_cast<unsigned long long>(size),
                    static_cast<unsigned long long>(fileSize));
  std::string header(size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(size));
  Json root;
  JsonReader reader(header);
  if (!in || !reader.parse(root) || root.kind != Json::Object)
    return setError("%s: not a safetensors file: its header is not a JSON "
                    "object (byte %zu)",
                    path.c_str(), reader.position() + 8);
  uint64_t dataStart = 8 + size;
  for (const auto &member : root.members) {
    // Named, not bound: the lambda below captures the name.
    const std::string &name = member.first;
    const Json &entry = member.second;
    if (name == "__metadata__")
      continue;
    auto bad = [&](const char *why) {
      return setError("%s: tensor %s: %s", path.c_str(), name.c_str(), why);
    };
    const Json *dtype = entry.get("dtype"), *shape = entry.get("shape"),
               *offsets = entry.get("data_offsets");
    if (!dtype || dtype->kind != Json::String || !shape ||
        shape->kind != Json::Array || !offsets ||
        offsets->kind != Json::Array || offsets->items.size() != 2)
      return bad("expected dtype, shape and data_offsets");
    StoredTensor t;
    t.file = path;
    t.dtype = dtype->text;
    uint64_t elements = 1;
    for (const Json &dim : shape->items) {
      if (dim.kind != Json::Number || dim.number < 0 || dim.number > 1e15 ||
          dim.number != std::floor(dim.number))
        return bad("a dimension of its shape is not a size");
      t.shape.push_back(static_cast<int64_t>(dim.number));
      auto size = static_cast<uint64_t>(dim.number);
      if (size && elements > std::numeric_limits<uint64_t>::max() / size)
        return bad("its shape has more elements than any file holds");
      elements *= size;
    }
    for (const Json &offset : offsets->items) {
      if (offset.kind != Json::Number || offset.number < 0 ||
          offset.number != std::floor(offset.number))
        return bad("data_offsets are not byte offsets");
      // Refused before it is converted, which beyond 2^64 is undefined.
      if (offset.number > static_cast<double>(fileSize))
        return bad("data_offsets past the end of the file");
    }
    t.begin = dataStart + static_cast<uint64_t>(offsets->items[0].number);
    t.end = dataStart + static_cast<uint64_t>(offsets->items[1].number);
    if (t.end < t.begin || t.end > fileSize)
      return bad("data_offsets past the end of the file");
    int64_t bytes = dtypeBytes(t.dtype);
    if (bytes && t.end - t.begin != elements * bytes)
      return bad("data_offsets do not span its shape's elements");
    if (!tensors.emplace(name, t).second)
      return setError("%s: tensor %s is in two files", path.c_str(),
                      name.c_str());
  }
  return true;
}

/// The tensors of `path`: a safetensors file, or a Hugging Face index
/// (*.json) whose weight_map names the shard of each tensor, read from the
/// index's directory.
bool readTensors(const std::string &path,
                 std::map<std::string, StoredTensor> &tensors) {
  if (!endsWith(path, ".json"))
    return readHeader(path, tensors);
  if (!checkRegularFile(path.c_str()))
    return false;
  std::ifstream in(path);
  if (!in)
    return setError("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  Json root;
  JsonReader reader(text);
  const Json *map = nullptr;
  if (in.bad() || !reader.parse(root) || !(map = root.get("weight_map")) ||
      map->kind != Json::Object)
    return setError("%s: not a safetensors index: expected a JSON object "
                    "with a \"weight_map\" object",
                    path.c_str());
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  std::map<std::string, bool> shards;
  for (const auto &[name, file] : map->members) {
    if (file.kind != Json::String || file.text.empty() ||
        file.text.find('/') != std::string::npos)
      return setError("%s: weight_map: the shard of %s is not a file name "
                      "in the index's directory",
                      path.c_str(), name.c_str());
    shards[dir + file.text] = true;
  }
  for (const auto &[shard, unused] : shards)
    if (!readHeader(shard, tensors))
      return false;
  for (const auto &[name, file] : map->members) {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.file != dir + file.text)
      return setError("%s: weight_map puts %s in %s, which does not hold it",
                      path.c_str(), name.c_str(), file.text.c_str());
  }
  return true;
}

/// Buffers a module keeps that are not parameters, which checkpoints of
/// older transformers releases hold: GPT-2's causal masks, Llama's rotary
/// frequencies.
bool isBuffer(const std::string &name) {
  for (const char *suffix :
       {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"})
    if (endsWith(name, suffix))
      return true;
  return false;
}

float toFloat(const unsigned char *bytes, const std::string &dtype) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, bytes, 4);
    return f;
  }
  uint16_t h = static_cast<uint16_t>(bytes[0] | bytes[1] << 8);
  if (dtype == "BF16") {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // F16.
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude =
      exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
      : exponent == 31
          ? (mantissa ? NAN : INFINITY)
          : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

/// Finds the stored tensor for `name`: under it, or without the base
/// model's prefix (GPT-2's published files say "h.0..." for
/// "transformer.h.0...").
StoredTensor *findStored(std::map<std::string, StoredTensor> &tensors,
                         const std::string &name) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    for (const char *prefix : {"transformer.", "model."})
      if (name.rfind(prefix, 0) == 0)
        it = tensors.find(name.substr(std::strlen(prefix)));
  return it == tensors.end() ? nullptr : &it->second;
}

/// Reads every tensor the model has from `path` into `whole`.
bool readWhole(const loom_model &model, const std::string &path,
               std::vector<float> &whole) {
  std::map<std::string, StoredTensor> tensors;
  if (!readTensors(path, tensors))
    return false;
  whole.assign(model.info.num_params, 0.0f);
  std::vector<unsigned char> bytes;
  std::map<std::string, std::unique_ptr<std::ifstream>> streams;
  for (const HfTensor &t : hfTensors(model)) {
    StoredTensor *stored = findStored(tensors, t.name);
    if (!stored)
      return setError("%s: no tensor %s, which the model (%s) needs",
                      path.c_str(), t.name.c_str(), model.info.name);
    stored->used = true;
    if (stored->shape != t.shape)
      return setError("%s: tensor %s is %s, the model needs %s",
                      stored->file.c_str(), t.name.c_str(),
                      formatShape(stored->shape).c_str(),
                      formatShape(t.shape).c_str());
    int64_t elementBytes = dtypeBytes(stored->dtype);
    if (!elementBytes)
      return setError("%s: tensor %s is %s; Loom reads F32, BF16 and F16",
                      stored->file.c_str(), t.name.c_str(),
                      stored->dtype.c_str());
    // One stream per file (a shard holds many tensors), opened once.
    std::unique_ptr<std::ifstream> &stream = streams[stored->file];
    if (!stream)
      stream = std::make_unique<std::ifstream>(stored->file, std::ios::binary);
    std::ifstream &in = *stream;
    bytes.resize(stored->end - stored->begin);
    in.seekg(static_cast<std::streamoff>(stored->begin));
    if (!in.read(reinterpret_cast<char *>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size())))
      return setError("%s: cannot read tensor %s", stored->file.c_str(),
                      t.name.c_str());
    for (int64_t r = 0; r < t.rows; ++r) {
      float *row = whole.data() + t.rowOffset(r);
      for (int64_t c = 0; c < t.cols; ++c) {
        // A transposed tensor is stored (cols, rows).
        int64_t at = t.transpose ? c * t.rows + r : r * t.cols + c;
        row[c] = toFloat(&bytes[at * elementBytes], stored->dtype);
      }
    }
  }
  for (const auto &[name, stored] : tensors)
    if (!stored.used && !isBuffer(name))
      return setError("%s: tensor %s is not one of the model's (%s): a "
                      "checkpoint of another architecture?",
                      stored.file.c_str(), name.c_str(), model.info.name);
  return true;
}
} // namespace

extern "C" int loom_model_load_safetensors(loom_model *model,
                                           const char *path) {
  if (!checkHfNames(*model, path))
    return 1;
  // Rank 0 reads; every rank gets the whole model and keeps its part.
  // Nothing changes before the whole file has been read and checked.
  std::vector<float> whole;
  int failed = isFirstRank() ? !readWhole(*model, path, whole) : 0;
  if (shareOutcome(failed, "read", path) ||
      broadcastFromFirstRank(whole, model->info.num_params))
    return 1;
  model->scatter(whole.data());
  model->resetOptimizer();
  return 0;
}
