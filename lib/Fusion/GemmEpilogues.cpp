//===- GemmEpilogues.cpp - The loom-gemm-epilogues pass -------------------===//
//
// Mixed precision multiplies bf16 (f16) matrices into an f32 buffer that a
// loop then reads once, to add the bias and round the sum back to bf16:
// the f32 product goes to memory and back for one addition and one
// rounding. cuBLASLt does both on the product's way out of its registers
// (its bias epilogue), so such a product becomes one call of the runtime's
// loom_rt_gemm_rounded that writes the narrow values themselves: into the
// loop's output when the loop stores them as they are, otherwise into a
// narrow buffer the loop reads instead. The loop is gone where storing
// them was all it did. The f32 buffer goes too, which the static arena
// then no longer holds.
//
// A GELU applied to such a rounded product by the next loop, and the
// gradient through it, which multiplies a rounded product by the GELU's
// derivative, go into the GEMM's epilogue too (loom_rt_gemm_gelu,
// cuBLASLt's GELU_AUX_BIAS and DGELU): the loop that read and wrote every
// activation of the MLP once more goes.
//
// It runs on buffers before the static arena, while each buffer is still
// its own allocation: the product's buffer is dead after the loop exactly
// when nothing else uses the allocation.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"
#include "loom/Buffers/FillForwarding.h"
#include "loom/Buffers/Gemm.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Fusion/Passes.h"
#include "loom/abi.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMGEMMEPILOGUES
#include "loom/Fusion/Passes.h.inc"
#include "loom/rt.h"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kGemmRounded = LOOM_RT_GEMM_ROUNDED;
constexpr llvm::StringLiteral kGemmGelu = LOOM_RT_GEMM_GELU;
constexpr llvm::StringLiteral kGemmAdd = LOOM_RT_GEMM_ADD;

/// A product made a call of loom_rt_gemm_rounded: what a GELU after it
/// needs to join it.
struct RoundedGemm {
  func::CallOp call;
  GemmForm form;
  /// The memrefs it reads (the bias null for none) and the [m, n] matrix
  /// it writes.
  Value a, b, bias, d;
};

/// A product whose f32 buffer one loop reads to round it, maybe after
/// adding a bias of its columns.
struct Epilogue {
  linalg::MatmulOp product;
  GemmForm form;
  memref::AllocOp buffer;
  linalg::FillOp zeros;
  /// The loop, its input that reads the product (the buffer or an
  /// expand_shape of it, in the loop's iteration space) and that input's
  /// reshape, if any.
  linalg::GenericOp loop;
  unsigned input;
  memref::ExpandShapeOp reshape;
  /// The rounding, and the bias added before it: an input of the loop.
  arith::TruncFOp round;
  arith::AddFOp add;
  std::optional<unsigned> bias;
  /// The loop's output that stores the rounded values as they are, if
  /// the product can be written there.
  std::optional<unsigned> output;
  /// Where the call goes: the product's place or, if what it needs is
  /// defined after it, the loop's.
  Operation *call = nullptr;
};

/// The users of `buffer` and of the reshapes made from it, reshapes
/// included.
void collectUsers(Value buffer, SmallVectorImpl<Operation *> &users) {
  for (Operation *user : buffer.getUsers()) {
    users.push_back(user);
    if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user))
      collectUsers(user->getResult(0), users);
  }
}

/// Whether `map` of a loop of `rank` dimensions picks its innermost
/// dimension alone: a vector along the product's columns.
bool isColumnMap(AffineMap map, unsigned rank) {
  return map.getNumDims() == rank && map.getNumResults() == 1 &&
         map.getResult(0) == getAffineDimExpr(rank - 1, map.getContext());
}

/// Whether `type` is `n` contiguous elements of `element`.
bool isContiguousVector(Type type, int64_t n, Type element) {
  auto memref = dyn_cast<MemRefType>(type);
  SmallVector<int64_t> strides;
  int64_t offset;
  return memref && memref.getRank() == 1 && memref.getDimSize(0) == n &&
         memref.getElementType() == element &&
         succeeded(memref.getStridesAndOffset(strides, offset)) &&
         strides[0] == 1;
}

