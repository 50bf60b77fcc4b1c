//===- Scan.cpp - Layer loops as scf.for ----------------------------------===//
//
// A loom.scan becomes an scf.for over its length that carries the carried
// values and the stacked results as iteration arguments: each iteration
// takes slice l of every stacked operand (a view once bufferized) and
// inserts what it yields into slice l of the stacked results, in place.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Offsets, sizes and strides of slice `index` along the leading dimension
/// of a tensor of `type`.
struct LeadingSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  LeadingSlice(OpBuilder &b, RankedTensorType type, Value index) {
    offsets.assign(type.getRank(), b.getIndexAttr(0));
    offsets[0] = index;
    sizes.push_back(b.getIndexAttr(1));
    for (int64_t dim : type.getShape().drop_front())
      sizes.push_back(b.getIndexAttr(dim));
    strides.assign(type.getRank(), b.getIndexAttr(1));
  }
};

struct ScanLowering : public OpConversionPattern<ScanOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ScanOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t length = op.getLength();
    unsigned numCarries = op.getNumCarries();
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    SmallVector<Value> inits(adaptor.getInits());
    for (Value result : op.getStackedResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      inits.push_back(tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                              type.getElementType()));
    }
    Block &body = op.getBodyBlock();
    auto yield = cast<YieldOp>(body.getTerminator());
    auto loop = scf::ForOp::create(
        rewriter, loc, index(0), index(length), index(1), inits,
        [&](OpBuilder &nested, Location, Value iv, ValueRange iterArgs) {
          OpBuilder::InsertionGuard guard(rewriter);
          rewriter.setInsertionPoint(nested.getInsertionBlock(),
                                     nested.getInsertionPoint());
          Value layer = iv;
          if (op.getReverse())
            layer = arith::SubIOp::create(rewriter, loc, index(length - 1), iv);
          SmallVector<Value> arguments(iterArgs.take_front(numCarries));
          for (Value stacked : adaptor.getStacked()) {
            auto type = cast<RankedTensorType>(stacked.getType());
            LeadingSlice slice(rewriter, type, layer);
            arguments.push_back(tensor::ExtractSliceOp::create(
                rewriter, loc, ScanOp::getSliceType(type), stacked,
                slice.offsets, slice.sizes, slice.strides));
          }
          // How the body was differentiated no longer matters, and outside
          // a scan the attribute is not valid.
          for (Operation &inner : body)
            if (inner.hasAttr(LoomDialect::getRecomputeAttrName()))
              rewriter.modifyOpInPlace(&inner, [&] {
                inner.removeAttr(LoomDialect::getRecomputeAttrName());
              });
          Block *loopBody = rewriter.getInsertionBlock();
          rewriter.inlineBlockBefore(&body, loopBody, loopBody->end(),
                                     arguments);
          rewriter.setInsertionPoint(yield);
          SmallVector<Value> next(yield.getOperands().take_front(numCarries));
          for (auto [value, stack] :
               llvm::zip(yield.getOperands().drop_front(numCarries),
                         iterArgs.drop_front(numCarries))) {
            LeadingSlice slice(rewriter,
                               cast<RankedTensorType>(stack.getType()), layer);
            next.push_back(tensor::InsertSliceOp::create(
                rewriter, loc, value, stack, slice.offsets, slice.sizes,
                slice.strides));
          }
          scf::YieldOp::create(rewriter, loc, next);
          rewriter.eraseOp(yield);
        });
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};
} // namespace

void mlir::loom::populateLoomScanToSCFPatterns(RewritePatternSet &patterns) {
  patterns.add<ScanLowering>(patterns.getContext());
}
