//===- LoomOps.td - Operations of the loom dialect ---------*- tablegen -*-===//
//
// The forward pass and loss of a pre-norm decoder (GPT-2, Llama). Every op
// works on statically shaped ranked tensors so that memory, FLOPs and
// parallel splits are known at compile time. Weights use the (out, in) layout of llm.c
// checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "LoomDialect.td"
include "LoomAttrs.td"
include "LoomInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations and weights: static float tensors in any compute precision the
// precision pass may choose.
def Loom_Differentiable
    : DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>;

def Loom_Costed : DeclareOpInterfaceMethods<Loom_CostOpInterface>;

def Loom_Partitioned
    : DeclareOpInterfaceMethods<Loom_TensorParallelOpInterface>;

// Ops whose tensors the precision pass stores in bf16 or f16 under mixed
// precision: the layers' forward and backward computations. Each computes
// in f32 whatever its storage (the lowering reads its operands widened and
// rounds its results), so that statistics, softmax and accumulations keep
// f32's range. Their 0-d results (the loss) stay f32.
def Loom_MixedPrecision : NativeOpTrait<"MixedPrecision"> {
  let cppNamespace = "::mlir::loom";
}

// Hyperparameters read by the generated code: a NaN or an infinity would
// only show up as a NaN loss, so each is confined to its meaningful range.
class Loom_F64RangeAttr<string pred, string desc>
    : ConfinedAttr<F64Attr, [AttrConstraint<
          CPred<"[](double x) { return " # pred # "; }("
                "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble())">,
          desc>]>;
def Loom_PositiveF64Attr
    : Loom_F64RangeAttr<"x > 0 && ::std::isfinite(x)", "whose value is finite and positive">;
def Loom_NonNegativeF64Attr
    : Loom_F64RangeAttr<"x >= 0 && ::std::isfinite(x)", "whose value is finite and not negative">;
def Loom_DecayF64Attr
    : Loom_F64RangeAttr<"x >= 0 && x < 1", "whose value lies in [0, 1)">;

def Loom_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
// Statistics that keep f32 under mixed precision.
def Loom_F32Tensor : StaticShapeTensorOf<[F32]>;
// Token ids and targets.
def Loom_IndexTensor : StaticShapeTensorOf<[I32]>;
// A 0-d f32 tensor: losses, norms and optimizer hyperparameters.
def Loom_Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
// A 0-d i1 tensor: a condition computed in the step.
def Loom_Flag : 0DTensorOf<[I1]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI1Type())">;

