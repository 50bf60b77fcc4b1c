//===- ExportEntries.cpp - The loom-export-entries pass -------------------===//
//
// The runtime has no MLIR inside, so it cannot build memref descriptors for a
// function whose arity depends on the model. Each entry point therefore gets
// a wrapper with one fixed C signature, `void(void **)`, and the artifact
// carries a manifest that says what each pointer must point to.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Export/Passes.h"
#include "loom/Version.h"
#include "loom/abi.h"
#include "loom/manifest.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMEXPORTENTRIES
#include "loom/Export/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;
namespace M = ::loom::manifest;

/// Writes ` <key>=<value>`, a field of a manifest line.
template <typename T>
static void field(raw_ostream &os, StringRef key, const T &value) {
  os << " " << key << "=" << value;
}

namespace {
constexpr llvm::StringLiteral kManifestSymbol = LOOM_MANIFEST_SYMBOL;
constexpr llvm::StringLiteral kEntryPrefix = LOOM_ENTRY_PREFIX;

/// The kind and name of an entry point's argument, from its attributes.
std::optional<std::pair<StringRef, StringRef>> describeArg(func::FuncOp func,
                                                           unsigned i) {
  static const std::pair<StringRef, StringRef> kinds[] = {
      {LoomDialect::getParamAttrName(), LOOM_ARG_PARAM},
      {LoomDialect::getStateAttrName(), LOOM_ARG_STATE},
      {LoomDialect::getParamCopyAttrName(), LOOM_ARG_PARAM_COPY},
      {LoomDialect::getInputAttrName(), LOOM_ARG_INPUT},
      {LoomDialect::getOutputAttrName(), LOOM_ARG_OUTPUT}};
  for (auto [attrName, kind] : kinds)
    if (auto name = func.getArgAttrOfType<StringAttr>(i, attrName))
      return std::make_pair(kind, name.getValue());
  return std::nullopt;
}

void printShape(raw_ostream &os, MemRefType type) {
  if (type.getRank() == 0) {
    os << "-";
    return;
  }
  llvm::interleave(type.getShape(), os, "x");
}

/// Removes the results of `func` that are its own arguments, as
/// loom-destination-outputs arranges for every result: the runtime passes
/// every buffer in, so nothing needs to come back.
LogicalResult dropArgumentResults(func::FuncOp func) {
  if (func.getNumResults() == 0)
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("expected a single block");
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value v : ret.getOperands()) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return func.emitOpError(
          "returns a buffer that is not one of its arguments; the runtime "
          "passes every buffer in (run loom-destination-outputs before "
          "bufferizing)");
  }
  ret->setOperands({});
  llvm::BitVector all(func.getNumResults(), true);
  return func.eraseResults(all);
}

