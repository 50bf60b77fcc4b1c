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

#include "loom/Buffers/Combiner.h"
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
bool readsAlongLoop(scf::ForOp loop) {
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
bool isWarpReduction(scf::ForOp loop) {
  std::optional<APInt> trips = loop.getStaticTripCount();
  return trips && trips->getSExtValue() >= kWarpSize && onlyReduces(loop) &&
         readsAlongLoop(loop);
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

/// Moves `ops`, in order, into a parallel loop of one iteration built at
/// `b`'s insertion point: a kernel of one thread.
void moveIntoOneIteration(OpBuilder &b, Location loc,
                          ArrayRef<Operation *> ops) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto wrapper = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                         ValueRange{one}, ValueRange{one});
  Operation *terminator = wrapper.getBody()->getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
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
  moveIntoOneIteration(b, loop.getLoc(), moved);
}

/// Whether `buffer` lies on the host's stack (a `memref.alloca`, or a view
/// of one), which a kernel cannot reach.
bool isOnStack(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewLikeOpInterface>())
    buffer = view.getViewSource();
  return buffer.getDefiningOp<memref::AllocaOp>();
}

/// Whether `op`, on the host, only moves a scalar between memory the device
/// reaches and registers, or computes one without touching memory.
bool movesScalars(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getType().isIntOrFloat() && !isOnStack(load.getMemRef());
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return store.getValueToStore().getType().isIntOrFloat() &&
           !isOnStack(store.getMemRef());
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) && runsOnDevice(op);
}

/// Puts `run`, consecutive host operations that movesScalars allows, in a
/// parallel loop of one iteration, to run as a kernel after them, when
/// what it loads only goes to what it stores (the step's loss, read from
/// where the backward pass summed it and stored for the step's output):
/// the host would otherwise wait for the device to read it. Operations
/// that read no memory and need nothing loaded (views, constants) stay on
/// the host.
void wrapHostScalars(ArrayRef<Operation *> run) {
  SmallPtrSet<Operation *, 8> inRun(run.begin(), run.end()), moved;
  SmallVector<Operation *> kernel;
  bool stores = false;
  for (Operation *op : run) {
    bool memory = isa<memref::LoadOp, memref::StoreOp>(op);
    bool needsMoved = llvm::any_of(op->getOperands(), [&](Value operand) {
      return moved.contains(operand.getDefiningOp());
    });
    if (!memory && !needsMoved)
      continue;
    // A value the host still needs after the run keeps it there.
    for (Operation *user : op->getUsers())
      if (!inRun.contains(op->getBlock()->findAncestorOpInBlock(*user)))
        return;
    moved.insert(op);
    kernel.push_back(op);
    stores |= isa<memref::StoreOp>(op);
  }
  if (!stores)
    return;
  OpBuilder b(run.back()->getContext());
  b.setInsertionPointAfter(run.back());
  moveIntoOneIteration(b, kernel.front()->getLoc(), kernel);
}

/// wrapHostScalars for each run of `block`.
void wrapHostScalars(Block &block) {
  SmallVector<SmallVector<Operation *>> runs(1);
  for (Operation &op : block) {
    if (movesScalars(&op))
      runs.back().push_back(&op);
    else if (!runs.back().empty())
      runs.emplace_back();
  }
  for (ArrayRef<Operation *> run : runs)
    if (!run.empty())
      wrapHostScalars(run);
}

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

/// Whether `value`, a view of memory the host computes from a buffer,
/// constants and indices (the static arena's buffers, a layer's slice of
/// them), can be computed again in a kernel from its buffer: the kernel
/// then takes the buffer, which its other views share, and the indices,
/// rather than a descriptor of each view.
bool isSinkableView(Value value) {
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
bool isSinkableIndex(Value value) {
  Operation *op = value.getDefiningOp();
  return op && value.getType().isIndex() &&
         isa<arith::ArithDialect>(op->getDialect()) && isPure(op) &&
         llvm::all_of(op->getOperandTypes(),
                      [](Type type) { return type.isIndex(); });
}

/// The values a kernel of `region` takes from the host, views it can compute
/// again replaced by their buffers and indices, into `arguments`. Constants
/// go into the kernel (gpu-kernel-outlining).
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

/// The bytes of a kernel's parameters for `arguments`: a memref is passed
/// as its descriptor (two pointers, the offset, the sizes and strides);
/// a scalar takes at most 8.
int64_t getArgumentBytes(const SetVector<Value> &arguments) {
  int64_t bytes = 0;
  for (Value value : arguments) {
    auto memref = dyn_cast<MemRefType>(value.getType());
    bytes += 8 * (memref ? 3 + 2 * memref.getRank() : 1);
  }
  return bytes;
}

/// Computes in `launchOp`'s kernel the views and indices it uses that
/// isSinkableView and isSinkableIndex allow.
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

constexpr int64_t kAnyPowerOfTwo = int64_t(1) << 62;

/// The largest power of two that the IR shows divides `index`, a value the
/// host computes: a view's byte shift, such as the residual stream's
/// (layer % 2) * bytes + start.
int64_t getKnownDivisor(Value index) {
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
bool startsAtAlignedPointer(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  return memref && succeeded(memref.getStridesAndOffset(strides, offset)) &&
         offset == 0;
}

/// The alignment in bytes, a power of two, that the IR shows `buffer`'s
/// aligned pointer has: an allocation's own, kept by the views that keep
/// the pointer, the largest power of two known to divide a byte shift
/// (memref.view, getKnownDivisor), and for a buffer a loop carries the least
/// of what enters the loop and what each iteration passes on (the residual
/// stream's two buffers). 1 for the step's arguments: the runtime packs its
/// parameters one after the other. `carried` holds the loop-carried buffers
/// being computed, assumed aligned to any power of two while they are: with
/// powers of two every step is a minimum, so the result is the least
/// alignment of every buffer that can reach `buffer`.
int64_t getKnownAlignment(Value buffer, SmallPtrSetImpl<Value> &carried) {
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

/// Tells the kernel the alignment of each buffer it takes that the host
/// allocated aligned (the static arena, its views computed in the kernel,
/// the buffers a layer loop carries): a kernel's parameters are otherwise
/// pointers of unknown alignment, and LLVM cannot join neighbouring
/// accesses into one wide one.
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
    // A global is the host's memory: a kernel or a copy given its address
    // faults on the GPU at run time, so it is refused here.
    WalkResult globals = getOperation().walk([](memref::GetGlobalOp op) {
      op.emitError() << "loom-parallel-loops-to-gpu: global '" << op.getName()
                     << "' is in the host's memory, which the GPU's kernels "
                        "cannot read";
      return WalkResult::interrupt();
    });
    if (globals.wasInterrupted())
      return signalPassFailure();
    getOperation().walk([](memref::CopyOp copy) { copyAsLoop(copy); });
    SmallVector<scf::ForOp> hostLoops;
    getOperation().walk([&](scf::ForOp loop) { hostLoops.push_back(loop); });
    for (scf::ForOp loop : hostLoops)
      wrapHostReduction(loop);
    // The host's blocks: functions' and host loops' bodies.
    SmallVector<Block *> hostBlocks;
    getOperation().walk([&](Block *block) {
      Operation *parent = block->getParentOp();
      if (!isa<scf::ParallelOp>(parent) &&
          !parent->getParentOfType<scf::ParallelOp>())
        hostBlocks.push_back(block);
    });
    for (Block *block : hostBlocks)
      wrapHostScalars(*block);
    // Outermost first; a loop that stays on the host is looked into.
    SmallVector<scf::ParallelOp> kernels;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
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
