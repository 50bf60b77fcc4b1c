//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//
//
// Include this header to use the loom dialect: its attributes and its ops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMDIALECT_H
#define LOOM_DIALECT_LOOMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
/// Parses a double written by printF64 (or any float literal).
FailureOr<llvm::APFloat> parseF64(AsmParser &parser);
/// The shortest decimal form of `value` that reads back to the same double
/// ("0.0003", "1.0e-08"), with the '.' MLIR's float literals need.
std::string formatF64(double value);
/// Prints formatF64 of `value`.
void printF64(AsmPrinter &printer, const llvm::APFloat &value);
/// The bytes of a statically shaped tensor or buffer of ints or floats.
int64_t getStaticBytes(ShapedType type);
/// Heads of D channels in each token's row of an attention's fused
/// queries, keys and values: 3 num_heads, or under grouped-query attention
/// (`kvHeads`) R + 2 for each group of R = num_heads / kv_heads query
/// heads: its queries, its key and its value.
int64_t getQkvRowHeads(int64_t numHeads, std::optional<int64_t> kvHeads);
} // namespace loom
} // namespace mlir

namespace mlir {
namespace loom {
/// What a GEMM's epilogue can apply to its product (cuBLASLt's GELU_AUX
/// and DGELU): the GELU, and the gradient through it, which multiplies the
/// product by the GELU's derivative at another matrix.
enum class GemmEpilogueKind { Gelu, GeluGrad };

/// A scalar function a GEMM's epilogue computes, and which of the function's
/// operands is the product (ScalarFunctionOpInterface).
struct GemmEpilogue {
  GemmEpilogueKind kind;
  unsigned product;
};

/// The trait of ops whose tensors mixed precision stores in bf16 or f16
/// (see Loom_MixedPrecision in LoomOps.td).
template <typename ConcreteType>
class MixedPrecision : public OpTrait::TraitBase<ConcreteType, MixedPrecision> {
};
} // namespace loom
} // namespace mlir

#include "loom/Dialect/LoomConfig.h"
#include "loom/Dialect/LoomCost.h"
#include "loom/Dialect/LoomDialect.h.inc"
#include "loom/Dialect/LoomEnums.h"
#include "loom/Dialect/LoomParallel.h"

// The interfaces' methods take the types declared above.
#include "loom/Dialect/LoomInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/LoomAttrs.h.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/LoomOps.h.inc"

namespace mlir {
namespace loom {
/// `spec` as an element of the module's `loom.tensors`: a dictionary of
/// `name`, `shape` (array<i64>), `init` ("normal", "zeros", "ones"), `std`
/// (f64, normal only), and where they apply `rows` (i64), `hf` (string) and
/// `hf_transpose`.
DictionaryAttr getTensorSpecAttr(MLIRContext *context, const TensorSpec &spec);
/// The TensorSpec `attr` holds, or a failure `emitError` explains.
FailureOr<TensorSpec>
parseTensorSpecAttr(Attribute attr,
                    llvm::function_ref<InFlightDiagnostic()> emitError);
} // namespace loom
} // namespace mlir

namespace mlir {
class ModuleOp;
namespace loom {
/// The plan the passes after loom-plan compile for: the module's
/// `#loom.plan`, or the single-rank plan where it has none. Fails, with an
/// error on the module, where the plan is still "auto".
FailureOr<PlanConfig> getResolvedPlan(ModuleOp module);
} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMDIALECT_H
