//===- LoomDialect.cpp - The loom dialect ---------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"
#include "mlir/IR/BuiltinOps.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::loom;

#include "loom/Dialect/LoomDialect.cpp.inc"

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
#include "loom/Dialect/LoomOps.cpp.inc"
      >();
  addInterfaces<LoomInlinerInterface>();
}

FailureOr<llvm::APFloat> mlir::loom::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return llvm::APFloat(value);
}

int64_t mlir::loom::getStaticBytes(ShapedType type) {
  return type.getNumElements() * static_cast<int64_t>(llvm::divideCeil(
                                     type.getElementTypeBitWidth(), 8));
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

/// Checks a module's plan against its model, training setup and cluster,
/// with the rule the description reader and the planner use.
static LogicalResult verifyPlan(Operation *op, PlanAttr plan) {
  auto model = op->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName());
  auto training =
      op->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
  auto cluster =
      op->getAttrOfType<ClusterAttr>(LoomDialect::getClusterAttrName());
  std::optional<ArchitectureConfig> arch;
  std::optional<TrainingConfig> batch;
  std::optional<ClusterConfig> world;
  if (model)
    arch = model.getConfig();
  if (training)
    batch = training.getConfig();
  if (cluster)
    world = cluster.getConfig();
  SmallVector<PlanViolation> violations =
      checkPlan(plan.getConfig(), arch ? &*arch : nullptr,
                batch ? &*batch : nullptr, world ? &*world : nullptr);
  if (violations.empty())
    return success();
  InFlightDiagnostic diag = op->emitError() << violations.front().field << ": "
                                            << violations.front().message;
  for (const PlanViolation &more : llvm::drop_begin(violations))
    diag.attachNote() << more.field << ": " << more.message;
  return diag;
}

DictionaryAttr mlir::loom::getTensorSpecAttr(MLIRContext *context,
                                             const TensorSpec &spec) {
  Builder b(context);
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("name", b.getStringAttr(spec.name)),
      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(spec.shape)),
      b.getNamedAttr("init", b.getStringAttr(stringifyTensorInit(spec.init)))};
  if (spec.init == TensorInit::Normal)
    fields.push_back(b.getNamedAttr("std", b.getF64FloatAttr(spec.std)));
  if (spec.rows)
    fields.push_back(b.getNamedAttr("rows", b.getI64IntegerAttr(spec.rows)));
  if (!spec.hfName.empty())
    fields.push_back(b.getNamedAttr("hf", b.getStringAttr(spec.hfName)));
  if (spec.hfTranspose)
    fields.push_back(b.getNamedAttr("hf_transpose", b.getUnitAttr()));
  if (!spec.hfRows.empty())
    fields.push_back(
        b.getNamedAttr("hf_rows", b.getDenseI64ArrayAttr(spec.hfRows)));
  if (spec.hfGroups != 1)
    fields.push_back(
        b.getNamedAttr("hf_groups", b.getI64IntegerAttr(spec.hfGroups)));
  return b.getDictionaryAttr(fields);
}