/// The loop's output `index` as the product's [m, n] matrix, if it is one
/// with contiguous rows: the loop writes it whole, in the shape in which it
/// reads the product.
std::optional<unsigned> matchOutput(Epilogue &e, unsigned index) {
  linalg::GenericOp loop = e.loop;
  OpOperand *init = loop.getDpsInitOperand(index);
  Value input = loop.getDpsInputs()[e.input];
  if (!loop.getMatchingIndexingMap(init).isIdentity() ||
      cast<MemRefType>(init->get().getType()).getShape() !=
          cast<MemRefType>(input.getType()).getShape() ||
      !loop.getMatchingBlockArgument(init).use_empty())
    return std::nullopt;
  auto type = cast<MemRefType>(init->get().getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 ||
      (e.reshape && !memref::CollapseShapeOp::isGuaranteedCollapsible(
                        type, e.reshape.getReassociationIndices())))
    return std::nullopt;
  // The product is written before the loop runs: nothing the loop or the
  // product reads may share its memory, nor another output of the loop.
  SmallVector<Value> others = {e.product.getDpsInputs()[0],
                               e.product.getDpsInputs()[1]};
  for (OpOperand &operand : loop->getOpOperands())
    if (&operand != init)
      others.push_back(operand.get());
  if (!llvm::all_of(others,
                    [&](Value v) { return areDisjoint(v, init->get()); }))
    return std::nullopt;
  return index;
}

/// Chooses where the call goes, if anywhere: at the product, if what it
/// reads and writes is defined there and nothing until the loop touches
/// the output it writes, or else at the loop, if nothing until the loop
/// writes what it reads.
bool placeCall(Epilogue &e) {
  Operation *product = e.product;
  SmallVector<Value> reads = {product->getOperand(0), product->getOperand(1)};
  if (e.bias)
    reads.push_back(e.loop.getDpsInputs()[*e.bias]);
  std::optional<Value> output;
  if (e.output)
    output = e.loop.getDpsInits()[*e.output];
  // Views made after the product of buffers made before it (a layer's
  // slice of a stack), the indices they take and buffers allocated after
  // it move up to it.
  SmallVector<Operation *> hoisted;
  std::function<bool(Value)> definedBefore = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != product->getBlock() ||
        def->isBeforeInBlock(product) || llvm::is_contained(hoisted, def))
      return true;
    // A fresh buffer may be allocated earlier: nothing can use it before.
    bool movable = (isPure(def) && def->getNumRegions() == 0) ||
                   (isa<memref::AllocOp>(def) && def->getNumOperands() == 0);
    if (!movable || !llvm::all_of(def->getOperands(), definedBefore))
      return false;
    hoisted.push_back(def);
    return true;
  };
  auto between = llvm::make_range(std::next(product->getIterator()),
                                  e.loop->getIterator());
  auto touchesOutput = [&](Operation &op) {
    return output && mayAccess(&op, *output);
  };
  if (llvm::all_of(reads, definedBefore) &&
      (!output || definedBefore(*output)) &&
      llvm::none_of(between, touchesOutput)) {
    // Operands first: each view follows what it is made of.
    for (Operation *op : hoisted)
      op->moveBefore(product);
    e.call = product;
    return true;
  }
  if (llvm::none_of(between, [&](Operation &op) {
        return touchesOutput(op) || llvm::any_of(reads, [&](Value v) {
                 return mayAccess(&op, v, /*writesOnly=*/true);
               });
      })) {
    e.call = e.loop;
    return true;
  }
  return false;
}

