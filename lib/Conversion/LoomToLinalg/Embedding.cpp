//===- Embedding.cpp - Token and position embeddings ----------------------===//
//
// The embedding is a gather-add generic; its gradient sums over the batch
// for positions and scatter-adds rows, in token order, for tokens: a
// loom.scatter_add_rows that the runtime computes, or loops.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "loom/abi.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
/// Whether the part starting at `start` is the first, which adds the
/// position table.
Value isFirstPart(OpBuilder &b, Location l, Value start) {
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, start,
                               arith::ConstantIndexOp::create(b, l, 0));
}

struct EmbeddingLowering : LoomPattern<EmbeddingOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(EmbeddingOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    auto shape = op.getType().getShape();
    Value wte = adaptor.getWte();
    // The first T rows of the position table; none under rotary positions.
    Value wpe = adaptor.getWpe();
    if (wpe && op.getWpe().getType().getDimSize(0) != shape[1])
      wpe = tensor::ExtractSliceOp::create(
          L.b, L.loc, wpe,
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(0), L.b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(shape[1]),
                                 L.b.getIndexAttr(shape[2])},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(1), L.b.getIndexAttr(1)});
    Value start = adaptor.getVocabStart();
    int64_t rows = op.getWte().getType().getDimSize(0);
    Value first = start && wpe ? isFirstPart(L.b, L.loc, start) : Value();
    SmallVector<Value> ins = {adaptor.getTokens()};
    // Loop dimensions (b, t, c).
    SmallVector<AffineMap> maps = {L.map(3, {0, 1})};
    if (wpe) {
      ins.push_back(wpe);
      maps.push_back(L.map(3, {1, 2}));
    }
    maps.push_back(L.identity(3));
    return {L.generic(
        ins, L.empty(shape), maps, {kPar, kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value row = L.toIndex(nb, a[0]);
          Value held;
          if (start)
            std::tie(held, row) = L.indexInPart(nb, row, start, rows);
          Value w = tensor::ExtractOp::create(nb, l, wte,
                                              ValueRange{row, L.index(nb, 2)});
          if (held)
            w = arith::SelectOp::create(nb, l, held, w, L.f32(nb, 0.0));
          if (wpe) {
            Value position = a[1];
            if (first)
              position = arith::SelectOp::create(nb, l, first, position,
                                                 L.f32(nb, 0.0));
            w = arith::AddFOp::create(nb, l, w, position);
          }
          linalg::YieldOp::create(nb, l, w);
        })[0]};
  }
};

/// The most blocks of equal size, at most `limit`, that `rows` splits into.
int64_t getRowBlocks(int64_t rows, int64_t limit) {
  for (int64_t blocks = std::min(rows, limit); blocks > 1; --blocks)
    if (rows % blocks == 0)
      return blocks;
  return 1;
}

struct EmbeddingGradLowering : LoomPattern<EmbeddingGradOp> {
  EmbeddingGradLowering(MLIRContext *context, TokenGradientOptions options)
      : LoomPattern(context), options(options) {}
  SmallVector<Value> lower(EmbeddingGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    auto gradShape =
        cast<RankedTensorType>(adaptor.getGrad().getType()).getShape();
    int64_t T = gradShape[1], C = gradShape[2];
    SmallVector<Value> results = {Value()};
    if (Value wpeGrad = op.getWpeGrad()) {
      auto wpeShape = cast<RankedTensorType>(wpeGrad.getType()).getShape();
      // Position gradient: the batch sum; loop dimensions (b, t, c).
      Value wpe = L.generic(adaptor.getGrad(), L.zeros({T, C}),
                            {L.identity(3), L.map(3, {1, 2})},
                            {kRed, kPar, kPar}, sumBody)[0];
      if (wpeShape[0] > T)
        wpe = tensor::InsertSliceOp::create(
            L.b, L.loc, wpe, L.zeros(wpeShape),
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(0), L.b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(T), L.b.getIndexAttr(C)},
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(1), L.b.getIndexAttr(1)});
      if (Value start = adaptor.getVocabStart())
        wpe = arith::SelectOp::create(
            L.b, L.loc, isFirstPart(L.b, L.loc, start), wpe, L.zeros(wpeShape));
      results.push_back(wpe);
    }
    Value start = adaptor.getVocabStart();

    Value tokens = L.flatten(adaptor.getTokens());
    Value init = adaptor.getWteInit()
                     ? adaptor.getWteInit()
                     : L.zeros(op.getWteGrad().getType().getShape());
    // Beyond the runtime's int32 positions (2^31 tokens), the loops, which
    // compute the same sums.
    int64_t n = cast<RankedTensorType>(tokens.getType()).getDimSize(0);
    int64_t rows = cast<RankedTensorType>(init.getType()).getDimSize(0);
    if (options.sorted && loom_scatter_add_rows_fits(n, rows)) {
      // The runtime reads bf16 or f16 rows as they are stored, rather than
      // a copy of them widened to f32 (the position table's sum reads the
      // widened values in its loop).
      Value updates = adaptor.getGrad();
      auto widened = op.getGrad().getDefiningOp<ConvertOp>();
      if (widened && !widened.getScale())
        if (Value stored = L.lowered(widened.getInput()))
          updates = stored;
      results[0] = ScatterAddRowsOp::create(
          L.b, L.loc, init.getType(), L.rows(updates), tokens, init, start);
      return results;
    }
    results[0] =
        scatterLoops(L, L.rows(adaptor.getGrad()), tokens, init, start);
    return results;
  }

