//===- EarlyDeallocation.cpp - The loom-early-deallocation pass -----------===//
//
// The ownership-based deallocation places a block's deallocations at its
// end. Moving each one up to the last use of its buffer makes a buffer's
// lifetime what the program's order says, which is what a pipeline
// schedule's memory (a micro-batch's activations freed by its backward
// pass) and the compiler's memory report assume.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMEARLYDEALLOCATION
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The last op of `block` that uses `buffer` or a value made from it (null
/// when none does), or failure when the block's terminator does. Every
/// result of an op that reads a value of the set joins the set, and so
/// does the memory a value of it is stored into: views, casts, base
/// buffers and pointers alias the buffer, and an op whose results do not
/// only keeps the buffer longer than needed.
FailureOr<Operation *> findLastUse(Block &block, Value buffer) {
  llvm::SetVector<Value> aliases;
  aliases.insert(buffer);
  Operation *last = nullptr;
  for (size_t i = 0; i < aliases.size(); ++i) {
    Value alias = aliases[i];
    for (Operation *user : alias.getUsers()) {
      // Freeing memory (this buffer's or, for a stored pointer, the
      // memory it was stored in) does not read it.
      if (isa<memref::DeallocOp>(user))
        continue;
      Operation *op = block.findAncestorOpInBlock(*user);
      if (!op || op->hasTrait<OpTrait::IsTerminator>())
        return failure();
      if (!last || last->isBeforeInBlock(op))
        last = op;
      aliases.insert(user->result_begin(), user->result_end());
      if (auto store = dyn_cast<memref::StoreOp>(user))
        if (store.getValueToStore() == alias)
          aliases.insert(store.getMemRef());
    }
  }
  return last;
}

struct EarlyDeallocationPass
    : public loom::impl::LoomEarlyDeallocationBase<EarlyDeallocationPass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp op) {
      // Within unstructured control flow a buffer's uses may follow in
      // another block.
      if (op->getParentRegion()->hasOneBlock())
        deallocs.push_back(op);
    });
    for (memref::DeallocOp dealloc : deallocs) {
      Block &block = *dealloc->getBlock();
      Value buffer = dealloc.getMemref();
      // A buffer from outside the block (an argument, a loop's value) may
      // be used after the block's operations in ways this block cannot see.
      if (buffer.getParentBlock() != &block)
        continue;
      FailureOr<Operation *> lastUse = findLastUse(block, buffer);
      if (failed(lastUse))
        continue;
      Operation *last = *lastUse ? *lastUse : buffer.getDefiningOp();
      if (last && last->isBeforeInBlock(dealloc))
        dealloc->moveAfter(last);
    }
  }
};
} // namespace