/// `product` as an Epilogue, if it is one.
std::optional<Epilogue> matchEpilogue(linalg::MatmulOp product) {
  Epilogue e{};
  e.product = product;
  std::string why;
  std::optional<GemmForm> form = matchGemm(product, &why);
  if (!form || form->dtype == LOOM_DTYPE_F32)
    return std::nullopt;
  e.form = *form;
  Value c = product.getDpsInits()[0];
  e.buffer = c.getDefiningOp<memref::AllocOp>();
  auto cType = cast<MemRefType>(c.getType());
  if (!e.buffer || !cType.hasStaticShape() || !cType.getLayout().isIdentity())
    return std::nullopt;
  e.zeros = findZeroFillReadBy(product, c);
  if (!e.zeros)
    return std::nullopt;
  // Besides the fill and the product, one loop reads the buffer, later in
  // the same block.
  SmallVector<Operation *> users;
  collectUsers(e.buffer, users);
  for (Operation *user : users) {
    if (user == product || user == e.zeros)
      continue;
    if (auto reshape = dyn_cast<memref::ExpandShapeOp>(user)) {
      if (e.reshape || reshape.getSrc() != c)
        return std::nullopt;
      e.reshape = reshape;
      continue;
    }
    auto loop = dyn_cast<linalg::GenericOp>(user);
    if (!loop || e.loop || loop->getBlock() != product->getBlock() ||
        !product->isBeforeInBlock(loop))
      return std::nullopt;
    e.loop = loop;
  }
  if (!e.loop || !e.loop.hasPureBufferSemantics() ||
      e.loop.getNumParallelLoops() != e.loop.getNumLoops())
    return std::nullopt;
  Value read = e.reshape ? e.reshape.getResult() : c;
  linalg::GenericOp loop = e.loop;
  unsigned rank = loop.getNumLoops();
  std::optional<unsigned> input;
  for (OpOperand *operand : loop.getDpsInputOperands())
    if (operand->get() == read) {
      if (input)
        return std::nullopt;
      input = operand->getOperandNumber();
    }
  // Read element by element in its own shape, the product's columns
  // innermost.
  if (!input ||
      !loop.getMatchingIndexingMap(loop.getDpsInputOperand(*input))
           .isIdentity() ||
      (e.reshape && e.reshape.getReassociationIndices().back().size() != 1) ||
      llvm::any_of(loop.getDpsInits(),
                   [&](Value init) { return !areDisjoint(init, c); }))
    return std::nullopt;
  e.input = *input;

  // In the loop's body: round(x) or round(x + extf(bias[j])), the sum used
  // by nothing else.
  Block *body = loop.getBody();
  Type narrow =
      cast<MemRefType>(product.getDpsInputs()[0].getType()).getElementType();
  BlockArgument x = body->getArgument(e.input);
  if (!x.hasOneUse())
    return std::nullopt;
  Operation *user = *x.getUsers().begin();
  if (auto add = dyn_cast<arith::AddFOp>(user)) {
    Value other = add.getLhs() == x ? add.getRhs() : add.getLhs();
    auto widen = other.getDefiningOp<arith::ExtFOp>();
    auto bias =
        widen ? dyn_cast<BlockArgument>(widen.getIn()) : BlockArgument();
    if (other == x || !bias || bias.getOwner() != body ||
        bias.getArgNumber() >= loop.getNumDpsInputs() || !add->hasOneUse())
      return std::nullopt;
    OpOperand *operand = loop.getDpsInputOperand(bias.getArgNumber());
    if (!isColumnMap(loop.getMatchingIndexingMap(operand), rank) ||
        !isContiguousVector(operand->get().getType(), e.form.n, narrow))
      return std::nullopt;
    e.add = add;
    e.bias = bias.getArgNumber();
    user = *add->getUsers().begin();
  }
  e.round = dyn_cast<arith::TruncFOp>(user);
  if (!e.round || e.round.getType() != narrow || e.round.getRoundingmodeAttr())
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (OpOperand &yielded : yield->getOpOperands())
    if (yielded.get() == e.round.getResult() &&
        (e.output = matchOutput(e, yielded.getOperandNumber())))
      break;
  if (!placeCall(e)) {
    if (!e.output)
      return std::nullopt;
    // Into a buffer of its own the product can always go where it was.
    e.output.reset();
    if (!placeCall(e))
      return std::nullopt;
  }
  return e;
}