def Loom_EmbeddingOp : Loom_Op<"embedding", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned,
    AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "token plus learned position embedding";
  let description = [{
    `result[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]` for tokens of shape
    [B, T], a token table [V, C] and a position table [P, C] with T <= P.
    Without `wpe` (rotary positions, applied in attention), the token rows
    alone.

    ```mlir
    %x = loom.embedding %tokens, %wte, %wpe
        : (tensor<4x64xi32>, tensor<256x64xf32>, tensor<64x64xf32>)
        -> tensor<4x64x64xf32>
    ```

    With `vocab_start` (vocabulary parallelism), `wte` holds the rows of
    tokens `vocab_start` to `vocab_start + rows - 1` only: other tokens look
    up zeros, and the position table is added by the part that starts at
    token 0 alone, so that the sum of the parts is the whole embedding.
  }];
  let arguments = (ins Loom_IndexTensor:$tokens, Loom_FloatTensor:$wte,
                   Optional<Loom_FloatTensor>:$wpe,
                   Optional<Index>:$vocab_start);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $wte (`,` $wpe^)? (`vocab_start` $vocab_start^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideResult"]>,
    InferTypeOpAdaptor]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias` along the last
    dimension C of `x`, with `weight` and `bias` of shape [C].

    `mean` and `rstd` (`1 / sqrt(var + epsilon)`), of `x`'s shape without
    its last dimension and always f32, are each row's statistics, which
    the gradient reads back instead of computing them again.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                   Loom_FloatTensor:$bias, Loom_PositiveF64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result, Loom_F32Tensor:$mean,
                      Loom_F32Tensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_RmsNormOp : Loom_Op<"rms_norm", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideResult"]>,
    InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * weight` along the last dimension C of
    `x`, with `weight` of shape [C] (Llama's RMSNorm: no centering, no
    bias).

    `rstd` (`1 / sqrt(mean(x^2) + epsilon)`), of `x`'s shape without its
    last dimension and always f32, is each row's statistic, which the
    gradient reads back instead of computing it again.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                   Loom_PositiveF64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result, Loom_F32Tensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_GroupQkvOp : Loom_Op<"group_qkv", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed,
    DeclareOpInterfaceMethods<Loom_TensorParallelOpInterface,
      ["getTensorParallelSplit"]>, InferTypeOpAdaptor]> {
  let summary = "grouped queries, keys and values as every head's";
  let description = [{
    Grouped-query attention's projection output `qkv` [B, T, G (R + 2) D]
    holds, for each of the G = `kv_heads` groups, its R = num_heads / G
    query heads, then its key head and its value head, D channels each
    (the layout that lets tensor parallelism give each rank whole groups).
    The result [B, T, 3 num_heads D] is what `loom.causal_attention`
    without `kv_heads` reads: all queries, then each query head's key, then
    its value, the group's key and value repeated for each of its R
    queries (Hugging Face's repeat_kv). `loom-lower-to-linalg` builds it
    for grouped attention that no fused kernel reads grouped.

    ```mlir
    %all = loom.group_qkv %qkv {num_heads = 4 : i64, kv_heads = 2 : i64}
        : tensor<2x16x96xf32> -> tensor<2x16x192xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$qkv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   ConfinedAttr<I64Attr, [IntPositive]>:$kv_heads);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$qkv attr-dict `:` type($qkv) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_RotaryOp : Loom_Op<"rotary", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed,
    DeclareOpInterfaceMethods<Loom_TensorParallelOpInterface,
      ["getTensorParallelSplit"]>,
    AllTypesMatch<["qkv", "result"]>]> {
  let summary = "rotary position embedding of the queries and keys";
  let description = [{
    `qkv` holds queries, keys and values as `loom.causal_attention`
    reads them, [B, T, 3C] or, with `kv_heads`, grouped. Each head of D
    channels of the queries and the keys is rotated by its position t:
    channels j and j + D/2 (j < D/2) turn by the angle t * theta^(-2j/D)
    (Llama's rotate-half pairing, as Hugging Face applies it). The values
    pass unchanged.

    With `inverse`, the rotation by minus each angle: the gradient, since
    a rotation's transpose is its inverse.

    `llama3_scaling` = [factor, low_freq_factor, high_freq_factor,
    original_context] scales the frequencies as Llama 3.1 and 3.2 do:
    those of wavelengths (2 pi / frequency) above original_context /
    low_freq_factor are divided by factor, those below original_context /
    high_freq_factor kept, and those between blended linearly in
    original_context / wavelength.

    ```mlir
    %r = loom.rotary %qkv {num_heads = 4 : i64, theta = 10000.0 : f64}
        : tensor<2x16x192xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$qkv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   Loom_PositiveF64Attr:$theta, UnitAttr:$inverse,
                   OptionalAttr<DenseF64ArrayAttr>:$llama3_scaling,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$qkv attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_LinearOp : Loom_Op<"linear", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned, InferTypeOpAdaptor]> {
  let summary = "affine map over the last dimension";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]`, with the
    weight in (out, in) layout and an optional bias. The tied language-model
    head is a linear whose weight is the token embedding table.

    `split` says how tensor parallelism divides the product (Megatron):
    `column` splits the output features (QKV, FC1, the head over the
    vocabulary), `row` splits the input features and needs a sum of the
    partial outputs (attention and MLP output projections). A linear
    without `split` is replicated.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                   Optional<Loom_FloatTensor>:$bias,
                   OptionalAttr<Loom_TensorSplitAttr>:$split);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_CausalAttentionOp : Loom_Op<"causal_attention", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed,
    DeclareOpInterfaceMethods<Loom_TensorParallelOpInterface,
      ["getTensorParallelSplit"]>,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideResult"]>,
    InferTypeOpAdaptor]> {
  let summary = "causal multi-head self-attention on a fused QKV tensor";
  let description = [{
    `qkv` has shape [B, T, 3C]: queries, keys and values, each [B, T, C] and
    split into `num_heads` heads of D = C / num_heads channels. Each
    position attends to itself and to earlier positions, with scores
    scaled by 1 / sqrt(D). The result is [B, T, C], heads concatenated.

    With `kv_heads` = G (grouped-query attention), each of G key/value
    heads serves R = num_heads / G query heads, and `qkv` [B, T, G (R + 2)
    D] holds for each group its R query heads, then its key head and its
    value head: the column-parallel projection's layout, which gives each
    tensor-parallel rank whole groups. Query head h reads the key and the
    value of group h / R where they are (Hugging Face's repeat_kv without
    the copies).

    ```mlir
    %out, %lse = loom.causal_attention %qkv {num_heads = 4 : i64, kv_heads = 2 : i64}
        : tensor<2x16x96xf32> -> tensor<2x16x64xf32>, tensor<2x4x16xf32>
    ```

    `lse` [B, num_heads, T] is each query's log-sum-exp: the log of the sum
    of its exponentiated scaled scores, always f32. The gradient reads it
    back instead of computing it again (FlashAttention's statistics).
  }];
  let arguments = (ins Loom_FloatTensor:$qkv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads);
  let results = (outs Loom_FloatTensor:$result, Loom_F32Tensor:$lse);
  let assemblyFormat = [{
    $qkv attr-dict `:` type($qkv) `->` type($result) `,` type($lse)
  }];
}

def Loom_GeluOp : Loom_Op<"gelu", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned, SameOperandsAndResultType]> {
  let summary = "GELU, GPT-2's tanh approximation";
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_SwigluOp : Loom_Op<"swiglu", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned, SameOperandsAndResultType]> {
  let summary = "SwiGLU: the SiLU of the gate times the up projection";
  let description = [{
    `gate * sigmoid(gate) * up`, elementwise (Llama's MLP between its gate
    and up projections and its down projection).
  }];
  let arguments = (ins Loom_FloatTensor:$gate, Loom_FloatTensor:$up);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Loom_AddOp : Loom_Op<"add", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned, SameOperandsAndResultType, Commutative]> {
  let summary = "residual addition";
  let hasCanonicalizer = 1;
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Costed, Loom_Partitioned, InferTypeOpAdaptor]> {
  let summary = "mean softmax cross-entropy over the vocabulary";
  let description = [{
    `logits` [B, T, Vp] and integer `targets` [B, T] give the mean over all
    B * T positions of `-log softmax(logits[b, t, :V])[targets[b, t]]`. Only
    the first `num_classes` = V columns take part, so a vocabulary padded to
    Vp for efficient GEMMs leaves the loss unchanged. The result is a 0-d
    tensor.

    With `vocab_start` (vocabulary parallelism, Megatron-LM's parallel
    cross-entropy), `logits` holds columns `vocab_start` onwards of the
    vocabulary only, each rank of `grid_axes` of `grid` holding its own:
    the ranks all-reduce the per-row maxima and the sums of exponentials and
    of the targets' logits, so that no rank holds a whole row of logits and
    every rank returns the whole loss.
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                   Optional<Index>:$vocab_start,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_classes,
                   OptionalAttr<FlatSymbolRefAttr>:$grid,
                   OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $targets (`vocab_start` $vocab_start^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_BiasAddOp : Loom_Op<"bias_add", [Loom_MixedPrecision, Pure, Loom_Differentiable, Loom_Partitioned,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "a bias added along the last dimension";
  let description = [{
    `result[..., n] = input[..., n] + bias[n]`. Tensor parallelism adds a
    row-parallel linear's bias with it once the ranks' partial products are
    summed, so that the bias is added once.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$bias);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def Loom_FanOutOp : Loom_Op<"fan_out", [Loom_MixedPrecision, Pure, Loom_Differentiable,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "a value each rank of a group uses for its own part";
  let description = [{
    The identity in the forward pass. Its vector-Jacobian product sums the
    cotangent over the ranks of `grid_axes` of `grid`: each rank of a
    tensor-parallel group that feeds a whole value into its own part of a
    computation (the input of a column-parallel linear, Megatron-LM's `f`)
    holds only its part's share of the value's cotangent. The lowering to
    linalg replaces it by its operand.

    ```mlir
    %y = loom.fan_out %x on @loom_grid axes = [2] : tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes attr-dict `:` type($input)
  }];
}

