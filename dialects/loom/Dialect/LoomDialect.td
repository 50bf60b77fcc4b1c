//===- LoomDialect.td - The loom dialect -------------------*- tablegen -*-===//
//
// The `loom` dialect holds transformer training programs at the level people
// reason about them: embeddings, layer norms, linears, attention and the loss,
// on statically shaped ranked tensors. Upstream dialects (linalg, tensor,
// shard, ...) take over below this level; `loom` exists because none of them
// carries the per-op knowledge the training-step builder, the parallel passes
// and the cost model need (vector-Jacobian products, Megatron splits, FLOPs).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TD
#define LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let summary = "Transformer training programs";
  let description = [{
    Ops of a GPT-style model's forward pass and loss, and the attributes that
    describe the model, its training setup, the parallel plan and the cluster.
    Later layers add gradient, optimizer, collective and region ops.
  }];
  let cppNamespace = "::mlir::loom";
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Adds the attributes; defined next to their storage classes.
    void registerAttributes();

    /// Module attribute names under which the importer records the model
    /// description, the training setup, the parallel plan and the cluster.
    static constexpr ::llvm::StringLiteral getModelAttrName() {
      return "loom.model";
    }
    static constexpr ::llvm::StringLiteral getTrainingAttrName() {
      return "loom.training";
    }
    static constexpr ::llvm::StringLiteral getPlanAttrName() {
      return "loom.plan";
    }
    /// Set by loom-plan on a module whose plan does not fit in memory.
    static constexpr ::llvm::StringLiteral getDoesNotFitAttrName() {
      return "loom.plan_does_not_fit";
    }
    static constexpr ::llvm::StringLiteral getClusterAttrName() {
      return "loom.cluster";
    }
    /// Module attribute: each parameter of the whole model, in the model's
    /// order, beyond its shape (loom::TensorSpec, getTensorSpecAttr): how it
    /// starts and its name in Hugging Face's checkpoints. The manifest's
    /// `tensor` lines.
    static constexpr ::llvm::StringLiteral getTensorsAttrName() {
      return "loom.tensors";
    }
    /// Module unit attribute: the tensors are llm.c's GPT-2 checkpoint's, in
    /// its order (the manifest's `checkpoint llmc`).
    static constexpr ::llvm::StringLiteral getLlmcCheckpointAttrName() {
      return "loom.llmc_checkpoint";
    }
    /// Module attribute: a rank's bytes of parameters, gradients and
    /// optimizer state, and the activations one micro-batch keeps for the
    /// backward pass, as compiled (loom-memory-report), a dictionary of
    /// i64 named by getMemoryKeys().
    static constexpr ::llvm::StringLiteral getMemoryAttrName() {
      return "loom.memory";
    }
    static constexpr ::llvm::StringLiteral getMemoryParametersKey() {
      return "parameters";
    }
    static constexpr ::llvm::StringLiteral getMemoryGradientsKey() {
      return "gradients";
    }
    static constexpr ::llvm::StringLiteral getMemoryOptimizerKey() {
      return "optimizer";
    }
    static constexpr ::llvm::StringLiteral getMemoryActivationsKey() {
      return "activations";
    }
    static ::llvm::ArrayRef<::llvm::StringLiteral> getMemoryKeys() {
      static constexpr ::llvm::StringLiteral keys[] = {
          getMemoryParametersKey(), getMemoryGradientsKey(),
          getMemoryOptimizerKey(), getMemoryActivationsKey()};
      return keys;
    }
    /// Under an offload plan: the bytes of the parameters and optimizer
    /// state above that the rank keeps in host memory.
    static constexpr ::llvm::StringLiteral getMemoryHostKey() {
      return "host";
    }
    /// Unit attribute of a function whose code runs on the host and whose
    /// buffers are host memory (the offloaded optimizer's,
    /// loom-place-offload), and of a training step's argument kept in host
    /// memory.
    static constexpr ::llvm::StringLiteral getHostAttrName() {
      return "loom.host";
    }
    /// Argument attribute of the device's copy of a parameter, in the
    /// step's precision, whose master the host keeps (offload): the
    /// parameter's name.
    static constexpr ::llvm::StringLiteral getParamCopyAttrName() {
      return "loom.param_copy";
    }
    /// Function attribute: the static arena `loom-static-arena` placed the
    /// function's buffers in, a dictionary of i64 named by getArenaKeys():
    /// the arena's bytes, the most bytes of buffers live at once, and of
    /// those the bytes of the activations the forward pass kept for the
    /// backward pass, of the gradients it handed on, and of the other
    /// buffers a collective or message reads or writes.
    static constexpr ::llvm::StringLiteral getArenaAttrName() {
      return "loom.arena";
    }
    static constexpr ::llvm::StringLiteral getArenaBytesKey() {
      return "bytes";
    }
    static constexpr ::llvm::StringLiteral getArenaLiveKey() { return "live"; }
    static constexpr ::llvm::StringLiteral getArenaCommunicationKey() {
      return "communication";
    }
    static constexpr ::llvm::StringLiteral getArenaKeptKey() { return "kept"; }
    static constexpr ::llvm::StringLiteral getArenaGradientsKey() {
      return "gradients";
    }
    /// Optional key of `loom.arena`: where the first free slot of the bytes
    /// `loom-static-arena` reserved past the buffers (`device-scalars`)
    /// begins, which kernels of one thread hand scalars to later kernels
    /// through (`loom-parallel-loops-to-gpu`); the arena's end once all are
    /// taken.
    static constexpr ::llvm::StringLiteral getArenaScalarsKey() {
      return "scalars";
    }
    static ::llvm::ArrayRef<::llvm::StringLiteral> getArenaKeys() {
      static constexpr ::llvm::StringLiteral keys[] = {
          getArenaBytesKey(), getArenaLiveKey(), getArenaCommunicationKey(),
          getArenaKeptKey(), getArenaGradientsKey()};
      return keys;
    }
    /// Unit attribute on a declaration of the runtime's functions that
    /// communicate with other ranks (collectives and messages): the memory
    /// plan counts the buffers they read or write.
    static constexpr ::llvm::StringLiteral getCommunicationAttrName() {
      return "loom.communication";
    }
    /// The value of `loom.plan` that asks `loom-plan` to choose the plan.
    static constexpr ::llvm::StringLiteral getAutoPlanName() { return "auto"; }
    /// Unit attribute on an op inside a loom.scan body: the backward pass
    /// recomputes its results instead of the forward pass saving them
    /// (activation recomputation). On a call in a pipeline rank's step: the
    /// call reruns a stage's forward pass for its backward pass
    /// (recompute=stage), so what it returns was not kept.
    static constexpr ::llvm::StringLiteral getRecomputeAttrName() {
      return "loom.recompute";
    }
    /// Argument attributes naming a function argument as a model parameter
    /// (with its GPT-2 name) or as a data input (`tokens`, `targets`).
    static constexpr ::llvm::StringLiteral getParamAttrName() {
      return "loom.param";
    }
    static constexpr ::llvm::StringLiteral getInputAttrName() {
      return "loom.input";
    }
    /// Argument attribute naming optimizer state ("m.wte", "v.wte",
    /// "momentum.wte") of the training step.
    static constexpr ::llvm::StringLiteral getStateAttrName() {
      return "loom.state";
    }
    /// Argument attribute of a parameter that each data-parallel replica
    /// holds only part of (ZeRO-3): the i64 dimension of the whole tensor
    /// whose extent the argument's type holds 1/dp of, this rank's part
    /// being the slice at its index on the replica axis.
    static constexpr ::llvm::StringLiteral getShardAttrName() {
      return "loom.shard";
    }
    /// Argument attribute of a parameter that tensor parallelism divides
    /// (loom-tensor-parallel): `[dim, blocks]`, dimension `dim` of the
    /// whole tensor being `blocks` equal blocks (3 for the fused query, key
    /// and value projection), each divided evenly among the tp ranks; the
    /// argument's type holds this rank's part of every block, at its index
    /// on the tensor-parallel axis. `[dim, blocks, shared]`: the ranks
    /// outnumber the blocks (key/value heads replicated); each block is held
    /// by tp / blocks consecutive ranks, which divide its leading elements
    /// and each hold its last `shared` elements. `loom.shard` then refers to
    /// the argument's own type.
    static constexpr ::llvm::StringLiteral getTensorSplitAttrName() {
      return "loom.tp_split";
    }
    /// Names an output of an entry point: on a result ("loss"), and on the
    /// argument that receives it once results are passed by destination.
    static constexpr ::llvm::StringLiteral getOutputAttrName() {
      return "loom.output";
    }
    /// Unit attribute on a function outlined from a parallel loop nest: its
    /// first two arguments are the range [begin, end) of the loop's
    /// outermost iterations it runs, so the runtime can split them among
    /// threads.
    static constexpr ::llvm::StringLiteral getParallelForAttrName() {
      return "loom.parallel_for";
    }
    /// Integer attribute on a function of a pipeline plan: the stage, in
    /// model order, whose share of the forward pass (or of the training
    /// step) it computes.
    static constexpr ::llvm::StringLiteral getStageAttrName() {
      return "loom.stage";
    }
    /// What a pipeline stage's functions take from and give to their
    /// neighbours (`loom.input` and `loom.output` values): the activations
    /// between two stages, their gradient, and the loss's gradient that
    /// seeds the last stage's backward pass.
    static constexpr ::llvm::StringLiteral getActivationsName() {
      return "activations";
    }
    static constexpr ::llvm::StringLiteral getActivationsGradName() {
      return "activations_grad";
    }
    static constexpr ::llvm::StringLiteral getLossGradName() {
      return "loss_grad";
    }
    /// Argument attribute of a parameter stacked over the layers that holds
    /// some of them only (a pipeline stage's): `[first, count, ...]`, runs
    /// of the whole's layers in the order the argument holds them.
    static constexpr ::llvm::StringLiteral getLayersAttrName() {
      return "loom.layers";
    }
    /// Result attribute naming the parameter a result is the gradient of.
    static constexpr ::llvm::StringLiteral getGradAttrName() {
      return "loom.grad";
    }
    /// Result attribute of the training step: the index of the argument
    /// (parameter or optimizer state) the result is the new value of.
    static constexpr ::llvm::StringLiteral getUpdatesAttrName() {
      return "loom.updates";
    }

    /// The functions the importer and the training-step passes build:
    /// the forward pass and mean loss, the loss with every parameter's
    /// gradient, and the whole step with the optimizer.
    static constexpr ::llvm::StringLiteral getForwardFunctionName() {
      return "forward";
    }
    static constexpr ::llvm::StringLiteral getForwardGradFunctionName() {
      return "forward_grad";
    }
    static constexpr ::llvm::StringLiteral getTrainStepFunctionName() {
      return "train_step";
    }
  }];
}

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_TD
