//===- KernelArguments.cpp - What a kernel takes from the host ------------===//
//
// The values a kernel takes from the host: views it can compute again
// from their buffers (so that a kernel takes the arena's buffer and
// indices, not a descriptor per view), and the alignment of each buffer
// the host allocated aligned, which LLVM needs to widen accesses.
//
//===----------------------------------------------------------------------===//

#include "ParallelLoopsToGpu.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

namespace mlir::loom::loops_to_gpu {
/// Whether `value`, a view of memory the host computes from a buffer,
/// constants and indices (the static arena's buffers, a layer's slice of
/// them), can be computed again in a kernel from its buffer: the kernel
/// then takes the buffer, which its other views share, and the indices,
/// rather than a descriptor of each view.
static bool isSinkableView(Value value) {
  Operation *op = value.getDefiningOp();
  if (!isa_and_nonnull<memref::ViewOp, memref::SubViewOp, memref::ExpandShapeOp,
                       memref::CollapseShapeOp, memref::CastOp>(op))
    return false;
  return llvm::all_of(op->getOperands().drop_front(), [](Value operand) {
    return operand.getType().isIndex() || matchPattern(operand, m_Constant());
  });
}

/// Whether `value`, an index, is arithmetic on indices a kernel can compute
/// again from the indices it uses (a view's offset from the layer loop's
/// induction variable): LLVM then sees the offset's multiples, and the
/// view's accesses keep the alignment its buffer's is assumed to have,
/// where a parameter would be an offset of unknown alignment.
static bool isSinkableIndex(Value value) {
  Operation *op = value.getDefiningOp();
  return op && value.getType().isIndex() &&
         isa<arith::ArithDialect>(op->getDialect()) && isPure(op) &&
         llvm::all_of(op->getOperandTypes(),
                      [](Type type) { return type.isIndex(); });
}

void collectKernelArguments(Region &region, SetVector<Value> &arguments) {
  SetVector<Value> used;
  getUsedValuesDefinedAbove(region, region, used);
  SmallVector<Value> pending(used.begin(), used.end());
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    if (matchPattern(value, m_Constant()))
      continue;
    if (isSinkableView(value) || isSinkableIndex(value)) {
      llvm::append_range(pending, value.getDefiningOp()->getOperands());
      continue;
    }
    arguments.insert(value);
  }
}

int64_t getArgumentBytes(const SetVector<Value> &arguments) {
  int64_t bytes = 0;
  for (Value value : arguments) {
    auto memref = dyn_cast<MemRefType>(value.getType());
    bytes += 8 * (memref ? 3 + 2 * memref.getRank() : 1);
  }
  return bytes;
}

void sinkViews(gpu::LaunchOp launchOp) {
  SetVector<Value> used;
  getUsedValuesDefinedAbove(launchOp.getBody(), launchOp.getBody(), used);
  OpBuilder b = OpBuilder::atBlockBegin(&launchOp.getBody().front());
  IRMapping mapping;
  auto sinkable = [](Value value) {
    return isSinkableView(value) || isSinkableIndex(value);
  };
  std::function<Value(Value)> sink = [&](Value value) -> Value {
    if (!sinkable(value))
      return value;
    if (Value done = mapping.lookupOrNull(value))
      return done;
    Operation *op = value.getDefiningOp();
    for (Value operand : op->getOperands())
      mapping.map(operand, sink(operand));
    Operation *clone = b.clone(*op, mapping);
    mapping.map(op->getResults(), clone->getResults());
    return mapping.lookup(value);
  };
  for (Value value : used) {
    if (!sinkable(value))
      continue;
    Value inside = sink(value);
    value.replaceUsesWithIf(inside, [&](OpOperand &use) {
      return launchOp->isProperAncestor(use.getOwner());
    });
  }
}

static constexpr int64_t kAnyPowerOfTwo = int64_t(1) << 62;

/// The largest power of two that the IR shows divides `index`, a value the
/// host computes: a view's byte shift, such as the residual stream's
/// (layer % 2) * bytes + start.
static int64_t getKnownDivisor(Value index) {
  APInt constant;
  if (matchPattern(index, m_ConstantInt(&constant))) {
    if (constant.isZero())
      return kAnyPowerOfTwo;
    return int64_t(1) << std::min<unsigned>(constant.countr_zero(), 62);
  }
  Operation *op = index.getDefiningOp();
  if (!op)
    return 1;
  if (isa<arith::MulIOp>(op)) {
    int64_t a = getKnownDivisor(op->getOperand(0)),
            b = getKnownDivisor(op->getOperand(1));
    return int64_t(1) << std::min(llvm::Log2_64(a) + llvm::Log2_64(b), 62u);
  }
  // a mod b is a minus a multiple of b.
  if (isa<arith::AddIOp, arith::SubIOp, arith::RemUIOp, arith::RemSIOp>(op))
    return std::min(getKnownDivisor(op->getOperand(0)),
                    getKnownDivisor(op->getOperand(1)));
  if (auto select = dyn_cast<arith::SelectOp>(op))
    return std::min(getKnownDivisor(select.getTrueValue()),
                    getKnownDivisor(select.getFalseValue()));
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op))
    return getKnownDivisor(op->getOperand(0));
  return 1;
}

