//===- DataParallel.cpp - The loom-data-parallel pass ---------------------===//
//
// Data parallelism as a rewrite of the training step: each replica computes
// the loss and gradients of its share of the batch, and collectives over
// the replicas, on the shard dialect's device grid, make them the global
// batch's. With ZeRO, each replica updates only its shard of the
// parameters and keeps only that shard's optimizer state (and, from
// ZeRO-2, gradient), and the updated shards are gathered. The collectives
// stay upstream shard ops until Loom lowers them to runtime calls after
// bufferization.
//
//===----------------------------------------------------------------------===//

#include "OffloadGradients.h"
#include "Replicas.h"

#include "mlir/IR/Dominance.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDATAPARALLEL
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
RankedTensorType vectorType(int64_t size, Type element) {
  return RankedTensorType::get({size}, element);
}

int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// Offsets, sizes and unit strides of a static slice.
struct Slice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  Slice(OpBuilder &b, ArrayRef<OpFoldResult> offsets, ArrayRef<int64_t> sizes)
      : offsets(offsets) {
    for (int64_t size : sizes) {
      this->sizes.push_back(b.getIndexAttr(size));
      strides.push_back(b.getIndexAttr(1));
    }
  }
};

struct DataParallelPass
    : public loom::impl::LoomDataParallelBase<DataParallelPass> {
  using LoomDataParallelBase::LoomDataParallelBase;

  FlatSymbolRefAttr grid;
  int64_t dp = 1;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1)
      return;
    dp = plan->dp;
    FailureOr<shard::GridOp> gridOp = getOrCreateGrid(module, *plan);
    if (failed(gridOp))
      return signalPassFailure();
    grid = FlatSymbolRefAttr::get(gridOp->getSymNameAttr());
    // One step, or each pipeline rank's.
    FailureOr<SmallVector<func::FuncOp>> steps = getSteps(module, *plan);
    if (failed(steps))
      return signalPassFailure();
    for (func::FuncOp step : *steps)
      if (failed(parallelizeStep(step, *plan)))
        return signalPassFailure();
    if (plan->zero >= 3)
      bucketShardCollectives(module);
  }

  /// The step's loss and gradients summed over the replicas, where it first
  /// reads them; under ZeRO, its updates on this rank's shards.
  LogicalResult parallelizeStep(func::FuncOp step, const PlanConfig &plan) {
    OpBuilder b(step.getContext());
    Location loc = step.getLoc();
    Value loss;
    SmallVector<Value> grads;
    if (plan.pp == 1) {
      // The results of the call of @forward_grad, or of the loop over
      // micro-batches that holds it.
      Operation *producer = findGradientProducer(step);
      if (!producer)
        return failure();
      b.setInsertionPointAfter(producer);
      loc = producer->getLoc();
      loss = producer->getResult(0);
      llvm::append_range(grads, producer->getResults().drop_front());
    } else {
      // A pipeline rank's gradients come from its schedule's backward
      // passes: what its updates read, summed after the last of them is
      // made; its loss is the pipeline's mean, summed before the return.
      Block &body = step.getBody().front();
      step.walk([&](OptimizerUpdateOpInterface update) {
        if (!llvm::is_contained(grads, update.getUpdateGrad()))
          grads.push_back(update.getUpdateGrad());
      });
      Operation *last = nullptr;
      for (Value g : grads) {
        Operation *there = isa<BlockArgument>(g)
                               ? nullptr
                               : body.findAncestorOpInBlock(*g.getDefiningOp());
        if (there && (!last || last->isBeforeInBlock(there)))
          last = there;
      }
      if (last)
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPointToStart(&body);
      loss = body.getTerminator()->getOperand(0);
    }
    for (Value v : grads) {
      auto tensor = dyn_cast<RankedTensorType>(v.getType());
      if (!tensor || !tensor.hasStaticShape())
        return emitError(v.getLoc())
               << "a gradient of type " << v.getType()
               << "; the collectives over the replicas take static tensors";
    }

    if (plan.pp > 1) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(step.getBody().front().getTerminator());
      sumOverReplicas(b, loc, {loss});
    } else {
      // The loss alone: the gradients' buckets then hold gradients only,
      // which is what the memory report counts.
      sumOverReplicas(b, loc, {loss});
    }
    // Each gradient as the optimizer reads it, where that is a shard.
    DenseMap<Value, Value> shardOf;
    if (plan.zero <= 1) {
      for (ArrayRef<Value> bucket : makeBuckets(grads))
        sumOverReplicas(b, loc, bucket);
    } else if (plan.zero == 2) {
      SmallVector<Value> bucketed;
      for (Value g : grads)
        if (!scatterLayers(b, loc, g, shardOf))
          bucketed.push_back(g);
      for (ArrayRef<Value> bucket : makeBuckets(bucketed))
        if (failed(scatterOverReplicas(b, loc, bucket, shardOf)))
          return failure();
    } else {
      // loom-shard-parameters made them shards, summed over the replicas.
      for (Value g : grads)
        shardOf[g] = g;
    }
    if (plan.zero >= 2 && failed(sumSquaresOverReplicas(b, loc, step, shardOf)))
      return failure();
    if (plan.zero == 1 || plan.zero == 2)
      if (failed(shardUpdates(b, step, shardOf)))
        return failure();
    return success();
  }

  /// Whether a result of `op` is used before `point`, an op of its block.
  static bool usedBefore(Operation *op, Operation *point) {
    return llvm::any_of(op->getUsers(), [&](Operation *user) {
      Operation *there = op->getBlock()->findAncestorOpInBlock(*user);
      return !there || !point->isBeforeInBlock(there);
    });
  }

  static int64_t bytesOf(Value v) {
    return getStaticBytes(cast<RankedTensorType>(v.getType()));
  }

  /// Whether `op` communicates along the leading dimension over the
  /// replica axis of the grid, so that a rank's block is contiguous.
  template <typename CollectiveOp>
  bool isReplicaCollective(CollectiveOp op, const APInt &axis) {
    return op.getGrid() == grid.getValue() && axis.isZero() &&
           op.getGridAxes() == ArrayRef<shard::GridAxis>{kReplicaAxis};
  }

  /// ZeRO-3: loom-shard-parameters gathers, and differentiation
  /// reduce-scatters, one tensor at a time, where the layer needs it.
  /// Block by block, consecutive ones along the leading dimension become
  /// one collective per bucket: gathers at the place of the first of the
  /// bucket (their shards are arguments there), reduce-scatters at the
  /// place of the last (their sums are read after it).
  void bucketShardCollectives(ModuleOp module) {
    SmallVector<Block *> blocks;
    module.walk([&](Block *block) { blocks.push_back(block); });
    DominanceInfo dominance(module);
    OpBuilder b(module.getContext());
    for (Block *block : blocks) {
      SmallVector<shard::AllGatherOp> gathers;
      int64_t gathered = 0, scattered = 0;
      auto flushGathers = [&] {
        if (gathers.size() > 1) {
          b.setInsertionPoint(gathers.front());
          SmallVector<Value> shards, wholes;
          for (shard::AllGatherOp op : gathers) {
            shards.push_back(op.getInput());
            wholes.push_back(op.getResult());
          }
          for (auto [op, whole] : llvm::zip(
                   gathers, gatherOverReplicas(b, gathers.front().getLoc(),
                                               shards, wholes)))
            op.replaceAllUsesWith(whole);
          for (shard::AllGatherOp op : gathers)
            op.erase();
        }
        gathers.clear();
        gathered = 0;
      };
      SmallVector<shard::ReduceScatterOp> scatters;
      auto flushScatters = [&] {
        if (scatters.size() > 1) {
          b.setInsertionPoint(scatters.back());
          SmallVector<Value> grads;
          for (shard::ReduceScatterOp op : scatters)
            grads.push_back(op.getInput());
          DenseMap<Value, Value> shardOf;
          (void)scatterOverReplicas(b, scatters.back().getLoc(), grads,
                                    shardOf);
          for (shard::ReduceScatterOp op : scatters) {
            Value mine =
                reshape(b, op.getLoc(), shardOf.lookup(op.getInput()),
                        cast<RankedTensorType>(op.getResult().getType()));
            op.replaceAllUsesWith(mine);
          }
          for (shard::ReduceScatterOp op : scatters)
            op.erase();
        }
        scatters.clear();
        scattered = 0;
      };
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        if (auto gather = dyn_cast<shard::AllGatherOp>(op);
            gather && isReplicaCollective(gather, gather.getGatherAxis())) {
          int64_t bytes = bytesOf(gather.getResult());
          if (!gathers.empty() && (gathered + bytes > bucketBytes ||
                                   !dominance.properlyDominates(
                                       gather.getInput(), gathers.front())))
            flushGathers();
          gathers.push_back(gather);
          gathered += bytes;
        } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op);
                   scatter &&
                   isReplicaCollective(scatter, scatter.getScatterAxis()) &&
                   scatter.getReduction() == shard::ReductionKind::Sum) {
          int64_t bytes = bytesOf(scatter.getInput());
          if (!scatters.empty() &&
              (scattered + bytes > bucketBytes ||
               llvm::any_of(scatters, [&](shard::ReduceScatterOp earlier) {
                 return usedBefore(earlier, scatter);
               })))
            flushScatters();
          scatters.push_back(scatter);
          scattered += bytes;
        }
      }
      flushGathers();
      flushScatters();
    }
  }

  /// Consecutive values of at most `bucketBytes` together; a value of that
  /// size or more alone.
  SmallVector<SmallVector<Value>> makeBuckets(ValueRange values) {
    SmallVector<SmallVector<Value>> buckets;
    int64_t filled = 0;
    for (Value v : values) {
      int64_t bytes = bytesOf(v);
      if (buckets.empty() || filled + bytes > bucketBytes) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(v);
      filled += bytes;
    }
    return buckets;
  }

  /// Replaces the uses of `bucket`'s values by their sums over the
  /// replicas, with one collective.
  void sumOverReplicas(OpBuilder &b, Location loc, ArrayRef<Value> bucket) {
    auto allReduce = [&](Value v) -> Value {
      return shard::AllReduceOp::create(b, loc, v, grid.getValue(),
                                        ArrayRef<shard::GridAxis>{kReplicaAxis},
                                        shard::ReductionKind::Sum);
    };
    if (bucket.size() == 1) {
      Value sum = allReduce(bucket[0]);
      Value(bucket[0]).replaceAllUsesExcept(sum, sum.getDefiningOp());
      return;
    }
    // Packed into one flat tensor, summed, and taken apart as views of it.
    Type element = cast<RankedTensorType>(bucket[0].getType()).getElementType();
    int64_t total = 0;
    for (Value v : bucket)
      total += numElements(v);
    Value flat = tensor::EmptyOp::create(b, loc, {total}, element);
    SmallPtrSet<Operation *, 8> packing;
    int64_t offset = 0;
    for (Value v : bucket) {
      int64_t size = numElements(v);
      Value row = reshape(b, loc, v, vectorType(size, element));
      if (Operation *op = row.getDefiningOp(); op && row != v)
        packing.insert(op);
      Slice slice(b, {b.getIndexAttr(offset)}, {size});
      flat = tensor::InsertSliceOp::create(b, loc, row, flat, slice.offsets,
                                           slice.sizes, slice.strides);
      packing.insert(flat.getDefiningOp());
      offset += size;
    }
    Value sums = allReduce(flat);
    offset = 0;
    for (Value v : bucket) {
      int64_t size = numElements(v);
      Slice slice(b, {b.getIndexAttr(offset)}, {size});
      Value part = tensor::ExtractSliceOp::create(
          b, loc, vectorType(size, element), sums, slice.offsets, slice.sizes,
          slice.strides);
      Value sum = reshape(b, loc, part, cast<RankedTensorType>(v.getType()));
      v.replaceAllUsesExcept(sum, packing);
      offset += size;
    }
  }

  /// The size of a rank's shard of `v`: 1/dp of its elements.
  FailureOr<int64_t> shardSize(Value v, Operation *user) {
    int64_t size = numElements(v);
    if (size % dp) {
      user->emitOpError("reads a tensor of ")
          << size << " elements, which the " << dp
          << " replicas cannot share equally";
      return failure();
    }
    return size / dp;
  }

  /// ZeRO-2: each gradient of `bucket` reduce-scattered over the replicas,
  /// with one collective: rank r receives the sum of the r-th contiguous
  /// 1/dp of the flattened gradient, recorded in `shardOf`.
  LogicalResult scatterOverReplicas(OpBuilder &b, Location loc,
                                    ArrayRef<Value> bucket,
                                    DenseMap<Value, Value> &shardOf) {
    Type element = cast<RankedTensorType>(bucket[0].getType()).getElementType();
    SmallVector<int64_t> sizes;
    int64_t total = 0;
    for (Value v : bucket) {
      FailureOr<int64_t> size = shardSize(v, v.getDefiningOp());
      if (failed(size))
        return failure();
      sizes.push_back(*size);
      total += *size;
    }
    // Row r of [dp, total] holds what rank r receives, gradient after
    // gradient.
    auto packedType = RankedTensorType::get({dp, total}, element);
    Value packed;
    if (bucket.size() == 1) {
      packed = reshape(b, loc, bucket[0], packedType);
    } else {
      packed = tensor::EmptyOp::create(b, loc, packedType.getShape(), element);
      int64_t offset = 0;
      for (auto [v, size] : llvm::zip(bucket, sizes)) {
        Value rows =
            reshape(b, loc, v, RankedTensorType::get({dp, size}, element));
        Slice slice(b, {b.getIndexAttr(0), b.getIndexAttr(offset)}, {dp, size});
        packed = tensor::InsertSliceOp::create(
            b, loc, rows, packed, slice.offsets, slice.sizes, slice.strides);
        offset += size;
      }
    }
    Value mine = shard::ReduceScatterOp::create(
        b, loc, RankedTensorType::get({1, total}, element), grid.getValue(),
        ArrayRef<shard::GridAxis>{kReplicaAxis}, packed,
        shard::ReductionKind::Sum, APInt(64, 0));
    int64_t offset = 0;
    for (auto [v, size] : llvm::zip(bucket, sizes)) {
      Slice slice(b, {b.getIndexAttr(0), b.getIndexAttr(offset)}, {1, size});
      Value part = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({1, size}, element), mine,
          slice.offsets, slice.sizes, slice.strides);
      shardOf[v] = reshape(b, loc, part, vectorType(size, element));
      offset += size;
    }
    return success();
  }

  /// ZeRO-2: a gradient the gradient function's layer loop stacks, of
  /// which each rank's 1/dp holds whole layers, is reduce-scattered on its
  /// own, along the layers: the same shard as in a bucket, in a form
  /// loom-stream-transfers turns into each layer summed onto its rank as
  /// the loop makes it, which keeps it (or, offloaded, sends it to the
  /// host). Returns false, recording nothing, for any other gradient.
  bool scatterLayers(OpBuilder &b, Location loc, Value g,
                     DenseMap<Value, Value> &shardOf) {
    auto result = dyn_cast<OpResult>(g);
    auto type = cast<RankedTensorType>(g.getType());
    if (!result || !isa<func::CallOp>(result.getOwner()) ||
        !type.getElementType().isF32() || type.getRank() < 2 ||
        type.getDimSize(0) % dp || !offload::isStackedByLayerLoop(g))
      return false;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= dp;
    Value layers = shard::ReduceScatterOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()),
        grid.getValue(), ArrayRef<shard::GridAxis>{kReplicaAxis}, g,
        shard::ReductionKind::Sum, APInt(64, 0));
    shardOf[g] =
        reshape(b, loc, layers,
                vectorType(type.getNumElements() / dp, type.getElementType()));
    return true;
  }

  /// ZeRO-2/3: the global norm's sums of squares over the gradients'
  /// shards, summed over the replicas (one collective for all of them).
  /// Every gradient is sharded from ZeRO-2 on, so a sum of squares that
  /// also reads a whole one is not the step's.
  LogicalResult sumSquaresOverReplicas(OpBuilder &b, Location loc,
                                       func::FuncOp step,
                                       const DenseMap<Value, Value> &shardOf) {
    SmallVector<SumSquaresOp> squares;
    step.walk([&](SumSquaresOp op) {
      if (llvm::any_of(op.getInputs(),
                       [&](Value input) { return shardOf.count(input); }))
        squares.push_back(op);
    });
    SmallVector<Value> partial;
    for (SumSquaresOp op : squares) {
      SmallVector<Value> shards;
      for (Value input : op.getInputs()) {
        Value shard = shardOf.lookup(input);
        if (!shard)
          return op.emitOpError("sums the squares of sharded gradients and "
                                "of a tensor that is not one (ZeRO-2 and 3 "
                                "shard every gradient)");
        shards.push_back(shard);
      }
      auto mine = SumSquaresOp::create(b, op.getLoc(), op.getType(), shards);
      op.replaceAllUsesWith(mine.getResult());
      op.erase();
      partial.push_back(mine);
    }
    if (!partial.empty())
      sumOverReplicas(b, loc, partial);
    return success();
  }

  /// ZeRO-1/2: every optimizer update runs on this rank's shard of its
  /// parameter, gradient and state; the state arguments become shards, and
  /// the updated parameter shards are gathered into whole parameters.
  LogicalResult shardUpdates(OpBuilder &b, func::FuncOp step,
                             const DenseMap<Value, Value> &shardOf) {
    Block &body = step.getBody().front();
    Value index = shard::ProcessMultiIndexOp::create(
                      b, step.getLoc(), grid.getValue(),
                      ArrayRef<shard::GridAxis>{kReplicaAxis})
                      .getResult()
                      .front();
    SmallVector<OptimizerUpdateOpInterface> updates;
    step.walk([&](OptimizerUpdateOpInterface op) { updates.push_back(op); });
    SmallVector<Value> newShards, oldParams;
    for (OptimizerUpdateOpInterface update : updates) {
      Value param = update.getUpdatedParam();
      Type element = cast<RankedTensorType>(param.getType()).getElementType();
      FailureOr<int64_t> size = shardSize(param, update);
      if (failed(size))
        return failure();
      auto shardType = vectorType(*size, element);
      b.setInsertionPoint(update);
      Location loc = update.getLoc();
      // This rank's contiguous 1/dp of a whole tensor, flattened.
      auto mine = [&](Value whole) -> Value {
        Value flat =
            reshape(b, loc, whole, vectorType(numElements(whole), element));
        Value offset = arith::MulIOp::create(
            b, loc, index, arith::ConstantIndexOp::create(b, loc, *size));
        Slice slice(b, {offset}, {*size});
        return tensor::ExtractSliceOp::create(
            b, loc, shardType, flat, slice.offsets, slice.sizes, slice.strides);
      };
      IRMapping mapping;
      mapping.map(param, mine(param));
      Value grad = update.getUpdateGrad();
      mapping.map(grad,
                  shardOf.count(grad) ? shardOf.lookup(grad) : mine(grad));
      for (Value state : update.getUpdateStates()) {
        auto arg = dyn_cast<BlockArgument>(state);
        if (!arg || arg.getOwner() != &body || !state.hasOneUse())
          return update.emitOpError("expected optimizer state that is an "
                                    "argument of @")
                 << step.getName() << " read by this update only";
        arg.setType(shardType);
        // The rank's part of the whole flattened state, for the runtime;
        // flat, it is no longer layers (the runtime takes a pipeline
        // stage's from the parameter).
        step.setArgAttr(arg.getArgNumber(), LoomDialect::getShardAttrName(),
                        b.getI64IntegerAttr(0));
        step.removeArgAttr(arg.getArgNumber(),
                           LoomDialect::getLayersAttrName());
      }
      Operation *sharded = b.clone(*update, mapping);
      for (OpResult result : sharded->getResults())
        result.setType(shardType);
      auto shardedUpdate = cast<OptimizerUpdateOpInterface>(sharded);
      for (auto [from, to] : llvm::zip(update.getNewStateValues(),
                                       shardedUpdate.getNewStateValues()))
        from.replaceAllUsesWith(to);
      newShards.push_back(shardedUpdate.getNewParamValue());
      oldParams.push_back(update.getNewParamValue());
    }
    // The whole parameters, once every shard is updated.
    b.setInsertionPoint(body.getTerminator());
    int64_t first = 0;
    for (ArrayRef<Value> bucket : makeBuckets(newShards)) {
      SmallVector<Value> wholes =
          gatherOverReplicas(b, step.getLoc(), bucket,
                             ArrayRef(oldParams).slice(first, bucket.size()));
      for (auto [old, whole] :
           llvm::zip(ArrayRef(oldParams).slice(first, bucket.size()), wholes))
        Value(old).replaceAllUsesWith(whole);
      first += bucket.size();
    }
    for (OptimizerUpdateOpInterface update : updates)
      update->erase();
    step.setFunctionType(
        FunctionType::get(step.getContext(), body.getArgumentTypes(),
                          body.getTerminator()->getOperandTypes()));
    return success();
  }

  /// The whole tensors (of the types of `like`) of which `bucket` holds
  /// this rank's shards, gathered over the replicas with one collective.
  SmallVector<Value> gatherOverReplicas(OpBuilder &b, Location loc,
                                        ArrayRef<Value> bucket,
                                        ArrayRef<Value> like) {
    Type element = cast<RankedTensorType>(bucket[0].getType()).getElementType();
    int64_t total = 0;
    for (Value v : bucket)
      total += numElements(v);
    auto rowType = RankedTensorType::get({1, total}, element);
    Value row;
    if (bucket.size() == 1) {
      row = reshape(b, loc, bucket[0], rowType);
    } else {
      row = tensor::EmptyOp::create(b, loc, rowType.getShape(), element);
      int64_t offset = 0;
      for (Value v : bucket) {
        int64_t size = numElements(v);
        Slice slice(b, {b.getIndexAttr(0), b.getIndexAttr(offset)}, {1, size});
        row = tensor::InsertSliceOp::create(
            b, loc,
            reshape(b, loc, v, RankedTensorType::get({1, size}, element)), row,
            slice.offsets, slice.sizes, slice.strides);
        offset += size;
      }
    }
    // Row r: rank r's shards, in the bucket's order.
    Value rows = shard::AllGatherOp::create(
        b, loc, RankedTensorType::get({dp, total}, element), grid.getValue(),
        ArrayRef<shard::GridAxis>{kReplicaAxis}, row, APInt(64, 0));
    SmallVector<Value> wholes;
    int64_t offset = 0;
    for (auto [v, target] : llvm::zip(bucket, like)) {
      int64_t size = numElements(v);
      auto partType = RankedTensorType::get({dp, size}, element);
      Value part = rows;
      if (bucket.size() > 1) {
        Slice slice(b, {b.getIndexAttr(0), b.getIndexAttr(offset)}, {dp, size});
        part = tensor::ExtractSliceOp::create(
            b, loc, partType, rows, slice.offsets, slice.sizes, slice.strides);
      }
      wholes.push_back(
          reshape(b, loc, part, cast<RankedTensorType>(target.getType())));
      offset += size;
    }
    return wholes;
  }

  /// The op of the step's body whose results are the loss and the
  /// gradients: the call of @forward_grad, or the loop over micro-batches
  /// that holds it.
  Operation *findGradientProducer(func::FuncOp step) {
    Operation *producer = nullptr;
    WalkResult walk = step.walk([&](func::CallOp call) {
      if (call.getCallee() != LoomDialect::getForwardGradFunctionName())
        return WalkResult::advance();
      Operation *top = call;
      while (top->getParentOp() != step)
        top = top->getParentOp();
      if (producer && producer != top) {
        step.emitOpError("calls @")
            << LoomDialect::getForwardGradFunctionName()
            << " from more than one place; expected one call or one loop "
               "over micro-batches";
        return WalkResult::interrupt();
      }
      producer = top;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return nullptr;
    if (!producer)
      step.emitOpError("does not call @")
          << LoomDialect::getForwardGradFunctionName();
    return producer;
  }
};
} // namespace