def Loom_FanOutSharedOp : Loom_Op<"fan_out_shared", [Loom_MixedPrecision,
    Pure, Loom_Differentiable, AllTypesMatch<["input", "result"]>]> {
  let summary = "a part whose last elements a team of ranks shares";
  let description = [{
    The identity in the forward pass. `input` is a rank's part of a
    parameter that tensor parallelism divides in `teams` blocks along `dim`,
    with more ranks than blocks (`loom.tp_split = [dim, teams, shared]`):
    the ranks of `grid_axes` form `teams` teams of `team_size` consecutive
    ranks, each team dividing one block's leading elements and each of its ranks
    holding the block's last `shared` elements (a key/value head that
    several ranks' query heads read). Its vector-Jacobian product sums the
    cotangent of those shared elements over the team, since each rank holds
    only its own query heads' share of it; the other elements' cotangents
    are the rank's own. The lowering to linalg replaces it by its operand.

    ```mlir
    %y = loom.fan_out_shared %x on @loom_grid axes = [2] dim = 0 teams = 2
        team_size = 2 shared = 64 : tensor<96x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$dim, I64Attr:$teams,
                   I64Attr:$team_size, I64Attr:$shared);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `axes` `=` $grid_axes `dim` `=` $dim `teams` `=` $teams
    `team_size` `=` $team_size `shared` `=` $shared attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Loom_SumSquaresOp : Loom_Op<"sum_squares", [Pure]> {
  let summary = "sum of the squares of all elements of its inputs";
  let description = [{
    A 0-d tensor holding `sum(x * x)` over every element of every input
    (at least one). The training step uses it for the global gradient
    norm, over all the gradients at once: its result is one value to
    read, where a sum per gradient would be one each (on a GPU, a wait
    for the device each).
  }];
  let arguments = (ins Variadic<Loom_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_ScatterAddRowsOp : Loom_Op<"scatter_add_rows", [Pure,
    AllTypesMatch<["init", "result"]>]> {
  let summary = "adds rows into the rows their indices name, in index order";
  let description = [{
    `result` is `init` with row `indices[i] - row_start` of it increased by
    row `i` of `updates`, for each `i` in increasing order: each element's
    additions happen in the order of the rows that add to it, so that the
    result is the same wherever it is computed. An index outside
    `[row_start, row_start + rows of init)` adds nothing. `row_start` is 0
    when absent. `updates` may be bf16 or f16, each widened to f32 before
    its addition; the sums are f32.

    `loom-lower-to-linalg` makes the token table's gradient this op
    (`sorted-token-gradient`, loomc's `--token-gradient=sorted`), and
    bufferization a call of the runtime's
    `loom_rt_scatter_add_rows` that updates `init`'s buffer in place: the
    runtime sorts the indices by row, then adds each row's updates with a
    thread per column, where a loop nest would have each column walk every
    index.

    ```mlir
    %g = loom.scatter_add_rows %updates, %ids into %zeros
        : tensor<512x128xf32>, tensor<512xi32> -> tensor<256x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$updates, Loom_IndexTensor:$indices,
                   Loom_F32Tensor:$init, Optional<Index>:$row_start);
  let results = (outs Loom_F32Tensor:$result);
  let assemblyFormat = [{
    $updates `,` $indices `into` $init (`row_start` $row_start^)? attr-dict
    `:` type($updates) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_SoftmaxStatsOp : Loom_Op<"softmax_stats", [Pure,
    AllTypesMatch<["max", "sum_exp"]>]> {
  let summary = "each row's maximum and sum of exponentials";
  let description = [{
    For each row `r` of the [rows, columns] `logits`, over its first
    `classes` columns (1 <= `classes` <= columns; a padded vocabulary's
    other columns are left out): `max[r]`, the largest value, and
    `sum_exp[r]`, the sum of `exp(x - max[r])`, in f32 whatever the
    logits' type (f32, bf16 or f16).

    `loom-lower-to-linalg` makes the loss's softmax statistics this op
    (`runtime-softmax-stats`, loomc's `--loss-statistics=runtime`, the
    default with `--target=cuda`), and bufferization a call of the
    runtime's `loom_rt_softmax_stats`, which reads the logits once on a GPU
    (a running maximum with a sum rescaled to it) where the generated
    loops read them twice.

    ```mlir
    %max, %sum = loom.softmax_stats %logits {classes = 50257 : i64}
        : tensor<512x50304xbf16> -> tensor<512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, I64Attr:$classes);
  let results = (outs Loom_F32Tensor:$max, Loom_F32Tensor:$sum_exp);
  let assemblyFormat = [{
    $logits attr-dict `:` type($logits) `->` type($max)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pipeline communication
//===----------------------------------------------------------------------===//

// Upstream's shard.send and shard.recv carry no message tag, and an
// interleaved schedule sends activations and gradients the same way
// between two ranks, which must not be taken for each other; shard.send
// also yields a tensor nothing reads.
def Loom_SendOp : Loom_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "send a tensor to another pipeline rank";
  let description = [{
    Sends `value` to pipeline rank `peer` (its index on the plan's pp axis,
    the other coordinates being this rank's), with message `tag`: 0 for
    activations going forward, 1 for their gradients going back, 2 for a
    tied parameter's gradient, 3 for the last stage's scores going to every
    other rank (`@logits_stage<r>`, loom-build-logits). The runtime sends without waiting for the
    receiver (the value is copied), so that two ranks sending to each other
    in a 1F1B schedule do not wait on each other; `loom.recv` with the same
    peer and tag takes the messages in the order they were sent.
  }];
  let arguments = (ins AnyStaticShapeTensor:$value,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$peer,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$tag);
  let assemblyFormat = [{
    $value `to` $peer `tag` $tag attr-dict `:` type($value)
  }];
}

def Loom_RecvOp : Loom_Op<"recv", [MemoryEffects<[MemWrite]>]> {
  let summary = "receive a tensor from another pipeline rank";
  let description = [{
    The next tensor pipeline rank `peer` sent this rank with `tag` (see
    `loom.send`), waiting for it.
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$peer,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$tag);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    `from` $peer `tag` $tag attr-dict `:` type($result)
  }];
}

def Loom_TraceBeginOp : Loom_Op<"trace_begin", [MemoryEffects<[MemWrite]>]> {
  let summary = "the start of a span of the step's timeline";
  let description = [{
    Marks where a span of a rank's step begins: a micro-batch's forward or
    backward pass through one of the rank's model chunks, or the optimizer.
    `loom-run --trace` records the spans between this and the matching
    `loom.trace_end` (nested spans end first); without it they cost a call
    that returns. Ordered with the ops around it (it writes the runtime's
    state), which is what makes its time stamps mean something.

    ```mlir
    loom.trace_begin forward micro_batch 3 chunk 0
    ```
  }];
  let arguments = (ins Loom_TraceSpanAttr:$span,
                   ConfinedAttr<I64Attr, [IntMinValue<-1>]>:$micro_batch,
                   ConfinedAttr<I64Attr, [IntMinValue<-1>]>:$chunk);
  let assemblyFormat = [{
    $span `micro_batch` $micro_batch `chunk` $chunk attr-dict
  }];
}

def Loom_TraceEndOp : Loom_Op<"trace_end", [MemoryEffects<[MemWrite]>]> {
  let summary = "the end of a span of the step's timeline";
  let description = [{
    Ends the innermost span `loom.trace_begin` opened, which must be of the
    same kind.
  }];
  let arguments = (ins Loom_TraceSpanAttr:$span);
  let assemblyFormat = "$span attr-dict";
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Loom_ScanOp : Loom_Op<"scan", [IsolatedFromAbove, RecursiveMemoryEffects,
    AttrSizedOperandSegments, SingleBlock, Loom_Differentiable]> {
  let summary = "one body applied over the leading dimension of stacked values";
  let description = [{
    The layers of a transformer as a loop, not a copy. The body runs
    `length` times; iteration `l` sees the carried values (`carry`, the
    previous iteration's first results, `inits` on the first) followed by
    slice `l` along the leading dimension of each `over` operand (the
    stacked `[L, ...]` parameters). It yields the next carried values, then
    any number of per-iteration values, which the op returns stacked along a
    new leading dimension of size `length`: slice `l` of such a result is
    what iteration `l` yielded. With `reverse`, iterations run from
    `length - 1` down to 0 (the backward pass of a forward scan); slices are
    still indexed by `l`.

    ```mlir
    %x = loom.scan carry(%x0 : tensor<2x4x8xf32>)
                   over(%w : tensor<3x8x8xf32>) length = 3
                   -> (tensor<2x4x8xf32>) {
    ^bb0(%xl: tensor<2x4x8xf32>, %wl: tensor<8x8xf32>):
      %y = loom.linear %xl, %wl : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
      loom.yield %y : tensor<2x4x8xf32>
    }
    ```

    The body is isolated from above, so that passes rewrite it as one unit
    (tensor parallelism, recomputation, pipeline stages as sub-ranges) and
    the compile time and code size do not depend on `length`. Its
    differentiation is a reverse scan over the body's vector-Jacobian
    product; the forward scan then also returns, stacked, the activations
    the backward body reads (see docs/dialect.md).
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$inits,
                   Variadic<AnyStaticShapeTensor>:$stacked,
                   ConfinedAttr<I64Attr, [IntPositive]>:$length,
                   UnitAttr:$reverse);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`carry` `(` $inits^ `:` type($inits) `)`)?
    (`over` `(` $stacked^ `:` type($stacked) `)`)?
    `length` `=` $length (`reverse` $reverse^)? attr-dict-with-keyword
    (`->` `(` type($results)^ `)`)? $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumCarries() { return getInits().size(); }
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    YieldOp getYield();
    /// The body's arguments: the carried values, then one slice per
    /// stacked operand.
    ::mlir::Block::BlockArgListType getCarryArguments();
    ::mlir::Block::BlockArgListType getSliceArguments();
    /// The final carried values, then the stacked per-iteration values.
    ::mlir::ResultRange getCarryResults();
    ::mlir::ResultRange getStackedResults();
    /// Adds the body block with the arguments the operands call for.
    ::mlir::Block &addBodyBlock();
    /// After the operands' types changed: gives the body's arguments the
    /// types the operands call for.
    void retypeBodyArguments();
    /// After the body's types changed: gives the results the types of what
    /// the body yields, stacked where stacked.
    void retypeResults();
    /// `type` with a leading dimension of `length` added or dropped.
    static ::mlir::RankedTensorType getStackedType(::mlir::Type type,
                                                   int64_t length);
    static ::mlir::RankedTensorType getSliceType(::mlir::Type type);
  }];
}

def Loom_YieldOp : Loom_Op<"yield", [Pure, ReturnLike, Terminator,
    HasParent<"ScanOp">]> {
  let summary = "the carried and per-iteration values of a scan body";
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Gradient ops: the vector-Jacobian products the forward ops build.
//===----------------------------------------------------------------------===//

def Loom_EmbeddingGradOp : Loom_Op<"embedding_grad", [Loom_MixedPrecision, Pure,
    AttrSizedOperandSegments]> {
  let summary = "gradient of the embedding tables";
  let description = [{
    Scatter-adds `grad` [B, T, C] into the token table gradient
    (`wte_grad[tokens[b, t], :] += grad[b, t, :]`), starting from `wte_init`
    when given and from zeros otherwise, and sums `grad` over the batch into
    the position table gradient (`wpe_grad[t, :] += grad[b, t, :]`). Rows of
    the position table past T get zeros. A model without a position table
    has no `wpe_grad`.

    A tied head's weight gradient is added to the token table's: starting
    the scatter from it (`into`) saves a pass that zeroes the table and one
    that adds two tables, each the size of the vocabulary; the
    canonicalization of `loom.add` does that.

    With `vocab_start`, the token table gradient holds the rows of tokens
    `vocab_start` onwards only (as `loom.embedding`'s table does), and the
    position table gradient is zero unless `vocab_start` is 0.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_IndexTensor:$tokens,
                   Optional<Loom_FloatTensor>:$wte_init,
                   Optional<Index>:$vocab_start);
  let results = (outs Loom_FloatTensor:$wte_grad,
                      Optional<Loom_FloatTensor>:$wpe_grad);
  let assemblyFormat = [{
    $grad `,` $tokens (`into` $wte_init^)? (`vocab_start` $vocab_start^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LayerNormGradOp : Loom_Op<"layer_norm_grad", [Loom_MixedPrecision, Pure,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideOperand"]>]> {
  let summary = "gradient of layer normalization";
  let description = [{
    Given the result cotangent `grad`, the forward's `input` and `weight`
    and its row statistics `mean` and `rstd` (f32), yields the cotangents
    of the input, the weight and the bias.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                   Loom_FloatTensor:$weight, Loom_F32Tensor:$mean,
                   Loom_F32Tensor:$rstd);
  let results = (outs Loom_FloatTensor:$input_grad,
                      Loom_FloatTensor:$weight_grad,
                      Loom_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $mean `,` $rstd attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_RmsNormGradOp : Loom_Op<"rms_norm_grad", [Loom_MixedPrecision, Pure,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideOperand"]>]> {
  let summary = "gradient of root-mean-square normalization";
  let description = [{
    Given the result cotangent `grad`, the forward's `input` and `weight`
    and its row statistic `rstd` (f32), yields the cotangents of the input
    and the weight.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                   Loom_FloatTensor:$weight, Loom_F32Tensor:$rstd);
  let results = (outs Loom_FloatTensor:$input_grad,
                      Loom_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $rstd attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_GroupQkvGradOp : Loom_Op<"group_qkv_grad", [Loom_MixedPrecision, Pure,
    InferTypeOpAdaptor]> {
  let summary = "gradient of grouping queries, keys and values";
  let description = [{
    The transpose of `loom.group_qkv`: from the cotangent `grad` of every
    head's queries, keys and values [B, T, 3 num_heads D], the grouped
    layout's [B, T, G (R + 2) D], each group's key and value cotangents the
    sums over its R query heads.
  }];
  let arguments = (ins Loom_FloatTensor:$grad,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   ConfinedAttr<I64Attr, [IntPositive]>:$kv_heads);
  let results = (outs Loom_FloatTensor:$qkv_grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($qkv_grad)";
  let hasVerifier = 1;
}

def Loom_SwigluGradOp : Loom_Op<"swiglu_grad", [Loom_MixedPrecision, Pure,
    AllTypesMatch<["grad", "gate", "up", "gate_grad", "up_grad"]>]> {
  let summary = "gradient of SwiGLU";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$gate,
                   Loom_FloatTensor:$up);
  let results = (outs Loom_FloatTensor:$gate_grad, Loom_FloatTensor:$up_grad);
  let assemblyFormat = [{
    $grad `,` $gate `,` $up attr-dict `:` type($grad)
  }];
}

def Loom_LinearGradOp : Loom_Op<"linear_grad", [Loom_MixedPrecision, Pure]> {
  let summary = "gradient of a linear map";
  let description = [{
    Given the result cotangent `grad` [..., N], the forward's `input`
    [..., K] and `weight` [N, K]: `input_grad = grad · weight`,
    `weight_grad = grad^T · input` (rows flattened over the leading
    dimensions) and, when present, `bias_grad` = the column sums of `grad`.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                   Loom_FloatTensor:$weight);
  let results = (outs Loom_FloatTensor:$input_grad,
                      Loom_FloatTensor:$weight_grad,
                      Optional<Loom_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_CausalAttentionGradOp : Loom_Op<"causal_attention_grad", [Loom_MixedPrecision, Pure,
    DeclareOpInterfaceMethods<Loom_WideStatisticsOpInterface, ["isWideOperand"]>]> {
  let summary = "gradient of causal multi-head self-attention";
  let description = [{
    Given the result cotangent `grad` [B, T, C], the forward's fused `qkv`
    ([B, T, 3C], or grouped with `kv_heads`, as `loom.causal_attention`
    reads it), its result `out` [B, T, C] and its log-sum-exp `lse` [B,
    num_heads, T] (f32), yields the cotangent of `qkv`; a group's key and
    value cotangents sum over its query heads. The attention
    probabilities are recomputed from `qkv` and `lse`; `out` gives each
    query's dot product of the result and its cotangent, which the
    softmax's gradient needs, without them.

    `query_sums`, which `loom-lower-to-linalg` sets on the cuda target for
    bf16 and f16 storage, says how the fused kernels compute it: the query
    gradient summed in f32 scratch that each block of keys adds to, which
    bufferization allocates (`loom_attention_grad_scratch`, abi.h). The
    value is the same either way.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$qkv,
                   Loom_FloatTensor:$out, Loom_F32Tensor:$lse,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                   UnitAttr:$query_sums,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads);
  let results = (outs Loom_FloatTensor:$qkv_grad);
  let assemblyFormat = [{
    $grad `,` $qkv `,` $out `,` $lse attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_BiasAddGradOp : Loom_Op<"bias_add_grad", [Loom_MixedPrecision, Pure]> {
  let summary = "gradient of a bias added along the last dimension";
  let description = [{
    The sums of `grad` [..., N] over all its leading dimensions: [N].
  }];
  let arguments = (ins Loom_FloatTensor:$grad);
  let results = (outs Loom_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad attr-dict `:` type($grad) `->` type($bias_grad)
  }];
  let hasVerifier = 1;
}

def Loom_GeluGradOp : Loom_Op<"gelu_grad", [Loom_MixedPrecision, Pure, AllTypesMatch<["grad", "input", "input_grad"]>]> {
  let summary = "gradient of GELU (tanh form)";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($input_grad)";
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [Loom_MixedPrecision, Pure, AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "gradient of the mean softmax cross-entropy";
  let description = [{
    `logits_grad[b, t, v] = grad * (softmax(logits[b, t, :V])[v] -
    (v == targets[b, t])) / (B * T)` for v < V = `num_classes`, and zero for
    the padded columns. With `vocab_start`, `grid` and `grid_axes`, the
    columns of this rank's part of the vocabulary, as for
    `loom.cross_entropy`, whose statistics it gathers again.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, Loom_FloatTensor:$logits,
                   Loom_IndexTensor:$targets, Optional<Index>:$vocab_start,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_classes,
                   OptionalAttr<FlatSymbolRefAttr>:$grid,
                   OptionalAttr<DenseI16ArrayAttr>:$grid_axes);
  let results = (outs Loom_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets (`vocab_start` $vocab_start^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Scalar functions in the bodies of lowered loops
//===----------------------------------------------------------------------===//

def Loom_ScalarFunction
    : DeclareOpInterfaceMethods<Loom_ScalarFunctionOpInterface,
                                ["getGemmEpilogue"]>;

def Loom_ScalarGeluOp : Loom_Op<"scalar.gelu", [Pure, Loom_ScalarFunction,
    SameOperandsAndResultType]> {
  let summary = "GELU of one f32 value, in a lowered loop's body";
  let description = [{
    `loom.gelu`'s function of one element, which the lowering to linalg
    builds as one op: loom-gemm-epilogues can move it into a GEMM's
    epilogue, and loom-expand-scalar-functions replaces it by its
    arithmetic.

    ```mlir
    %y = loom.scalar.gelu %x : f32
    ```
  }];
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_ScalarGeluGradOp : Loom_Op<"scalar.gelu_grad", [Pure,
    Loom_ScalarFunction, SameOperandsAndResultType]> {
  let summary = "gradient through the GELU of one f32 value";
  let description = [{
    `grad` times the derivative of `loom.scalar.gelu` at `input`: what
    `loom.gelu_grad` computes of one element, its operands in its order.

    ```mlir
    %dx = loom.scalar.gelu_grad %dy, %x : f32
    ```
  }];
  let arguments = (ins F32:$grad, F32:$input);
  let results = (outs F32:$input_grad);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($input_grad)";
}

//===----------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------===//

def Loom_ConvertOp : Loom_Op<"convert", [Pure]> {
  let summary = "a tensor in another float type, optionally scaled";
  let description = [{
    `result = convert(input * scale)` element by element, rounding to the
    nearest value of the result's element type (a product formed in f32).
    `scale` defaults to 1; the same element type with a scale multiplies.
    The precision pass casts the parameters to bf16 or f16 with it, and
    takes the gradients back to f32, dividing them by the loss scale.

    ```mlir
    %w16 = loom.convert %w : tensor<384x128xf32> to tensor<384x128xbf16>
    %g = loom.convert %g16 scale %inv : tensor<384x128xf16> to tensor<384x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Optional<Loom_Scalar>:$scale);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? attr-dict `:` type($input) `to` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_TransferOp : Loom_Op<"transfer", [Pure,
    AllTypesMatch<["source", "dest", "result"]>]> {
  let summary = "a tensor copied between host and device memory";
  let description = [{
    `source`'s elements, copied into `dest`, which lives in the memory
    `to` names; the result is `dest` so written. The offload placement
    (loom-place-offload) moves gradients to the host and the updated
    parameters back with it. Each becomes one runtime copy
    (`loom_rt_transfer`): on a GPU a copy queued on the step's stream, to
    or from pinned memory; a copy between the two arenas on a CPU.

    With `async` (set by loom-stream-transfers in layer loops) the copy
    only starts (`loom_rt_transfer_start`) and runs alongside the step's
    later work until a `loom.transfer_wait` of its source or its result:
    until then nothing may write the source or read the result.

    With `accumulate if %more` (f32, to the host) the result is the sum of
    the source and, where `%more` holds, `dest`'s elements, else zero: the
    micro-batches' gradients summed in host memory as each crosses
    (`loom_rt_transfer_add`), element by element as a device's `loom.add`
    of an accumulator starting from zeros would.

    ```mlir
    %h = loom.transfer %g into %buffer to host : tensor<384x128xf32>
    %n = loom.transfer %w into %next to device async : tensor<384x128xbf16>
    %s = loom.transfer %g into %sum to host accumulate if %more : tensor<384x128xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$source,
                   AnyStaticShapeTensor:$dest, Loom_PlacementAttr:$to,
                   UnitAttr:$async, Optional<I1>:$accumulate);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $source `into` $dest `to` $to (`async` $async^)?
    (`accumulate` `if` $accumulate^)? attr-dict `:` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$source, "::mlir::Value":$dest,
                   "::mlir::loom::Placement":$to,
                   CArg<"bool", "false">:$async), [{
      build($_builder, $_state, source.getType(), source, dest, to, async,
            ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}

def Loom_TransferWaitOp : Loom_Op<"transfer_wait",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the step's later work waits for an async transfer";
  let description = [{
    The work after this op waits for the last `async` `loom.transfer` that
    read `value` (its source) or wrote it (its result): after it the source
    may be written again and the result read. Where no such transfer is in
    flight it does nothing. Becomes one call of `loom_rt_transfer_wait`
    with `value`'s address: on a GPU the step's stream waits for the copy
    stream's event, on a CPU the caller for the copying thread.

    ```mlir
    loom.transfer_wait %previous : tensor<384x128xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Loom_SeedOp : Loom_Op<"seed", [Pure]> {
  let summary = "the cotangent the step's loss is differentiated from";
  let description = [{
    1: the step's gradients are those of the mean loss. Differentiation
    seeds the whole model's loss with it, where the precision pass can find
    it: under fp16 it becomes the loss scale, which the gradients are later
    divided by.
  }];
  let results = (outs Loom_Scalar:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

def Loom_AdamWOp : Loom_Op<"adamw", [Pure,
    DeclareOpInterfaceMethods<Loom_OptimizerUpdateOpInterface,
      ["getUpdatedParam", "getUpdateGrad", "getUpdateStates",
       "setSkipCondition"]>,
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "one AdamW update of a parameter";
  let description = [{
    With `g = grad * grad_scale` (the clip factor and the averaging over
    micro-batches) and the step number `step` counted from 1:
    `m' = beta1 m + (1 - beta1) g`, `v' = beta2 v + (1 - beta2) g^2`,
    `param' = param - lr * (m' / (1 - beta1^step) /
    (sqrt(v' / (1 - beta2^step)) + epsilon) + weight_decay * param)`.
    Where `skip` is true (the gradients overflowed under loss scaling), the
    results are the parameter and its state unchanged.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                   Loom_FloatTensor:$m, Loom_FloatTensor:$v,
                   Loom_Scalar:$lr, Loom_Scalar:$step, Loom_Scalar:$grad_scale,
                   Optional<Loom_Flag>:$skip, Loom_DecayF64Attr:$beta1,
                   Loom_DecayF64Attr:$beta2, Loom_PositiveF64Attr:$epsilon,
                   Loom_NonNegativeF64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param, Loom_FloatTensor:$new_m,
                      Loom_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_scale
    (`skip` `if` $skip^)? attr-dict `:` type($param)
  }];
}

def Loom_SGDOp : Loom_Op<"sgd", [Pure,
    DeclareOpInterfaceMethods<Loom_OptimizerUpdateOpInterface,
      ["getUpdatedParam", "getUpdateGrad", "getUpdateStates",
       "setSkipCondition"]>,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>]> {
  let summary = "one SGD update with momentum of a parameter";
  let description = [{
    With `g = grad * grad_scale + weight_decay * param`:
    `buf' = momentum * buf + g`, `param' = param - lr * buf'`. Where
    `skip` is true, the results are the parameter and its buffer unchanged.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                   Loom_FloatTensor:$momentum_buffer, Loom_Scalar:$lr,
                   Loom_Scalar:$grad_scale, Optional<Loom_Flag>:$skip,
                   Loom_DecayF64Attr:$momentum,
                   Loom_NonNegativeF64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param,
                      Loom_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $grad_scale
    (`skip` `if` $skip^)? attr-dict `:` type($param)
  }];
}

#endif // LOOM_OPS_TD