struct ExportEntriesPass
    : public mlir::loom::impl::LoomExportEntriesBase<ExportEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.lookupSymbol(kManifestSymbol)) {
      module.emitError() << "the module already has a '" << kManifestSymbol
                         << "' symbol";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isPrivate() && !func.isExternal() &&
          func.getNumArguments() > 0 && describeArg(func, 0))
        entries.push_back(func);
    if (entries.empty()) {
      module.emitError("no entry points to export: expected public functions "
                       "whose arguments carry Loom attributes");
      return signalPassFailure();
    }

    std::string manifest;
    llvm::raw_string_ostream os(manifest);
    if (failed(printHeader(module, entries, os)))
      return signalPassFailure();
    for (func::FuncOp func : entries)
      if (failed(exportEntry(func, os)))
        return signalPassFailure();
    os << M::kEndLine << "\n";

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    manifest.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), manifest.size());
    LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                           LLVM::Linkage::External, kManifestSymbol,
                           b.getStringAttr(manifest));
  }

  LogicalResult printHeader(ModuleOp module, ArrayRef<func::FuncOp> entries,
                            raw_ostream &os) {
    auto model =
        module->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName());
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    if (!model || !training)
      return module.emitError("expected the module's '")
             << LoomDialect::getModelAttrName() << "' and '"
             << LoomDialect::getTrainingAttrName()
             << "' attributes for the manifest";
    os << M::kFormatLine << "\n";
    os << M::kVersionLine << " " << LOOM_VERSION << "\n";
    // Zeros until the artifact is linked (writeArtifact fills them in).
    os << LOOM_CHECKSUM_KEY << std::string(LOOM_CHECKSUM_DIGITS, '0') << "\n";
    os << M::kModelLine << " " << model.getName();
    field(os, M::model::kLayers, model.getLayers());
    field(os, M::model::kWidth, model.getWidth());
    field(os, M::model::kHeads, model.getHeads());
    field(os, M::model::kHidden, model.getHidden());
    field(os, M::model::kVocab, model.getVocab());
    field(os, M::model::kPaddedVocab, model.getPaddedVocab());
    field(os, M::model::kPositions, model.getPositions());
    field(os, M::model::kTied, model.getTied() ? 1 : 0);
    os << "\n";
    auto f = [](const llvm::APFloat &v) {
      return formatF64(v.convertToDouble());
    };
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return failure();
    os << M::kTrainingLine;
    field(os, M::training::kBatch, training.getBatch());
    field(os, M::training::kSequence, training.getSequence());
    field(os, M::training::kOptimizer,
          stringifyOptimizerKind(training.getOptimizer()));
    field(os, M::training::kLr, f(training.getLr()));
    field(os, M::training::kBeta1, f(training.getBeta1()));
    field(os, M::training::kBeta2, f(training.getBeta2()));
    field(os, M::training::kEps, f(training.getEps()));
    field(os, M::training::kWeightDecay, f(training.getWeightDecay()));
    field(os, M::training::kMomentum, f(training.getMomentum()));
    field(os, M::training::kGradClip, f(training.getGradClip()));
    os << "\n";
    if (module->hasAttr(LoomDialect::getPlanAttrName())) {
      os << M::kPlanLine;
      field(os, M::plan::kDp, plan->dp);
      field(os, M::plan::kTp, plan->tp);
      field(os, M::plan::kPp, plan->pp);
      field(os, M::plan::kZero, plan->zero);
      field(os, M::plan::kMicroBatches, plan->microBatches);
      field(os, M::plan::kRecompute, stringifyRecompute(plan->recompute));
      if (plan->pp > 1) {
        field(os, M::plan::kSchedule, getScheduleName(plan->schedule));
        field(os, M::plan::kVirtualStages, plan->virtualStages);
      }
      if (plan->offload != Offload::none)
        field(os, M::plan::kOffload, stringifyOffload(plan->offload));
      os << "\n";
    }
    printMemory(module, os);
    if (target != "cpu" && target != "cuda")
      return module.emitError() << "loom-export-entries: unknown target '"
                                << target << "' (cpu or cuda)";
    if (target == "cuda") {
      os << M::kTargetLine << " cuda";
      field(os, M::target::kArch, cudaArch);
      os << "\n";
    }
    FailureOr<int64_t> layers = stackedLayers(entries);
    if (failed(layers))
      return failure();
    os << M::kStackedLine << " " << StringRef(LOOM_STACKED_PREFIX).drop_back()
       << " " << *layers << "\n";
    return printTensors(module, entries, os);
  }

  /// The module's `loom.tensors` as `tensor` lines, then `checkpoint llmc`
  /// where the module says its tensors are llm.c's. Every parameter an entry
  /// point takes must be one of them: the runtime initializes and names
  /// each from its line.
  LogicalResult printTensors(ModuleOp module, ArrayRef<func::FuncOp> entries,
                             raw_ostream &os) {
    auto tensors =
        module->getAttrOfType<ArrayAttr>(LoomDialect::getTensorsAttrName());
    if (!tensors)
      return module.emitError("expected the module's '")
             << LoomDialect::getTensorsAttrName()
             << "' (each parameter's initialization and checkpoint name) for "
                "the manifest";
    llvm::StringSet<> listed;
    for (Attribute tensor : tensors) {
      FailureOr<TensorSpec> spec =
          parseTensorSpecAttr(tensor, [&] { return module.emitError(); });
      if (failed(spec))
        return failure();
      listed.insert(spec->name);
      os << M::kTensorLine << " " << spec->name << " " << M::tensor::kShape
         << "=";
      llvm::interleave(spec->shape, os, "x");
      field(os, M::tensor::kInit, stringifyTensorInit(spec->init));
      if (spec->init == TensorInit::Normal)
        field(os, M::tensor::kStd, formatF64(spec->std));
      if (spec->rows)
        field(os, M::tensor::kRows, spec->rows);
      if (!spec->hfName.empty())
        field(os, M::tensor::kHf, spec->hfName);
      if (spec->hfTranspose)
        field(os, M::tensor::kHfTranspose, 1);
      if (!spec->hfRows.empty()) {
        std::string rows;
        llvm::raw_string_ostream rowsOs(rows);
        llvm::interleave(spec->hfRows, rowsOs, ",");
        field(os, M::tensor::kHfRows, rows);
      }
      if (spec->hfGroups != 1)
        field(os, M::tensor::kHfGroups, spec->hfGroups);
      os << "\n";
    }
    for (func::FuncOp func : entries)
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (auto name = func.getArgAttrOfType<StringAttr>(
                i, LoomDialect::getParamAttrName());
            name && !listed.contains(name.getValue()))
          return func.emitOpError()
                 << "takes parameter '" << name.getValue()
                 << "', which the module's '"
                 << LoomDialect::getTensorsAttrName() << "' does not list";
    if (module->hasAttr(LoomDialect::getLlmcCheckpointAttrName()))
      os << M::kCheckpointLine << " " << M::kLlmcCheckpoint << "\n";
    return success();
  }

  /// A dictionary of byte counts on `op`, if it has one, as the manifest
  /// line `<line> <field>=<bytes>...`: the count of `keys[i]` under
  /// `fields[i]`.
  static void printCounts(Operation *op, StringRef attrName, StringRef line,
                          ArrayRef<StringLiteral> keys,
                          ArrayRef<const char *> fields, raw_ostream &os) {
    auto counts = op->getAttrOfType<DictionaryAttr>(attrName);
    if (!counts)
      return;
    os << line;
    for (auto [key, name] : llvm::zip_equal(keys, fields))
      field(os, name, counts.getAs<IntegerAttr>(key).getInt());
    // Offload: what the host keeps, and the arena of the step's host part.
    if (auto host =
            counts.getAs<IntegerAttr>(LoomDialect::getMemoryHostKey())) {
      int64_t bytes = host.getInt();
      auto module = isa<ModuleOp>(op) ? cast<ModuleOp>(op)
                                      : op->getParentOfType<ModuleOp>();
      // A pipeline rank's figures count the host functions its step calls;
      // the module's, those of the one step. They run one after the other:
      // the largest arena is the host's.
      llvm::SmallDenseSet<StringRef> called;
      op->walk([&](func::CallOp call) { called.insert(call.getCallee()); });
      int64_t hostArena = 0;
      for (auto func : module.getOps<func::FuncOp>())
        if (func->hasAttr(LoomDialect::getHostAttrName()) &&
            (isa<ModuleOp>(op) || called.contains(func.getName())))
          if (auto arena = func->getAttrOfType<DictionaryAttr>(
                  LoomDialect::getArenaAttrName()))
            hostArena = std::max<int64_t>(
                hostArena,
                arena.getAs<IntegerAttr>(LoomDialect::getArenaBytesKey())
                    .getInt());
      field(os, M::memory::kHost, bytes + hostArena);
    }
    os << "\n";
  }

  /// `loom.memory`'s figures as a manifest line: the module's, or an entry
  /// point's own (a pipeline rank's), which follows its entry line.
  static void printMemory(Operation *op, raw_ostream &os) {
    printCounts(op, LoomDialect::getMemoryAttrName(), M::kMemoryLine,
                LoomDialect::getMemoryKeys(),
                {M::memory::kParameters, M::memory::kGradients,
                 M::memory::kOptimizer, M::memory::kActivations},
                os);
  }

  /// The layers of the whole model the parameters stacked over them hold,
  /// which the runtime checks against the model's layers: their leading
  /// dimension, or, where a pipeline stage holds some of the layers
  /// (`loom.layers`), the layers those runs are of.
  FailureOr<int64_t> stackedLayers(ArrayRef<func::FuncOp> entries) {
    std::optional<int64_t> layers;
    for (func::FuncOp func : entries) {
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        auto name = func.getArgAttrOfType<StringAttr>(
            i, LoomDialect::getParamAttrName());
        auto type = dyn_cast<MemRefType>(func.getArgument(i).getType());
        // An offloaded step's master weights may be slices of the
        // flattened tensors (ZeRO-1/2); the other entries show the stack.
        if (!name || !name.getValue().starts_with(LOOM_STACKED_PREFIX) ||
            !type || type.getRank() == 0 ||
            func.getArgAttr(i, LoomDialect::getHostAttrName()))
          continue;
        // The verifier checked that the runs add up to the leading
        // dimension.
        int64_t whole = type.getDimSize(0);
        if (func.getArgAttr(i, LoomDialect::getLayersAttrName()))
          whole =
              func->getParentOfType<ModuleOp>()
                  ->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName())
                  .getLayers();
        if (layers && *layers != whole)
          return func.emitOpError()
                 << "stacks parameter '" << name.getValue() << "' over "
                 << whole << " layers, others over " << *layers;
        layers = whole;
      }
    }
    if (!layers)
      return entries.front()->getParentOp()->emitError(
          "no parameter is stacked over the layers ('" LOOM_STACKED_PREFIX
          "<name>')");
    return *layers;
  }

  LogicalResult exportEntry(func::FuncOp func, raw_ostream &os) {
    if (failed(dropArgumentResults(func)))
      return failure();
    std::string symbol = (kEntryPrefix + func.getName()).str();
    os << M::kEntryLine << " " << func.getName() << " " << symbol << " "
       << func.getNumArguments() << "\n";
    printMemory(func, os);
    printCounts(func, LoomDialect::getArenaAttrName(), M::kArenaLine,
                LoomDialect::getArenaKeys(),
                {M::arena::kBytes, M::arena::kLive, M::arena::kCommunication,
                 M::arena::kKept, M::arena::kGradients},
                os);
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto type = dyn_cast<MemRefType>(func.getArgument(i).getType());
      auto desc = describeArg(func, i);
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
          !desc)
        return func.emitOpError() << "argument #" << i
                                  << " is not a named, statically shaped "
                                     "memref with the identity layout";
      os << M::kArgLine << " " << desc->first << " " << desc->second << " "
         << type.getElementType() << " ";
      printShape(os, type);
      if (auto shard = func.getArgAttrOfType<IntegerAttr>(
              i, LoomDialect::getShardAttrName()))
        field(os, M::arg::kShard, shard.getInt());
      if (auto split = func.getArgAttrOfType<DenseI64ArrayAttr>(
              i, LoomDialect::getTensorSplitAttrName())) {
        field(os, M::arg::kTpDim, split[0]);
        field(os, M::arg::kTpBlocks, split[1]);
        if (split.size() > 2)
          field(os, M::arg::kTpShared, split[2]);
      }
      // A pipeline stage's layers: runs of the whole's, first:count each.
      if (auto runs = func.getArgAttrOfType<DenseI64ArrayAttr>(
              i, LoomDialect::getLayersAttrName())) {
        os << " " << M::arg::kLayers << "=";
        for (int64_t r = 0; r + 1 < runs.size(); r += 2)
          os << (r ? "," : "") << runs[r] << ":" << runs[r + 1];
      }
      os << "\n";
    }

    // void loom_entry_<name>(void **buffers)
    MLIRContext *ctx = func.getContext();
    OpBuilder b(func);
    b.setInsertionPointAfter(func);
    Location loc = func.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    auto wrapper =
        func::FuncOp::create(b, loc, symbol, b.getFunctionType({ptr}, {}));
    Block *block = wrapper.addEntryBlock();
    b.setInsertionPointToStart(block);
    Type i64 = b.getI64Type();
    auto i64c = [&](int64_t v) -> Value {
      return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
    };
    SmallVector<Value> args;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto type = cast<MemRefType>(func.getArgument(i).getType());
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, block->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      Value data = LLVM::LoadOp::create(b, loc, ptr, slot);
      // The descriptor memref-to-LLVM lowering uses: allocated and aligned
      // pointers, offset, sizes, strides.
      SmallVector<Type> fields = {ptr, ptr, i64};
      int64_t rank = type.getRank();
      if (rank > 0) {
        auto array = LLVM::LLVMArrayType::get(i64, rank);
        fields.append({array, array});
      }
      auto descType = LLVM::LLVMStructType::getLiteral(ctx, fields);
      Value desc = LLVM::PoisonOp::create(b, loc, descType);
      desc =
          LLVM::InsertValueOp::create(b, loc, desc, data, ArrayRef<int64_t>{0});
      desc =
          LLVM::InsertValueOp::create(b, loc, desc, data, ArrayRef<int64_t>{1});
      desc = LLVM::InsertValueOp::create(b, loc, desc, i64c(0),
                                         ArrayRef<int64_t>{2});
      SmallVector<int64_t> strides;
      int64_t offset;
      (void)type.getStridesAndOffset(strides, offset);
      for (int64_t d = 0; d < rank; ++d) {
        desc = LLVM::InsertValueOp::create(
            b, loc, desc, i64c(type.getDimSize(d)), ArrayRef<int64_t>{3, d});
        desc = LLVM::InsertValueOp::create(b, loc, desc, i64c(strides[d]),
                                           ArrayRef<int64_t>{4, d});
      }
      args.push_back(
          UnrealizedConversionCastOp::create(b, loc, type, desc).getResult(0));
    }
    func::CallOp::create(b, loc, func, args);
    func::ReturnOp::create(b, loc);
    func.setPrivate();
    return success();
  }
};
} // namespace
