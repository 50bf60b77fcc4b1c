//===- MatmulToBlas.cpp - The loom-matmul-to-blas pass --------------------===//
//
// GEMMs are where a training step spends its time; a tuned BLAS beats
// generated loops by an order of magnitude, so they leave the generated code
// as calls into the runtime, which forwards them to OpenBLAS. A product of
// bf16 or f16 matrices into f32 (mixed precision) calls the runtime's GEMM
// of that element type, cuBLASLt's on a GPU. A loop whose iterations are
// each one GEMM on views offset by its indices (attention's heads) is one
// batched GEMM: a strided-batched cuBLASLt matmul instead of a launch per
// head.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"
#include "loom/Buffers/FillForwarding.h"
#include "loom/Buffers/Gemm.h"

#include "loom/Lowering/Passes.h"
#include "loom/abi.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMATMULTOBLAS
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kSgemm = LOOM_RT_SGEMM;
constexpr llvm::StringLiteral kGemm = LOOM_RT_GEMM;
constexpr llvm::StringLiteral kGemmBatched = LOOM_RT_GEMM_BATCHED;

/// The loops of an scf.forall whose whole body is one matmul of views of
/// buffers defined outside it, each view offset by the loop's indices
/// (attention's products of every (batch, head) pair): one batched GEMM of
/// the runtime. `loop` has at most two dimensions.
struct Batch {
  scf::ForallOp loop;
  SmallVector<int64_t, 2> counts;
  /// The matmul's A, B and C at the first iteration, created before the
  /// loop, and how many elements each moves per iteration of each loop
  /// dimension.
  SmallVector<Value, 3> first;
  SmallVector<SmallVector<int64_t, 2>, 3> strides;
  /// Whether C's views cover its buffer, each element once.
  bool coversOutput = false;
};

/// The view `v` of `loop`'s body at the loop's first iteration, built
/// before the loop, with the elements it moves per iteration of each loop
/// dimension, and whether the views cover their buffer.
struct BatchedView {
  Value first;
  SmallVector<int64_t, 2> strides;
  bool covers;
};
std::optional<BatchedView> batchedView(Value v, scf::ForallOp loop,
                                       ArrayRef<int64_t> counts) {
  auto view = v.getDefiningOp<memref::SubViewOp>();
  if (!view || view->getParentOp() != loop ||
      !loop.isDefinedOutsideOfLoop(view.getSource()))
    return std::nullopt;
  MemRefType sourceType = view.getSourceType();
  SmallVector<int64_t> sourceStrides;
  int64_t sourceOffset;
  if (failed(sourceType.getStridesAndOffset(sourceStrides, sourceOffset)) ||
      llvm::any_of(sourceStrides, ShapedType::isDynamic) ||
      !view.hasUnitStride() || !view.getSizes().empty())
    return std::nullopt;
  BatchedView result{{}, SmallVector<int64_t, 2>(counts.size(), 0), true};
  OpBuilder b(loop);
  SmallVector<OpFoldResult> offsets = view.getMixedOffsets();
  SmallVector<bool> seen(counts.size(), false);
  for (auto [d, offset] : llvm::enumerate(offsets)) {
    int64_t size = view.getStaticSizes()[d];
    auto value = dyn_cast<Value>(offset);
    if (!value) {
      result.covers &=
          getConstantIntValue(offset) == 0 && size == sourceType.getDimSize(d);
      continue;
    }
    auto iv = dyn_cast<BlockArgument>(value);
    if (!iv || iv.getOwner() != loop.getBody() || seen[iv.getArgNumber()])
      return std::nullopt;
    unsigned dim = iv.getArgNumber();
    seen[dim] = true;
    result.strides[dim] = sourceStrides[d];
    result.covers &= size == 1 && counts[dim] == sourceType.getDimSize(d);
    offset = arith::ConstantIndexOp::create(b, view.getLoc(), 0).getResult();
  }
  // Sizes and strides are static (a stride of 1 may be a constant of the
  // loop's body, which does not dominate the loop).
  SmallVector<OpFoldResult> sizes, unit;
  for (int64_t size : view.getStaticSizes()) {
    sizes.push_back(b.getIndexAttr(size));
    unit.push_back(b.getIndexAttr(1));
  }
  result.first = memref::SubViewOp::create(
      b, view.getLoc(), view.getType(), view.getSource(), offsets, sizes, unit);
  return result;
}

