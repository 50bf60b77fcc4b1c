//===- Importer.cpp - Model descriptions to loom IR -----------------------===//
//
// Builds the forward pass and loss of a GPT-2-style model as loom ops, in the
// order of GPT-2's reference implementation (pre-norm blocks, tied head).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Importer.h"

#include "Loom/LoomDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::loom;

namespace {

/// Collects the function's arguments in order, then builds the body.
class ForwardBuilder {
public:
  ForwardBuilder(MLIRContext &context, const ModelConfig &config,
                 Location fileLoc)
      : config(config), fileLoc(fileLoc), builder(&context) {}

  func::FuncOp build(ModuleOp module);

private:
  /// Declares a parameter `name` of `shape` and returns its index.
  unsigned param(StringRef name, ArrayRef<int64_t> shape) {
    argTypes.push_back(RankedTensorType::get(shape, builder.getF32Type()));
    argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        LoomDialect::getParamAttrName(), builder.getStringAttr(name))));
    return argTypes.size() - 1;
  }
  unsigned input(StringRef name, ArrayRef<int64_t> shape) {
    argTypes.push_back(
        RankedTensorType::get(shape, builder.getIntegerType(32)));
    argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        LoomDialect::getInputAttrName(), builder.getStringAttr(name))));
    return argTypes.size() - 1;
  }
  /// Location of the op computing `what` ("h.3.attn.c_attn"), so that
  /// diagnostics and later passes can say which part of the model they mean.
  Location loc(const Twine &what) {
    return NameLoc::get(builder.getStringAttr(what), fileLoc);
  }
  RankedTensorType activation(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }

  const ModelConfig &config;
  Location fileLoc;
  OpBuilder builder;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
};

struct LayerParams {
  unsigned ln1w, ln1b, qkvw, qkvb, attprojw, attprojb;
  unsigned ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

func::FuncOp ForwardBuilder::build(ModuleOp module) {
  const ArchitectureConfig &arch = config.arch;
  // @forward sees one micro-batch; the training step accumulates the plan's
  // micro-batches over the whole batch.
  int64_t B =
      config.training.batchSize / (config.plan ? config.plan->microBatches : 1);
  int64_t T = config.training.sequenceLength;
  int64_t C = arch.width, H = arch.hidden, L = arch.layers;

  // Parameters in the order of llm.c checkpoints' tensors within a layer.
  unsigned wte = param("wte", {arch.paddedVocab, C});
  unsigned wpe = param("wpe", {arch.positions, C});
  SmallVector<LayerParams> layers;
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    LayerParams lp;
    lp.ln1w = param(p + "ln_1.weight", {C});
    lp.ln1b = param(p + "ln_1.bias", {C});
    lp.qkvw = param(p + "attn.c_attn.weight", {3 * C, C});
    lp.qkvb = param(p + "attn.c_attn.bias", {3 * C});
    lp.attprojw = param(p + "attn.c_proj.weight", {C, C});
    lp.attprojb = param(p + "attn.c_proj.bias", {C});
    lp.ln2w = param(p + "ln_2.weight", {C});
    lp.ln2b = param(p + "ln_2.bias", {C});
    lp.fcw = param(p + "mlp.c_fc.weight", {H, C});
    lp.fcb = param(p + "mlp.c_fc.bias", {H});
    lp.fcprojw = param(p + "mlp.c_proj.weight", {C, H});
    lp.fcprojb = param(p + "mlp.c_proj.bias", {C});
    layers.push_back(lp);
  }
  unsigned lnfw = param("ln_f.weight", {C});
  unsigned lnfb = param("ln_f.bias", {C});
  unsigned head = arch.tiedEmbeddings
                      ? wte
                      : param("lm_head.weight", {arch.paddedVocab, C});
  unsigned tokens = input("tokens", {B, T});
  unsigned targets = input("targets", {B, T});

  builder.setInsertionPointToEnd(module.getBody());
  auto scalarLoss = RankedTensorType::get({}, builder.getF32Type());
  auto func = func::FuncOp::create(
      builder, fileLoc, LoomDialect::getForwardFunctionName(),
      builder.getFunctionType(argTypes, {scalarLoss}));
  func.setAllArgAttrs(argAttrs);
  func.setResultAttr(0, LoomDialect::getOutputAttrName(),
                     builder.getStringAttr("loss"));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  auto arg = [&](unsigned i) -> Value { return body->getArgument(i); };

