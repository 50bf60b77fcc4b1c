//===- OutlineLoopNests.cpp - The loom-outline-loop-nests pass ------------===//
//
// Keeps the functions LLVM sees small and lets the runtime run loops on
// every core: a step's loop nests each become a function, so the cost of
// LLVM's per-function loop analyses grows with the number of nests rather
// than with its square, identical nests are compiled once, and a nest whose
// outermost loop is parallel takes the range of its outer iterations as
// arguments, for loom_rt_parallel_for to split among threads.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Lowering/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMOUTLINELOOPNESTS
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Whether anything inside `op` calls a function.
bool hasCalls(Operation *op) {
  return op->walk([](CallOpInterface) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// The constant bounds of a parallel loop's outermost dimension, when it
/// has some: the range the runtime splits.
struct OuterRange {
  int64_t lower, upper, step;
  int64_t count() const { return (upper - lower + step - 1) / step; }
};
std::optional<OuterRange> getOuterRange(scf::ParallelOp loop) {
  APInt lower, upper, step;
  if (!matchPattern(loop.getLowerBound()[0], m_ConstantInt(&lower)) ||
      !matchPattern(loop.getUpperBound()[0], m_ConstantInt(&upper)) ||
      !matchPattern(loop.getStep()[0], m_ConstantInt(&step)) ||
      step.getSExtValue() <= 0)
    return std::nullopt;
  return OuterRange{lower.getSExtValue(), upper.getSExtValue(),
                    step.getSExtValue()};
}

/// Iterations of the innermost loop bodies of `nest`, when its bounds are
/// constant: the work a parallel loop splits.
std::optional<int64_t> getStaticWork(Operation *nest) {
  std::optional<int64_t> work = 0;
  std::function<void(Operation *, int64_t)> visit = [&](Operation *op,
                                                        int64_t outer) {
    int64_t trips = 1;
    if (auto loop = dyn_cast<LoopLikeOpInterface>(op)) {
      auto lower = loop.getLoopLowerBounds(), upper = loop.getLoopUpperBounds(),
           steps = loop.getLoopSteps();
      if (!lower || !upper || !steps) {
        work = std::nullopt;
        return;
      }
      for (auto [lb, ub, step] : llvm::zip(*lower, *upper, *steps)) {
        std::optional<int64_t> l = getConstantIntValue(lb),
                               u = getConstantIntValue(ub),
                               s = getConstantIntValue(step);
        if (!l || !u || !s || *s <= 0) {
          work = std::nullopt;
          return;
        }
        trips *= std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
      }
    }
    bool innermost = true;
    for (Region &region : op->getRegions())
      for (Operation &inner : region.getOps())
        if (isa<LoopLikeOpInterface>(inner) || inner.getNumRegions()) {
          innermost = false;
          visit(&inner, outer * trips);
        }
    if (innermost && work)
      *work += outer * trips;
  };
  visit(nest, 1);
  return work;
}

/// Below this many innermost iterations a loop costs less than handing it
/// to another thread.
constexpr int64_t kMinParallelWork = 32768;

struct OutlineLoopNestsPass
    : public loom::impl::LoomOutlineLoopNestsBase<OutlineLoopNestsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    symbols.emplace(module);
    outlined.clear();
    SmallVector<func::FuncOp> functions(module.getOps<func::FuncOp>());
    for (func::FuncOp function : functions) {
      if (function.isExternal() ||
          (hostOnly && !function->hasAttr(LoomDialect::getHostAttrName())))
        continue;
      SmallVector<Operation *> nests;
      collectNests(function.getBody(), nests);
      for (auto [index, loop] : llvm::enumerate(nests))
        outline(function, loop, index);
    }
    mergeIdenticalNests();
  }

  /// Collects the loop nests of `region` to outline: every parallel loop,
  /// and every other loop that calls nothing. Loops that call and are not
  /// parallel (the layer loop, which calls BLAS) are control structure: the
  /// nests inside them are collected instead.
  static void collectNests(Region &region,
                           SmallVectorImpl<Operation *> &nests) {
    for (Block &block : region) {
      for (Operation &op : block) {
        if (isa<LoopLikeOpInterface>(op) && op.getNumResults() == 0 &&
            (isa<scf::ParallelOp>(op) || !hasCalls(&op))) {
          nests.push_back(&op);
          continue;
        }
        for (Region &nested : op.getRegions())
          collectNests(nested, nests);
      }
    }
  }

  /// Moves `loop` into a private function `<function>_loop<index>` of the
  /// values it uses (constants move in with it: as arguments they would
  /// hide loop bounds and scalars from LLVM) and calls it in its place. A
  /// parallel loop with constant outer bounds takes its outer range as the
  /// first two arguments and is marked loom.parallel_for.
  void outline(func::FuncOp function, Operation *loop, size_t index) {
    MLIRContext *context = &getContext();
    SetVector<Value> captured;
    loop->walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (!loop->isAncestor(operand.getParentRegion()->getParentOp()))
          captured.insert(operand);
    });
    SmallVector<Value> arguments;
    SmallVector<Operation *> constants;
    for (Value value : captured) {
      Operation *def = value.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>())
        constants.push_back(def);
      else
        arguments.push_back(value);
    }
    auto parallel = dyn_cast<scf::ParallelOp>(loop);
    std::optional<OuterRange> range;
    // Loops that call (BLAS on each head) are worth splitting whatever
    // their trip count.
    std::optional<int64_t> work = getStaticWork(loop);
    if (parallel && (hasCalls(loop) || !work || *work >= kMinParallelWork))
      range = getOuterRange(parallel);

    OpBuilder b(context);
    b.setInsertionPoint(function);
    Location loc = loop->getLoc();
    SmallVector<Type> types;
    if (range)
      types.append(2, b.getIndexType());
    for (Value value : arguments)
      types.push_back(value.getType());
    std::string base = (function.getSymName() + "_loop" + Twine(index)).str();
    std::string name = base;
    for (unsigned suffix = 0; symbols->lookup(name); ++suffix)
      name = base + "_" + std::to_string(suffix);
    auto nest =
        func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
    nest.setPrivate();
    symbols->insert(nest);
    // Read by the conversion to the LLVM dialect: a function local to the
    // artifact that LLVM must not inline back into its caller.
    nest->setAttr("passthrough", b.getArrayAttr(b.getStringAttr("noinline")));
    nest->setAttr(
        "llvm.linkage",
        LLVM::LinkageAttr::get(context, LLVM::linkage::Linkage::Internal));
    if (range)
      nest->setAttr(LoomDialect::getParallelForAttrName(), b.getUnitAttr());
    // A host function's nests run where it does.
    if (Attribute host = function->getAttr(LoomDialect::getHostAttrName()))
      nest->setAttr(LoomDialect::getHostAttrName(), host);

    Block *body = nest.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping mapping;
    for (Operation *constant : constants)
      b.clone(*constant, mapping);
    auto argumentsInBody = body->getArguments().drop_front(range ? 2 : 0);
    mapping.map(arguments, argumentsInBody);
    Operation *copy = b.clone(*loop, mapping);
    if (range) {
      // Iterations [begin, end) of the outer dimension.
      auto copyLoop = cast<scf::ParallelOp>(copy);
      Value step = arith::ConstantIndexOp::create(b, loc, range->step);
      Value lower = arith::ConstantIndexOp::create(b, loc, range->lower);
      auto at = [&](Value iteration) -> Value {
        return arith::AddIOp::create(
            b, loc, lower, arith::MulIOp::create(b, loc, iteration, step));
      };
      Value upper = arith::MinSIOp::create(
          b, loc, at(body->getArgument(1)),
          arith::ConstantIndexOp::create(b, loc, range->upper));
      copyLoop.getLowerBoundMutable()[0].set(at(body->getArgument(0)));
      copyLoop.getUpperBoundMutable()[0].set(upper);
      copy->moveBefore(body, body->end());
    }
    func::ReturnOp::create(b, loc);

    b.setInsertionPoint(loop);
    SmallVector<Value> operands;
    if (range) {
      operands.push_back(arith::ConstantIndexOp::create(b, loc, 0));
      operands.push_back(
          arith::ConstantIndexOp::create(b, loc, range->count()));
    }
    llvm::append_range(operands, arguments);
    auto call = func::CallOp::create(b, loc, nest, operands);
    loop->erase();
    outlined.push_back({nest, call});
  }

  /// Keeps one function of each set of outlined nests that are the same
  /// code: the forward pass appears in @forward, @forward_grad and
  /// @train_step, and layer norms, bias broadcasts and residual adds of one
  /// shape recur; LLVM then optimizes and compiles each once.
  void mergeIdenticalNests() {
    auto flags = OperationEquivalence::IgnoreLocations;
    DenseMap<llvm::hash_code, SmallVector<func::FuncOp>> kept;
    for (auto [function, call] : outlined) {
      llvm::hash_code hash = hash_value(function.getFunctionType());
      function.getBody().walk([&](Operation *op) {
        hash = llvm::hash_combine(
            hash, OperationEquivalence::computeHash(
                      op, OperationEquivalence::ignoreHashValue,
                      OperationEquivalence::ignoreHashValue, flags));
      });
      SmallVector<func::FuncOp> &candidates = kept[hash];
      auto same = llvm::find_if(candidates, [&](func::FuncOp other) {
        return other.getFunctionType() == function.getFunctionType() &&
               other->getDiscardableAttrDictionary() ==
                   function->getDiscardableAttrDictionary() &&
               OperationEquivalence::isRegionEquivalentTo(
                   &other.getBody(), &function.getBody(), flags);
      });
      if (same == candidates.end()) {
        candidates.push_back(function);
        continue;
      }
      call.setCallee(same->getSymName());
      symbols->erase(function);
    }
  }

  std::optional<SymbolTable> symbols;
  /// Each outlined nest and its only call.
  SmallVector<std::pair<func::FuncOp, func::CallOp>> outlined;
};
} // namespace
