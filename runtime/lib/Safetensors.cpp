//===- Safetensors.cpp - Hugging Face GPT-2 tensors ----------------------===//
//
// loom_model_export_safetensors: the whole model as Hugging Face's GPT-2
// state dict (GPT2LMHeadModel's names and layouts) in a safetensors file,
// which transformers loads.
//
//===----------------------------------------------------------------------===//

#include "JobFiles.h"
#include "Model.h"

#include <cstring>

using namespace loom;

//===----------------------------------------------------------------------===//

namespace {
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors' F32 is little-endian, written as this host has "
              "it");

/// A tensor of Hugging Face's GPT-2 (GPT2LMHeadModel's state dict): `rows`
/// x `cols` floats of the whole model from `offset`, as llm.c stores them,
/// written transposed when `transpose` is set.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape; ///< Hugging Face's.
  int64_t offset, rows, cols;
  bool transpose;
};

/// The model's tensors under Hugging Face's names and layouts, in the order
/// the file holds them: the embeddings, each block's, the final norm. The
/// tied head is wte, which Hugging Face ties again.
std::vector<HfTensor> hfTensors(const loom_model &model) {
  const loom_model_info &info = model.info;
  std::vector<HfTensor> tensors;
  auto param = [&](const char *name) -> const Param & {
    return model.params[model.paramIndex.at(name)];
  };
  auto add = [&](std::string name, const std::vector<int64_t> &shape,
                 int64_t offset) {
    int64_t rows = shape.size() == 2 ? shape[0] : 1;
    tensors.push_back(
        {std::move(name), shape, offset, rows, shape.back(), false});
  };
  // wte's rows past the vocabulary pad it for the GEMMs: they are dropped.
  add("transformer.wte.weight", {info.vocab, info.width}, param("wte").offset);
  add("transformer.wpe.weight", param("wpe").shape, param("wpe").offset);
  const size_t prefix = std::strlen(LOOM_STACKED_PREFIX);
  for (int64_t l = 0; l < info.layers; ++l)
    for (const Param &p : model.params) {
      if (p.name.compare(0, prefix, LOOM_STACKED_PREFIX) != 0)
        continue;
      std::vector<int64_t> shape(p.shape.begin() + 1, p.shape.end());
      add("transformer.h." + std::to_string(l) + "." + p.name.substr(prefix),
          shape, p.offset + l * (p.size / info.layers));
      // GPT-2's Conv1D weights, a block's only matrices, are (in, out):
      // llm.c's (out, in) transposed.
      if (shape.size() == 2) {
        tensors.back().shape = {shape[1], shape[0]};
        tensors.back().transpose = true;
      }
    }
  for (const char *name : {"ln_f.weight", "ln_f.bias"})
    add(std::string("transformer.") + name, param(name).shape,
        param(name).offset);
  return tensors;
}

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
    std::vector<float> transposed;
    for (const HfTensor &t : tensors) {
      const float *from = whole.data() + t.offset;
      size_t count = t.rows * t.cols;
      if (t.transpose) {
        transposed.resize(count);
        for (int64_t r = 0; r < t.rows; ++r)
          for (int64_t c = 0; c < t.cols; ++c)
            transposed[c * t.rows + r] = from[r * t.cols + c];
        from = transposed.data();
      }
      if (std::fwrite(from, sizeof(float), count, file) != count)
        return false;
    }
    return true;
  });
}
} // namespace

extern "C" int loom_model_export_safetensors(const loom_model *model,
                                             const char *path) {
  if (!checkLlmcLayout(model, path, "Hugging Face GPT-2"))
    return 1;
  // As a checkpoint: the replicas gather the whole model, rank 0 writes it.
  std::vector<float> whole;
  if (!model->gather(whole))
    return 1;
  int failed = isFirstRank() ? writeSafetensors(*model, path, whole) : 0;
  return shareOutcome(failed, "write", path);
}
