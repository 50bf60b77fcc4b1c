//===- ParallelLoopsToGpu.cpp - The loom-parallel-loops-to-gpu pass -------===//
//
// Upstream's `convert-parallel-loops-to-gpu` maps each dimension of a loop to
// a grid or block dimension, which caps a dimension at the hardware's limits
// and leaves a one-dimensional loop one thread per block. Loom's loop nests
// have up to four dimensions of any size, so each outermost nest is instead
// flattened: one thread per iteration, a fixed number per block, and the
// indices recovered from the thread's number.
//
// A nest that reduces (a row's sum or maximum) is instead a warp per
// iteration: one thread per row would read each row alone, a whole row per
// thread, where a warp reads 32 neighbouring elements at once and combines
// its threads' parts by shuffles.
//
//===----------------------------------------------------------------------===//

#include "Combiner.h"
#include "FillForwarding.h"
#include "loom/Conversion/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPARALLELLOOPSTOGPU
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Whether `op` allocates or frees memory that outlives its scope: the
/// runtime's heap, which only the host reaches.
bool usesHeap(Operation *op) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::any_of(instances, [](MemoryEffects::EffectInstance &instance) {
    return isa<MemoryEffects::Allocate, MemoryEffects::Free>(
               instance.getEffect()) &&
           instance.getResource() !=
               SideEffects::AutomaticAllocationScopeResource::get();
  });
}

/// Whether a GPU thread can run `op`: arithmetic, loads and stores, views
/// and structured control flow. Calls and heap allocations go through the
/// host's runtime, and a loop with reductions needs threads that cooperate.
bool runsOnDevice(Operation *op) {
  if (isa<CallOpInterface>(op) || usesHeap(op))
    return false;
  if (auto loop = dyn_cast<scf::ParallelOp>(op))
    if (!loop.getInitVals().empty())
      return false;
  return isa_and_nonnull<arith::ArithDialect, math::MathDialect,
                         memref::MemRefDialect, scf::SCFDialect,
                         affine::AffineDialect, index::IndexDialect>(
      op->getDialect());
}

/// Whether the nest of `loop`, the loop included, can be one kernel.
bool nestRunsOnDevice(scf::ParallelOp loop) {
  return !loop->walk([](Operation *op) {
                return runsOnDevice(op) ? WalkResult::advance()
                                        : WalkResult::interrupt();
              })
              .wasInterrupted();
}

/// Replaces a copy by the loop nest of its elements, which runs on the device
/// like any other: lowered as it is, the copy is a memcpy on the host.
void copyAsLoop(memref::CopyOp copy) {
  OpBuilder b(copy);
  Location loc = copy.getLoc();
  Value source = copy.getSource(), target = copy.getTarget();
  auto type = cast<MemRefType>(source.getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  // A copy of one element still needs one iteration.
  SmallVector<Value> lower(std::max<int64_t>(type.getRank(), 1), zero), upper,
      steps(lower.size(), one);
  // Static sizes fold to constants, which the kernel's index arithmetic
  // divides by cheaply.
  for (int64_t d = 0; d < type.getRank(); ++d)
    upper.push_back(b.createOrFold<memref::DimOp>(loc, source, d));
  if (type.getRank() == 0)
    upper.push_back(one);
  scf::ParallelOp::create(
      b, loc, lower, upper, steps,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange ivs) {
        ValueRange indices = type.getRank() ? ivs : ValueRange();
        Value v = memref::LoadOp::create(nested, nestedLoc, source, indices);
        memref::StoreOp::create(nested, nestedLoc, v, target, indices);
      });
  copy.erase();
}

/// The threads of a warp, which exchange values by shuffles.
constexpr int64_t kWarpSize = 32;

/// The operation that folds each iteration's term into the accumulator
/// `iterArg` of `loop`, if it is a reassociable one (a sum, a product, a
/// maximum or minimum) on a type a shuffle moves: the iterations may then
/// be split among threads and the parts combined in any order.
Operation *warpCombiner(scf::ForOp loop, unsigned iterArg) {
  SmallVector<BlockArgument> carried(loop.getRegionIterArgs());
  Type type = carried[iterArg].getType();
  if (!(type.isF32() || type.isInteger(32)))
    return nullptr;
  return getReassociableCombiner(carried, iterArg);
}

/// Whether `loop` only reduces: it carries accumulators of warp combiners
/// alone and writes no memory, which its iterations split among threads
/// would write in another order.
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