/// The product computed by the runtime, rounded, into the loop's output or
/// a narrow buffer, which the loop reads instead of the f32 product and its
/// rounding; the loop stops writing the output the product now writes, and
/// goes if that was all it wrote.
FailureOr<RoundedGemm> rewrite(Epilogue &e) {
  linalg::GenericOp loop = e.loop;
  Location loc = e.product.getLoc();
  OpBuilder b(e.call);
  Type narrow =
      cast<MemRefType>(e.product.getDpsInputs()[0].getType()).getElementType();

  // The narrow product, in the shape the loop reads: the output, or a
  // buffer where the f32 one was.
  Value read;
  if (e.output) {
    read = loop.getDpsInits()[*e.output];
  } else {
    OpBuilder at(e.buffer);
    auto type = MemRefType::get(e.buffer.getType().getShape(), narrow);
    read = memref::AllocOp::create(at, e.buffer.getLoc(), type,
                                   e.buffer.getAlignmentAttr());
    if (e.reshape) {
      at.setInsertionPoint(e.reshape);
      read = memref::ExpandShapeOp::create(
          at, e.reshape.getLoc(), e.reshape.getResultType().getShape(), read,
          e.reshape.getReassociationIndices());
    }
  }
  Value matrix = read;
  if (e.reshape && e.output)
    matrix = memref::CollapseShapeOp::create(
        b, loc, read, e.reshape.getReassociationIndices());
  else if (e.reshape)
    matrix = read.getDefiningOp<memref::ExpandShapeOp>().getSrc();

  // The call, where the loop was.
  Value a = e.product.getDpsInputs()[0], bm = e.product.getDpsInputs()[1];
  FailureOr<GemmOperand> da = buildGemmOperand(b, loc, a, e.product),
                         db = buildGemmOperand(b, loc, bm, e.product),
                         dd = buildGemmOperand(b, loc, matrix, e.product);
  if (failed(da) || failed(db) || failed(dd))
    return failure();
  Value bias = e.bias ? buildDataPointer(b, loc, loop.getDpsInputs()[*e.bias])
                      : LLVM::ZeroOp::create(
                            b, loc, LLVM::LLVMPointerType::get(b.getContext()))
                            .getResult();
  auto i32c = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  auto i64c = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  buildRuntimeCall(b, e.product, kGemmRounded,
                   {i32c(e.form.dtype), i32c(e.form.transA),
                    i32c(e.form.transB), i64c(e.form.m), i64c(e.form.n),
                    i64c(e.form.k), one, da->pointer, da->leading, db->pointer,
                    db->leading, bias, dd->pointer, dd->leading});
  RoundedGemm rounded{
      cast<func::CallOp>(*std::prev(b.getInsertionPoint())), e.form, a, bm,
      e.bias ? loop.getDpsInputs()[*e.bias] : Value(),       matrix};

  // The loop's body reads the narrow value in place of computing it.
  Block *body = loop.getBody();
  BlockArgument x = body->getArgument(e.input);
  x.setType(narrow);
  e.round.getResult().replaceAllUsesWith(x);
  e.round.erase();
  if (e.add) {
    Operation *widen =
        e.add.getOperand(e.add.getLhs() == x ? 1 : 0).getDefiningOp();
    e.add.erase();
    if (widen->use_empty())
      widen->erase();
  }
  SmallVector<Value> inputs(loop.getDpsInputs()), outputs(loop.getDpsInits());
  SmallVector<AffineMap> maps = loop.getIndexingMapsArray();
  inputs[e.input] = read;
  if (e.output) {
    auto yield = cast<linalg::YieldOp>(body->getTerminator());
    yield->eraseOperand(*e.output);
    body->eraseArgument(loop.getNumDpsInputs() + *e.output);
    outputs.erase(outputs.begin() + *e.output);
    maps.erase(maps.begin() + loop.getNumDpsInputs() + *e.output);
  }
  // The bias, now the product's, if the loop read it for nothing else.
  if (e.bias && body->getArgument(*e.bias).use_empty()) {
    body->eraseArgument(*e.bias);
    inputs.erase(inputs.begin() + *e.bias);
    maps.erase(maps.begin() + *e.bias);
  }
  if (!outputs.empty()) {
    b.setInsertionPoint(loop);
    auto rebuilt =
        linalg::GenericOp::create(b, loop.getLoc(), TypeRange(), inputs,
                                  outputs, maps, loop.getIteratorTypesArray());
    rebuilt.getRegion().takeBody(loop.getRegion());
  }
  loop.erase();
  e.product.erase();
  e.zeros.erase();
  if (e.reshape && e.reshape->use_empty())
    e.reshape.erase();
  if (e.buffer->use_empty())
    e.buffer.erase();
  return rounded;
}

//===----------------------------------------------------------------------===//
// The GELU
//===----------------------------------------------------------------------===//

/// The buffer whose elements `view` holds in the same order: reshapes
/// peeled.
Value peelReshapes(Value view) {
  while (Operation *def = view.getDefiningOp()) {
    if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(def))
      break;
    view = def->getOperand(0);
  }
  return view;
}

