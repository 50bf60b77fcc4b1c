//===- Importer.cpp - Model descriptions to loom IR -----------------------===//
//
// Builds the forward pass and loss of a pre-norm decoder as loom ops: GPT-2's
// block in the order of its reference implementation, or Llama's (RMSNorm,
// rotary positions, SwiGLU) in the order of Hugging Face's. Each family
// names its parameters as its Hugging Face checkpoints do.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Importer.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

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
  /// The parameters of one layer, in checkpoint order: name, shape and
  /// how each starts. They are stacked over the layers as `h.*.<name>`.
  struct LayerParam {
    std::string name;
    SmallVector<int64_t, 2> shape;
    TensorSpec spec;
  };
  SmallVector<LayerParam> gpt2Layer() const;
  SmallVector<LayerParam> llamaLayer() const;
  /// Builds one layer's body from `in` and its parameters `w` (by name).
  Value buildGpt2Layer(Value in, function_ref<Value(StringRef)> w);
  Value buildLlamaLayer(Value in, function_ref<Value(StringRef)> w);
  /// A layer's input type and its batch and sequence.
  std::tuple<RankedTensorType, int64_t, int64_t> layerShape(Value in) {
    auto type = cast<RankedTensorType>(in.getType());
    return {type, type.getDimSize(0), type.getDimSize(1)};
  }
  /// Megatron's column and row splits of a linear.
  std::pair<TensorSplitAttr, TensorSplitAttr> splits() {
    return {TensorSplitAttr::get(builder.getContext(), TensorSplit::column),
            TensorSplitAttr::get(builder.getContext(), TensorSplit::row)};
  }
  /// A normalization of the family's kind, named `what`.
  Value norm(StringRef what, Value x, Value weight, Value bias);
  bool isLlama() const { return config.arch.norm == NormKind::rmsnorm; }

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

/// GPT-2's layer in llm.c's checkpoint order. Weight matrices start from
/// N(0, 0.02), the projections into the residual stream scaled by
/// 1 / sqrt(2 L) (GPT-2's), layer norms' weights ones. The biases are drawn
/// from N(0, 0.02) too, where GPT-2's recipe zeroes them: the losses every
/// test and figure was measured with start from these. Hugging Face keeps
/// the blocks' matrices as Conv1D's (in, out) transposes.
SmallVector<ForwardBuilder::LayerParam> ForwardBuilder::gpt2Layer() const {
  const ArchitectureConfig &arch = config.arch;
  int64_t C = arch.width, H = arch.hidden;
  double residual = 0.02 / std::sqrt(2.0 * arch.layers);
  auto hf = [](StringRef name) { return ("transformer.h.*." + name).str(); };
  auto ones = [&](StringRef name) {
    return LayerParam{
        name.str(), {C}, constantTensor(TensorInit::Ones, hf(name))};
  };
  auto normal = [&](StringRef name, SmallVector<int64_t, 2> shape,
                    double std = 0.02) {
    TensorSpec spec = normalTensor(std, hf(name));
    spec.hfTranspose = shape.size() == 2;
    return LayerParam{name.str(), shape, spec};
  };
  return {ones("ln_1.weight"),
          normal("ln_1.bias", {C}),
          normal("attn.c_attn.weight", {3 * C, C}),
          normal("attn.c_attn.bias", {3 * C}),
          normal("attn.c_proj.weight", {C, C}, residual),
          normal("attn.c_proj.bias", {C}),
          ones("ln_2.weight"),
          normal("ln_2.bias", {C}),
          normal("mlp.c_fc.weight", {H, C}),
          normal("mlp.c_fc.bias", {H}),
          normal("mlp.c_proj.weight", {C, H}, residual),
          normal("mlp.c_proj.bias", {C})};
}

