//===- DataParallel.cpp - The loom-data-parallel pass ---------------------===//
//
// Data parallelism as a rewrite of the training step: each replica computes
// the loss and gradients of its share of the batch, and a sum over the
// replicas, on the shard dialect's device grid, makes them the global
// batch's. The collectives stay upstream shard ops until Loom lowers them to
// runtime calls after bufferization.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDATAPARALLEL
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The grid's axes, as the plan lays the ranks out (tp fastest).
constexpr shard::GridAxis kDataAxis = 1;

struct DataParallelPass
    : public loom::impl::LoomDataParallelBase<DataParallelPass> {
  using LoomDataParallelBase::LoomDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1)
      return;
    if (plan->zero > 0) {
      module.emitError() << "ZeRO-" << plan->zero
                         << " is not compiled yet: data parallelism runs "
                            "with zero=0";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getTrainStepFunctionName());
    if (!step || step.isExternal()) {
      module.emitError() << "expected @"
                         << LoomDialect::getTrainStepFunctionName()
                         << " (run loom-build-train-step first)";
      return signalPassFailure();
    }
    Operation *producer = findGradientProducer(step);
    if (!producer)
      return signalPassFailure();
    for (Type type : producer->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape()) {
        producer->emitOpError("yields ")
            << type << "; the sums over the replicas take static tensors";
        return signalPassFailure();
      }
    }

    StringRef gridName = getGridName();
    if (module.lookupSymbol(gridName)) {
      module.emitError() << "the module already has a symbol @" << gridName;
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    auto grid =
        shard::GridOp::create(b, module.getLoc(), gridName,
                              ArrayRef<int64_t>{plan->pp, plan->dp, plan->tp});
    // Private: once the collectives are runtime calls, symbol-dce drops it.
    SymbolTable::setSymbolVisibility(grid, SymbolTable::Visibility::Private);

    b.setInsertionPointAfter(producer);
    for (MutableArrayRef<Value> bucket : makeBuckets(producer->getResults()))
      sumOverReplicas(b, producer->getLoc(), gridName, bucket);
  }

  /// Consecutive values of at most `bucketBytes` together; a value of that
  /// size or more alone.
  SmallVector<SmallVector<Value>> makeBuckets(ValueRange values) {
    SmallVector<SmallVector<Value>> buckets;
    int64_t filled = 0;
    for (Value v : values) {
      auto type = cast<RankedTensorType>(v.getType());
      int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
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
  static void sumOverReplicas(OpBuilder &b, Location loc, StringRef grid,
                              MutableArrayRef<Value> bucket) {
    auto allReduce = [&](Value v) -> Value {
      return shard::AllReduceOp::create(b, loc, v, grid,
                                        ArrayRef<shard::GridAxis>{kDataAxis},
                                        shard::ReductionKind::Sum);
    };
    if (bucket.size() == 1) {
      Value sum = allReduce(bucket[0]);
      bucket[0].replaceAllUsesExcept(sum, sum.getDefiningOp());
      return;
    }
    // Packed into one flat tensor, summed, and taken apart as views of it.
    Type element = cast<RankedTensorType>(bucket[0].getType()).getElementType();
    int64_t total = 0;
    for (Value v : bucket)
      total += cast<RankedTensorType>(v.getType()).getNumElements();
    Value flat = tensor::EmptyOp::create(b, loc, {total}, element);
    SmallVector<Operation *> packing;
    int64_t offset = 0;
    auto slice = [&](int64_t size) {
      return std::make_tuple(SmallVector<OpFoldResult>{b.getIndexAttr(offset)},
                             SmallVector<OpFoldResult>{b.getIndexAttr(size)},
                             SmallVector<OpFoldResult>{b.getIndexAttr(1)});
    };
    for (Value v : bucket) {
      auto type = cast<RankedTensorType>(v.getType());
      auto vector = RankedTensorType::get({type.getNumElements()}, element);
      Value row = reshape(b, loc, v, vector);
      packing.push_back(row.getDefiningOp());
      auto [offsets, sizes, strides] = slice(type.getNumElements());
      auto insert = tensor::InsertSliceOp::create(b, loc, row, flat, offsets,
                                                  sizes, strides);
      packing.push_back(insert);
      flat = insert;
      offset += type.getNumElements();
    }
    Value sums = allReduce(flat);
    offset = 0;
    for (Value v : bucket) {
      auto type = cast<RankedTensorType>(v.getType());
      auto vector = RankedTensorType::get({type.getNumElements()}, element);
      auto [offsets, sizes, strides] = slice(type.getNumElements());
      Value part = tensor::ExtractSliceOp::create(b, loc, vector, sums, offsets,
                                                  sizes, strides);
      Value sum = reshape(b, loc, part, type);
      SmallPtrSet<Operation *, 8> except(packing.begin(), packing.end());
      v.replaceAllUsesExcept(sum, except);
      offset += type.getNumElements();
    }
  }

  /// `v` reshaped to `type`, of the same number of elements, where one of
  /// the two is a vector and the other has any rank (0 included).
  static Value reshape(OpBuilder &b, Location loc, Value v,
                       RankedTensorType type) {
    auto from = cast<RankedTensorType>(v.getType());
    if (from == type)
      return v;
    bool expand = type.getRank() > from.getRank();
    RankedTensorType low = expand ? from : type, high = expand ? type : from;
    // One group of all the higher rank's dimensions, or none from a 0-d one.
    SmallVector<ReassociationIndices> groups;
    if (low.getRank() == 1)
      groups.push_back(llvm::to_vector(llvm::seq<int64_t>(0, high.getRank())));
    if (expand)
      return tensor::ExpandShapeOp::create(b, loc, type, v, groups);
    return tensor::CollapseShapeOp::create(b, loc, type, v, groups);
  }

  static StringRef getGridName() { return "loom_grid"; }

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
