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
// It runs on buffers before the static arena, while each buffer is still
// its own allocation: the product's buffer is dead after the loop exactly
// when nothing else uses the allocation.
//
//===----------------------------------------------------------------------===//

#include "DataPointer.h"
#include "FillForwarding.h"
#include "Gemm.h"

#include "loom/Conversion/Passes.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMGEMMEPILOGUES
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kGemmRounded = LOOM_RT_GEMM_ROUNDED;

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
LogicalResult rewrite(Epilogue &e) {
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
  return success();
}

struct GemmEpiloguesPass
    : public loom::impl::LoomGemmEpiloguesBase<GemmEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<linalg::MatmulOp> products;
    getOperation().walk([&](linalg::MatmulOp op) {
      if (op.hasPureBufferSemantics())
        products.push_back(op);
    });
    for (linalg::MatmulOp product : products)
      if (std::optional<Epilogue> e = matchEpilogue(product))
        if (failed(rewrite(*e)))
          return signalPassFailure();
  }
};
} // namespace
