//===- Importer.cpp - Model descriptions to loom IR -----------------------===//
//
// Builds the forward pass and loss of a GPT-2-style model as loom ops, in the
// order of GPT-2's reference implementation (pre-norm blocks, tied head).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Importer.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

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
  /// Declares a parameter `name` of `shape` that starts as `spec` says (its
  /// name set here) and returns its index.
  unsigned param(StringRef name, ArrayRef<int64_t> shape, TensorSpec spec) {
    spec.name = name.str();
    spec.shape.assign(shape.begin(), shape.end());
    tensors.push_back(getTensorSpecAttr(builder.getContext(), spec));
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
  /// The parameters' TensorSpecs, in their order (loom.tensors).
  SmallVector<Attribute> tensors;
};

/// GPT-2's per-layer tensors in llm.c's checkpoint order, each stacked over
/// the layers as `h.*.<name>` (slice l is GPT-2's `h.<l>.<name>`).
enum LayerTensor {
  kLn1Weight,
  kLn1Bias,
  kQkvWeight,
  kQkvBias,
  kAttnProjWeight,
  kAttnProjBias,
  kLn2Weight,
  kLn2Bias,
  kFcWeight,
  kFcBias,
  kFcProjWeight,
  kFcProjBias,
  kNumLayerTensors
};