/// Reads `hf_rows` and `hf_groups` into `spec`, whose name, shape and hf
/// are read: the parts' rows must fill the groups of the first dimension
/// (of a layer's, for a stacked tensor).
static LogicalResult
parseHfParts(DictionaryAttr dict, TensorSpec &spec,
             llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &why) {
    return emitError() << "tensor '" << spec.name << "': " << why;
  };
  if (Attribute rows = dict.get("hf_rows")) {
    auto array = dyn_cast<DenseI64ArrayAttr>(rows);
    if (!array ||
        llvm::any_of(array.asArrayRef(), [](int64_t r) { return r <= 0; }))
      return fail("'hf_rows' must be an array of positive integers");
    spec.hfRows.assign(array.asArrayRef().begin(), array.asArrayRef().end());
  }
  if (Attribute groups = dict.get("hf_groups")) {
    auto value = dyn_cast<IntegerAttr>(groups);
    if (!value || value.getInt() <= 0)
      return fail("'hf_groups' must be a positive integer");
    spec.hfGroups = value.getInt();
  }
  if (spec.hfRows.empty() && spec.hfGroups == 1)
    return success();
  size_t parts = llvm::count(spec.hfName, ',') + 1;
  bool stacked = StringRef(spec.name).starts_with(LOOM_STACKED_PREFIX);
  int64_t first =
      spec.shape.size() > (stacked ? 1u : 0u) ? spec.shape[stacked ? 1 : 0] : 0;
  int64_t perGroup = 0;
  for (int64_t rows : spec.hfRows)
    perGroup += rows;
  if (spec.hfRows.size() != parts || spec.hfTranspose || spec.rows ||
      perGroup * spec.hfGroups != first)
    return fail("'hf_rows' must give each of the " + Twine(parts) +
                " 'hf' parts its rows, which over 'hf_groups' groups fill "
                "the first dimension, without 'hf_transpose' or 'rows'");
  return success();
}