  FloatAttr eps = builder.getF64FloatAttr(arch.layerNormEpsilon);
  auto xType = activation({B, T, C});
  Value x = EmbeddingOp::create(builder, loc("embedding"), xType, arg(tokens),
                                arg(wte), arg(wpe));
  auto column = TensorSplitAttr::get(builder.getContext(), TensorSplit::column);
  auto row = TensorSplitAttr::get(builder.getContext(), TensorSplit::row);
  for (auto [l, lp] : llvm::enumerate(layers)) {
    std::string p = "h." + std::to_string(l) + ".";
    Operation *layerStart = &body->back();
    Value h = LayerNormOp::create(builder, loc(p + "ln_1"), xType, x,
                                  arg(lp.ln1w), arg(lp.ln1b), eps);
    Value qkv = LinearOp::create(builder, loc(p + "attn.c_attn"),
                                 activation({B, T, 3 * C}), h, arg(lp.qkvw),
                                 arg(lp.qkvb), column);
    Value att = CausalAttentionOp::create(builder, loc(p + "attn"), xType, qkv,
                                          arch.heads);
    Value proj = LinearOp::create(builder, loc(p + "attn.c_proj"), xType, att,
                                  arg(lp.attprojw), arg(lp.attprojb), row);
    x = AddOp::create(builder, loc(p + "attn.residual"), x, proj);
    Value h2 = LayerNormOp::create(builder, loc(p + "ln_2"), xType, x,
                                   arg(lp.ln2w), arg(lp.ln2b), eps);
    Value fc =
        LinearOp::create(builder, loc(p + "mlp.c_fc"), activation({B, T, H}),
                         h2, arg(lp.fcw), arg(lp.fcb), column);
    Value gelu = GeluOp::create(builder, loc(p + "mlp.gelu"), fc);
    Value mlp = LinearOp::create(builder, loc(p + "mlp.c_proj"), xType, gelu,
                                 arg(lp.fcprojw), arg(lp.fcprojb), row);
    x = AddOp::create(builder, loc(p + "mlp.residual"), x, mlp);
    auto layer = builder.getI64IntegerAttr(l);
    for (Operation &op :
         llvm::make_range(std::next(layerStart->getIterator()), body->end()))
      op.setAttr(LoomDialect::getLayerAttrName(), layer);
  }
  Value xf = LayerNormOp::create(builder, loc("ln_f"), xType, x, arg(lnfw),
                                 arg(lnfb), eps);
  Value logits = LinearOp::create(builder, loc("lm_head"),
                                  activation({B, T, arch.paddedVocab}), xf,
                                  arg(head), Value(), column);
  Value loss = CrossEntropyOp::create(builder, loc("loss"), scalarLoss, logits,
                                      arg(targets), arch.vocab);
  func::ReturnOp::create(builder, fileLoc, loss);
  return func;
}

} // namespace

OwningOpRef<ModuleOp> mlir::loom::importModel(MLIRContext &context,
                                              const ModelConfig &config,
                                              StringRef file) {
  context.loadDialect<LoomDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(&context, file, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc, config.name);

  Builder b(&context);
  SmallVector<NamedAttribute> attrs;
  attrs.push_back(
      b.getNamedAttr(LoomDialect::getModelAttrName(),
                     ModelAttr::get(&context, config.name, config.arch)));
  attrs.push_back(b.getNamedAttr(LoomDialect::getTrainingAttrName(),
                                 TrainingAttr::get(&context, config.training)));
  if (config.planAuto)
    attrs.push_back(
        b.getNamedAttr(LoomDialect::getPlanAttrName(),
                       b.getStringAttr(LoomDialect::getAutoPlanName())));
  else if (config.plan)
    attrs.push_back(b.getNamedAttr(LoomDialect::getPlanAttrName(),
                                   PlanAttr::get(&context, *config.plan)));
  if (config.cluster)
    attrs.push_back(
        b.getNamedAttr(LoomDialect::getClusterAttrName(),
                       ClusterAttr::get(&context, *config.cluster)));
  (*module)->setAttrs(attrs);

  ForwardBuilder(context, config, fileLoc).build(*module);
  return module;
}
