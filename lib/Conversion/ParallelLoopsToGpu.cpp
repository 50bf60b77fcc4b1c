//===- ParallelLoopsToGpu.cpp - The loom-parallel-loops-to-gpu pass -------===//
//
// Upstream's `convert-parallel-loops-to-gpu` maps each dimension of a loop to
// a grid or block dimension, which caps a dimension at the hardware's limits
// and leaves a one-dimensional loop one thread per block. Loom's loop nests
// have up to four dimensions of any size, so each outermost nest is instead
// flattened: one thread per iteration, a fixed number per block, and the
// indices recovered from the thread's number.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
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
  for (int64_t d = 0; d < type.getRank(); ++d)
    upper.push_back(memref::DimOp::create(b, loc, source, d).getResult());
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

/// Replaces `loop` by a launch of one thread per iteration.
void launch(scf::ParallelOp loop, int64_t blockSize) {
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
  Value threads = constant(blockSize);
  // An empty loop still launches one block, whose threads all skip the body:
  // a grid of zero blocks is a launch error.
  Value blocks = b.createOrFold<arith::MaxSIOp>(
      loc, b.createOrFold<arith::CeilDivSIOp>(loc, total, threads), one);
  auto launchOp =
      gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one);

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
  Value rest = id;
  for (int64_t d = trips.size() - 1; d >= 0; --d) {
    Value index = rest;
    if (d > 0) {
      index = arith::RemSIOp::create(body, loc, rest, trips[d]);
      rest = arith::DivSIOp::create(body, loc, rest, trips[d]);
    }
    Value iv = body.createOrFold<arith::AddIOp>(
        loc, loop.getLowerBound()[d],
        body.createOrFold<arith::MulIOp>(loc, index, loop.getStep()[d]));
    mapping.map(loop.getInductionVars()[d], iv);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    body.clone(op, mapping);
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
    getOperation().walk([](memref::CopyOp copy) { copyAsLoop(copy); });
    // Outermost first; a loop that stays on the host is looked into.
    SmallVector<scf::ParallelOp> kernels;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
      if (!nestRunsOnDevice(loop))
        return WalkResult::advance();
      kernels.push_back(loop);
      return WalkResult::skip();
    });
    for (scf::ParallelOp loop : kernels)
      launch(loop, static_cast<int64_t>(blockSize));
  }
};
} // namespace