/// Whether `actual` computes what `reference` does, operation for
/// operation (the operands of commutative ones in either order), binding
/// the reference's block arguments to values in `leaves`.
bool isSameExpression(Value actual, Value reference, IRMapping &leaves) {
  if (actual.getType() != reference.getType())
    return false;
  if (auto argument = dyn_cast<BlockArgument>(reference)) {
    if (Value bound = leaves.lookupOrNull(argument))
      return bound == actual;
    leaves.map(argument, actual);
    return true;
  }
  Operation *r = reference.getDefiningOp(), *a = actual.getDefiningOp();
  if (!a || a->getName() != r->getName() || a->getNumRegions() ||
      a->getAttrDictionary() != r->getAttrDictionary() ||
      a->getNumOperands() != r->getNumOperands() ||
      cast<OpResult>(actual).getResultNumber() !=
          cast<OpResult>(reference).getResultNumber())
    return false;
  auto operandsMatch = [&](ValueRange actuals, ValueRange references) {
    IRMapping before = leaves;
    for (auto [x, y] : llvm::zip(actuals, references))
      if (!isSameExpression(x, y, leaves)) {
        leaves = before;
        return false;
      }
    return true;
  };
  if (operandsMatch(a->getOperands(), r->getOperands()))
    return true;
  return r->hasTrait<OpTrait::IsCommutative>() && r->getNumOperands() == 2 &&
         operandsMatch({a->getOperand(1), a->getOperand(0)}, r->getOperands());
}

/// Whether the body of `loop` yields `build`'s f32 arithmetic on its
/// `inputs` (in that order), each widened from their narrow type to f32,
/// rounded back to it.
bool computesReference(
    linalg::GenericOp loop, ArrayRef<unsigned> inputs,
    function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)> build) {
  Block *body = loop.getBody();
  Type narrow = body->getArgument(inputs[0]).getType();
  Location loc = loop.getLoc();
  // The reference, in a block of its own that is dropped afterwards.
  Block reference;
  auto drop = llvm::make_scope_exit([&] {
    while (!reference.empty())
      reference.back().erase();
  });
  OpBuilder b(loop.getContext());
  b.setInsertionPointToEnd(&reference);
  SmallVector<Value> wide;
  for (unsigned i = 0, e = inputs.size(); i < e; ++i)
    wide.push_back(arith::ExtFOp::create(b, loc, b.getF32Type(),
                                         reference.addArgument(narrow, loc)));
  Value result = arith::TruncFOp::create(b, loc, narrow, build(b, loc, wide));
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  IRMapping leaves;
  if (yield.getNumOperands() != 1 ||
      !isSameExpression(yield.getOperand(0), result, leaves))
    return false;
  for (auto [i, input] : llvm::enumerate(inputs))
    if (leaves.lookupOrNull(reference.getArgument(i)) !=
        body->getArgument(input))
      return false;
  return true;
}

/// The reassociation that collapses `view`, an [..., n] buffer in a
/// loop's iteration space, into the GEMM's [m, n] matrix with contiguous
/// rows whose row stride is a multiple of 8 elements (cuBLASLt's GELU
/// epilogues' auxiliary matrix); empty if it is that matrix already, none
/// if it cannot be one.
std::optional<SmallVector<ReassociationIndices>>
getMatrixGroups(Value view, const GemmForm &form) {
  auto type = cast<MemRefType>(view.getType());
  if (type.getRank() < 2 || !type.hasStaticShape() ||
      type.getShape().back() != form.n ||
      type.getNumElements() != form.m * form.n)
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || ShapedType::isDynamic(strides.end()[-2]) ||
      strides.end()[-2] % 8 != 0)
    return std::nullopt;
  SmallVector<ReassociationIndices> groups;
  if (type.getRank() == 2)
    return groups;
  groups.emplace_back();
  for (int64_t d = 0; d + 1 < type.getRank(); ++d)
    groups.back().push_back(d);
  groups.push_back({type.getRank() - 1});
  if (!memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups))
    return std::nullopt;
  return groups;
}

/// `view` collapsed by getMatrixGroups' `groups`, built at `b`.
Value collapseToMatrix(OpBuilder &b, Location loc, Value view,
                       ArrayRef<ReassociationIndices> groups) {
  if (groups.empty())
    return view;
  return memref::CollapseShapeOp::create(b, loc, view, groups);
}

