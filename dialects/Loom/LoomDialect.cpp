//===- LoomDialect.cpp - The loom dialect ---------------------------------===//

#include "Loom/LoomDialect.h"

#include "mlir/Transforms/InliningUtils.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::loom;

#include "Loom/LoomDialect.cpp.inc"

namespace {
/// Loom ops are pure functions of their operands, so calls to functions
/// made of them (@forward_grad inside @train_step) can be inlined.
struct LoomInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void LoomDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "Loom/LoomOps.cpp.inc"
      >();
  addInterfaces<LoomInlinerInterface>();
}

FailureOr<llvm::APFloat> mlir::loom::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return llvm::APFloat(value);
}

std::string mlir::loom::formatF64(double value) {
  // The shortest %g form that reads back exactly keeps hand-written values
  // such as 3e-4 readable while guaranteeing a lossless round trip.
  char buffer[32];
  // Enough digits for the integer part keeps 50 from printing as 5e+01.
  double magnitude = std::fabs(value);
  int first = magnitude >= 1 && magnitude < 1e16
                  ? static_cast<int>(std::floor(std::log10(magnitude))) + 1
                  : 1;
  for (int precision = first; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text(buffer);
  // MLIR's float literals need a '.' before any exponent: "1e-05" would read
  // as an integer.
  if (std::isfinite(value) && text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  return text;
}

void mlir::loom::printF64(AsmPrinter &printer, const llvm::APFloat &value) {
  printer << formatF64(value.convertToDouble());
}

LogicalResult verifyPlan(Operation *op, PlanAttr plan) {
  auto model = op->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName());
  auto training =
      op->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
  auto cluster =
      op->getAttrOfType<ClusterAttr>(LoomDialect::getClusterAttrName());
  auto planError = [&](StringRef key) {
    return op->emitError() << "plan." << key << ": ";
  };
  if (model) {
    if (model.getHeads() % plan.getTp() != 0)
      return planError("tp")
             << "tensor parallelism " << plan.getTp() << " does not divide the "
             << model.getHeads() << " heads (model.n_head)";
    if (model.getHidden() % plan.getTp() != 0)
      return planError("tp")
             << "tensor parallelism " << plan.getTp()
             << " does not divide the MLP width " << model.getHidden();
    if (plan.getPp() > model.getLayers())
      return planError("pp") << plan.getPp() << " pipeline stages exceed the "
                             << model.getLayers() << " layers (model.n_layer)";
  }
  if (training) {
    int64_t split = plan.getDp() * plan.getMicroBatches();
    if (training.getBatch() % split != 0)
      return planError("mb")
             << "dp * micro_batches = " << plan.getDp() << " * "
             << plan.getMicroBatches() << " does not divide the batch of "
             << training.getBatch() << " sequences (training.batch_size)";
    if (plan.getSequenceParallel() &&
        training.getSequence() % plan.getTp() != 0)
      return planError("sp")
             << "tensor parallelism " << plan.getTp()
             << " does not divide the sequence length "
             << training.getSequence() << " (training.sequence_length)";
  }
  if (cluster && plan.getWorldSize() != cluster.getWorldSize())
    return op->emitError() << "plan: dp * tp * pp = " << plan.getWorldSize()
                           << " ranks, but the cluster has "
                           << cluster.getWorldSize()
                           << " GPUs (cluster.nodes * cluster.gpus_per_node)";
  return success();
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "attribute '" << name << "' must be " << what
                           << ", got " << attr.getValue();
  };
  if (name == getModelAttrName())
    return expect(isa<ModelAttr>(attr.getValue()), "a #loom.model");
  if (name == getTrainingAttrName())
    return expect(isa<TrainingAttr>(attr.getValue()), "a #loom.training");
  if (name == getPlanAttrName()) {
    if (failed(expect(isa<PlanAttr>(attr.getValue()), "a #loom.plan")))
      return failure();
    return verifyPlan(op, cast<PlanAttr>(attr.getValue()));
  }
  if (name == getClusterAttrName())
    return expect(isa<ClusterAttr>(attr.getValue()), "a #loom.cluster");
  if (name == getLayerAttrName()) {
    auto layer = dyn_cast<IntegerAttr>(attr.getValue());
    return expect(layer && layer.getType().isInteger(64) && layer.getInt() >= 0,
                  "a non-negative i64 layer number");
  }
  return op->emitError() << "unknown loom attribute '" << name << "'";
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getParamAttrName() || name == getInputAttrName() ||
      name == getStateAttrName() || name == getOutputAttrName()) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitError() << "argument #" << argIndex << ": '" << name
                             << "' must be a non-empty string";
    return success();
  }
  return op->emitError() << "argument #" << argIndex
                         << ": unknown loom argument attribute '" << name
                         << "'";
}
