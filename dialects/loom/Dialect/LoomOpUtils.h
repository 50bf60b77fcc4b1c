//===- LoomOpUtils.h - Shapes in the loom ops' verifiers -------*- C++ -*-===//
//
// The shape helpers the ops' verifiers and type inference share, across
// the files that define the ops' methods.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMOPUTILS_H
#define LOOM_DIALECT_LOOMOPUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir {
namespace loom {
namespace detail {
/// Streams a shape as "[4, 64, 768]" for diagnostics.
struct ShapeStr {
  ArrayRef<int64_t> dims;
};
inline raw_ostream &operator<<(raw_ostream &os, ShapeStr s) {
  os << '[';
  llvm::interleaveComma(s.dims, os);
  return os << ']';
}
inline Diagnostic &operator<<(Diagnostic &diag, ShapeStr s) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << s;
  return diag << str;
}
inline ArrayRef<int64_t> dimsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
inline ShapeStr shapeOf(Value v) { return {dimsOf(v)}; }
inline Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}
} // namespace detail
} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMOPUTILS_H