/// `op` as a batch of its loop, if its loop is one.
std::optional<Batch> matchBatch(linalg::MatmulOp op) {
  auto loop = dyn_cast<scf::ForallOp>(op->getParentOp());
  if (!loop || loop.getRank() > 2 || !loop.getOutputs().empty())
    return std::nullopt;
  ArrayRef<int64_t> upper = loop.getStaticUpperBound();
  if (llvm::any_of(loop.getStaticLowerBound(),
                   [](int64_t v) { return v != 0; }) ||
      llvm::any_of(loop.getStaticStep(), [](int64_t v) { return v != 1; }) ||
      llvm::any_of(upper, ShapedType::isDynamic))
    return std::nullopt;
  // Nothing but the matmul and its views.
  for (Operation &inner : loop.getBody()->without_terminator())
    if (&inner != op.getOperation() &&
        !isa<memref::SubViewOp, arith::ConstantOp>(inner))
      return std::nullopt;
  if (!loop.getTerminator().getYieldingOps().empty())
    return std::nullopt;
  Batch batch{loop, SmallVector<int64_t, 2>(upper), {}, {}, false};
  SmallVector<Value> operands = {op.getDpsInputs()[0], op.getDpsInputs()[1],
                                 op.getDpsInits()[0]};
  SmallVector<Operation *> created;
  for (auto [i, operand] : llvm::enumerate(operands)) {
    std::optional<BatchedView> view = batchedView(operand, loop, batch.counts);
    if (!view) {
      for (Operation *dead : llvm::reverse(created))
        dead->erase();
      return std::nullopt;
    }
    created.push_back(view->first.getDefiningOp());
    batch.first.push_back(view->first);
    batch.strides.push_back(view->strides);
    if (i == 2)
      batch.coversOutput = view->covers;
  }
  // Two iterations writing the same output would race.
  for (auto [count, stride] : llvm::zip(batch.counts, batch.strides[2]))
    if (count > 1 && stride == 0) {
      for (Operation *dead : llvm::reverse(created))
        dead->erase();
      return std::nullopt;
    }
  return batch;
}

struct MatmulToBlasPass
    : public loom::impl::LoomMatmulToBlasBase<MatmulToBlasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    SmallVector<linalg::MatmulOp> matmuls;
    module.walk([&](linalg::MatmulOp op) { matmuls.push_back(op); });

    for (linalg::MatmulOp op : matmuls) {
      if (!op.hasPureBufferSemantics()) {
        op.emitOpError("expected buffers; run bufferization first");
        return signalPassFailure();
      }
      std::string why;
      std::optional<GemmForm> form = matchGemm(op, &why);
      if (!form) {
        op.emitOpError(why);
        return signalPassFailure();
      }
      Value a = op.getDpsInputs()[0], bm = op.getDpsInputs()[1],
            c = op.getDpsInits()[0];
      std::optional<Batch> batch = matchBatch(op);
      // A batch's GEMMs replace its loop, from before it, on the views of
      // its first iteration.
      Operation *anchor = batch ? batch->loop.getOperation() : op;
      if (batch) {
        a = batch->first[0];
        bm = batch->first[1];
        c = batch->first[2];
      }
      b.setInsertionPoint(anchor);
      Location loc = op.getLoc();
      FailureOr<GemmOperand> da = buildGemmOperand(b, loc, a, op),
                             db = buildGemmOperand(b, loc, bm, op),
                             dc = buildGemmOperand(b, loc, c, op);
      if (failed(da) || failed(db) || failed(dc))
        return signalPassFailure();
      auto i32c = [&](int64_t v) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
      };
      auto i64c = [&](int64_t v) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
      };
      Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
      Value beta = one;
      // The zero fill of the output, of the whole buffer for a batch whose
      // views cover it.
      linalg::FillOp zeroFill;
      if (!batch)
        zeroFill = findZeroFillReadBy(op, op.getDpsInits()[0]);
      else if (batch->coversOutput)
        zeroFill = findZeroFillReadBy(
            batch->loop,
            batch->first[2].getDefiningOp<memref::SubViewOp>().getSource());
      if (zeroFill) {
        beta = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
        zeroFill.erase();
      }
      SmallVector<Value> args = {i32c(form->transA),
                                 i32c(form->transB),
                                 i64c(form->m),
                                 i64c(form->n),
                                 i64c(form->k),
                                 one,
                                 da->pointer,
                                 da->leading,
                                 db->pointer,
                                 db->leading,
                                 beta,
                                 dc->pointer,
                                 dc->leading};
      StringRef callee = kSgemm;
      if (form->dtype != LOOM_DTYPE_F32 || batch) {
        args.insert(args.begin(), i32c(form->dtype));
        callee = kGemm;
      }
      if (batch) {
        // Two loop dimensions, the outer one of a single iteration for a
        // loop of one.
        size_t pad = 2 - batch->counts.size();
        for (unsigned dim = 0; dim < 2; ++dim) {
          bool real = dim >= pad;
          args.push_back(i64c(real ? batch->counts[dim - pad] : 1));
          for (unsigned operand = 0; operand < 3; ++operand)
            args.push_back(i64c(real ? batch->strides[operand][dim - pad] : 0));
        }
        callee = kGemmBatched;
      }
      buildRuntimeCall(b, op, callee, args);
      if (batch)
        batch->loop.erase();
      else
        op.erase();
    }
  }
};
} // namespace
