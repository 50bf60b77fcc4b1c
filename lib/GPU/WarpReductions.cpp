//===- WarpReductions.cpp - Reductions a warp shares ----------------------===//
//
// A kernel's reduction loop whose iterations read along a row runs on the
// 32 threads of a warp, each taking every 32nd iteration, their parts
// combined by a butterfly of shuffles.
//
//===----------------------------------------------------------------------===//

#include "ParallelLoopsToGpu.h"

#include "loom/Buffers/Combiner.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace mlir::loom::loops_to_gpu {
/// The operation that folds each iteration's term into the accumulator
/// `iterArg` of `loop`, if it is a reassociable one (a sum, a product, a
/// maximum or minimum) on a type a shuffle moves: the iterations may then
/// be split among threads and the parts combined in any order.
static Operation *warpCombiner(scf::ForOp loop, unsigned iterArg) {
  SmallVector<BlockArgument> carried(loop.getRegionIterArgs());
  Type type = carried[iterArg].getType();
  if (!(type.isF32() || type.isInteger(32)))
    return nullptr;
  return getReassociableCombiner(carried, iterArg);
}

bool onlyReduces(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() == 0)
    return false;
  for (unsigned i = 0, e = loop.getNumRegionIterArgs(); i < e; ++i)
    if (!warpCombiner(loop, i))
      return false;
  return !loop.getBody()
              ->walk([](Operation *op) {
                auto effects = dyn_cast<MemoryEffectOpInterface>(op);
                bool writes =
                    effects
                        ? effects.hasEffect<MemoryEffects::Write>()
                        : !op->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
                return writes ? WalkResult::interrupt() : WalkResult::advance();
              })
              .wasInterrupted();
}

/// Whether `loop` reads memory along its induction variable: a load whose
/// innermost index, in a dimension of unit stride, is the variable or the
/// variable plus an offset (a row's sum). The threads of a warp sharing its
/// iterations then read neighbouring elements. A loop that walks down a
/// column (a column's sum, each part of one: the variable in an outer
/// index, the innermost fixed through the loop) reads an element a row: its
/// nest runs a thread per iteration instead, neighbouring threads reading
/// neighbouring columns, each adding its column in order. A gather, whose
/// column each iteration loads (the loss's target logit of each row), is
/// no column: a thread walking its rows alone would wait on each load in
/// turn.
static bool readsAlongLoop(scf::ForOp loop) {
  Value iv = loop.getInductionVar();
  auto isAlong = [&](Value index) {
    if (index == iv)
      return true;
    auto add = index.getDefiningOp<arith::AddIOp>();
    return add && (add.getLhs() == iv || add.getRhs() == iv);
  };
  bool along = false, down = false;
  loop->walk([&](memref::LoadOp load) {
    ValueRange indices = load.getIndices();
    if (indices.empty())
      return;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (isAlong(indices.back()) &&
        succeeded(load.getMemRefType().getStridesAndOffset(strides, offset)) &&
        strides.back() == 1)
      along = true;
    // Down a column: the variable in an outer index, not the innermost
    // (a per-row vector read beside it, a row's mean, does not count).
    else if (llvm::any_of(indices.drop_back(), isAlong) &&
             loop.isDefinedOutsideOfLoop(indices.back()))
      down = true;
  });
  return along && !down;
}

/// Whether the threads of a warp can share the iterations of `loop`: it
/// only reduces, with iterations enough for every thread, reading along
/// its iterations.
static bool isWarpReduction(scf::ForOp loop) {
  std::optional<APInt> trips = loop.getStaticTripCount();
  return trips && trips->getSExtValue() >= kWarpSize && onlyReduces(loop) &&
         readsAlongLoop(loop);
}

SmallVector<scf::ForOp> warpReductions(Block &body) {
  SmallVector<scf::ForOp> loops;
  bool otherLoops = false;
  body.walk<WalkOrder::PreOrder>([&](Operation *op) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (loop && isWarpReduction(loop)) {
      loops.push_back(loop);
      return WalkResult::skip();
    }
    if (isa<LoopLikeOpInterface>(op) &&
        !op->walk([](scf::ForOp inner) {
             return isWarpReduction(inner) ? WalkResult::interrupt()
                                           : WalkResult::advance();
           }).wasInterrupted())
      otherLoops = true;
    return WalkResult::advance();
  });
  if (otherLoops)
    loops.clear();
  return loops;
}

void shareAmongWarp(scf::ForOp loop, Value lane) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  SmallVector<Operation *> combiners;
  for (unsigned i = 0, e = loop.getNumRegionIterArgs(); i < e; ++i)
    combiners.push_back(warpCombiner(loop, i));
  Value warp = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  Value first =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                            arith::ConstantIndexOp::create(b, loc, 0));
  loop.setLowerBound(arith::AddIOp::create(
      b, loc, loop.getLowerBound(),
      arith::MulIOp::create(b, loc, lane, loop.getStep())));
  loop.setStep(arith::MulIOp::create(b, loc, loop.getStep(), warp));
  for (auto [init, combiner] :
       llvm::zip(loop.getInitArgsMutable(), combiners)) {
    // The parts add up in another order, which may overflow where the
    // loop's order did not.
    if (auto flags =
            dyn_cast<arith::ArithIntegerOverflowFlagsInterface>(combiner))
      combiner->setAttr(
          flags.getIntegerOverflowAttrName(),
          arith::IntegerOverflowFlagsAttr::get(
              combiner->getContext(), arith::IntegerOverflowFlags::none));
    Value identity =
        arith::ConstantOp::create(b, loc, *arith::getNeutralElement(combiner));
    init.set(arith::SelectOp::create(b, loc, first, init.get(), identity));
  }

  b.setInsertionPointAfter(loop);
  for (auto [result, carried, combiner] :
       llvm::zip(loop.getResults(), loop.getRegionIterArgs(), combiners)) {
    Value accumulator = result;
    SmallPtrSet<Operation *, 10> butterfly;
    for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, accumulator, offset,
                                            kWarpSize, gpu::ShuffleMode::XOR);
      IRMapping mapping;
      for (Value operand : combiner->getOperands())
        mapping.map(operand, operand == carried ? accumulator
                                                : shuffle.getShuffleResult());
      Operation *combined = b.clone(*combiner, mapping);
      butterfly.insert(shuffle);
      butterfly.insert(combined);
      accumulator = combined->getResult(0);
    }
    result.replaceAllUsesExcept(accumulator, butterfly);
  }
}
} // namespace mlir::loom::loops_to_gpu