FailureOr<TensorSpec> mlir::loom::parseTensorSpecAttr(
    Attribute attr, llvm::function_ref<InFlightDiagnostic()> emitError) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return emitError() << "a tensor must be a dictionary, got " << attr;
  TensorSpec spec;
  auto name = dict.getAs<StringAttr>("name");
  auto init = dict.getAs<StringAttr>("init");
  std::optional<TensorInit> kind =
      init ? parseTensorInit(init.getValue()) : std::nullopt;
  if (!name || name.getValue().empty() || !kind)
    return emitError() << "a tensor needs a non-empty 'name' and an 'init' "
                          "of normal, zeros or ones, got "
                       << attr;
  spec.name = name.getValue().str();
  spec.init = *kind;
  auto shape = dict.getAs<DenseI64ArrayAttr>("shape");
  if (!shape || shape.empty() ||
      llvm::any_of(shape.asArrayRef(), [](int64_t d) { return d <= 0; }))
    return emitError() << "tensor '" << spec.name
                       << "': 'shape' must be an array of positive sizes";
  spec.shape.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
  auto std = dict.getAs<FloatAttr>("std");
  if ((spec.init == TensorInit::Normal) != bool(std) ||
      (std && !(std.getValueAsDouble() >= 0)))
    return emitError() << "tensor '" << spec.name
                       << "': a non-negative 'std' goes with init normal, "
                          "and only with it";
  if (std)
    spec.std = std.getValueAsDouble();
  if (auto rows = dict.get("rows")) {
    auto value = dyn_cast<IntegerAttr>(rows);
    if (!value || value.getInt() <= 0)
      return emitError() << "tensor '" << spec.name
                         << "': 'rows' must be a positive integer";
    spec.rows = value.getInt();
  }
  if (auto hf = dict.get("hf")) {
    auto value = dyn_cast<StringAttr>(hf);
    if (!value || value.getValue().empty())
      return emitError() << "tensor '" << spec.name
                         << "': 'hf' must be a non-empty string";
    spec.hfName = value.getValue().str();
  }
  spec.hfTranspose = dict.contains("hf_transpose");
  if (failed(parseHfParts(dict, spec, emitError)))
    return failure();
  for (NamedAttribute field : dict)
    if (!llvm::is_contained({"name", "shape", "init", "std", "rows", "hf",
                             "hf_transpose", "hf_rows", "hf_groups"},
                            field.getName().getValue()))
      return emitError() << "tensor '" << spec.name << "': unknown field '"
                         << field.getName().getValue() << "'";
  return spec;
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
    if (auto plan = dyn_cast<PlanAttr>(attr.getValue()))
      return verifyPlan(op, plan);
    auto text = dyn_cast<StringAttr>(attr.getValue());
    return expect(text && text.getValue() == getAutoPlanName(),
                  "a #loom.plan or \"auto\"");
  }
  if (name == getClusterAttrName())
    return expect(isa<ClusterAttr>(attr.getValue()), "a #loom.cluster");
  if (name == getDoesNotFitAttrName() || name == getLlmcCheckpointAttrName())
    return expect(isa<UnitAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a unit attribute on a module");
  if (name == getTensorsAttrName()) {
    auto tensors = dyn_cast<ArrayAttr>(attr.getValue());
    if (failed(expect(tensors && isa<ModuleOp>(op), "an array on a module")))
      return failure();
    llvm::StringSet<> names;
    for (Attribute tensor : tensors) {
      FailureOr<TensorSpec> spec =
          parseTensorSpecAttr(tensor, [&] { return op->emitError(); });
      if (failed(spec))
        return failure();
      if (!names.insert(spec->name).second)
        return op->emitError() << "tensor '" << spec->name
                               << "' is listed twice in '" << name << "'";
    }
    return success();
  }
  // A dictionary of exactly `keys` and maybe `optional`, each a
  // non-negative integer.
  auto isByteCounts = [&](ArrayRef<StringLiteral> keys,
                          StringRef optional = {}) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto isCount = [&](StringRef key) {
      auto v = dict.getAs<IntegerAttr>(key);
      return v && v.getInt() >= 0;
    };
    bool extra = !optional.empty() && dict && dict.get(optional);
    return dict && dict.size() == keys.size() + extra &&
           llvm::all_of(keys, isCount) && (!extra || isCount(optional));
  };
  if (name == getMemoryAttrName())
    return expect(isByteCounts(getMemoryKeys(), getMemoryHostKey()),
                  "a dictionary of byte counts (parameters, gradients, "
                  "optimizer, activations, and host under offload)");
  if (name == getHostAttrName())
    return expect(isa<UnitAttr>(attr.getValue()) &&
                      isa<FunctionOpInterface>(op),
                  "a unit attribute on a function");
  if (name == getArenaAttrName())
    return expect(isByteCounts(getArenaKeys(), getArenaScalarsKey()) &&
                      isa<FunctionOpInterface>(op),
                  "a dictionary of byte counts (bytes, live, communication, "
                  "kept, gradients, and scalars where bytes are reserved "
                  "for them) on a function");
  if (name == getCommunicationAttrName())
    return expect(isa<UnitAttr>(attr.getValue()) &&
                      isa<FunctionOpInterface>(op),
                  "a unit attribute on a function");
  if (name == getParallelForAttrName())
    return expect(isa<UnitAttr>(attr.getValue()) &&
                      isa<FunctionOpInterface>(op) &&
                      cast<FunctionOpInterface>(op).getNumArguments() >= 2,
                  "a unit attribute on a function whose first two arguments "
                  "are a range of iterations");
  if (name == getStageAttrName()) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    return expect(stage && stage.getInt() >= 0 && isa<FunctionOpInterface>(op),
                  "a non-negative integer on a function");
  }
  if (name == getRecomputeAttrName())
    return expect(
        isa<UnitAttr>(attr.getValue()) &&
            (op->getParentOfType<ScanOp>() || isa<CallOpInterface>(op)),
        "a unit attribute on an op inside a loom.scan body or on "
        "a call");
  return op->emitError() << "unknown loom attribute '" << name << "'";
}

