//===- Safetensors.h - A model's tensors under Hugging Face names -*- C++
//-*-===//
//
// What loom_model_export_safetensors writes and loom_model_load_safetensors
// reads: the tensors the manifest's tensor lines name for Hugging Face, in
// the order a state dict holds them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SAFETENSORS_H
#define LOOM_RUNTIME_SAFETENSORS_H

#include "loom/runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {
/// A tensor of a Hugging Face checkpoint: `rows` x `cols` floats of the
/// whole model, stored transposed when `transpose` is set. They lie in
/// runs of `groupRows` rows, the first at `offset`, each `groupStride`
/// floats after the one before (one run: a part of a fused tensor that
/// interleaves its parts, grouped-query attention's q, k and v).
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape; ///< Hugging Face's.
  int64_t offset, rows, cols;
  bool transpose;
  int64_t groupRows, groupStride;

  /// Where row `r` starts in the whole model.
  int64_t rowOffset(int64_t r) const {
    return offset + r / groupRows * groupStride + r % groupRows * cols;
  }
};

/// Whether every parameter has a Hugging Face name; else false, the error
/// naming `path` (the file that was to be read or written) and the tensor.
bool checkHfNames(const loom_model &model, const char *path);

/// The model's tensors under their Hugging Face names (the tensor lines'
/// `hf`), in the order the file holds them: the parameters' order, the
/// layers of the stacked ones together where the first of them stands
/// (all of layer 0's, then layer 1's, ...), each layer's name with its
/// number for the `*`, a fused tensor's parts one after the other. Every
/// parameter must have a name.
std::vector<HfTensor> hfTensors(const loom_model &model);
} // namespace loom

#endif // LOOM_RUNTIME_SAFETENSORS_H
