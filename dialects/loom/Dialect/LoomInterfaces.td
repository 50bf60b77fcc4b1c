//===- LoomInterfaces.td - Interfaces of loom ops ----------*- tablegen -*-===//
//
// Per-op knowledge that passes query instead of switching on op names.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERFACES_TD
#define LOOM_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Loom_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    An op that reverse-mode differentiation can pass through. Given the
    cotangent of each result, the op builds the ops that compute the
    cotangent of each of its operands (its vector-Jacobian product) at the
    rewriter's insertion point.

    An op whose backward pass needs values its forward pass computes but
    does not return (a loop over layers needs each layer's activations) may
    replace itself, through the rewriter, by a forward op that also returns
    them. Callers therefore read the op's operands before calling and do
    not touch the op afterwards.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the vector-Jacobian product. `resultGrads` holds one cotangent
        per result, of the result's type. `operandGrads` is resized to the
        number of operands and receives, for each operand, its cotangent or a
        null value for an operand that is not differentiable (integer token
        ids). Fails, after emitting a diagnostic, when the op cannot be
        differentiated in its current form.
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::RewriterBase &":$rewriter,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Loom_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    An op the cost model can price: it reports, as rows of the seed
    performance model (loom/Dialect/LoomCost.h), its FLOPs, the bytes its
    forward and backward passes move, the activations it keeps for the backward
    pass, its weights and its tensor-parallel collectives, for one
    micro-batch on one rank of a plan. Ops that the model prices as several
    kernels (attention: scores, softmax, weighted sum) append several rows.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends this op's rows, priced under `context`, to `rows`. Row names
        are short ("logits"); the caller prefixes the op's own name.
      }],
      "void", "estimateCost",
      (ins "const ::mlir::loom::CostContext &":$context,
           "::llvm::SmallVectorImpl<::mlir::loom::CostRow> &":$rows)>
  ];
}

def Loom_OptimizerUpdateOpInterface
    : OpInterface<"OptimizerUpdateOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    One optimizer update of one parameter, element by element: the new
    parameter and the new optimizer state at each position depend only on
    the parameter, its gradient and the state at that position (and on
    scalar operands such as the learning rate). The update of any slice is
    therefore the same op on the slices of all of them, which is how ZeRO
    updates each rank's shard (loom-data-parallel).
  }];
  let methods = [
    InterfaceMethod<"The parameter before the update.", "::mlir::Value",
      "getUpdatedParam">,
    InterfaceMethod<"Its gradient.", "::mlir::Value", "getUpdateGrad">,
    InterfaceMethod<"The optimizer state read, in the order of the new "
      "state results.", "::mlir::OperandRange", "getUpdateStates">,
    InterfaceMethod<"The new parameter.", "::mlir::Value", "getNewParamValue",
      (ins), [{ return $_op->getResult(0); }]>,
    InterfaceMethod<"The new optimizer state.", "::mlir::ResultRange",
      "getNewStateValues", (ins), [{ return $_op->getResults().drop_front(); }]>,
    InterfaceMethod<"Makes the update keep the parameter and its state "
      "where `skip`, a 0-d i1 tensor, is true.", "void", "setSkipCondition",
      (ins "::mlir::Value":$skip)>
  ];
}

def Loom_WideStatisticsOpInterface
    : OpInterface<"WideStatisticsOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    An op of the `MixedPrecision` trait some of whose float tensors are
    statistics that keep f32 whatever the storage type of the others
    (attention's log-sum-exp per query: rounded to bf16, one near log 1024
    would be off by up to 0.014, and each probability computed from it by
    1.4%; a layer norm's mean and reciprocal deviation per row).
    loom-lower-precision narrows
    neither these operands nor these results, nor what a layer loop saves
    of them.
  }];
  let methods = [
    InterfaceMethod<"Whether operand `index` keeps f32.", "bool",
      "isWideOperand", (ins "unsigned":$index), "",
      "return false;">,
    InterfaceMethod<"Whether result `index` keeps f32.", "bool",
      "isWideResult", (ins "unsigned":$index), "",
      "return false;">
  ];
}

def Loom_TensorParallelOpInterface : OpInterface<"TensorParallelOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    How an op divides among the ranks of a tensor-parallel group (Megatron-
    LM): given the layouts of its operands (loom/Dialect/LoomParallel.h), the op
    asks the partitioning pass for its operands in the layouts it needs,
    rewrites itself into this rank's part and records its results'
    layouts. A column-parallel linear splits its weight's rows and yields
    its output split along the features; a row-parallel one takes its
    input so split and yields a partial sum the pass reduces; attention
    takes its heads' part of the fused projections; layer norm and
    elementwise ops keep the layout they are given. The pass inserts every
    collective, so an op never asks which op produced its operands.
  }];
  let methods = [
    InterfaceMethod<[{
        Rewrites the op into this rank's part through `rewriter`, which
        stands at the op. The op may replace itself; the caller reads
        nothing of it afterwards.
      }],
      "::llvm::LogicalResult", "partitionTensorParallel",
      (ins "::mlir::loom::TensorParallelRewriter &":$rewriter)>,
    InterfaceMethod<[{
        How operand `index` must be split along dimension `dim`, which its
        producer splits, among `size` ranks: in 3 blocks for the fused
        query, key and value projection attention reads, in groups shared
        by teams of ranks where the ranks outnumber the key/value heads.
      }],
      "::mlir::loom::TensorLayout", "getTensorParallelSplit",
      (ins "unsigned":$index, "int64_t":$dim, "int64_t":$size), [{}],
      [{ return ::mlir::loom::TensorLayout::split(dim); }]>
  ];
}

def Loom_ScalarFunctionOpInterface
    : OpInterface<"ScalarFunctionOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    A function of f32 scalars that the lowering to linalg puts in a loop's
    body as one op (the GELU of `loom.gelu`), so that the passes on loops
    see what a loop computes by the op itself rather than by its
    arithmetic: loom-gemm-epilogues moves a GELU into the epilogue of the
    GEMM before it. loom-expand-scalar-functions then replaces each such op
    by its arithmetic.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the function's arithmetic (arith and math ops on f32) on the
        op's operands at `builder`'s insertion point; returns its value.
      }],
      "::mlir::Value", "expand", (ins "::mlir::OpBuilder &":$builder)>,
    InterfaceMethod<[{
        The GEMM epilogue that computes this function of a GEMM's product,
        if one does: its kind, and which operand is the product (any other
        is the epilogue's auxiliary matrix).
      }],
      "std::optional<::mlir::loom::GemmEpilogue>", "getGemmEpilogue", (ins),
      "", "return std::nullopt;">
  ];
}

#endif // LOOM_INTERFACES_TD
