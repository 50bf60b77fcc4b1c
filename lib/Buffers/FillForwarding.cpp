//===- FillForwarding.cpp - Fills that a whole-buffer update reads --------===//

#include "loom/Buffers/FillForwarding.h"
#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Where a buffer lies: the allocation it views (or the value it could not
/// be traced past) and, when it lies in a `memref.view` at a constant shift
/// (the static arena's buffers), the bytes of the allocation it may touch.
struct Extent {
  Value root;
  std::optional<int64_t> begin, end;
};

/// The least and greatest values an index computation of constants may
/// take: the static arena's shift of a buffer that alternates between two
/// places from one loop iteration to the next is `(i mod 2) * size + base`.
using Range = std::pair<int64_t, int64_t>;
std::optional<Range> getRange(Value value) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return Range(constant.getSExtValue(), constant.getSExtValue());
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<Range> rhs = getRange(op->getOperand(1));
  if (!rhs || rhs->first < 0)
    return std::nullopt;
  // An unsigned remainder lies below the divisor, whatever it divides.
  if (isa<arith::RemUIOp>(op))
    return rhs->first == rhs->second && rhs->first > 0
               ? std::optional<Range>(Range(0, rhs->first - 1))
               : std::nullopt;
  std::optional<Range> lhs = getRange(op->getOperand(0));
  if (!lhs || lhs->first < 0)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return Range(lhs->first + rhs->first, lhs->second + rhs->second);
  if (isa<arith::MulIOp>(op))
    return Range(lhs->first * rhs->first, lhs->second * rhs->second);
  return std::nullopt;
}

/// The elements of its buffer that a memref of `type` spans, from its
/// layout's offset, if the layout and shape are static.
std::optional<Range> getElementRange(MemRefType type) {
  int64_t offset;
  SmallVector<int64_t> strides;
  if (!type.hasStaticShape() ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset))
    return std::nullopt;
  int64_t last = offset;
  for (auto [extent, stride] : llvm::zip(type.getShape(), strides)) {
    if (extent == 0)
      return Range(offset, offset - 1);
    if (ShapedType::isDynamic(stride) || stride < 0)
      return std::nullopt;
    last += (extent - 1) * stride;
  }
  return Range(offset, last);
}

/// Traces `value` through the views that stay inside their source (a
/// subview, a reshape, a cast, a view) to what they view.
Extent getExtent(Value value) {
  Extent extent;
  bool known = true, inView = false;
  int64_t begin = 0, size = 0;
  // Subviews of a view's result (the parts of one arena buffer, such as
  // the gradient norm's partial sums of each tensor) span the elements
  // their layout says, from the view's start.
  auto outer = dyn_cast<MemRefType>(value.getType());
  bool part = false;
  while (Operation *op = value.getDefiningOp()) {
    if (auto view = dyn_cast<memref::ViewOp>(op)) {
      std::optional<Range> shift = getRange(view.getByteShift());
      if (!shift) {
        known = false;
      } else {
        begin += shift->first;
        // What the view spans at its farthest.
        size += shift->second - shift->first;
      }
      if (!inView) {
        auto type = cast<MemRefType>(view.getType());
        std::optional<Range> elements =
            part ? getElementRange(outer) : std::nullopt;
        if (elements) {
          int64_t bytes = llvm::divideCeil(outer.getElementTypeBitWidth(), 8);
          begin += elements->first * bytes;
          size += (elements->second + 1 - elements->first) * bytes;
        } else if (type.hasStaticShape()) {
          size += getStaticBytes(type);
        } else {
          known = false;
        }
      }
      inView = true;
      value = view.getSource();
      continue;
    }
    if (!isa<memref::SubViewOp, memref::CollapseShapeOp, memref::ExpandShapeOp,
             memref::CastOp>(op))
      break;
    // A part of a view's source: where is not followed.
    if (inView)
      known = false;
    part |= isa<memref::SubViewOp>(op);
    value = op->getOperand(0);
  }
  extent.root = value;
  if (inView && known) {
    extent.begin = begin;
    extent.end = begin + size;
  }
  return extent;
}

bool isAllocation(Value value) {
  return value.getDefiningOp<memref::AllocOp>() ||
         value.getDefiningOp<memref::AllocaOp>();
}

/// A function's argument, which no allocation of the function can be.
bool isFunctionArgument(Value value) {
  auto argument = dyn_cast<BlockArgument>(value);
  return argument && argument.getOwner()->isEntryBlock() &&
         isa<FunctionOpInterface>(argument.getOwner()->getParentOp());
}

/// The Loom attribute that names `value` as an argument of its function's
/// entry point (`loom.param`, `loom.state`, `loom.input`, `loom.output`),
/// or empty.
StringRef getLoomArgumentKind(Value value) {
  if (!isFunctionArgument(value))
    return {};
  auto argument = cast<BlockArgument>(value);
  auto func = cast<FunctionOpInterface>(argument.getOwner()->getParentOp());
  for (StringRef kind :
       {LoomDialect::getParamAttrName(), LoomDialect::getStateAttrName(),
        LoomDialect::getInputAttrName(), LoomDialect::getOutputAttrName()})
    if (func.getArgAttr(argument.getArgNumber(), kind))
      return kind;
  return {};
}