/// Erases the operations that computed `values` and are used by nothing
/// else now: the pointers, views and buffer of a call that is gone. An op
/// may be reached more than once (the metadata of a view gives both a
/// pointer's offset and a leading dimension): it is erased once.
void eraseDeadDefinitions(ValueRange values) {
  SmallVector<Operation *> worklist;
  for (Value value : values)
    if (Operation *def = value.getDefiningOp())
      worklist.push_back(def);
  SmallPtrSet<Operation *, 16> erased;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val();
    if (erased.contains(def) || !def->use_empty() ||
        !(isPure(def) || isa<memref::AllocOp>(def)))
      continue;
    for (Value operand : def->getOperands())
      if (Operation *next = operand.getDefiningOp())
        worklist.push_back(next);
    erased.insert(def);
    def->erase();
  }
}

/// The loop after a call of loom_rt_gemm_rounded that reads its product
/// first, if it is elementwise code the call's epilogue can take over: all
/// parallel, one output, at most two inputs, every one read and written
/// in the iteration's own element.
struct ProductReader {
  linalg::GenericOp loop;
  /// The loop's input that reads the product, and its other one, if any.
  unsigned read;
  std::optional<unsigned> other;
  /// The operations between the call and the loop.
  SmallVector<Operation *> between;
};

