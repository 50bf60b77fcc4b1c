//===- LoomParallel.h - How loom ops divide among ranks ---------*- C++ -*-===//
//
// The vocabulary of TensorParallelOpInterface: how a value is divided among
// the ranks of a tensor-parallel group, and what an op may ask of the pass
// that partitions it (loom-tensor-parallel). An op states its own rule (a
// column-parallel linear splits its weight's rows, attention splits its
// heads); the pass owns the collectives that connect one op's layout to
// the next's, so that an op never needs to know which op produced its
// operands.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMPARALLEL_H
#define LOOM_DIALECT_LOOMPARALLEL_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Value.h"

namespace mlir {
namespace loom {

/// How one value is held by the ranks of a tensor-parallel group.
struct TensorLayout {
  enum class Kind {
    /// Every rank holds all of it.
    replicated,
    /// Dimension `dim` is `blocks` equal blocks. Without `shared`, each
    /// block is divided evenly among the ranks and a rank holds its part of
    /// every block, in order. With `shared` > 0 the ranks outnumber the
    /// blocks (groups of query heads with one key/value head each, fewer
    /// than the ranks): each block is held by size / blocks consecutive
    /// ranks, which divide its leading elements evenly and each hold its
    /// last `shared` elements (the group's key and value) whole.
    split,
    /// Every rank holds a tensor of the full shape; the value is their sum
    /// (the output of a row-parallel linear before its all-reduce).
    partial,
  };
  Kind kind = Kind::replicated;
  int64_t dim = 0, blocks = 1, shared = 0;

  static TensorLayout replicated() { return {}; }
  static TensorLayout split(int64_t dim, int64_t blocks = 1) {
    return {Kind::split, dim, blocks};
  }
  /// Blocks shared by teams of ranks (see Kind::split).
  static TensorLayout sharedBlocks(int64_t dim, int64_t blocks,
                                   int64_t shared) {
    return {Kind::split, dim, blocks, shared};
  }
  static TensorLayout partial() { return {Kind::partial, 0, 1}; }
  bool isReplicated() const { return kind == Kind::replicated; }
  bool isSplit() const { return kind == Kind::split; }
  bool isPartial() const { return kind == Kind::partial; }
  /// The same layout along dimension `d`.
  TensorLayout along(int64_t d) const {
    TensorLayout layout = *this;
    layout.dim = d;
    return layout;
  }
  /// The extent of a rank's part of dimension `dim`, whole `extent` long,
  /// among `size` ranks; -1 when the layout cannot divide it.
  int64_t getPartExtent(int64_t extent, int64_t size) const;
  bool operator==(const TensorLayout &other) const {
    return kind == other.kind && (kind != Kind::split ||
                                  (dim == other.dim && blocks == other.blocks &&
                                   shared == other.shared));
  }
  bool operator!=(const TensorLayout &other) const { return !(*this == other); }
};

/// The static slice of a tensor that holds elements [offset, offset +
/// size) along dimension `dim` and all of the others: a part's own or
/// shared elements under a layout with `shared`.
struct DimSlice {
  DimSlice(OpBuilder &b, RankedTensorType whole, int64_t dim, int64_t offset,
           int64_t size);
  Value extract(OpBuilder &b, Location loc, Value from) const;
  /// `slice` written into `into`, a tensor of the whole's type.
  Value insert(OpBuilder &b, Location loc, Value slice, Value into) const;

  RankedTensorType type;
  SmallVector<OpFoldResult> offsets, sizes, strides;
};

/// The key/value heads of a rank's part of grouped-query attention over
/// `size` ranks: its share of the groups, or the one group its team shares.
int64_t getLocalKvHeads(int64_t kvHeads, int64_t size);

/// How the users of `value` want it split along dimension `dim` among
/// `size` ranks, which its producer splits (TensorParallelOpInterface::
/// getTensorParallelSplit): in one block when none asks. Users asking for
/// more than one block, or for blocks shared by teams of ranks, win over
/// those content with any split; users asking for two such layouts do not
/// occur (the rotation and the attention after it ask alike), and the op
/// whose operand is laid out otherwise than it asked refuses it.
TensorLayout getSplitWantedByUsers(Value value, int64_t dim, int64_t size);

/// What loom-tensor-parallel offers an op that partitions itself. Operands
/// are asked for in the layout the op needs; the pass inserts the
/// collective that produces it (or divides a parameter), or fails with a
/// diagnostic when no collective does. Methods that fail have emitted an
/// error on the op.
class TensorParallelRewriter {
public:
  TensorParallelRewriter(RewriterBase &rewriter, int64_t size)
      : rewriter(rewriter), size(size) {}
  virtual ~TensorParallelRewriter();

  RewriterBase &getRewriter() { return rewriter; }
  /// Ranks in the tensor-parallel group.
  int64_t getSize() const { return size; }

  virtual TensorLayout getLayout(Value value) = 0;
  /// Records the layout of a result the op built or rewrote.
  virtual void setLayout(Value value, TensorLayout layout) = 0;

  /// Makes `operand` whole on every rank, for an op that computes the same
  /// on every rank from it: a partial value is all-reduced.
  virtual LogicalResult makeReplicated(OpOperand &operand) = 0;
  /// Makes `operand` whole on every rank, for an op whose ranks each
  /// compute a different part from it (Megatron's f): its cotangents are
  /// then summed over the group in the backward pass.
  virtual LogicalResult makeFannedOut(OpOperand &operand) = 0;
  /// Makes `operand` split as `layout` says: a parameter is divided (its
  /// argument becomes this rank's part); an activation must be split so
  /// already.
  virtual LogicalResult makeSplit(OpOperand &operand, TensorLayout layout) = 0;
  LogicalResult makeSplit(OpOperand &operand, int64_t dim, int64_t blocks) {
    return makeSplit(operand, TensorLayout::split(dim, blocks));
  }
  /// The sum over the group of `partial`, built at the rewriter's insertion
  /// point: replicated, or split along the sequence under sequence
  /// parallelism.
  virtual FailureOr<Value> reducePartial(Location loc, Value partial) = 0;

  /// This rank's index in the group, built at the rewriter's insertion
  /// point, and the grid axes of the group, for ops that compute with
  /// their part's position or communicate themselves.
  virtual Value buildIndexInGroup(Location loc) = 0;
  virtual FlatSymbolRefAttr getGrid() = 0;
  virtual DenseI16ArrayAttr getGridAxes() = 0;

  /// A result type with dimension `dim` divided among the group.
  RankedTensorType getPartType(Type whole, int64_t dim) const;
  /// A result type divided among the group as `layout` says, which must
  /// divide it (TensorLayout::getPartExtent is then positive).
  RankedTensorType getPartType(Type whole, TensorLayout layout) const;

private:
  RewriterBase &rewriter;
  int64_t size;
};

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMPARALLEL_H
