//===- LowerParallelCalls.cpp - The loom-lower-parallel-calls pass --------===//
//
// The runtime cannot call a function whose signature depends on the loop it
// runs, so each parallel loop gets a task with one fixed C signature,
// `void(void *context, int64_t from, int64_t to)`, and its values travel in
// a struct the caller fills on its stack.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Lowering/Passes.h"
#include "loom/abi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERPARALLELCALLS
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kParallelFor = LOOM_RT_PARALLEL_FOR;

struct LowerParallelCallsPass
    : public loom::impl::LoomLowerParallelCallsBase<LowerParallelCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    Type ptr = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    SymbolTable symbols(module);

    SmallVector<LLVM::LLVMFuncOp> loops;
    for (auto function : module.getOps<LLVM::LLVMFuncOp>())
      if (function->hasAttr(LoomDialect::getParallelForAttrName()))
        loops.push_back(function);
    if (loops.empty())
      return;

    // The calls to rewrite, before the tasks add their own.
    SmallVector<LLVM::CallOp> calls;
    module.walk([&](LLVM::CallOp call) {
      if (auto callee = call.getCalleeAttr())
        if (auto function = symbols.lookup<LLVM::LLVMFuncOp>(callee.getAttr()))
          if (function->hasAttr(LoomDialect::getParallelForAttrName()))
            calls.push_back(call);
    });
    for (LLVM::CallOp call : calls) {
      if (!call->getParentOfType<LLVM::LLVMFuncOp>()) {
        call.emitOpError("calls a parallel loop from outside an llvm.func; "
                         "the pass runs after the conversion to LLVM");
        return signalPassFailure();
      }
    }

    OpBuilder b(context);
    if (!symbols.lookup(kParallelFor)) {
      b.setInsertionPointToEnd(module.getBody());
      LLVM::LLVMFuncOp::create(
          b, module.getLoc(), kParallelFor,
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context),
                                      {ptr, ptr, i64, i64}));
    }

    DenseMap<StringAttr, std::pair<LLVM::LLVMFuncOp, LLVM::LLVMStructType>>
        tasks;
    for (LLVM::LLVMFuncOp loop : loops) {
      ArrayRef<Type> params = loop.getFunctionType().getParams();
      if (params.size() < 2 || params[0] != i64 || params[1] != i64) {
        loop.emitOpError() << "is marked '"
                           << LoomDialect::getParallelForAttrName()
                           << "' but does not take an i64 range first";
        return signalPassFailure();
      }
      auto contextType =
          LLVM::LLVMStructType::getLiteral(context, params.drop_front(2));

      // <loop>_task(context, from, to): loads the values, runs the range.
      b.setInsertionPointAfter(loop);
      Location loc = loop.getLoc();
      auto task = LLVM::LLVMFuncOp::create(
          b, loc, (loop.getName() + "_task").str(),
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context),
                                      {ptr, i64, i64}),
          LLVM::Linkage::Internal);
      symbols.insert(task);
      Block *entry = task.addEntryBlock(b);
      b.setInsertionPointToStart(entry);
      SmallVector<Value> operands = {entry->getArgument(1),
                                     entry->getArgument(2)};
      for (auto [i, type] : llvm::enumerate(params.drop_front(2))) {
        Value field = LLVM::GEPOp::create(
            b, loc, ptr, contextType, entry->getArgument(0),
            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
        operands.push_back(LLVM::LoadOp::create(b, loc, type, field));
      }
      LLVM::CallOp::create(b, loc, loop, operands);
      LLVM::ReturnOp::create(b, loc, ValueRange());
      tasks[loop.getNameAttr()] = {task, contextType};
    }

    for (LLVM::CallOp call : calls) {
      auto [task, contextType] = tasks.lookup(call.getCalleeAttr().getAttr());
      Location loc = call.getLoc();
      // The struct lives in the caller's frame: allocated once, at entry,
      // whether or not the call sits in a loop.
      auto caller = call->getParentOfType<LLVM::LLVMFuncOp>();
      b.setInsertionPointToStart(&caller.getBody().front());
      Value one = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(1));
      Value slot = LLVM::AllocaOp::create(b, loc, ptr, contextType, one);
      b.setInsertionPoint(call);
      for (auto [i, value] :
           llvm::enumerate(call.getArgOperands().drop_front(2))) {
        Value field = LLVM::GEPOp::create(
            b, loc, ptr, contextType, slot,
            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
        LLVM::StoreOp::create(b, loc, value, field);
      }
      Value function = LLVM::AddressOfOp::create(b, loc, ptr, task.getName());
      LLVM::CallOp::create(b, loc, TypeRange(), kParallelFor,
                           ValueRange{function, slot, call.getArgOperands()[0],
                                      call.getArgOperands()[1]});
      call.erase();
    }
  }
};
} // namespace
