//===- LoomOps.td - Operations of the loom dialect ---------*- tablegen -*-===//
//
// The forward pass and loss of a GPT-2-style model. Every op works on
// statically shaped ranked tensors so that memory, FLOPs and parallel splits
// are known at compile time. Weights use the (out, in) layout of llm.c
// checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "LoomDialect.td"
include "LoomAttrs.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations and weights: static float tensors in any compute precision the
// precision pass may choose.
def Loom_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
// Token ids and targets.
def Loom_IndexTensor : StaticShapeTensorOf<[I32]>;

def Loom_EmbeddingOp : Loom_Op<"embedding", [Pure]> {
  let summary = "token plus learned position embedding";
  let description = [{
    `result[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]` for tokens of shape
    [B, T], a token table [V, C] and a position table [P, C] with T <= P.

    ```mlir
    %x = loom.embedding %tokens, %wte, %wpe
        : (tensor<4x64xi32>, tensor<256x64xf32>, tensor<64x64xf32>)
        -> tensor<4x64x64xf32>
    ```
  }];
  let arguments = (ins Loom_IndexTensor:$tokens, Loom_FloatTensor:$wte,
                   Loom_FloatTensor:$wpe);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $wte `,` $wpe attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias` along the last
    dimension C of `x`, with `weight` and `bias` of shape [C].
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                   Loom_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LinearOp : Loom_Op<"linear", [Pure]> {
  let summary = "affine map over the last dimension";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]`, with the
    weight in (out, in) layout and an optional bias. The tied language-model
    head is a linear whose weight is the token embedding table.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                   Optional<Loom_FloatTensor>:$bias);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_CausalAttentionOp : Loom_Op<"causal_attention", [Pure]> {
  let summary = "causal multi-head self-attention on a fused QKV tensor";
  let description = [{
    `qkv` has shape [B, T, 3C]: queries, keys and values, each [B, T, C] and
    split into `num_heads` heads of C / num_heads channels. Each position
    attends to itself and to earlier positions, with scores scaled by
    1 / sqrt(C / num_heads). The result is [B, T, C], heads concatenated.
  }];
  let arguments = (ins Loom_FloatTensor:$qkv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $qkv attr-dict `:` type($qkv) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_GeluOp : Loom_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, GPT-2's tanh approximation";
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_AddOp : Loom_Op<"add", [Pure, SameOperandsAndResultType, Commutative]> {
  let summary = "residual addition";
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure]> {
  let summary = "mean softmax cross-entropy over the vocabulary";
  let description = [{
    `logits` [B, T, Vp] and integer `targets` [B, T] give the mean over all
    B * T positions of `-log softmax(logits[b, t, :V])[targets[b, t]]`. Only
    the first `num_classes` = V columns take part, so a vocabulary padded to
    Vp for efficient GEMMs leaves the loss unchanged. The result is a 0-d
    tensor.
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$targets,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_classes);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // LOOM_OPS_TD
