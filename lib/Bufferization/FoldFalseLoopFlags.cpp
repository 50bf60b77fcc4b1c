//===- FoldFalseLoopFlags.cpp - The loom-fold-false-loop-flags pass -------===//
//
// MLIR's ownership-based deallocation carries, through each loop, an i1 per
// buffer the loop yields: whether the iteration owns it, the OR of what
// the previous iteration owned and what it allocated. Where every buffer a
// step uses is a view of its arena, nothing is ever owned, but the flags
// start false and stay an OR of each other, which no folding sees through;
// a deallocation left conditional on them is lowered to a run-time alias
// check that allocates buffers of its own. This pass finds the greatest
// set of such flags that are false on entry and yield an OR of false and
// flags of the set, and replaces them by false.
//
//===----------------------------------------------------------------------===//

#include "loom/Bufferization/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFOLDFALSELOOPFLAGS
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Whether `value` is false when every flag of `flags` (iteration
/// arguments of `loop`) is: false itself, one of the flags, or an OR of
/// such values.
bool isFalseGiven(Value value, scf::ForOp loop,
                  const llvm::SmallBitVector &flags) {
  if (matchPattern(value, m_Zero()))
    return true;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (arg.getOwner() != loop.getBody() || arg.getArgNumber() == 0)
      return false;
    return flags.test(arg.getArgNumber() - 1);
  }
  auto orOp = value.getDefiningOp<arith::OrIOp>();
  return orOp && isFalseGiven(orOp.getLhs(), loop, flags) &&
         isFalseGiven(orOp.getRhs(), loop, flags);
}

/// Replaces the flags of `loop` that are always false; returns whether
/// there were any.
bool foldFlags(scf::ForOp loop) {
  unsigned n = loop.getNumRegionIterArgs();
  llvm::SmallBitVector flags(n);
  for (unsigned i = 0; i < n; ++i)
    flags[i] = loop.getInitArgs()[i].getType().isInteger(1) &&
               matchPattern(loop.getInitArgs()[i], m_Zero());
  Operation *yield = loop.getBody()->getTerminator();
  for (bool shrunk = true; shrunk;) {
    shrunk = false;
    for (unsigned i = 0; i < n; ++i)
      if (flags[i] && !isFalseGiven(yield->getOperand(i), loop, flags)) {
        flags.reset(i);
        shrunk = true;
      }
  }
  bool changed = false;
  for (unsigned i = 0; i < n; ++i) {
    if (!flags[i])
      continue;
    Value arg = loop.getRegionIterArgs()[i], result = loop.getResult(i);
    if (arg.use_empty() && result.use_empty())
      continue;
    Value falseValue = loop.getInitArgs()[i];
    arg.replaceAllUsesWith(falseValue);
    result.replaceAllUsesWith(falseValue);
    changed = true;
  }
  return changed;
}

struct FoldFalseLoopFlagsPass
    : public loom::impl::LoomFoldFalseLoopFlagsBase<FoldFalseLoopFlagsPass> {
  void runOnOperation() override {
    // Inner loops first, whose results outer loops' flags are made of;
    // again until nothing changes.
    for (bool changed = true; changed;) {
      changed = false;
      getOperation()->walk(
          [&](scf::ForOp loop) { changed |= foldFlags(loop); });
    }
  }
};
} // namespace
