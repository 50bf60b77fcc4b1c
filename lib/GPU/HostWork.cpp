//===- HostWork.cpp - What runs on the device -----------------------------===//
//
// A kernel runs arithmetic, loads and stores; calls and the heap stay on
// the host. Host work that would make the host wait for the device (a
// reduction to scalars, the loss read back and stored) moves into kernels
// of one thread instead.
//
//===----------------------------------------------------------------------===//

#include "ParallelLoopsToGpu.h"

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace mlir::loom::loops_to_gpu {
bool queuesWork(Operation *op) {
  return isa<gpu::LaunchOp, gpu::LaunchFuncOp, CallOpInterface>(op);
}

bool readsConstantArgument(memref::LoadOp load) {
  auto arg = dyn_cast<BlockArgument>(load.getMemRef());
  if (!arg || !arg.getOwner()->isEntryBlock())
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || !llvm::all_of(arg.getUsers(), [](Operation *user) {
        return isa<memref::LoadOp>(user);
      }))
    return false;
  auto module = func->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(func, module);
  if (!uses)
    return false;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto caller = use.getUser()->getParentOfType<FunctionOpInterface>();
    if (!caller || caller
                       ->walk([&](Operation *op) {
                         return queuesWork(op) && op != use.getUser()
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       })
                       .wasInterrupted())
      return false;
  }
  return true;
}

/// Whether `op` allocates or frees memory that outlives its scope: the
/// runtime's heap, which only the host reaches.
static bool usesHeap(Operation *op) {
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
static bool runsOnDevice(Operation *op) {
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

bool nestRunsOnDevice(scf::ParallelOp loop) {
  return !loop->walk([](Operation *op) {
                return runsOnDevice(op) ? WalkResult::advance()
                                        : WalkResult::interrupt();
              })
              .wasInterrupted();
}

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

/// Moves `ops`, in order, into a parallel loop of one iteration built at
/// `b`'s insertion point: a kernel of one thread.
static scf::ParallelOp moveIntoOneIteration(OpBuilder &b, Location loc,
                                            ArrayRef<Operation *> ops) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto wrapper = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                         ValueRange{one}, ValueRange{one});
  Operation *terminator = wrapper.getBody()->getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
  return wrapper;
}

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
static bool isOnStack(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewLikeOpInterface>())
    buffer = view.getViewSource();
  return buffer.getDefiningOp<memref::AllocaOp>();
}

/// Whether `op`, on the host, only moves a scalar between memory the device
/// reaches and registers, or computes one without touching memory.
static bool movesScalars(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getType().isIntOrFloat() && !isOnStack(load.getMemRef());
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return store.getValueToStore().getType().isIntOrFloat() &&
           !isOnStack(store.getMemRef());
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) && runsOnDevice(op);
}

/// The kernel that runs `op`, nested in `block`: the outermost parallel
/// loop around it that can run as one (the pass looks into a loop that
/// cannot). Null where `op` stays on the host.
static scf::ParallelOp enclosingKernel(Operation *op, Block &block) {
  SmallVector<scf::ParallelOp> loops;
  for (Operation *at = op; at; at = at->getParentOp()) {
    if (auto loop = dyn_cast<scf::ParallelOp>(at))
      loops.push_back(loop);
    if (at->getBlock() == &block)
      break;
  }
  for (scf::ParallelOp loop : llvm::reverse(loops))
    if (nestRunsOnDevice(loop))
      return loop;
  return nullptr;
}

/// Views of `types.size()` slots of 8 bytes among those loom-static-arena
/// reserved past the buffers of the function holding `block`
/// (`device-scalars`), which its `loom.arena` figures say are free from
/// `scalars` on; it moves past them. None where the function reserved no
/// such bytes or too few are left.
static std::optional<SmallVector<Value>> reserveSlots(Block &block,
                                                      TypeRange types) {
  auto func = dyn_cast<func::FuncOp>(block.getParentOp());
  if (!func)
    func = block.getParentOp()->getParentOfType<func::FuncOp>();
  auto figures =
      func
          ? func->getAttrOfType<DictionaryAttr>(LoomDialect::getArenaAttrName())
          : nullptr;
  auto bytes = figures
                   ? figures.getAs<IntegerAttr>(LoomDialect::getArenaBytesKey())
                   : nullptr;
  auto free =
      figures ? figures.getAs<IntegerAttr>(LoomDialect::getArenaScalarsKey())
              : nullptr;
  constexpr int64_t kSlotBytes = 8;
  int64_t first = free ? free.getInt() : 0;
  int64_t end = first + kSlotBytes * static_cast<int64_t>(types.size());
  if (!bytes || !free || end > bytes.getInt())
    return std::nullopt;
  // loom-static-arena's allocation, among the entry block's first ops.
  memref::AllocOp arena;
  for (auto alloc : func.getBody().front().getOps<memref::AllocOp>()) {
    MemRefType type = alloc.getType();
    if (type.getRank() == 1 && type.getElementType().isInteger(8) &&
        type.getDimSize(0) == bytes.getInt()) {
      arena = alloc;
      break;
    }
  }
  if (!arena)
    return std::nullopt;
  Builder attrs(func.getContext());
  NamedAttrList updated(figures);
  updated.set(LoomDialect::getArenaScalarsKey(), attrs.getI64IntegerAttr(end));
  func->setAttr(LoomDialect::getArenaAttrName(),
                updated.getDictionary(func.getContext()));
  OpBuilder b(func.getContext());
  b.setInsertionPointAfter(arena);
  SmallVector<Value> slots;
  for (auto [i, scalar] : llvm::enumerate(types)) {
    Value offset = arith::ConstantIndexOp::create(
        b, arena.getLoc(), first + kSlotBytes * static_cast<int64_t>(i));
    slots.push_back(memref::ViewOp::create(b, arena.getLoc(),
                                           MemRefType::get({}, scalar), arena,
                                           offset, ValueRange{}));
  }
  return slots;
}

