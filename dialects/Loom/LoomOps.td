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
include "LoomInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations and weights: static float tensors in any compute precision the
// precision pass may choose.
def Loom_Differentiable
    : DeclareOpInterfaceMethods<Loom_DifferentiableOpInterface>;

def Loom_Costed : DeclareOpInterfaceMethods<Loom_CostOpInterface>;

def Loom_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
// Token ids and targets.
def Loom_IndexTensor : StaticShapeTensorOf<[I32]>;
// A 0-d f32 tensor: losses, norms and optimizer hyperparameters.
def Loom_Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def Loom_EmbeddingOp : Loom_Op<"embedding", [Pure, Loom_Differentiable, Loom_Costed]> {
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

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure, Loom_Differentiable, Loom_Costed]> {
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

def Loom_LinearOp : Loom_Op<"linear", [Pure, Loom_Differentiable, Loom_Costed]> {
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
  let hasVerifier = 1;
}

def Loom_CausalAttentionOp : Loom_Op<"causal_attention", [Pure, Loom_Differentiable, Loom_Costed]> {
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

def Loom_GeluOp : Loom_Op<"gelu", [Pure, Loom_Differentiable, Loom_Costed, SameOperandsAndResultType]> {
  let summary = "GELU, GPT-2's tanh approximation";
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_AddOp : Loom_Op<"add", [Pure, Loom_Differentiable, Loom_Costed, SameOperandsAndResultType, Commutative]> {
  let summary = "residual addition";
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, Loom_Differentiable, Loom_Costed]> {
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

def Loom_SumSquaresOp : Loom_Op<"sum_squares", [Pure]> {
  let summary = "sum of the squares of all elements";
  let description = [{
    A 0-d tensor holding `sum(x * x)`. The training step uses it for the
    global gradient norm.
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Gradient ops: the vector-Jacobian products the forward ops build.
//===----------------------------------------------------------------------===//

def Loom_EmbeddingGradOp : Loom_Op<"embedding_grad", [Pure]> {
  let summary = "gradient of the embedding tables";
  let description = [{
    Scatter-adds `grad` [B, T, C] into a zero token table gradient
    (`wte_grad[tokens[b, t], :] += grad[b, t, :]`) and sums it over the batch
    into the position table gradient (`wpe_grad[t, :] += grad[b, t, :]`).
    Rows of the position table past T get zeros.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_IndexTensor:$tokens);
  let results = (outs Loom_FloatTensor:$wte_grad, Loom_FloatTensor:$wpe_grad);
  let assemblyFormat = [{
    $grad `,` $tokens attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LayerNormGradOp : Loom_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradient of layer normalization";
  let description = [{
    Given the result cotangent `grad` and the forward's `input` and `weight`,
    yields the cotangents of the input, the weight and the bias. The mean and
    the inverse standard deviation are recomputed from the input.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input,
                   Loom_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$input_grad,
                      Loom_FloatTensor:$weight_grad,
                      Loom_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LinearGradOp : Loom_Op<"linear_grad", [Pure]> {
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

def Loom_CausalAttentionGradOp : Loom_Op<"causal_attention_grad", [Pure]> {
  let summary = "gradient of causal multi-head self-attention";
  let description = [{
    Given the result cotangent `grad` [B, T, C] and the forward's fused `qkv`
    [B, T, 3C], yields the cotangent of `qkv`. The attention probabilities
    are recomputed from `qkv`.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$qkv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_heads);
  let results = (outs Loom_FloatTensor:$qkv_grad);
  let assemblyFormat = [{
    $grad `,` $qkv attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_GeluGradOp : Loom_Op<"gelu_grad", [Pure, AllTypesMatch<["grad", "input", "input_grad"]>]> {
  let summary = "gradient of GELU (tanh form)";
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($input_grad)";
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [Pure, AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "gradient of the mean softmax cross-entropy";
  let description = [{
    `logits_grad[b, t, v] = grad * (softmax(logits[b, t, :V])[v] -
    (v == targets[b, t])) / (B * T)` for v < V = `num_classes`, and zero for
    the padded columns.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, Loom_FloatTensor:$logits,
                   Loom_IndexTensor:$targets,
                   ConfinedAttr<I64Attr, [IntPositive]>:$num_classes);
  let results = (outs Loom_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

def Loom_AdamWOp : Loom_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "one AdamW update of a parameter";
  let description = [{
    With `g = grad * grad_scale` (the clip factor and the averaging over
    micro-batches) and the step number `step` counted from 1:
    `m' = beta1 m + (1 - beta1) g`, `v' = beta2 v + (1 - beta2) g^2`,
    `param' = param - lr * (m' / (1 - beta1^step) /
    (sqrt(v' / (1 - beta2^step)) + epsilon) + weight_decay * param)`.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                   Loom_FloatTensor:$m, Loom_FloatTensor:$v,
                   Loom_Scalar:$lr, Loom_Scalar:$step, Loom_Scalar:$grad_scale,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                   F64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param, Loom_FloatTensor:$new_m,
                      Loom_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_scale attr-dict
    `:` type($param)
  }];
}

def Loom_SGDOp : Loom_Op<"sgd", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>]> {
  let summary = "one SGD update with momentum of a parameter";
  let description = [{
    With `g = grad * grad_scale + weight_decay * param`:
    `buf' = momentum * buf + g`, `param' = param - lr * buf'`.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                   Loom_FloatTensor:$momentum_buffer, Loom_Scalar:$lr,
                   Loom_Scalar:$grad_scale, F64Attr:$momentum,
                   F64Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param,
                      Loom_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $grad_scale attr-dict
    `:` type($param)
  }];
}

#endif // LOOM_OPS_TD
