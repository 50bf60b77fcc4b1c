//===- Safetensors.cpp - Hugging Face tensors ----------------------------===//
//
// loom_model_export_safetensors: the whole model as a Hugging Face state
// dict in a safetensors file, which transformers loads: each tensor under
// the name and in the layout its manifest tensor line gives (GPT-2's:
// GPT2LMHeadModel's).
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "JobFiles.h"
#include "Model.h"

#include <cstring>

using namespace loom;

//===----------------------------------------------------------------------===//

namespace {
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors' F32 is little-endian, written as this host has "
              "it");

/// `param`'s Hugging Face tensors whose elements start at `offset`: `shape`
/// (the parameter's, or a layer's of a stacked one) less its padding rows,
/// transposed if its tensor line says so, in parts of its first dimension
/// if its `hf` names several: even ones, or hf_rows each in hf_groups
/// groups.
void appendHfTensors(std::vector<HfTensor> &tensors, const Param &param,
                     const std::string &names, std::vector<int64_t> shape,
                     int64_t offset) {
  if (param.spec.rows)
    shape[0] = param.spec.rows;
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    size_t comma = names.find(',', begin);
    parts.push_back(names.substr(begin, comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
  // The manifest reader checked that the parts fill the first dimension.
  int64_t groups = param.spec.hfGroups;
  std::vector<int64_t> partRows = param.spec.hfRows;
  if (partRows.empty())
    partRows.assign(parts.size(),
                    shape[0] / static_cast<int64_t>(parts.size()));
  int64_t inner = 1;
  for (size_t d = 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t groupStride = shape[0] / groups * inner;
  for (size_t p = 0; p < parts.size(); ++p) {
    std::vector<int64_t> partShape = shape;
    partShape[0] = partRows[p] * groups;
    // A vector is a column, so that its groups are runs of rows.
    int64_t cols = partShape.size() >= 2 ? partShape.back() : 1;
    int64_t rows = partShape[0] * inner / cols;
    // A transposed tensor is a matrix (the manifest reader checked).
    HfTensor t{std::move(parts[p]),    partShape,     offset,     rows, cols,
               param.spec.hfTranspose, rows / groups, groupStride};
    if (t.transpose)
      t.shape = {partShape[1], partShape[0]};
    tensors.push_back(std::move(t));
    offset += partRows[p] * inner;
  }
}
} // namespace

bool loom::checkHfNames(const loom_model &model, const char *path) {
  for (const Param &p : model.params)
    if (p.spec.hfName.empty())
      return setError("%s: this model (%s) has no Hugging Face name for "
                      "its tensor %s",
                      path, model.info.name, p.name.c_str());
  return true;
}

std::vector<HfTensor> loom::hfTensors(const loom_model &model) {
  std::vector<HfTensor> tensors;
  auto stacked = [](const Param &p) {
    return p.name.rfind(LOOM_STACKED_PREFIX, 0) == 0;
  };
  bool layersDone = false;
  // Every parameter has its name (loom_model_export_safetensors).
  for (const Param &p : model.params) {
    if (!stacked(p)) {
      appendHfTensors(tensors, p, p.spec.hfName, p.shape, p.offset);
      continue;
    }
    if (layersDone)
      continue;
    layersDone = true;
    for (int64_t l = 0; l < model.info.layers; ++l)
      for (const Param &q : model.params) {
        if (!stacked(q))
          continue;
        std::string names = q.spec.hfName;
        for (size_t star = names.find('*'); star != std::string::npos;
             star = names.find('*', star))
          names.replace(star, 1, std::to_string(l));
        appendHfTensors(
            tensors, q, names,
            std::vector<int64_t>(q.shape.begin() + 1, q.shape.end()),
            q.offset + l * (q.size / model.info.layers));
      }
  }
  return tensors;
}

namespace {
/// The JSON header: every tensor's dtype, shape and byte range in the data
/// after it, padded with spaces to a multiple of 8 bytes.
std::string safetensorsHeader(const std::vector<HfTensor> &tensors) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  int64_t begin = 0;
  for (const HfTensor &t : tensors) {
    int64_t end = begin + t.rows * t.cols * int64_t(sizeof(float));
    json += ",\"" + t.name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d)
      json += (d ? "," : "") + std::to_string(t.shape[d]);
    json += "],\"data_offsets\":[" + std::to_string(begin) + "," +
            std::to_string(end) + "]}";
    begin = end;
  }
  json += "}";
  json.resize((json.size() + 7) / 8 * 8, ' ');
  return json;
}

int writeSafetensors(const loom_model &model, const char *path,
                     const std::vector<float> &whole) {
  std::vector<HfTensor> tensors = hfTensors(model);
  std::string header = safetensorsHeader(tensors);
  return writeFile(path, [&](FILE *file) {
    uint64_t size = header.size();
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<unsigned char>(size >> (8 * i));
    if (std::fwrite(length, 1, 8, file) != 8 ||
        std::fwrite(header.data(), 1, header.size(), file) != header.size())
      return false;
    std::vector<float> stored;
    for (const HfTensor &t : tensors) {
      size_t count = t.rows * t.cols;
      stored.resize(count);
      for (int64_t r = 0; r < t.rows; ++r) {
        const float *row = whole.data() + t.rowOffset(r);
        for (int64_t c = 0; c < t.cols; ++c)
          stored[t.transpose ? c * t.rows + r : r * t.cols + c] = row[c];
      }
      if (std::fwrite(stored.data(), sizeof(float), count, file) != count)
        return false;
    }
    return true;
  });
}
} // namespace

extern "C" int loom_model_export_safetensors(const loom_model *model,
                                             const char *path) {
  if (!checkHfNames(*model, path))
    return 1;
  // As a checkpoint: the replicas gather the whole model, rank 0 writes it.
  std::vector<float> whole;
  if (!model->gather(whole))
    return 1;
  int failed = isFirstRank() ? writeSafetensors(*model, path, whole) : 0;
  return shareOutcome(failed, "write", path);
}