constexpr const char *kLayerTensorNames[kNumLayerTensors] = {
    "ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
    "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

/// The shape of one layer's tensor `t`, for width C and MLP width H.
SmallVector<int64_t, 2> layerTensorShape(LayerTensor t, int64_t C, int64_t H) {
  switch (t) {
  case kQkvWeight:
    return {3 * C, C};
  case kQkvBias:
    return {3 * C};
  case kAttnProjWeight:
    return {C, C};
  case kFcWeight:
    return {H, C};
  case kFcBias:
    return {H};
  case kFcProjWeight:
    return {C, H};
  case kLn1Weight:
  case kLn1Bias:
  case kAttnProjBias:
  case kLn2Weight:
  case kLn2Bias:
  case kFcProjBias:
    return {C};
  case kNumLayerTensors:
    break;
  }
  llvm_unreachable("not a layer tensor");
}

/// A tensor drawn from N(0, `std`), `rows` of its first dimension real (0:
/// all), named `hf` in Hugging Face's checkpoints.
TensorSpec normalTensor(double std, StringRef hf, int64_t rows = 0) {
  TensorSpec spec;
  spec.init = TensorInit::Normal;
  spec.std = std;
  spec.rows = rows;
  spec.hfName = hf.str();
  return spec;
}

/// A tensor of `init`'s constant, named `hf` in Hugging Face's checkpoints.
TensorSpec constantTensor(TensorInit init, StringRef hf) {
  TensorSpec spec;
  spec.init = init;
  spec.hfName = hf.str();
  return spec;
}

/// Loom's initialization of one layer's tensor `t`: weight matrices from
/// N(0, 0.02), the projections into the residual stream scaled by
/// 1 / sqrt(2 L) (GPT-2's), layer norms' weights ones. The biases are drawn
/// from N(0, 0.02) too, where GPT-2's recipe zeroes them: the losses every
/// test and figure was measured with start from these. Hugging Face keeps
/// the blocks' matrices as Conv1D's (in, out) transposes.
TensorSpec gpt2LayerTensorSpec(LayerTensor t, int64_t layers) {
  std::string hf = (Twine("transformer.h.*.") + kLayerTensorNames[t]).str();
  switch (t) {
  case kLn1Weight:
  case kLn2Weight:
    return constantTensor(TensorInit::Ones, hf);
  case kQkvWeight:
  case kFcWeight:
  case kAttnProjWeight:
  case kFcProjWeight: {
    bool residual = t == kAttnProjWeight || t == kFcProjWeight;
    TensorSpec spec =
        normalTensor(residual ? 0.02 / std::sqrt(2.0 * layers) : 0.02, hf);
    spec.hfTranspose = true;
    return spec;
  }
  default:
    return normalTensor(0.02, hf);
  }
}

func::FuncOp ForwardBuilder::build(ModuleOp module) {
  const ArchitectureConfig &arch = config.arch;
  // The global batch: loom-micro-batches gives @forward the plan's
  // micro-batch later.
  int64_t B = config.training.batchSize;
  int64_t T = config.training.sequenceLength;
  int64_t C = arch.width, H = arch.hidden, L = arch.layers;

  // Parameters in the order of llm.c checkpoints' tensors. The token table's
  // rows past the vocabulary (--pad-vocab) are zeros.
  int64_t vocabRows = arch.paddedVocab > arch.vocab ? arch.vocab : 0;
  unsigned wte = param("wte", {arch.paddedVocab, C},
                       normalTensor(0.02, "transformer.wte.weight", vocabRows));
  unsigned wpe = param("wpe", {arch.positions, C},
                       normalTensor(0.02, "transformer.wpe.weight"));
  SmallVector<unsigned> stacked;
  for (int t = 0; t < kNumLayerTensors; ++t) {
    auto tensor = static_cast<LayerTensor>(t);
    SmallVector<int64_t> stackedShape = {L};
    llvm::append_range(stackedShape, layerTensorShape(tensor, C, H));
    stacked.push_back(
        param((Twine(LOOM_STACKED_PREFIX) + kLayerTensorNames[t]).str(),
              stackedShape, gpt2LayerTensorSpec(tensor, L)));
  }
  unsigned lnfw =
      param("ln_f.weight", {C},
            constantTensor(TensorInit::Ones, "transformer.ln_f.weight"));
  unsigned lnfb =
      param("ln_f.bias", {C},
            constantTensor(TensorInit::Zeros, "transformer.ln_f.bias"));
  unsigned head = arch.tiedEmbeddings
                      ? wte
                      : param("lm_head.weight", {arch.paddedVocab, C},
                              normalTensor(0.02, "lm_head.weight", vocabRows));
  unsigned tokens = input(LOOM_INPUT_TOKENS, {B, T});
  unsigned targets = input(LOOM_INPUT_TARGETS, {B, T});

  builder.setInsertionPointToEnd(module.getBody());
  auto scalarLoss = RankedTensorType::get({}, builder.getF32Type());
  auto func = func::FuncOp::create(
      builder, fileLoc, LoomDialect::getForwardFunctionName(),
      builder.getFunctionType(argTypes, {scalarLoss}));
  func.setAllArgAttrs(argAttrs);
  module->setAttr(LoomDialect::getTensorsAttrName(),
                  builder.getArrayAttr(tensors));
  // llm.c's checkpoints hold GPT-2 with a tied head and a 4C MLP: their
  // header has no MLP width.
  if (arch.tiedEmbeddings && arch.hidden == 4 * arch.width)
    module->setAttr(LoomDialect::getLlmcCheckpointAttrName(),
                    builder.getUnitAttr());
  func.setResultAttr(0, LoomDialect::getOutputAttrName(),
                     builder.getStringAttr(LOOM_OUTPUT_LOSS));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  auto arg = [&](unsigned i) -> Value { return body->getArgument(i); };

  FloatAttr eps = builder.getF64FloatAttr(arch.layerNormEpsilon);
  auto column = TensorSplitAttr::get(builder.getContext(), TensorSplit::column);
  auto row = TensorSplitAttr::get(builder.getContext(), TensorSplit::row);
  auto xType = activation({B, T, C});
  Value x = EmbeddingOp::create(builder, loc("embedding"), xType, arg(tokens),
                                arg(wte), arg(wpe), /*vocab_start=*/Value());

  // One layer body, applied over the stacked parameters.
  SmallVector<Value> stackedArgs;
  for (unsigned index : stacked)
    stackedArgs.push_back(arg(index));
  auto layers = ScanOp::create(builder, loc("h"), TypeRange{xType},
                               ValueRange{x}, stackedArgs, L,
                               /*reverse=*/false);
  Block &layer = layers.addBodyBlock();
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(&layer);
    Value in = layer.getArgument(0);
    auto w = [&](LayerTensor t) -> Value { return layer.getArgument(1 + t); };
    Value h = LayerNormOp::create(builder, loc("h.*.ln_1"), in, w(kLn1Weight),
                                  w(kLn1Bias), eps)
                  .getResult();
    Value qkv = LinearOp::create(builder, loc("h.*.attn.c_attn"),
                                 activation({B, T, 3 * C}), h, w(kQkvWeight),
                                 w(kQkvBias), column);
    Value att =
        CausalAttentionOp::create(builder, loc("h.*.attn"), qkv, arch.heads)
            .getResult();
    Value proj = LinearOp::create(builder, loc("h.*.attn.c_proj"), xType, att,
                                  w(kAttnProjWeight), w(kAttnProjBias), row);
    Value x1 = AddOp::create(builder, loc("h.*.attn.residual"), in, proj);
    Value h2 = LayerNormOp::create(builder, loc("h.*.ln_2"), x1, w(kLn2Weight),
                                   w(kLn2Bias), eps)
                   .getResult();
    Value fc =
        LinearOp::create(builder, loc("h.*.mlp.c_fc"), activation({B, T, H}),
                         h2, w(kFcWeight), w(kFcBias), column);
    Value gelu = GeluOp::create(builder, loc("h.*.mlp.gelu"), fc);
    Value mlp = LinearOp::create(builder, loc("h.*.mlp.c_proj"), xType, gelu,
                                 w(kFcProjWeight), w(kFcProjBias), row);
    Value out = AddOp::create(builder, loc("h.*.mlp.residual"), x1, mlp);
    YieldOp::create(builder, loc("h"), out);
  }
  x = layers.getResult(0);

  Value xf =
      LayerNormOp::create(builder, loc("ln_f"), x, arg(lnfw), arg(lnfb), eps)
          .getResult();
  Value logits = LinearOp::create(builder, loc("lm_head"),
                                  activation({B, T, arch.paddedVocab}), xf,
                                  arg(head), Value(), column);
  Value loss = CrossEntropyOp::create(
      builder, loc("loss"), scalarLoss, logits, arg(targets),
      /*vocab_start=*/Value(), arch.vocab, /*grid=*/nullptr,
      /*grid_axes=*/nullptr);
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