/// Whether the threads of a warp can share the iterations of `loop`: it
/// only reduces, with iterations enough for every thread.
bool isWarpReduction(scf::ForOp loop) {
  std::optional<APInt> trips = loop.getStaticTripCount();
  return trips && trips->getSExtValue() >= kWarpSize && onlyReduces(loop);
}

/// The reduction loops of a kernel's body a warp shares, outermost first
/// (none inside another). Empty when the body does other work a warp could
/// not share: a loop that is not a shared reduction and contains none,
/// which each of the warp's threads would run whole.
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

/// Splits the iterations of `loop` among the threads of a warp, thread
/// `lane` taking every 32nd from its own, and combines the threads' parts by
/// a butterfly of shuffles, after which every thread holds the whole
/// result. The loop's initial values enter through thread 0's part, so that
/// each thread has read them before the shuffles that any thread's later
/// stores wait for. Code outside the loop runs in every thread of the warp
/// alike, storing the same values.
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

/// Puts `loop`, a reduction to scalars on the host whose results are only
/// stored right after it, in a parallel loop of one iteration, to run as a
/// kernel (of one warp if it is a warp reduction). A load of an initial
/// value just before it, which nothing else reads, goes with it, and so
/// does a store of that value just before the load.
void wrapHostReduction(scf::ForOp loop) {
  // Nested parallel loops would run in the one thread.
  if (loop->getParentOfType<scf::ParallelOp>() || !onlyReduces(loop) ||
      loop->walk([](Operation *op) {
            return runsOnDevice(op) && !isa<scf::ParallelOp>(op)
                       ? WalkResult::advance()
                       : WalkResult::interrupt();
          })
          .wasInterrupted())
    return;
  SmallVector<Operation *> moved;
  Operation *before = loop->getPrevNode();
  if (auto load = dyn_cast_or_null<memref::LoadOp>(before)) {
    if (load->hasOneUse() && *load->user_begin() == loop) {
      // And the fill of the output that the initial value is, just before.
      auto fill = dyn_cast_or_null<memref::StoreOp>(load->getPrevNode());
      if (fill && fill.getMemRef() == load.getMemRef() &&
          fill.getIndices() == load.getIndices())
        moved.push_back(fill);
      moved.push_back(load);
    }
  }
  moved.push_back(loop);
  // The results' stores, in order right after the loop.
  unsigned stores = 0;
  for (Value result : loop.getResults())
    stores += std::distance(result.use_begin(), result.use_end());
  Operation *next = loop->getNextNode();
  for (unsigned i = 0; i < stores; ++i, next = next->getNextNode()) {
    auto store = dyn_cast_or_null<memref::StoreOp>(next);
    if (!store || store.getValueToStore().getDefiningOp() != loop)
      return;
    moved.push_back(store);
  }
  OpBuilder b(moved.front());
  Location loc = loop.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto wrapper = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                         ValueRange{one}, ValueRange{one});
  Operation *terminator = wrapper.getBody()->getTerminator();
  for (Operation *op : moved)
    op->moveBefore(terminator);
}

/// Replaces `loop` by a launch of one thread per iteration, or of one warp
/// per iteration where its body reduces.
/// The kernel's name, from the part of the model its loop computes and the
/// pass it belongs to ("h.*.ln_1" of the backward pass: backward_h_ln_1),
/// so that the runtime's trace and profilers tell kernels apart; "loop"
/// where the location names no part.
std::string kernelName(Location loc) {
  StringRef pass, part;
  loc->walk([&](Location l) {
    if (auto fused = dyn_cast<FusedLoc>(l))
      if (auto tag = dyn_cast_or_null<StringAttr>(fused.getMetadata())) {
        StringRef value = tag.getValue();
        if (pass.empty() && value.consume_front("loom."))
          pass = value;
      }
    if (auto name = dyn_cast<NameLoc>(l))
      if (part.empty())
        part = name.getName().getValue();
    return WalkResult::advance();
  });
  // PTX names are C identifiers: other characters separate words.
  std::string name;
  for (char c : (pass.empty() ? part.str() : (pass + "." + part).str())) {
    if (llvm::isAlnum(c))
      name += c;
    else if (!name.empty() && name.back() != '_')
      name += '_';
  }
  while (!name.empty() && name.back() == '_')
    name.pop_back();
  if (name.empty())
    return "loop";
  if (llvm::isDigit(name.front()))
    name.insert(0, "loop_");
  return name;
}

