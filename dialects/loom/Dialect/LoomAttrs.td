//===- LoomAttrs.td - Attributes of the loom dialect -------*- tablegen -*-===//
//
// Module-level descriptions: the model, the training setup, the parallel plan
// and the cluster. They travel with the IR so that every pass after import
// reads them from the module rather than from the JSON file.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ATTRS_TD
#define LOOM_ATTRS_TD

include "LoomDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Loom_Precision : I32EnumAttr<"Precision", "compute precision", [
    I32EnumAttrCase<"fp32", 0>,
    I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"fp16", 2>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_PrecisionAttr : EnumAttr<Loom_Dialect, Loom_Precision, "precision">;

def Loom_OptimizerKind : I32EnumAttr<"OptimizerKind", "optimizer", [
    I32EnumAttrCase<"adamw", 0>,
    I32EnumAttrCase<"sgd", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_OptimizerKindAttr
    : EnumAttr<Loom_Dialect, Loom_OptimizerKind, "optimizer">;

// Users write "1f1b" (JSON, --plan); IR keywords cannot start with a digit,
// so the IR spells it one_f_one_b (see parseScheduleName).
def Loom_Schedule : I32EnumAttr<"Schedule", "pipeline schedule", [
    I32EnumAttrCase<"gpipe", 0>,
    I32EnumAttrCase<"one_f_one_b", 1>,
    I32EnumAttrCase<"interleaved", 2>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_ScheduleAttr : EnumAttr<Loom_Dialect, Loom_Schedule, "schedule">;

// The spans of a step's timeline that generated code marks; the runtime
// numbers them the same way (LOOM_TRACE_* in abi.h).
def Loom_TraceSpan : I32EnumAttr<"TraceSpan", "a span of a step's timeline", [
    I32EnumAttrCase<"forward", 0>,
    I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"optimizer", 2>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_TraceSpanAttr : EnumAttr<Loom_Dialect, Loom_TraceSpan, "trace_span">;

def Loom_Recompute : I32EnumAttr<"Recompute", "activation recomputation", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"selective", 1>,
    I32EnumAttrCase<"full", 2>,
    I32EnumAttrCase<"stage", 3>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_RecomputeAttr : EnumAttr<Loom_Dialect, Loom_Recompute, "recompute">;

def Loom_Offload : I32EnumAttr<"Offload",
    "what a plan keeps in host memory", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"optimizer", 1>,
    I32EnumAttrCase<"parameters", 2>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_OffloadAttr : EnumAttr<Loom_Dialect, Loom_Offload, "offload">;

def Loom_Placement : I32EnumAttr<"Placement",
    "the memory a value lives in", [
    I32EnumAttrCase<"host", 0>,
    I32EnumAttrCase<"device", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_PlacementAttr : EnumAttr<Loom_Dialect, Loom_Placement, "placement">;

def Loom_TensorSplit : I32EnumAttr<"TensorSplit",
    "how tensor parallelism divides a matrix product", [
    I32EnumAttrCase<"column", 0>,
    I32EnumAttrCase<"row", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}
def Loom_TensorSplitAttr : EnumAttr<Loom_Dialect, Loom_TensorSplit, "split">;

// The parts of a decoder block, which make the model families: GPT-2 is
// layernorm, learned, gelu, all; Llama rmsnorm, rope, swiglu, none (or, with
// Hugging Face's attention_bias and mlp_bias, biases on the attention's
// projections, the MLP's, or all); Qwen2 as Llama with biases on the query,
// key and value projections (qkv).
def Loom_NormKind : I32EnumAttr<"NormKind", "normalization of a block", [
    I32EnumAttrCase<"layernorm", 0>,
    I32EnumAttrCase<"rmsnorm", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}

def Loom_PositionKind : I32EnumAttr<"PositionKind", "position encoding", [
    I32EnumAttrCase<"learned", 0>,
    I32EnumAttrCase<"rope", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}

def Loom_MlpKind : I32EnumAttr<"MlpKind", "feed-forward block", [
    I32EnumAttrCase<"gelu", 0>,
    I32EnumAttrCase<"swiglu", 1>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}

def Loom_BiasKind : I32EnumAttr<"BiasKind", "biases of a block's linears", [
    I32EnumAttrCase<"all", 0>,
    I32EnumAttrCase<"none", 1>,
    I32EnumAttrCase<"qkv", 2>,
    // The query, key, value and output projections.
    I32EnumAttrCase<"attention", 3>,
    I32EnumAttrCase<"mlp", 4>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

// A double (held as an APFloat so that attribute storage can hash it),
// printed in its shortest form that reads back to the same value, so that
// hyperparameters survive a print/parse round trip exactly.
class Loom_F64Parameter<string desc, string default = "">
    : APFloatParameter<desc> {
  let parser = "::mlir::loom::parseF64($_parser)";
  let printer = "::mlir::loom::printF64($_printer, $_self)";
  let defaultValue = !if(!eq(default, ""), "", "::llvm::APFloat(" # default # ")");
}

// An enum parameter left out of the printed form when it is `default`.
class Loom_DefaultEnumParameter<EnumAttrInfo enumInfo, string default>
    : EnumParameter<enumInfo> {
  let defaultValue = enumInfo.cppNamespace # "::" # enumInfo.className #
                     "::" # default;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Loom_ModelAttr : Loom_Attr<"Model", "model"> {
  let summary = "architecture of a pre-norm decoder";
  let description = [{
    `vocab` is the real vocabulary; `padded_vocab` (at least `vocab`) is the
    number of rows of the token embedding, padded for efficient GEMMs as
    llm.c does. `hidden` is the MLP's inner width (4 x width for GPT-2).
    `norm`, `position` (with `rope_theta`), `mlp` and `biases` choose the
    block's parts; left out, they are GPT-2's and are not printed.
    `kv_heads` (grouped-query attention), when given, divides `heads`.
    `rope_factor` (with `rope_low_freq_factor`, `rope_high_freq_factor` and
    `rope_original_context`) is Llama 3's scaling of the rotary
    frequencies; 0 or left out, none.
    `positions` is the longest sequence: the rows of a learned position
    table, or the context a rotary model was trained for.

    ```mlir
    #loom.model<name = "gpt2-124m", layers = 12, width = 768, heads = 12,
                hidden = 3072, vocab = 50257, padded_vocab = 50257,
                positions = 1024, tied = true, epsilon = 1.0e-05>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"model name">:$name,
    "int64_t":$layers,
    "int64_t":$width,
    "int64_t":$heads,
    "int64_t":$hidden,
    "int64_t":$vocab,
    "int64_t":$padded_vocab,
    "int64_t":$positions,
    "bool":$tied,
    Loom_F64Parameter<"normalization epsilon">:$epsilon,
    Loom_DefaultEnumParameter<Loom_NormKind, "layernorm">:$norm,
    Loom_DefaultEnumParameter<Loom_PositionKind, "learned">:$position,
    Loom_F64Parameter<"rotary base", "10000.0">:$rope_theta,
    Loom_DefaultEnumParameter<Loom_MlpKind, "gelu">:$mlp,
    Loom_DefaultEnumParameter<Loom_BiasKind, "all">:$biases,
    DefaultValuedParameter<"int64_t", "0",
        "key/value heads; 0: as many as heads">:$kv_heads,
    Loom_F64Parameter<"Llama 3 rotary scaling factor; 0: none", "0.0">:$rope_factor,
    Loom_F64Parameter<"Llama 3 low-frequency factor", "1.0">:$rope_low_freq_factor,
    Loom_F64Parameter<"Llama 3 high-frequency factor", "4.0">:$rope_high_freq_factor,
    DefaultValuedParameter<"int64_t", "0",
        "Llama 3 original context">:$rope_original_context);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    ArchitectureConfig getConfig() const;
    static ModelAttr get(::mlir::MLIRContext *context, ::llvm::StringRef name,
                         const ArchitectureConfig &config);
  }];
}

def Loom_TrainingAttr : Loom_Attr<"Training", "training"> {
  let summary = "training setup of one step";
  let description = [{
    `batch` is the global batch in sequences of `sequence` tokens. The
    optimizer's hyperparameters are those of AdamW (`beta1`, `beta2`,
    `epsilon`) or SGD (`momentum`); `grad_clip` is the global gradient-norm
    limit, 0 meaning no clipping.
  }];
  let parameters = (ins
    "int64_t":$batch,
    "int64_t":$sequence,
    "OptimizerKind":$optimizer,
    Loom_F64Parameter<"learning rate">:$lr,
    Loom_F64Parameter<"AdamW beta1", "0.0">:$beta1,
    Loom_F64Parameter<"AdamW beta2", "0.0">:$beta2,
    Loom_F64Parameter<"AdamW epsilon", "0.0">:$eps,
    Loom_F64Parameter<"decoupled weight decay", "0.0">:$weight_decay,
    Loom_F64Parameter<"SGD momentum", "0.0">:$momentum,
    Loom_F64Parameter<"global gradient-norm clip", "0.0">:$grad_clip,
    "Precision":$precision);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    TrainingConfig getConfig() const;
    static TrainingAttr get(::mlir::MLIRContext *context,
                            const TrainingConfig &config);
  }];
}

def Loom_PlanAttr : Loom_Attr<"Plan", "plan"> {
  let summary = "parallel plan of a training step";
  let description = [{
    World size is `pp * dp * tp`, tensor-parallel ranks varying fastest.
    `micro_batches` is the number of micro-batches each data-parallel
    replica splits its share of the global batch into; `zero` is the ZeRO
    stage (0 to 3). `stage_layers` gives the layers of each of the pp * v
    pipeline stages in model order (stage c * pp + r is chunk c of pipeline
    rank r); `loom-plan` balances them with the cost model when a pipeline
    plan does not give them. `offload` keeps the optimizer's state and
    update (`optimizer`) in host memory, the device holding the parameters
    in the step's precision (loom-place-offload). On a module, `loom.plan`
    may instead be the string
    "auto", which `loom-plan` replaces by the cost model's choice; whether a
    plan fits the module's model, batch and cluster is checked by
    `checkPlan` (loom/Dialect/LoomConfig.h) when the module is verified.
  }];
  let parameters = (ins
    "int64_t":$dp,
    "int64_t":$tp,
    "int64_t":$pp,
    "int64_t":$zero,
    "int64_t":$micro_batches,
    "Schedule":$schedule,
    "Recompute":$recompute,
    "bool":$sequence_parallel,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$stage_layers,
    DefaultValuedParameter<"Offload", "Offload::none">:$offload);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of ranks the plan runs on.
    int64_t getWorldSize() const { return getDp() * getTp() * getPp(); }
    PlanConfig getConfig() const;
    static PlanAttr get(::mlir::MLIRContext *context, const PlanConfig &config);
  }];
}

def Loom_ClusterAttr : Loom_Attr<"Cluster", "cluster"> {
  let summary = "machines a plan runs on";
  let description = [{
    GPU kind by name (one of the catalogue's, loom/Dialect/LoomHardware.h),
    GPUs per node and node count. Link bandwidths in GB/s
    per direction; 0 means the catalogue's figure for the GPU kind. The
    memory margin is the share of each GPU's memory a plan leaves free.
  }];
  let parameters = (ins
    StringRefParameter<"GPU kind">:$gpu,
    "int64_t":$gpus_per_node,
    "int64_t":$nodes,
    Loom_F64Parameter<"intra-node link bandwidth (GB/s)", "0.0">:$intra_node_bandwidth,
    Loom_F64Parameter<"inter-node link bandwidth (GB/s)", "0.0">:$inter_node_bandwidth,
    Loom_F64Parameter<"share of memory left free", "0.08">:$memory_margin);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getWorldSize() const { return getGpusPerNode() * getNodes(); }
    ClusterConfig getConfig() const;
    static ClusterAttr get(::mlir::MLIRContext *context,
                           const ClusterConfig &config);
  }];
}

#endif // LOOM_ATTRS_TD