/// Puts `run`, consecutive host operations that movesScalars allows, in a
/// parallel loop of one iteration, to run as a kernel after them, when
/// what it loads only goes to what it stores (the step's loss, read from
/// where the backward pass summed it and stored for the step's output) or
/// to later kernels: the host would otherwise wait for the device to read
/// it. A value a later kernel takes (the clipping factor, from the
/// gradients' norm, which the optimizer's kernels scale by) goes through a
/// slot the arena reserved (reserveSlots), which the kernel loads: the host
/// neither waits in the middle of the step nor passes the kernel what it
/// computed. That only where the run reads memory the device writes: the
/// learning rate and step number, which only the host writes, stay kernel
/// parameters, and the optimizer's kernels one launch. Operations that read no
/// memory and need nothing loaded (views, constants) stay on the host.
static void wrapHostScalars(ArrayRef<Operation *> run) {
  SmallPtrSet<Operation *, 8> inRun(run.begin(), run.end()), moved;
  SmallVector<Operation *> kernel;
  // The values later kernels take, and those kernels, in order.
  SmallVector<std::pair<Value, SmallVector<scf::ParallelOp>>> passed;
  Block &block = *run.front()->getBlock();
  bool stores = false, readsDeviceMemory = false;
  for (Operation *op : run) {
    bool memory = isa<memref::LoadOp, memref::StoreOp>(op);
    bool needsMoved = llvm::any_of(op->getOperands(), [&](Value operand) {
      return moved.contains(operand.getDefiningOp());
    });
    if (!memory && !needsMoved)
      continue;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      readsDeviceMemory |= !readsConstantArgument(load);
    for (Value result : op->getResults()) {
      SmallVector<scf::ParallelOp> kernels;
      for (Operation *user : result.getUsers()) {
        if (inRun.contains(block.findAncestorOpInBlock(*user)))
          continue;
        // A value the host still needs after the run keeps it there.
        scf::ParallelOp loop = enclosingKernel(user, block);
        if (!loop)
          return;
        if (!llvm::is_contained(kernels, loop))
          kernels.push_back(loop);
      }
      if (!kernels.empty())
        passed.emplace_back(result, std::move(kernels));
    }
    moved.insert(op);
    kernel.push_back(op);
    stores |= isa<memref::StoreOp>(op);
  }
  if (!passed.empty() && !readsDeviceMemory)
    return;
  if (!stores && passed.empty())
    return;
  SmallVector<Type> types;
  for (auto &[value, kernels] : passed)
    types.push_back(value.getType());
  std::optional<SmallVector<Value>> slots;
  if (!passed.empty() && !(slots = reserveSlots(block, types)))
    return;
  OpBuilder b(run.back()->getContext());
  b.setInsertionPointAfter(run.back());
  scf::ParallelOp wrapper =
      moveIntoOneIteration(b, kernel.front()->getLoc(), kernel);
  for (auto [i, entry] : llvm::enumerate(passed)) {
    auto &[value, kernels] = entry;
    Value slot = (*slots)[i];
    b.setInsertionPoint(wrapper.getBody()->getTerminator());
    memref::StoreOp::create(b, value.getLoc(), value, slot);
    for (scf::ParallelOp loop : kernels) {
      b.setInsertionPointToStart(loop.getBody());
      Value loaded = memref::LoadOp::create(b, value.getLoc(), slot);
      value.replaceUsesWithIf(loaded, [&](OpOperand &use) {
        return loop->isProperAncestor(use.getOwner());
      });
    }
  }
}

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
} // namespace mlir::loom::loops_to_gpu
