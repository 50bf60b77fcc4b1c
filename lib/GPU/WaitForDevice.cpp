//===- WaitForDevice.cpp - The loom-wait-for-device pass ------------------===//
//
// Upstream's lowering of a launch waits for the GPU after it; Loom's runtime
// instead queues launches and GEMMs on one stream and lets the host run
// ahead, so the host must wait before it reads or writes memory that work
// still queued may use. This pass puts a call of the runtime's wait before
// every host operation that touches memory after device work was queued,
// once until the next launch or call.
//
//===----------------------------------------------------------------------===//

#include "ParallelLoopsToGpu.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/GPU/Passes.h"
#include "loom/abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMWAITFORDEVICE
#include "loom/GPU/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;
using loops_to_gpu::queuesWork;
using loops_to_gpu::readsConstantArgument;

namespace {
constexpr llvm::StringLiteral kWait = LOOM_RT_DEVICE_WAIT;

/// Whether `op` or an operation in it reads or writes memory from the host.
/// Allocation and freeing touch no data; an operation that does not say
/// what it does is taken to touch memory.
bool touchesMemory(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        auto load = dyn_cast<memref::LoadOp>(nested);
        if (load && readsConstantArgument(load))
          return WalkResult::advance();
        if (auto effects = dyn_cast<MemoryEffectOpInterface>(nested)) {
          SmallVector<MemoryEffects::EffectInstance> instances;
          effects.getEffects(instances);
          for (MemoryEffects::EffectInstance &instance : instances)
            if (isa<MemoryEffects::Read, MemoryEffects::Write>(
                    instance.getEffect()))
              return WalkResult::interrupt();
          return WalkResult::advance();
        }
        if (nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
            nested->hasTrait<OpTrait::IsTerminator>())
          return WalkResult::advance();
        return WalkResult::interrupt();
      })
      .wasInterrupted();
}

struct WaitForDevicePass
    : public loom::impl::LoomWaitForDeviceBase<WaitForDevicePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool used = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      // An offload plan's host functions touch host memory only; what they
      // hand the device crosses by the runtime's transfers, which order
      // themselves with the GPU's work.
      if (func.isExternal() || func->hasAttr(LoomDialect::getHostAttrName()))
        continue;
      // Structured control flow only: a function of several blocks would
      // need the state carried along its branches.
      if (!func.getBody().hasOneBlock()) {
        func.emitOpError("has several blocks; loom-wait-for-device expects "
                         "structured control flow");
        return signalPassFailure();
      }
      used |= visit(func.getBody().front(), /*pending=*/true);
    }
    if (!used || module.lookupSymbol(kWait))
      return;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    func::FuncOp::create(b, module.getLoc(), kWait, b.getFunctionType({}, {}))
        .setPrivate();
  }

  /// Puts the waits in `block`, where the device may still be running work
  /// when it starts if `pending`; a host loop's body always starts so, since
  /// the iteration before may have queued some. Returns whether any wait
  /// was put.
  bool visit(Block &block, bool pending) {
    bool used = false;
    for (Operation &op : block) {
      if (queuesWork(&op)) {
        pending = true;
        continue;
      }
      bool queuesInside = op.walk([](Operation *nested) {
                              return queuesWork(nested)
                                         ? WalkResult::interrupt()
                                         : WalkResult::advance();
                            }).wasInterrupted();
      if (queuesInside) {
        for (Region &region : op.getRegions())
          for (Block &nested : region)
            used |= visit(nested, /*pending=*/true);
        pending = true;
        continue;
      }
      if (!pending || !touchesMemory(&op))
        continue;
      OpBuilder b(&op);
      func::CallOp::create(b, op.getLoc(), kWait, TypeRange{});
      pending = false;
      used = true;
    }
    return used;
  }
};
} // namespace