/// Llama's layer in Hugging Face's order, initialized as Hugging Face
/// initializes it: matrices from N(0, 0.02), norms' weights ones, biases
/// zeros. The query, key and value projections are one matrix, which
/// Hugging Face keeps as three (`hf` lists them): each a third of the rows,
/// or under grouped-query attention, for each key/value group, its query
/// heads' rows, then its key's, then its value's (loom.group_qkv). Each
/// linear's bias, where the model has one, follows its weight.
SmallVector<ForwardBuilder::LayerParam> ForwardBuilder::llamaLayer() const {
  const ArchitectureConfig &arch = config.arch;
  int64_t C = arch.width, H = arch.hidden;
  int64_t G = arch.getKvHeads(), D = C / arch.heads, R = arch.heads / G;
  int64_t qkvRows = G * (R + 2) * D;
  auto grouped = [&](TensorSpec spec) {
    if (arch.isGrouped()) {
      spec.hfRows = {R * D, D, D};
      spec.hfGroups = G;
    }
    return spec;
  };
  auto hf = [](StringRef name) { return ("model.layers.*." + name).str(); };
  auto qkv = [&](StringRef kind) {
    std::string names;
    for (StringRef part : {"q", "k", "v"})
      names += (names.empty() ? "" : ",") +
               hf(("self_attn." + part + "_proj." + kind).str());
    return names;
  };
  SmallVector<LayerParam> layer = {
      {"input_layernorm.weight",
       {C},
       constantTensor(TensorInit::Ones, hf("input_layernorm.weight"))},
      {"self_attn.qkv_proj.weight",
       {qkvRows, C},
       grouped(normalTensor(0.02, qkv("weight")))}};
  if (arch.hasQkvBias())
    layer.push_back({"self_attn.qkv_proj.bias",
                     {qkvRows},
                     grouped(constantTensor(TensorInit::Zeros, qkv("bias")))});
  // A projection's weight, then its bias where it has one.
  auto linear = [&](StringRef name, int64_t out, int64_t in, bool bias) {
    std::string weight = (name + ".weight").str();
    layer.push_back({weight, {out, in}, normalTensor(0.02, hf(weight))});
    if (bias) {
      std::string b = (name + ".bias").str();
      layer.push_back({b, {out}, constantTensor(TensorInit::Zeros, hf(b))});
    }
  };
  linear("self_attn.o_proj", C, C, arch.hasOutputBias());
  layer.push_back({"post_attention_layernorm.weight",
                   {C},
                   constantTensor(TensorInit::Ones,
                                  hf("post_attention_layernorm.weight"))});
  linear("mlp.gate_proj", H, C, arch.hasMlpBias());
  linear("mlp.up_proj", H, C, arch.hasMlpBias());
  linear("mlp.down_proj", C, H, arch.hasMlpBias());
  return layer;
}

Value ForwardBuilder::norm(StringRef what, Value x, Value weight, Value bias) {
  FloatAttr eps = builder.getF64FloatAttr(config.arch.normEpsilon);
  if (bias)
    return LayerNormOp::create(builder, loc(what), x, weight, bias, eps)
        .getResult();
  return RmsNormOp::create(builder, loc(what), x, weight, eps).getResult();
}

Value ForwardBuilder::buildGpt2Layer(Value in,
                                     function_ref<Value(StringRef)> w) {
  const ArchitectureConfig &arch = config.arch;
  auto [inType, B, T] = layerShape(in);
  int64_t C = arch.width, H = arch.hidden;
  auto [column, row] = splits();
  Value h = norm("h.*.ln_1", in, w("ln_1.weight"), w("ln_1.bias"));
  Value qkv = LinearOp::create(
      builder, loc("h.*.attn.c_attn"), activation({B, T, 3 * C}), h,
      w("attn.c_attn.weight"), w("attn.c_attn.bias"), column);
  Value att = CausalAttentionOp::create(builder, loc("h.*.attn"), qkv,
                                        builder.getI64IntegerAttr(arch.heads),
                                        /*kv_heads=*/nullptr)
                  .getResult();
  Value proj =
      LinearOp::create(builder, loc("h.*.attn.c_proj"), inType, att,
                       w("attn.c_proj.weight"), w("attn.c_proj.bias"), row);
  Value x1 = AddOp::create(builder, loc("h.*.attn.residual"), in, proj);
  Value h2 = norm("h.*.ln_2", x1, w("ln_2.weight"), w("ln_2.bias"));
  Value fc =
      LinearOp::create(builder, loc("h.*.mlp.c_fc"), activation({B, T, H}), h2,
                       w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), column);
  Value gelu = GeluOp::create(builder, loc("h.*.mlp.gelu"), fc);
  Value mlp =
      LinearOp::create(builder, loc("h.*.mlp.c_proj"), inType, gelu,
                       w("mlp.c_proj.weight"), w("mlp.c_proj.bias"), row);
  return AddOp::create(builder, loc("h.*.mlp.residual"), x1, mlp);
}