/// The shaped type of argument `argIndex` of a function `op`, or null.
static ShapedType getShapedArgumentType(Operation *op, unsigned argIndex) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  return function && argIndex < function.getNumArguments()
             ? dyn_cast<ShapedType>(function.getArgumentTypes()[argIndex])
             : ShapedType();
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getHostAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "argument #" << argIndex << ": '" << name
                             << "' must be a unit attribute";
    return success();
  }
  if (name == getParamAttrName() || name == getInputAttrName() ||
      name == getStateAttrName() || name == getOutputAttrName() ||
      name == getParamCopyAttrName()) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitError() << "argument #" << argIndex << ": '" << name
                             << "' must be a non-empty string";
    // The passes and the runtime size every buffer from its type.
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!function || argIndex >= function.getNumArguments())
      return success();
    auto type = dyn_cast<ShapedType>(function.getArgumentTypes()[argIndex]);
    if (!type || !type.hasStaticShape())
      return op->emitError() << "argument #" << argIndex << " ('" << name
                             << " = \"" << str.getValue()
                             << "\"') must be a tensor or memref of static "
                                "shape";
    bool tokenIds =
        name == getInputAttrName() && (str.getValue() == LOOM_INPUT_TOKENS ||
                                       str.getValue() == LOOM_INPUT_TARGETS);
    if (tokenIds &&
        (type.getRank() != 2 || !isa<IntegerType>(type.getElementType())))
      return op->emitError()
             << "argument #" << argIndex << " ('" << name << " = \""
             << str.getValue()
             << "\"') must hold integer ids of shape [batch, sequence]";
    return success();
  }
  if (name == getShardAttrName()) {
    auto dim = dyn_cast<IntegerAttr>(attr.getValue());
    ShapedType type = getShapedArgumentType(op, argIndex);
    if (!dim || !type || !type.hasRank() || dim.getInt() < 0 ||
        dim.getInt() >= type.getRank())
      return op->emitError() << "argument #" << argIndex << ": '" << name
                             << "' must be an integer dimension of the "
                                "argument's shaped type";
    return success();
  }
  if (name == getTensorSplitAttrName()) {
    auto split = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    ShapedType type = getShapedArgumentType(op, argIndex);
    bool ok = split && (split.size() == 2 || split.size() == 3) && type &&
              type.hasRank() && split[0] >= 0 && split[0] < type.getRank() &&
              split[1] >= 1;
    // [dim, blocks, shared]: the part is one block's share and its last
    // `shared` elements; otherwise a share of each block.
    if (ok && split.size() == 3)
      ok = split[2] >= 1 && type.getDimSize(split[0]) > split[2];
    else if (ok)
      ok = type.getDimSize(split[0]) % split[1] == 0;
    if (!ok)
      return op->emitError()
             << "argument #" << argIndex << ": '" << name
             << "' must be [dim, blocks] (a dimension of the argument's "
                "shaped type and a positive number of blocks dividing it) or "
                "[dim, blocks, shared] (shared smaller than the dimension)";
    return success();
  }
  if (name == getLayersAttrName()) {
    auto runs = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    ShapedType type = getShapedArgumentType(op, argIndex);
    int64_t count = 0;
    bool ok = runs && !runs.empty() && runs.size() % 2 == 0;
    for (int64_t i = 0, e = runs.size(); ok && i < e; i += 2) {
      ok = runs[i] >= 0 && runs[i + 1] > 0;
      count += runs[i + 1];
    }
    if (!ok || !type || !type.hasRank() || type.getRank() == 0 ||
        type.getDimSize(0) != count)
      return op->emitError()
             << "argument #" << argIndex << ": '" << name
             << "' must be [first, count, ...]: runs of layers whose counts "
                "add up to the argument's leading dimension";
    return success();
  }
  return op->emitError() << "argument #" << argIndex
                         << ": unknown loom argument attribute '" << name
                         << "'";
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getOutputAttrName() || name == getGradAttrName()) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitError() << "result #" << resultIndex << ": '" << name
                             << "' must be a non-empty string";
    return success();
  }
  if (name == getUpdatesAttrName()) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0)
      return op->emitError() << "result #" << resultIndex << ": '" << name
                             << "' must be a non-negative argument index";
    return success();
  }
  return op->emitError() << "result #" << resultIndex
                         << ": unknown loom result attribute '" << name << "'";
}

FailureOr<PlanConfig> mlir::loom::getResolvedPlan(ModuleOp module) {
  Attribute attr = module->getAttr(LoomDialect::getPlanAttrName());
  if (!attr)
    return PlanConfig();
  if (auto plan = dyn_cast<PlanAttr>(attr))
    return plan.getConfig();
  return module.emitError() << "the plan is still \"auto\": run loom-plan "
                               "first";
}