/// Whether `x` and `y`, two different arguments of one function, hold
/// different memory because one is a parameter or optimizer state: each
/// names a tensor of its own, which the runtime keeps at its own place in
/// its storage (and a call inside the module passes its caller's), never
/// where another parameter, state, input or output is. Two inputs may be
/// one buffer (the same tokens as targets).
bool areOwnTensors(Value x, Value y) {
  StringRef xKind = getLoomArgumentKind(x), yKind = getLoomArgumentKind(y);
  auto own = [](StringRef kind) {
    return kind == LoomDialect::getParamAttrName() ||
           kind == LoomDialect::getStateAttrName();
  };
  return !xKind.empty() && !yKind.empty() &&
         x.getParentRegion() == y.getParentRegion() &&
         (own(xKind) || own(yKind));
}

/// The extents `value` may have: a loop's carried buffer is its initial
/// one or one a previous iteration yielded.
void collectExtents(Value value, SmallVectorImpl<Extent> &extents,
                    SmallPtrSetImpl<Value> &visited) {
  Extent extent = getExtent(value);
  scf::ForOp loop;
  BlockArgument carried;
  if (auto result = dyn_cast<OpResult>(extent.root)) {
    loop = dyn_cast<scf::ForOp>(result.getOwner());
    if (loop)
      carried = loop.getTiedLoopRegionIterArg(result);
  } else if (auto argument = dyn_cast<BlockArgument>(extent.root)) {
    loop = dyn_cast<scf::ForOp>(argument.getOwner()->getParentOp());
    if (loop && loop.getTiedLoopInit(argument))
      carried = argument;
  }
  if (!carried) {
    extents.push_back(extent);
    return;
  }
  if (!visited.insert(carried).second)
    return;
  collectExtents(loop.getTiedLoopInit(carried)->get(), extents, visited);
  collectExtents(loop.getTiedLoopYieldedValue(carried)->get(), extents,
                 visited);
}

bool areDisjoint(const Extent &x, const Extent &y) {
  if (x.root != y.root)
    return (isAllocation(x.root) &&
            (isAllocation(y.root) || isFunctionArgument(y.root))) ||
           (isAllocation(y.root) && isFunctionArgument(x.root)) ||
           areOwnTensors(x.root, y.root);
  return x.begin && y.begin && (*x.end <= *y.begin || *y.end <= *x.begin);
}
} // namespace

bool mlir::loom::areDisjoint(Value a, Value b) {
  if (!isa<BaseMemRefType>(a.getType()) || !isa<BaseMemRefType>(b.getType()))
    return true;
  SmallVector<Extent> xs, ys;
  SmallPtrSet<Value, 4> visited;
  collectExtents(a, xs, visited);
  visited.clear();
  collectExtents(b, ys, visited);
  return llvm::all_of(xs, [&](const Extent &x) {
    return llvm::all_of(ys, [&](const Extent &y) { return areDisjoint(x, y); });
  });
}

bool mlir::loom::mayAccess(Operation *op, Value buffer, bool writesOnly) {
  // Some of the runtime's functions (its single GEMMs, the softmax
  // statistics) touch the buffers they are handed and nothing else: they
  // read the first few (a GEMM's A and B) and may write the others.
  if (std::optional<unsigned> readOnly = getReadOnlyPointers(op)) {
    unsigned pointers = 0;
    return llvm::any_of(op->getOperands(), [&](Value operand) {
      if (!isa<LLVM::LLVMPointerType>(operand.getType()) ||
          (++pointers <= *readOnly && writesOnly) ||
          operand.getDefiningOp<LLVM::ZeroOp>())
        return false;
      Value pointed = getPointedBuffer(operand);
      return !pointed || !areDisjoint(pointed, buffer);
    });
  }
  std::optional<SmallVector<MemoryEffects::EffectInstance>> effects =
      getEffectsRecursively(op);
  if (!effects)
    return true;
  return llvm::any_of(*effects, [&](const MemoryEffects::EffectInstance &e) {
    if (!isa<MemoryEffects::Write, MemoryEffects::Free>(e.getEffect()) &&
        (writesOnly || !isa<MemoryEffects::Read>(e.getEffect())))
      return false;
    Value value = e.getValue();
    return !value || !loom::areDisjoint(value, buffer);
  });
}

linalg::FillOp mlir::loom::findFillReadBy(Operation *user, Value buffer) {
  for (Operation *prev = user->getPrevNode(); prev;
       prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (fill && fill.hasPureBufferSemantics() &&
        fill.getDpsInits()[0] == buffer)
      return fill;
    if (mayAccess(prev, buffer))
      return {};
  }
  return {};
}

linalg::FillOp mlir::loom::findZeroFillReadBy(Operation *user, Value buffer) {
  linalg::FillOp fill = findFillReadBy(user, buffer);
  return fill && matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat())
             ? fill
             : linalg::FillOp();
}