/// How many iterations of `loop` each thread may run, for `threadBytes` of
/// its narrowest loaded element type: 1 where the body is not elementwise
/// code whose iterations can be interleaved. A thread per element keeps
/// one load of 2 or 4 bytes in flight, too few to fill a GPU's memory
/// pipe; a thread running several iterations issues all their loads
/// before it computes and stores. Its iterations lie a grid's worth of
/// threads apart, so that each of its loads is one of the warp's
/// neighbouring elements, as before.
///
/// All loads and arithmetic, then all stores, is the iterations' order
/// only if no store of one iteration writes what a load of another reads:
/// each store must write memory disjoint from each load's
/// (FillForwarding.h), or the very element the load reads in the same
/// iteration, indexed by every induction variable. The body is
/// straight-line code whose loads all come before its stores, and the
/// iterations a constant multiple of the factor.
int64_t getCoarsening(scf::ParallelOp loop, int64_t threadBytes) {
  int64_t iterations = 1;
  for (auto [lower, upper, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lower),
                           u = getConstantIntValue(upper),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return 1;
    if (*u <= *l)
      return 1;
    iterations *= llvm::divideCeil(*u - *l, *s);
  }
  SmallVector<memref::LoadOp> loads;
  SmallVector<memref::StoreOp> stores;
  int64_t narrowest = 0;
  for (Operation &op : loop.getBody()->without_terminator()) {
    // The nest runs on the device already (nestRunsOnDevice).
    if (op.getNumRegions())
      return 1;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (!stores.empty() || !load.getType().isIntOrFloat())
        return 1;
      loads.push_back(load);
      int64_t bytes =
          llvm::divideCeil(load.getType().getIntOrFloatBitWidth(), 8);
      narrowest = narrowest ? std::min(narrowest, bytes) : bytes;
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      stores.push_back(store);
      continue;
    }
    if (!isMemoryEffectFree(&op))
      return 1;
  }
  if (!narrowest || stores.empty())
    return 1;
  auto ownElement = [&](memref::StoreOp store, memref::LoadOp load) {
    return store.getMemRef() == load.getMemRef() &&
           store.getIndices() == load.getIndices() &&
           llvm::all_of(loop.getInductionVars(), [&](Value iv) {
             return llvm::is_contained(store.getIndices(), iv);
           });
  };
  for (memref::StoreOp store : stores)
    for (memref::LoadOp load : loads)
      if (!areDisjoint(store.getMemRef(), load.getMemRef()) &&
          !ownElement(store, load))
        return 1;
  int64_t factor = std::max<int64_t>(threadBytes / narrowest, 1);
  while (factor > 1 && iterations % factor != 0)
    factor /= 2;
  return factor;
}

