//===- ExpandScalarFunctions.cpp - loom-expand-scalar-functions -----------===//
//
// Loops' scalar functions stay one op each while passes on loops recognize
// them by it; afterwards, the targets compile their arithmetic.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMEXPANDSCALARFUNCTIONS
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct ExpandScalarFunctionsPass
    : loom::impl::LoomExpandScalarFunctionsBase<ExpandScalarFunctionsPass> {
  void runOnOperation() override {
    SmallVector<ScalarFunctionOpInterface> functions;
    getOperation()->walk(
        [&](ScalarFunctionOpInterface op) { functions.push_back(op); });
    for (ScalarFunctionOpInterface op : functions) {
      OpBuilder b(op);
      op->getResult(0).replaceAllUsesWith(op.expand(b));
      op->erase();
    }
  }
};
} // namespace
