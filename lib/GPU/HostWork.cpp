//===- HostWork.cpp - What runs on the device -----------------------------===//
//
// A kernel runs arithmetic, loads and stores; calls and the heap stay on
// the host. Host work that would make the host wait for the device (a
// reduction to scalars, the loss read back and stored) moves into kernels
// of one thread instead.
//
//===----------------------------------------------------------------------===//

#include "ParallelLoopsToGpu.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace mlir::loom::loops_to_gpu {
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
static void moveIntoOneIteration(OpBuilder &b, Location loc,
                                 ArrayRef<Operation *> ops) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto wrapper = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                         ValueRange{one}, ValueRange{one});
  Operation *terminator = wrapper.getBody()->getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
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

/// Puts `run`, consecutive host operations that movesScalars allows, in a
/// parallel loop of one iteration, to run as a kernel after them, when
/// what it loads only goes to what it stores (the step's loss, read from
/// where the backward pass summed it and stored for the step's output):
/// the host would otherwise wait for the device to read it. Operations
/// that read no memory and need nothing loaded (views, constants) stay on
/// the host.
static void wrapHostScalars(ArrayRef<Operation *> run) {
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