Value ForwardBuilder::buildLlamaLayer(Value in,
                                      function_ref<Value(StringRef)> w) {
  const ArchitectureConfig &arch = config.arch;
  auto [inType, B, T] = layerShape(in);
  int64_t C = arch.width, H = arch.hidden;
  auto [column, row] = splits();
  Value h =
      norm("h.*.input_layernorm", in, w("input_layernorm.weight"), Value());
  // The projections' biases, where the model has them.
  auto bias = [&](bool has, StringRef name) { return has ? w(name) : Value(); };
  Value qkvBias = bias(arch.hasQkvBias(), "self_attn.qkv_proj.bias");
  int64_t G = arch.getKvHeads(), R = arch.heads / G, D = C / arch.heads;
  Value qkv = LinearOp::create(builder, loc("h.*.self_attn.qkv_proj"),
                               activation({B, T, G * (R + 2) * D}), h,
                               w("self_attn.qkv_proj.weight"), qkvBias, column);
  // Grouped-query attention: the rotation and the attention read each
  // group's key and value where the projection put them.
  IntegerAttr kvHeads =
      arch.isGrouped() ? builder.getI64IntegerAttr(G) : IntegerAttr();
  Value turned = RotaryOp::create(
      builder, loc("h.*.self_attn.rotary_emb"), qkv.getType(), qkv,
      builder.getI64IntegerAttr(arch.heads),
      builder.getF64FloatAttr(arch.ropeTheta), /*inverse=*/nullptr,
      arch.ropeScaling.factor
          ? builder.getDenseF64ArrayAttr(arch.getRopeScalingArray())
          : nullptr,
      kvHeads);
  Value att =
      CausalAttentionOp::create(builder, loc("h.*.self_attn"), turned,
                                builder.getI64IntegerAttr(arch.heads), kvHeads)
          .getResult();
  Value proj = LinearOp::create(
      builder, loc("h.*.self_attn.o_proj"), inType, att,
      w("self_attn.o_proj.weight"),
      bias(arch.hasOutputBias(), "self_attn.o_proj.bias"), row);
  Value x1 = AddOp::create(builder, loc("h.*.self_attn.residual"), in, proj);
  Value h2 = norm("h.*.post_attention_layernorm", x1,
                  w("post_attention_layernorm.weight"), Value());
  auto hiddenType = activation({B, T, H});
  bool mlpBias = arch.hasMlpBias();
  Value gate = LinearOp::create(builder, loc("h.*.mlp.gate_proj"), hiddenType,
                                h2, w("mlp.gate_proj.weight"),
                                bias(mlpBias, "mlp.gate_proj.bias"), column);
  Value up = LinearOp::create(builder, loc("h.*.mlp.up_proj"), hiddenType, h2,
                              w("mlp.up_proj.weight"),
                              bias(mlpBias, "mlp.up_proj.bias"), column);
  Value act = SwigluOp::create(builder, loc("h.*.mlp.act_fn"), gate, up);
  Value down = LinearOp::create(builder, loc("h.*.mlp.down_proj"), inType, act,
                                w("mlp.down_proj.weight"),
                                bias(mlpBias, "mlp.down_proj.bias"), row);
  return AddOp::create(builder, loc("h.*.mlp.residual"), x1, down);
}

func::FuncOp ForwardBuilder::build(ModuleOp module) {
  const ArchitectureConfig &arch = config.arch;
  // The global batch: loom-micro-batches gives @forward the plan's
  // micro-batch later.
  int64_t B = config.training.batchSize;
  int64_t T = config.training.sequenceLength;
  int64_t C = arch.width, L = arch.layers;

  // Parameters in checkpoint order (llm.c's for GPT-2). The token table's
  // rows past the vocabulary (--pad-vocab) are zeros.
  bool llama = isLlama();
  int64_t vocabRows = arch.paddedVocab > arch.vocab ? arch.vocab : 0;
  unsigned wte = param(
      llama ? "embed_tokens.weight" : "wte", {arch.paddedVocab, C},
      normalTensor(
          0.02, llama ? "model.embed_tokens.weight" : "transformer.wte.weight",
          vocabRows));
  std::optional<unsigned> wpe;
  if (arch.position == PositionKind::learned)
    wpe = param("wpe", {arch.positions, C},
                normalTensor(0.02, "transformer.wpe.weight"));
  SmallVector<LayerParam> layerParams = llama ? llamaLayer() : gpt2Layer();
  SmallVector<unsigned> stacked;
  llvm::StringMap<unsigned> layerIndex;
  for (const LayerParam &p : layerParams) {
    SmallVector<int64_t> stackedShape = {L};
    llvm::append_range(stackedShape, p.shape);
    layerIndex[p.name] = stacked.size();
    stacked.push_back(param((Twine(LOOM_STACKED_PREFIX) + p.name).str(),
                            stackedShape, p.spec));
  }
  unsigned lnfw =
      llama
          ? param("norm.weight", {C},
                  constantTensor(TensorInit::Ones, "model.norm.weight"))
          : param("ln_f.weight", {C},
                  constantTensor(TensorInit::Ones, "transformer.ln_f.weight"));
  std::optional<unsigned> lnfb;
  if (!llama)
    lnfb = param("ln_f.bias", {C},
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
  if (!llama && arch.tiedEmbeddings && arch.hidden == 4 * arch.width)
    module->setAttr(LoomDialect::getLlmcCheckpointAttrName(),
                    builder.getUnitAttr());
  func.setResultAttr(0, LoomDialect::getOutputAttrName(),
                     builder.getStringAttr(LOOM_OUTPUT_LOSS));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  auto arg = [&](unsigned i) -> Value { return body->getArgument(i); };

  auto column = TensorSplitAttr::get(builder.getContext(), TensorSplit::column);
  auto xType = activation({B, T, C});
  Value x = EmbeddingOp::create(builder, loc("embedding"), xType, arg(tokens),
                                arg(wte), wpe ? arg(*wpe) : Value(),
                                /*vocab_start=*/Value());

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
    auto w = [&](StringRef name) -> Value {
      return layer.getArgument(1 + layerIndex.lookup(name));
    };
    Value in = layer.getArgument(0);
    Value out = llama ? buildLlamaLayer(in, w) : buildGpt2Layer(in, w);
    YieldOp::create(builder, loc("h"), out);
  }
  x = layers.getResult(0);

  Value xf =
      norm(llama ? "norm" : "ln_f", x, arg(lnfw), lnfb ? arg(*lnfb) : Value());
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