/// Whether `type`'s first element is at its aligned pointer (an offset of 0):
/// memref.assume_alignment asserts the alignment of that element's address,
/// the aligned pointer plus the offset.
static bool startsAtAlignedPointer(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  return memref && succeeded(memref.getStridesAndOffset(strides, offset)) &&
         offset == 0;
}

/// getKnownAlignment of `buffer` (ParallelLoopsToGpu.h): an allocation's own,
/// kept by the views that keep the pointer, the largest power of two known to
/// divide a byte shift (memref.view, getKnownDivisor), and for a buffer a loop
/// carries the least of what enters the loop and what each iteration passes on
/// (the residual stream's two buffers). 1 for the step's arguments: the runtime
/// packs its parameters one after the other. `carried` holds the loop-carried
/// buffers being computed, assumed aligned to any power of two while they are:
/// with powers of two every step is a minimum, so the result is the least
/// alignment of every buffer that can reach `buffer`.
static int64_t getKnownAlignment(Value buffer,
                                 SmallPtrSetImpl<Value> &carried) {
  Operation *op = buffer.getDefiningOp();
  if (auto alloc = dyn_cast_or_null<memref::AllocOp>(op))
    return alloc.getAlignment().value_or(1);
  if (auto assume = dyn_cast_or_null<memref::AssumeAlignmentOp>(op)) {
    int64_t source = getKnownAlignment(assume.getMemref(), carried);
    return startsAtAlignedPointer(assume.getType())
               ? std::max<int64_t>(assume.getAlignment(), source)
               : source;
  }
  if (auto view = dyn_cast_or_null<memref::ViewOp>(op)) {
    return std::min(getKnownAlignment(view.getSource(), carried),
                    getKnownDivisor(view.getByteShift()));
  }
  if (isa_and_nonnull<memref::SubViewOp, memref::ExpandShapeOp,
                      memref::CollapseShapeOp, memref::CastOp,
                      memref::ReinterpretCastOp>(op))
    return getKnownAlignment(op->getOperand(0), carried);
  // A buffer the loop carries, inside it or as its result.
  scf::ForOp loop;
  unsigned carriedIndex = 0;
  if (auto arg = dyn_cast<BlockArgument>(buffer)) {
    loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
    if (!loop || arg.getArgNumber() < loop.getNumInductionVars())
      return 1;
    carriedIndex = arg.getArgNumber() - loop.getNumInductionVars();
  } else if ((loop = dyn_cast<scf::ForOp>(op))) {
    carriedIndex = cast<OpResult>(buffer).getResultNumber();
  } else {
    return 1;
  }
  // Assumed aligned while computed: the argument and the result are the
  // same buffers.
  Value arg = loop.getRegionIterArgs()[carriedIndex];
  if (!carried.insert(arg).second)
    return kAnyPowerOfTwo;
  int64_t alignment = std::min(
      getKnownAlignment(loop.getInitArgs()[carriedIndex], carried),
      getKnownAlignment(loop.getYieldedValues()[carriedIndex], carried));
  carried.erase(arg);
  return alignment;
}

int64_t getKnownAlignment(Value buffer) {
  SmallPtrSet<Value, 4> carried;
  return getKnownAlignment(buffer, carried);
}

void assumeAlignments(gpu::LaunchOp launchOp) {
  SetVector<Value> used;
  getUsedValuesDefinedAbove(launchOp.getBody(), launchOp.getBody(), used);
  OpBuilder b = OpBuilder::atBlockBegin(&launchOp.getBody().front());
  for (Value value : used) {
    // A view at an offset (a subview, a loop-carried one) is not told: its
    // first element's alignment is not its aligned pointer's.
    if (!startsAtAlignedPointer(value.getType()))
      continue;
    int64_t alignment = getKnownAlignment(value);
    if (alignment < 2)
      continue;
    Value aligned =
        memref::AssumeAlignmentOp::create(b, value.getLoc(), value, alignment);
    value.replaceUsesWithIf(aligned, [&](OpOperand &use) {
      return launchOp->isProperAncestor(use.getOwner()) &&
             use.getOwner() != aligned.getDefiningOp();
    });
  }
}
} // namespace mlir::loom::loops_to_gpu