void launch(scf::ParallelOp loop, int64_t blockSize, int64_t threadBytes) {
  // Before anything is built: it reads the loop's bounds.
  bool perWarp =
      blockSize % kWarpSize == 0 && !warpReductions(*loop.getBody()).empty();
  int64_t factor = perWarp ? 1 : getCoarsening(loop, threadBytes);
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  // The launch's argument array is put on the stack where the launch is;
  // in a host loop of many launches, the scope gives it back each time.
  auto scope = memref::AllocaScopeOp::create(b, loc, TypeRange());
  b.setInsertionPointToStart(&scope.getBodyRegion().emplaceBlock());
  memref::AllocaScopeReturnOp::create(b, loc);
  b.setInsertionPointToStart(&scope.getBodyRegion().front());
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value one = constant(1);
  // Trip counts of each dimension, and their product.
  SmallVector<Value> trips;
  Value total = one;
  for (auto [lower, upper, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, upper, lower);
    Value trip = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    trips.push_back(trip);
    total = b.createOrFold<arith::MulIOp>(loc, total, trip);
  }
  // A thread per `factor` iterations, `stride` apart.
  Value stride = total;
  if (factor > 1)
    total = stride =
        b.createOrFold<arith::DivSIOp>(loc, total, constant(factor));
  // A warp per iteration needs whole warps in a block, so that a warp's
  // threads are all in range or all out.
  if (perWarp)
    total = b.createOrFold<arith::MulIOp>(loc, total, constant(kWarpSize));
  Value threads = constant(blockSize);
  // An empty loop still launches one block, whose threads all skip the body:
  // a grid of zero blocks is a launch error.
  Value blocks = b.createOrFold<arith::MaxSIOp>(
      loc, b.createOrFold<arith::CeilDivSIOp>(loc, total, threads), one);
  auto launchOp =
      gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one);
  launchOp.setFunctionAttr(
      FlatSymbolRefAttr::get(b.getContext(), kernelName(loop.getLoc())));

  OpBuilder inner = OpBuilder::atBlockBegin(&launchOp.getBody().front());
  gpu::KernelDim3 blockIds = launchOp.getBlockIds(),
                  threadIds = launchOp.getThreadIds();
  Value id = arith::AddIOp::create(
      inner, loc,
      arith::MulIOp::create(inner, loc, blockIds.x, launchOp.getBlockSizeX()),
      threadIds.x);
  Value inRange =
      arith::CmpIOp::create(inner, loc, arith::CmpIPredicate::slt, id, total);
  auto guard = scf::IfOp::create(inner, loc, inRange, /*withElse=*/false);
  gpu::TerminatorOp::create(inner, loc);

  OpBuilder body = guard.getThenBodyBuilder();
  IRMapping mapping;
  Value rest = id, lane;
  if (perWarp) {
    Value warp = arith::ConstantIndexOp::create(body, loc, kWarpSize);
    lane = arith::RemSIOp::create(body, loc, id, warp);
    rest = arith::DivSIOp::create(body, loc, id, warp);
  }
  // The induction variables of flat iteration `flat`, into `into`.
  auto mapIndices = [&](Value flat, IRMapping &into) {
    for (int64_t d = trips.size() - 1; d >= 0; --d) {
      Value index = flat;
      if (d > 0) {
        index = body.createOrFold<arith::RemSIOp>(loc, flat, trips[d]);
        flat = body.createOrFold<arith::DivSIOp>(loc, flat, trips[d]);
      }
      Value iv = body.createOrFold<arith::AddIOp>(
          loc, loop.getLowerBound()[d],
          body.createOrFold<arith::MulIOp>(loc, index, loop.getStep()[d]));
      into.map(loop.getInductionVars()[d], iv);
    }
  };
  if (factor == 1) {
    mapIndices(rest, mapping);
    for (Operation &op : loop.getBody()->without_terminator())
      body.clone(op, mapping);
  } else {
    // The thread's iterations: every load and computation, then every
    // store, in the iterations' order.
    SmallVector<IRMapping> iterations(factor);
    for (auto [i, iteration] : llvm::enumerate(iterations))
      mapIndices(
          body.createOrFold<arith::AddIOp>(
              loc, rest,
              body.createOrFold<arith::MulIOp>(
                  loc, stride, arith::ConstantIndexOp::create(body, loc, i))),
          iteration);
    for (IRMapping &iteration : iterations)
      for (Operation &op : loop.getBody()->without_terminator())
        if (!isa<memref::StoreOp>(op))
          body.clone(op, iteration);
    for (IRMapping &iteration : iterations)
      for (Operation &op : loop.getBody()->without_terminator())
        if (isa<memref::StoreOp>(op))
          body.clone(op, iteration);
  }
  if (perWarp)
    for (scf::ForOp reduction : warpReductions(*guard.thenBlock()))
      shareAmongWarp(reduction, lane);
  loop.erase();
}

struct ParallelLoopsToGpuPass
    : public loom::impl::LoomParallelLoopsToGpuBase<ParallelLoopsToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize <= 0 || blockSize > 1024) {
      getOperation().emitError()
          << "loom-parallel-loops-to-gpu: block-size must be in [1, 1024], "
             "got "
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (threadBytes < 0) {
      getOperation().emitError()
          << "loom-parallel-loops-to-gpu: thread-bytes must be at least 0, "
             "got "
          << static_cast<int64_t>(threadBytes);
      return signalPassFailure();
    }
    getOperation().walk([](memref::CopyOp copy) { copyAsLoop(copy); });
    SmallVector<scf::ForOp> hostLoops;
    getOperation().walk([&](scf::ForOp loop) { hostLoops.push_back(loop); });
    for (scf::ForOp loop : hostLoops)
      wrapHostReduction(loop);
    // Outermost first; a loop that stays on the host is looked into.
    SmallVector<scf::ParallelOp> kernels;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
      if (!nestRunsOnDevice(loop))
        return WalkResult::advance();
      kernels.push_back(loop);
      return WalkResult::skip();
    });
    for (scf::ParallelOp loop : kernels)
      launch(loop, static_cast<int64_t>(blockSize),
             static_cast<int64_t>(threadBytes));
  }
};
} // namespace