private:
  /// The token gradient as loops: `init` with each row of `grad2` added to
  /// the row of the table its token names (from `start` on, when given).
  /// Each column (of a block of rows) is its own iteration of a parallel
  /// loop, which adds the column's elements in token order: the result is
  /// deterministic, and no two iterations write the same element, so that
  /// a GPU runs a thread per column where rows scattered one at a time
  /// were a launch per token. Blocks interleave (block k holds rows k,
  /// k + B, ...): a thread's additions are a chain through memory, and
  /// text's frequent tokens have neighbouring ids (punctuation, short
  /// words), which contiguous blocks would all give to one thread.
  Value scatterLoops(Lowering &L, Value grad2, Value tokens, Value init,
                     Value start) const {
    auto tableShape = cast<RankedTensorType>(init.getType()).getShape();
    int64_t rows = tableShape[0], C = tableShape[1];
    int64_t n = cast<RankedTensorType>(grad2.getType()).getDimSize(0);
    OpBuilder &b = L.b;
    Location loc = L.loc;
    int64_t blocks = getRowBlocks(rows, options.rowBlocks);
    int64_t blockRows = rows / blocks;
    SmallVector<OpFoldResult> counts = {b.getIndexAttr(C)};
    if (blocks > 1)
      counts.insert(counts.begin(), b.getIndexAttr(blocks));
    auto columns = scf::ForallOp::create(b, loc, counts, ValueRange{init},
                                         /*mapping=*/std::nullopt);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(columns.getBody());
      Value c = columns.getInductionVars().back();
      Value all = columns.getRegionIterArgs()[0];
      // The block, k: rows k, k + B, ...; its rows' tokens are added,
      // others skipped.
      Value block = blocks > 1 ? columns.getInductionVar(0) : Value();
      auto columnType = RankedTensorType::get({blockRows}, L.f32());
      SmallVector<OpFoldResult> offsets = {
          block ? OpFoldResult(block) : b.getIndexAttr(0), c};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(blockRows),
                                         b.getIndexAttr(1)};
      SmallVector<OpFoldResult> strides = {b.getIndexAttr(blocks),
                                           b.getIndexAttr(1)};
      Value column = tensor::ExtractSliceOp::create(b, loc, columnType, all,
                                                    offsets, sizes, strides);
      auto loop = scf::ForOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, 0),
          arith::ConstantIndexOp::create(b, loc, n),
          arith::ConstantIndexOp::create(b, loc, 1), ValueRange{column},
          [&](OpBuilder &nb, Location l, Value i, ValueRange acc) {
            Value token = arith::IndexCastOp::create(
                nb, l, nb.getIndexType(),
                tensor::ExtractOp::create(nb, l, tokens, ValueRange{i}));
            Value held;
            if (start)
              std::tie(held, token) = L.indexInPart(nb, token, start, rows);
            // A token of another part adds zeros to row 0, as it is.
            auto add = [&](OpBuilder &ab, Location al, Value row) {
              Value g =
                  tensor::ExtractOp::create(ab, al, grad2, ValueRange{i, c});
              if (held)
                g = arith::SelectOp::create(ab, al, held, g, L.f32(ab, 0.0));
              Value old = tensor::ExtractOp::create(ab, al, acc[0], row);
              Value sum = arith::AddFOp::create(ab, al, g, old);
              scf::YieldOp::create(
                  ab, al,
                  tensor::InsertOp::create(ab, al, sum, acc[0], row)
                      .getResult());
            };
            if (!block)
              return add(nb, l, token);
            Value count = arith::ConstantIndexOp::create(nb, l, blocks);
            Value mine = arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(nb, l, token, count), block);
            Value row = arith::DivUIOp::create(nb, l, token, count);
            auto inBlock = scf::IfOp::create(
                nb, l, mine,
                [&](OpBuilder &ab, Location al) { add(ab, al, row); },
                [&](OpBuilder &ab, Location al) {
                  scf::YieldOp::create(ab, al, acc[0]);
                });
            scf::YieldOp::create(nb, l, inBlock.getResults());
          });
      b.setInsertionPointToStart(columns.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(b, loc, loop.getResult(0), all,
                                            offsets, sizes, strides);
    }
    return columns.getResult(0);
  }

  TokenGradientOptions options;
};

} // namespace

void mlir::loom::populateLoomEmbeddingToLinalgPatterns(
    RewritePatternSet &patterns, TokenGradientOptions tokenGradient) {
  patterns.add<EmbeddingLowering>(patterns.getContext());
  patterns.add<EmbeddingGradLowering>(patterns.getContext(), tokenGradient);
}
