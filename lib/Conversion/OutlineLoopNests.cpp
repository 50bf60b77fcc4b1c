//===- OutlineLoopNests.cpp - The loom-outline-loop-nests pass ------------===//
//
// Keeps the functions LLVM sees small: a step's loop nests each become a
// function, so the cost of LLVM's per-function loop analyses grows with the
// number of nests rather than with its square.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMOUTLINELOOPNESTS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct OutlineLoopNestsPass
    : public loom::impl::LoomOutlineLoopNestsBase<OutlineLoopNestsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    symbols.emplace(module);
    outlined.clear();
    SmallVector<func::FuncOp> functions(module.getOps<func::FuncOp>());
    for (func::FuncOp function : functions) {
      if (function.isExternal())
        continue;
      SmallVector<Operation *> nests;
      collectNests(function.getBody(), nests);
      for (auto [index, loop] : llvm::enumerate(nests))
        if (failed(outline(rewriter, function, loop, index)))
          return signalPassFailure();
    }
    mergeIdenticalNests();
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

  /// Collects the loop nests of `region` that call nothing: the compute
  /// nests LLVM optimizes one at a time. Loops that call (the layer loop,
  /// which calls BLAS; attention's loop over heads) are control structure:
  /// the nests inside them are collected instead.
  static void collectNests(Region &region,
                           SmallVectorImpl<Operation *> &nests) {
    for (Block &block : region) {
      for (Operation &op : block) {
        if (isa<LoopLikeOpInterface>(op)) {
          bool calls = op.walk([](CallOpInterface) {
                           return WalkResult::interrupt();
                         }).wasInterrupted();
          if (!calls) {
            nests.push_back(&op);
            continue;
          }
        }
        for (Region &nested : op.getRegions())
          collectNests(nested, nests);
      }
    }
  }

  /// Wraps `loop` into a region of its own and outlines that region.
  LogicalResult outline(IRRewriter &rewriter, func::FuncOp function,
                        Operation *loop, size_t index) {
    // Loops that yield values would need the region's results threaded
    // through; the lowering of loom ops produces none outside its nests.
    if (loop->getNumResults() != 0)
      return success();
    Location loc = loop->getLoc();
    rewriter.setInsertionPoint(loop);
    auto wrapper = scf::ExecuteRegionOp::create(rewriter, loc, TypeRange{});
    Block *body = rewriter.createBlock(&wrapper.getRegion());
    rewriter.setInsertionPointToEnd(body);
    auto yield = scf::YieldOp::create(rewriter, loc);
    rewriter.moveOpBefore(loop, yield);

    // Constants the nest uses move in with it: as arguments they would hide
    // loop bounds and scalars from LLVM.
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(wrapper.getRegion(), captured);
    rewriter.setInsertionPointToStart(body);
    for (Value value : captured) {
      Operation *def = value.getDefiningOp();
      if (!def || !def->hasTrait<OpTrait::ConstantLike>())
        continue;
      Value copy = rewriter.clone(*def)->getResult(0);
      rewriter.replaceUsesWithIf(value, copy, [&](OpOperand &use) {
        return wrapper->isProperAncestor(use.getOwner());
      });
    }

    std::string base = (function.getSymName() + "_loop" + Twine(index)).str();
    std::string name = base;
    for (unsigned suffix = 0; symbols->lookup(name); ++suffix)
      name = base + "_" + std::to_string(suffix);
    func::CallOp call;
    FailureOr<func::FuncOp> outlined = outlineSingleBlockRegion(
        rewriter, loc, wrapper.getRegion(), name, &call);
    if (failed(outlined))
      return function.emitError() << "could not outline loop nest " << index;
    outlined->setPrivate();
    symbols->insert(*outlined);
    // Read by the conversion to the LLVM dialect: a function local to the
    // artifact that LLVM must not inline back into its caller.
    outlined->getOperation()->setAttr(
        "passthrough",
        rewriter.getArrayAttr(rewriter.getStringAttr("noinline")));
    outlined->getOperation()->setAttr(
        "llvm.linkage",
        LLVM::LinkageAttr::get(rewriter.getContext(),
                               LLVM::linkage::Linkage::Internal));

    // The wrapper now holds only the call; put the call in its place.
    rewriter.moveOpBefore(call, wrapper);
    rewriter.eraseOp(wrapper);
    this->outlined.push_back({*outlined, call});
    return success();
  }

  std::optional<SymbolTable> symbols;
  /// Each outlined nest and its only call.
  SmallVector<std::pair<func::FuncOp, func::CallOp>> outlined;
};
} // namespace