std::optional<ProductReader> findProductReader(RoundedGemm &g) {
  Value base = peelReshapes(g.d);
  ProductReader r;
  for (Operation *op = g.call->getNextNode(); op && !r.loop;
       op = op->getNextNode()) {
    if (auto generic = dyn_cast<linalg::GenericOp>(op))
      for (OpOperand *input : generic.getDpsInputOperands())
        if (peelReshapes(input->get()) == base) {
          r.loop = generic;
          r.read = input->getOperandNumber();
        }
    if (!r.loop)
      r.between.push_back(op);
  }
  linalg::GenericOp loop = r.loop;
  if (!loop || !loop.hasPureBufferSemantics() ||
      loop.getNumParallelLoops() != loop.getNumLoops() ||
      loop.getNumDpsInits() != 1 || loop.getNumDpsInputs() > 2 ||
      !llvm::all_of(loop.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return std::nullopt;
  if (loop.getNumDpsInputs() == 2) {
    r.other = 1 - r.read;
    // Another buffer of the product's type, which the call can read.
    Value other = loop.getDpsInputs()[*r.other];
    if (peelReshapes(other) == base ||
        cast<MemRefType>(other.getType()).getElementType() !=
            cast<MemRefType>(g.d.getType()).getElementType())
      return std::nullopt;
  }
  return r;
}

/// Whether `r`'s loop alone reads `g`'s product, whose buffer can then go:
/// its other users are views and the ops that make the call's pointer to
/// it (other runtime calls read buffers through such ops too).
bool readsProductAlone(RoundedGemm &g, ProductReader &r) {
  Value base = peelReshapes(g.d);
  SetVector<Operation *> pointer;
  BackwardSliceOptions options;
  options.inclusive = true;
  for (unsigned i : {12, 13})
    (void)getBackwardSlice(g.call->getOperand(i), &pointer, options);
  SmallVector<Operation *> users;
  collectUsers(base, users);
  return base.getDefiningOp<memref::AllocOp>() &&
         llvm::all_of(users, [&](Operation *user) {
           return user == r.loop.getOperation() ||
                  isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user) ||
                  pointer.contains(user);
         });
}

/// Whether `g`'s call can run at `r`'s loop instead, writing the loop's
/// output and also reading `read` there: nothing between touches the
/// product or writes what the call reads, and nothing it reads shares
/// memory with the output.
bool canRunAtLoop(RoundedGemm &g, ProductReader &r, Value read) {
  Value output = r.loop.getDpsInits()[0];
  SmallVector<Value> reads = {g.a, g.b, read};
  if (g.bias)
    reads.push_back(g.bias);
  if (llvm::any_of(r.between, [&](Operation *op) {
        return mayAccess(op, g.d) || llvm::any_of(reads, [&](Value v) {
                 return mayAccess(op, v, /*writesOnly=*/true);
               });
      }))
    return false;
  reads.push_back(g.d);
  return llvm::all_of(reads, [&](Value v) { return areDisjoint(v, output); });
}

/// `view`, which getMatrixGroups takes, as an [m, n] operand of `g`'s GEMM
/// built at `r`'s loop.
FailureOr<GemmOperand> buildMatrixOperand(OpBuilder &b, RoundedGemm &g,
                                          ProductReader &r, Value view) {
  Location loc = r.loop.getLoc();
  return buildGemmOperand(
      b, loc, collapseToMatrix(b, loc, view, *getMatrixGroups(view, g.form)),
      r.loop);
}

/// Replaces `g`'s call and `r`'s loop by a call of `callee` at the loop with
/// `args`, and erases what computed their operands that nothing uses now
/// (the product's pointer and, where it goes, its views and buffer).
void replaceByCall(RoundedGemm &g, ProductReader &r, OpBuilder &b,
                   StringRef callee, ArrayRef<Value> args) {
  buildRuntimeCall(b, r.loop, callee, args);
  SmallVector<Value> operands(g.call->getOperands());
  llvm::append_range(operands, r.loop->getOperands());
  g.call->erase();
  r.loop.erase();
  eraseDeadDefinitions(operands);
}

/// A scalar function a GEMM's epilogue computes, as a loop's body holds it:
/// the epilogue, and the loop's input each operand of the function reads.
struct EpilogueFunction {
  GemmEpilogue epilogue;
  SmallVector<unsigned> inputs;
};

/// The function `loop` stores, if that is all its body computes: one
/// rounding to `narrow` of a scalar function that has a GEMM epilogue, each
/// of whose operands is another input of the loop widened from `narrow`.
std::optional<EpilogueFunction> matchEpilogueFunction(linalg::GenericOp loop,
                                                      Type narrow) {
  auto yield = cast<linalg::YieldOp>(loop.getBody()->getTerminator());
  auto round = yield.getNumOperands() == 1
                   ? yield.getOperand(0).getDefiningOp<arith::TruncFOp>()
                   : nullptr;
  auto function =
      round && round.getType() == narrow && !round.getRoundingmodeAttr()
          ? round.getIn().getDefiningOp<ScalarFunctionOpInterface>()
          : nullptr;
  std::optional<GemmEpilogue> epilogue =
      function ? function.getGemmEpilogue() : std::nullopt;
  if (!epilogue)
    return std::nullopt;
  EpilogueFunction f{*epilogue, {}};
  for (Value operand : function->getOperands()) {
    auto widen = operand.getDefiningOp<arith::ExtFOp>();
    auto input = widen ? dyn_cast<BlockArgument>(widen.getIn()) : nullptr;
    if (!input || input.getOwner() != loop.getBody() ||
        input.getType() != narrow ||
        input.getArgNumber() >= loop.getNumDpsInputs() ||
        llvm::is_contained(f.inputs, input.getArgNumber()))
      return std::nullopt;
    f.inputs.push_back(input.getArgNumber());
  }
  return f;
}

/// The GELU loop after `g`'s call, which reads its product and nothing
/// between touches, moved into the call as loom_rt_gemm_gelu's epilogue
/// at the loop's place, if there is one:
///  - forward, a loop that stores the GELU of the product: the call writes
///    the product as before, as the GELU's input (AUX), and the GELU into
///    the loop's output;
///  - backward, a loop that stores the gradient through the GELU of the
///    product at a second input, whose product nothing else reads: the
///    call reads that input as AUX and writes the loop's output; the
///    product's buffer goes.
/// The loop says which by its scalar function (ScalarFunctionOpInterface).
/// Whether it moved; fails only where a matrix it checked is refused when
/// built.
FailureOr<bool> fuseGelu(RoundedGemm &g) {
  std::optional<ProductReader> r = findProductReader(g);
  if (!r)
    return false;
  std::optional<EpilogueFunction> f = matchEpilogueFunction(
      r->loop, cast<MemRefType>(g.d.getType()).getElementType());
  if (!f || f->inputs[f->epilogue.product] != r->read ||
      f->inputs.size() != r->loop.getNumDpsInputs())
    return false;
  bool backward = f->epilogue.kind == GemmEpilogueKind::GeluGrad;
  // Backward, H is another buffer, which the call reads as AUX.
  if (backward && (g.bias || !readsProductAlone(g, *r)))
    return false;
  // What the call reads stays unwritten until the loop, and the product
  // unread: the call moves there.
  Value output = r->loop.getDpsInits()[0];
  Value aux = backward ? r->loop.getDpsInputs()[*r->other] : g.d;
  if (!canRunAtLoop(g, *r, aux) || !getMatrixGroups(output, g.form) ||
      !getMatrixGroups(aux, g.form))
    return false;
  OpBuilder b(r->loop);
  Location loc = r->loop.getLoc();
  FailureOr<GemmOperand> d = buildMatrixOperand(b, g, *r, output);
  FailureOr<GemmOperand> auxOperand =
      backward ? buildMatrixOperand(b, g, *r, aux)
               : FailureOr<GemmOperand>(GemmOperand{g.call->getOperand(12),
                                                    g.call->getOperand(13)});
  if (failed(d) || failed(auxOperand))
    return failure();
  // loom_rt_gemm_rounded's operands up to the bias, the mode after the
  // type, then AUX and D.
  SmallVector<Value> args(g.call->getOperands().take_front(12));
  args.insert(args.begin() + 1,
              arith::ConstantOp::create(
                  b, loc,
                  b.getI32IntegerAttr(backward ? LOOM_GELU_BACKWARD
                                               : LOOM_GELU_FORWARD)));
  args.append(
      {auxOperand->pointer, auxOperand->leading, d->pointer, d->leading});
  replaceByCall(g, *r, b, kGemmGelu, args);
  return true;
}

/// The loop after `g`'s call that stores the sum of its product and
/// another matrix of its type (a residual connection's add, as the
/// lowering of loom.add builds it: both widened, added, rounded), whose
/// product nothing else reads, moved into the call as loom_rt_gemm_add at
/// the loop's place: the call reads the other matrix as C and writes the
/// loop's output; the product's buffer goes. The sum is rounded once where
/// the loop rounded the product first. Whether it moved; fails only where
/// a matrix it checked is refused when built.
FailureOr<bool> fuseAdd(RoundedGemm &g) {
  std::optional<ProductReader> r = findProductReader(g);
  if (!r || !r->other)
    return false;
  auto add = [](OpBuilder &b, Location loc, ArrayRef<Value> wide) {
    return arith::AddFOp::create(b, loc, wide[0], wide[1]).getResult();
  };
  Value output = r->loop.getDpsInits()[0];
  Value addend = r->loop.getDpsInputs()[*r->other];
  // The sum binds the inputs in either order.
  if (!(computesReference(r->loop, {r->read, *r->other}, add) ||
        computesReference(r->loop, {*r->other, r->read}, add)) ||
      !readsProductAlone(g, *r) || !canRunAtLoop(g, *r, addend) ||
      !getMatrixGroups(output, g.form) || !getMatrixGroups(addend, g.form))
    return false;
  OpBuilder b(r->loop);
  FailureOr<GemmOperand> d = buildMatrixOperand(b, g, *r, output);
  FailureOr<GemmOperand> c = buildMatrixOperand(b, g, *r, addend);
  if (failed(d) || failed(c))
    return failure();
  // loom_rt_gemm_rounded's operands up to the bias, then C and D.
  SmallVector<Value> args(g.call->getOperands().take_front(12));
  args.append({c->pointer, c->leading, d->pointer, d->leading});
  replaceByCall(g, *r, b, kGemmAdd, args);
  return true;
}

struct GemmEpiloguesPass
    : public loom::impl::LoomGemmEpiloguesBase<GemmEpiloguesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::MatmulOp> products;
    getOperation().walk([&](linalg::MatmulOp op) {
      if (op.hasPureBufferSemantics())
        products.push_back(op);
    });
    SmallVector<RoundedGemm> rounded;
    for (linalg::MatmulOp product : products)
      if (std::optional<Epilogue> e = matchEpilogue(product)) {
        FailureOr<RoundedGemm> call = rewrite(*e);
        if (failed(call))
          return signalPassFailure();
        rounded.push_back(*call);
      }
    // Each call takes at most one loop: the first after it that reads its
    // product.
    for (RoundedGemm &g : rounded) {
      FailureOr<bool> fused = gelu ? fuseGelu(g) : FailureOr<bool>(false);
      if (succeeded(fused) && !*fused && add)
        fused = fuseAdd(g);
      if (failed(fused))
        return signalPassFailure();
    }
  }
};
} // namespace
