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

#include "ParallelLoopsToGpu.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Buffers/FillForwarding.h"
#include "loom/GPU/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPARALLELLOOPSTOGPU
#include "loom/GPU/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::loops_to_gpu;

namespace {
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

/// The name of a launch of `loops`: their name where they share it, else
/// the first one's and how many others run with it.
std::string kernelName(ArrayRef<scf::ParallelOp> loops) {
  std::string name = kernelName(loops.front()->getLoc());
  if (llvm::all_of(loops.drop_front(), [&](scf::ParallelOp loop) {
        return kernelName(loop->getLoc()) == name;
      }))
    return name;
  return name + "_and_" + std::to_string(loops.size() - 1) + "_more";
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

/// The most bytes of parameters a kernel of several nests takes: the 4,096
/// every CUDA driver accepts for PTX before ISA 8.1.
constexpr int64_t kMaxArgumentBytes = 4096;

/// The reads and writes of `op` and of the operations in it, or none if
/// one of them does not say which memory it touches.
std::optional<SmallVector<MemoryEffects::EffectInstance>>
getAccesses(Operation *op) {
  std::optional<SmallVector<MemoryEffects::EffectInstance>> effects =
      getEffectsRecursively(op);
  if (!effects)
    return std::nullopt;
  SmallVector<MemoryEffects::EffectInstance> accesses;
  for (const MemoryEffects::EffectInstance &effect : *effects) {
    // A nest that runs on the device allocates on its own stack at most.
    if (!isa<MemoryEffects::Read, MemoryEffects::Write>(effect.getEffect()))
      continue;
    if (!effect.getValue())
      return std::nullopt;
    accesses.push_back(effect);
  }
  return accesses;
}

/// Whether one of `a` and one of `b` may touch the same memory, one of
/// them writing it.
bool conflict(ArrayRef<MemoryEffects::EffectInstance> a,
              ArrayRef<MemoryEffects::EffectInstance> b) {
  return llvm::any_of(a, [&](const MemoryEffects::EffectInstance &x) {
    return llvm::any_of(b, [&](const MemoryEffects::EffectInstance &y) {
      return (isa<MemoryEffects::Write>(x.getEffect()) ||
              isa<MemoryEffects::Write>(y.getEffect())) &&
             !areDisjoint(x.getValue(), y.getValue());
    });
  });
}

/// Loop nests that one launch runs, each on blocks of its own: launches
/// cost the GPU a few microseconds each, which the optimizer's update of
/// each parameter tensor (and other small neighbouring nests) would pay
/// one by one.
struct LaunchGroup {
  SmallVector<scf::ParallelOp> loops;
  /// What the nests read and write, if known.
  std::optional<SmallVector<MemoryEffects::EffectInstance>> accesses;
  /// The host operations before the first nest that read no memory
  /// written since.
  SmallVector<Operation *> hoisted;
  /// What the kernel takes from the host.
  SetVector<Value> arguments;

  /// A group of `loop`, which reads and writes `touched` (getAccesses).
  LaunchGroup(scf::ParallelOp loop,
              std::optional<SmallVector<MemoryEffects::EffectInstance>> touched)
      : loops{loop}, accesses(std::move(touched)) {
    collectKernelArguments(loop.getRegion(), arguments);
    // What the host computes right before the first nest, which those moved
    // there may fold into.
    if (accesses)
      for (Operation *op = loop->getPrevNode(); op && mayRunBefore(op);
           op = op->getPrevNode())
        hoisted.push_back(op);
  }

  /// Adds `loop` if it can run in the group's launch: it follows the last
  /// nest in its block with nothing between them but host operations that
  /// may run before the first nest (they read memory no nest writes, and
  /// write none), and touches no memory a nest writes, nor writes memory
  /// one reads. The operations between then move before the first nest.
  /// `mine` is what `loop` reads and writes (getAccesses).
  bool tryAdd(scf::ParallelOp loop,
              ArrayRef<MemoryEffects::EffectInstance> mine, size_t maxNests) {
    scf::ParallelOp last = loops.back();
    if (loops.size() >= maxNests || !accesses ||
        loop->getBlock() != last->getBlock() || conflict(*accesses, mine))
      return false;
    SmallVector<Operation *> between;
    for (Operation *op = last->getNextNode(); op != loop;
         op = op->getNextNode()) {
      if (!op || !mayRunBefore(op))
        return false;
      between.push_back(op);
    }
    // Moved whether or not the nest joins: they may run there either way.
    for (Operation *op : between)
      hoist(op);
    SetVector<Value> joined = arguments;
    collectKernelArguments(loop.getRegion(), joined);
    if (getArgumentBytes(joined) > kMaxArgumentBytes)
      return false;
    loops.push_back(loop);
    accesses->append(mine.begin(), mine.end());
    arguments = std::move(joined);
    return true;
  }

private:
  /// Whether `op`, a host operation after the group's nests, may run before
  /// them.
  bool mayRunBefore(Operation *op) {
    if (op->getNumRegions())
      return false;
    if (isMemoryEffectFree(op))
      return true;
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return false;
    SmallVector<MemoryEffects::EffectInstance> reads;
    effects.getEffects(reads);
    return llvm::all_of(reads,
                        [](const MemoryEffects::EffectInstance &effect) {
                          return isa<MemoryEffects::Read>(effect.getEffect()) &&
                                 effect.getValue();
                        }) &&
           !conflict(*accesses, reads);
  }

  /// Moves `op` before the first nest, folded into an operation moved
  /// there before that computes the same (the optimizer's updates each
  /// read the learning rate and compute the bias corrections).
  void hoist(Operation *op) {
    for (Operation *before : hoisted)
      if (OperationEquivalence::isEquivalentTo(
              op, before, OperationEquivalence::IgnoreLocations)) {
        op->replaceAllUsesWith(before);
        op->erase();
        return;
      }
    op->moveBefore(loops.front());
    hoisted.push_back(op);
  }
};

/// Whether every access of `loop`'s body that streams through memory along
/// its innermost dimension is to a buffer aligned to the bytes `factor`
/// consecutive iterations of it span, at most the 16 of the widest access:
/// where one is not, LLVM keeps a contiguous thread's accesses one element
/// wide, and each of a warp's loads touches 8 times the memory sectors its
/// bytes fill (the optimizer's updates of the step's arguments, which the
/// runtime packs one after the other). An access that walks the innermost
/// dimension alone in a nest of several (a layer norm's weight, read again
/// for each row) stays in the cache and does not count.
bool widensAccesses(scf::ParallelOp loop, int64_t factor) {
  ValueRange ivs = loop.getInductionVars();
  auto sliceOf = [](ValueRange roots) {
    SetVector<Operation *> slice;
    for (Value root : roots)
      getForwardSlice(root, &slice);
    return slice;
  };
  SetVector<Operation *> walking = sliceOf(ivs.back()),
                         outer = sliceOf(ivs.drop_back());
  auto dependsOn = [](ValueRange indices, ValueRange roots,
                      const SetVector<Operation *> &slice) {
    return llvm::any_of(indices, [&](Value index) {
      return llvm::is_contained(roots, index) ||
             slice.contains(index.getDefiningOp());
    });
  };
  auto walks = [&](ValueRange indices) {
    return dependsOn(indices, ivs.back(), walking) &&
           (ivs.size() == 1 || dependsOn(indices, ivs.drop_back(), outer));
  };
  auto aligned = [&](Value buffer, Type element) {
    if (!element.isIntOrFloat())
      return false;
    int64_t bytes =
        factor * llvm::divideCeil(element.getIntOrFloatBitWidth(), 8);
    return getKnownAlignment(buffer) >= std::min<int64_t>(bytes, 16);
  };
  WalkResult result = loop.getBody()->walk([&](Operation *op) {
    if (auto load = dyn_cast<memref::LoadOp>(op))
      if (walks(load.getIndices()) &&
          !aligned(load.getMemRef(), load.getType()))
        return WalkResult::interrupt();
    if (auto store = dyn_cast<memref::StoreOp>(op))
      if (walks(store.getIndices()) &&
          !aligned(store.getMemRef(), store.getValueToStore().getType()))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// How one loop nest runs in a launch: the threads it takes, as values
/// computed on the host before the launch, and how each runs its
/// iterations.
struct Segment {
  scf::ParallelOp loop;
  /// A warp per iteration (its body reduces), or a thread per `factor`.
  bool perWarp = false;
  int64_t factor = 1;
  /// A thread's `factor` iterations are consecutive, not `stride` apart.
  bool contiguous = false;
  /// The trip count of each dimension; a thread's iterations lie `stride`
  /// apart; `threads` of them; `blocks` of the launch's blocks.
  SmallVector<Value> trips;
  Value stride, threads, blocks;
};

/// Plans `loop`'s part of a launch of `blockSize` threads a block, building
/// its counts with `b` on the host from the constants 1 and `blockSize`
/// (`one`, `threads`).
Segment planSegment(OpBuilder &b, scf::ParallelOp loop, int64_t blockSize,
                    int64_t threadBytes, bool contiguous, Value one,
                    Value threads) {
  Segment s;
  s.loop = loop;
  Location loc = loop.getLoc();
  // Before anything is built: they read the loop's bounds.
  s.perWarp =
      blockSize % kWarpSize == 0 && !warpReductions(*loop.getBody()).empty();
  s.factor = s.perWarp ? 1 : getCoarsening(loop, threadBytes);
  s.contiguous = contiguous && s.factor > 1 && widensAccesses(loop, s.factor);
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value total = one;
  for (auto [lower, upper, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, upper, lower);
    Value trip = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    s.trips.push_back(trip);
    total = b.createOrFold<arith::MulIOp>(loc, total, trip);
  }
  // A thread per `factor` iterations, `stride` apart.
  s.stride = total;
  if (s.factor > 1)
    total = s.stride =
        b.createOrFold<arith::DivSIOp>(loc, total, constant(s.factor));
  // A warp per iteration needs whole warps in a block, so that a warp's
  // threads are all in range or all out.
  if (s.perWarp)
    total = b.createOrFold<arith::MulIOp>(loc, total, constant(kWarpSize));
  s.threads = total;
  // An empty loop still takes one block, whose threads all skip the body:
  // a grid of zero blocks is a launch error.
  s.blocks = b.createOrFold<arith::MaxSIOp>(
      loc, b.createOrFold<arith::CeilDivSIOp>(loc, total, threads), one);
  return s;
}

/// Builds at `inner`'s insertion point, in the kernel, the iterations of
/// `s` that the segment's thread number `id` runs.
void buildSegment(OpBuilder &inner, const Segment &s, Value id) {
  scf::ParallelOp loop = s.loop;
  Location loc = loop.getLoc();
  Value inRange = arith::CmpIOp::create(inner, loc, arith::CmpIPredicate::slt,
                                        id, s.threads);
  auto guard = scf::IfOp::create(inner, loc, inRange, /*withElse=*/false);
  OpBuilder body = guard.getThenBodyBuilder();
  IRMapping mapping;
  Value rest = id, lane;
  if (s.perWarp) {
    Value warp = arith::ConstantIndexOp::create(body, loc, kWarpSize);
    lane = arith::RemSIOp::create(body, loc, id, warp);
    rest = arith::DivSIOp::create(body, loc, id, warp);
  }
  // The induction variables of flat iteration `flat`, into `into`; with
  // `chunk` > 1, of the innermost dimension's `chunk`th part `flat`, its
  // index a multiple of `chunk`.
  auto mapIndices = [&](Value flat, IRMapping &into, int64_t chunk = 1) {
    int64_t last = s.trips.size() - 1;
    for (int64_t d = last; d >= 0; --d) {
      Value index = flat;
      if (d > 0) {
        Value trip = s.trips[d];
        if (d == last && chunk > 1)
          trip = body.createOrFold<arith::DivSIOp>(
              loc, trip, arith::ConstantIndexOp::create(body, loc, chunk));
        index = body.createOrFold<arith::RemSIOp>(loc, flat, trip);
        flat = body.createOrFold<arith::DivSIOp>(loc, flat, trip);
      }
      if (d == last && chunk > 1)
        index = body.createOrFold<arith::MulIOp>(
            loc, index, arith::ConstantIndexOp::create(body, loc, chunk));
      Value iv = body.createOrFold<arith::AddIOp>(
          loc, loop.getLowerBound()[d],
          body.createOrFold<arith::MulIOp>(loc, index, loop.getStep()[d]));
      into.map(loop.getInductionVars()[d], iv);
    }
  };
  if (s.factor == 1) {
    mapIndices(rest, mapping);
    for (Operation &op : loop.getBody()->without_terminator())
      body.clone(op, mapping);
  } else {
    // The thread's iterations: every load and computation, then every
    // store, in the iterations' order.
    SmallVector<IRMapping> iterations(s.factor);
    auto constant = [&](int64_t v) {
      return arith::ConstantIndexOp::create(body, loc, v);
    };
    std::optional<int64_t> innerTrip = getConstantIntValue(s.trips.back());
    if (s.contiguous && innerTrip && *innerTrip % s.factor == 0) {
      // The innermost dimension holds them all: the same outer indices,
      // the innermost one counting up, so that their accesses are
      // neighbours LLVM can make one. The thread's first index is computed
      // as a multiple of the factor, not as a remainder of `first`, so that
      // LLVM knows the accesses' alignment.
      mapIndices(rest, iterations[0], s.factor);
      Value inner = loop.getInductionVars().back();
      Value at = iterations[0].lookup(inner);
      for (int64_t i = 1; i < s.factor; ++i) {
        iterations[i] = iterations[0];
        iterations[i].map(inner,
                          body.createOrFold<arith::AddIOp>(
                              loc, at,
                              body.createOrFold<arith::MulIOp>(
                                  loc, loop.getStep().back(), constant(i))));
      }
    } else {
      // Consecutive iterations from factor * rest, or `stride` apart from
      // rest.
      Value first =
          s.contiguous
              ? body.createOrFold<arith::MulIOp>(loc, rest, constant(s.factor))
              : rest;
      Value apart = s.contiguous ? constant(1) : s.stride;
      for (auto [i, iteration] : llvm::enumerate(iterations))
        mapIndices(
            body.createOrFold<arith::AddIOp>(
                loc, first,
                body.createOrFold<arith::MulIOp>(loc, apart, constant(i))),
            iteration);
    }
    for (IRMapping &iteration : iterations)
      for (Operation &op : loop.getBody()->without_terminator())
        if (!isa<memref::StoreOp>(op))
          body.clone(op, iteration);
    for (IRMapping &iteration : iterations)
      for (Operation &op : loop.getBody()->without_terminator())
        if (isa<memref::StoreOp>(op))
          body.clone(op, iteration);
  }
  if (s.perWarp)
    for (scf::ForOp reduction : warpReductions(*guard.thenBlock()))
      shareAmongWarp(reduction, lane);
}

/// Replaces `loops`, consecutive in their block and independent of each
/// other (LaunchGroup::tryAdd), by one launch: each nest a thread per
/// iteration, or a warp per iteration where its body reduces, on blocks of its
/// own, the first nest on the first blocks.
void launch(ArrayRef<scf::ParallelOp> loops, int64_t blockSize, bool contiguous,
            int64_t threadBytes) {
  scf::ParallelOp first = loops.front();
  OpBuilder b(first);
  Location loc = first.getLoc();
  // The launch's argument array is put on the stack where the launch is;
  // in a host loop of many launches, the scope gives it back each time.
  auto scope = memref::AllocaScopeOp::create(b, loc, TypeRange());
  b.setInsertionPointToStart(&scope.getBodyRegion().emplaceBlock());
  memref::AllocaScopeReturnOp::create(b, loc);
  b.setInsertionPointToStart(&scope.getBodyRegion().front());
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value threads = arith::ConstantIndexOp::create(b, loc, blockSize);
  // Each nest's blocks end where the next one's begin.
  SmallVector<Segment> segments;
  SmallVector<Value> ends;
  for (scf::ParallelOp loop : loops) {
    segments.push_back(
        planSegment(b, loop, blockSize, threadBytes, contiguous, one, threads));
    Value blocks = segments.back().blocks;
    ends.push_back(
        ends.empty() ? blocks
                     : b.createOrFold<arith::AddIOp>(loc, ends.back(), blocks));
  }
  auto launchOp =
      gpu::LaunchOp::create(b, loc, ends.back(), one, one, threads, one, one);
  launchOp.setFunctionAttr(
      FlatSymbolRefAttr::get(b.getContext(), kernelName(loops)));

  OpBuilder inner = OpBuilder::atBlockBegin(&launchOp.getBody().front());
  inner.setInsertionPoint(gpu::TerminatorOp::create(inner, loc));
  gpu::KernelDim3 blockIds = launchOp.getBlockIds(),
                  threadIds = launchOp.getThreadIds();
  // The thread's number in its nest, from its block's number there.
  auto threadNumber = [&](OpBuilder &at, Value block) -> Value {
    return arith::AddIOp::create(
        at, loc,
        arith::MulIOp::create(at, loc, block, launchOp.getBlockSizeX()),
        threadIds.x);
  };
  // A block runs one nest, which all its threads branch to alike.
  for (auto [i, segment] : llvm::enumerate(segments)) {
    Value block =
        i == 0 ? blockIds.x
               : arith::SubIOp::create(inner, loc, blockIds.x, ends[i - 1])
                     .getResult();
    if (i + 1 == segments.size()) {
      buildSegment(inner, segment, threadNumber(inner, block));
      break;
    }
    Value here = arith::CmpIOp::create(inner, loc, arith::CmpIPredicate::slt,
                                       blockIds.x, ends[i]);
    auto branch = scf::IfOp::create(inner, loc, here, /*withElse=*/true);
    OpBuilder then = OpBuilder::atBlockBegin(branch.thenBlock());
    buildSegment(then, segment, threadNumber(then, block));
    inner.setInsertionPoint(branch.elseBlock()->getTerminator());
  }
  for (scf::ParallelOp loop : loops)
    loop.erase();
  sinkViews(launchOp);
  assumeAlignments(launchOp);
}

struct ParallelLoopsToGpuPass
    : public loom::impl::LoomParallelLoopsToGpuBase<ParallelLoopsToGpuPass> {
  using Base::Base;

  /// Whether option `name`'s `value` is at least `least` (and at most
  /// `most`, if given); else an error.
  bool checkOption(StringRef name, int64_t value, int64_t least,
                   std::optional<int64_t> most = std::nullopt) {
    if (value >= least && (!most || value <= *most))
      return true;
    InFlightDiagnostic error = getOperation().emitError()
                               << "loom-parallel-loops-to-gpu: " << name;
    if (most)
      error << " must be in [" << least << ", " << *most << "], got " << value;
    else
      error << " must be at least " << least << ", got " << value;
    return false;
  }

  void runOnOperation() override {
    if (!checkOption("block-size", blockSize, 1, 1024) ||
        !checkOption("thread-bytes", threadBytes, 0) ||
        !checkOption("nests-per-launch", nestsPerLaunch, 1))
      return signalPassFailure();
    // An offload plan's host functions (loom.host) run on the host, in
    // host memory: their loops stay host code, which the host's threads
    // run (loom-outline-loop-nests).
    SmallVector<func::FuncOp> deviceFunctions;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func->hasAttr(LoomDialect::getHostAttrName()))
        deviceFunctions.push_back(func);
    // A global is the host's memory: a kernel or a copy given its address
    // faults on the GPU at run time, so it is refused here.
    for (func::FuncOp func : deviceFunctions) {
      WalkResult globals = func.walk([](memref::GetGlobalOp op) {
        op.emitError() << "loom-parallel-loops-to-gpu: global '" << op.getName()
                       << "' is in the host's memory, which the GPU's "
                          "kernels cannot read";
        return WalkResult::interrupt();
      });
      if (globals.wasInterrupted())
        return signalPassFailure();
      func.walk([](memref::CopyOp copy) { copyAsLoop(copy); });
      SmallVector<scf::ForOp> hostLoops;
      func.walk([&](scf::ForOp loop) { hostLoops.push_back(loop); });
      for (scf::ForOp loop : hostLoops)
        wrapHostReduction(loop);
      // The host's blocks: functions' and host loops' bodies.
      SmallVector<Block *> hostBlocks;
      func.walk([&](Block *block) {
        Operation *parent = block->getParentOp();
        if (!isa<scf::ParallelOp>(parent) &&
            !parent->getParentOfType<scf::ParallelOp>())
          hostBlocks.push_back(block);
      });
      for (Block *block : hostBlocks)
        wrapHostScalars(*block);
    }
    // Outermost first; a loop that stays on the host is looked into.
    SmallVector<scf::ParallelOp> kernels;
    for (func::FuncOp func : deviceFunctions)
      func.walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
        if (!nestRunsOnDevice(loop))
          return WalkResult::advance();
        kernels.push_back(loop);
        return WalkResult::skip();
      });
    SmallVector<LaunchGroup> groups;
    for (scf::ParallelOp loop : kernels) {
      std::optional<SmallVector<MemoryEffects::EffectInstance>> accesses =
          getAccesses(loop);
      if (groups.empty() || !accesses ||
          !groups.back().tryAdd(loop, *accesses,
                                static_cast<size_t>(nestsPerLaunch)))
        groups.emplace_back(loop, std::move(accesses));
    }
    for (LaunchGroup &group : groups)
      launch(group.loops, static_cast<int64_t>(blockSize), contiguousThreads,
             static_cast<int64_t>(threadBytes));
  }
};
} // namespace
