//===- Passes.td - Loom's bufferization passes -------------*- tablegen -*-===//

#ifndef LOOM_BUFFERIZATION_PASSES_TD
#define LOOM_BUFFERIZATION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomStreamTransfers
    : Pass<"loom-stream-transfers", "::mlir::ModuleOp"> {
  let summary = "Move the transfer of a layer loop's stack into the loop";
  let description = [{
    `loom.transfer %stack into %dest`, where `%stack` is what an `scf.for`
    built slice by slice from an empty tensor (a layer loop's stacked
    result, as the lowering of `loom.scan` makes it) and nothing else reads
    it, becomes a transfer of each slice into its slice of `%dest` as the
    loop makes it: the loop builds its stack in `%dest`, and each
    iteration's value crosses as soon as it exists. An offloaded step's
    layer gradients thus reach the host layer by layer during the backward
    pass, and the device never holds the whole stack (ZeRO-Offload's
    gradients, streamed to the host as they are made). The slices must be
    along the leading dimension (contiguous, as a transfer's destination
    must be), and `%dest` defined before the loop and read by nothing
    else. Each slice crosses as soon as it and its place's offsets exist.

    With `overlap` (the default) a layer loop's transfers then run
    alongside its compute, double-buffered (`async`, `loom.transfer_wait`):
    a slice sent to the host whose value the iteration makes (it
    bufferizes to a buffer of the iteration's own, or a view of one) is
    handed to the next iteration, which waits for its copy just before it
    starts its own, and the last is waited for after the loop; a fetch
    into a fresh buffer of a slice of something defined outside a loop of
    constant bounds that runs at least once, at offsets computed from the
    induction variable, is started an iteration ahead (the first before the loop,
    each next one under an `scf.if` where the iteration has a next) into a
    buffer the loop hands to the iteration that reads it, which waits for
    it first. The static arena gives each handed-on buffer two slots.

    ZeRO-2 with offload: `loom.transfer` of this rank's layers of a loop's
    stack, `tensor.collapse_shape` of a `shard.reduce_scatter` along the
    layers (as `loom-data-parallel` forms it), moves into the loop the same
    way, with each layer's slice summed onto the rank that owns it (a
    `shard.reduce` whose root is the layer's owner, DeepSpeed's ZeRO-2
    reduction), which alone sends it, under an `scf.if`, into its place
    among its layers in `%dest`: the same sums, the same traffic. The wait
    for the previous layer's copy stays in the loop's body, outside the
    condition.

    ZeRO-2 on the device: such a `shard.reduce_scatter` whose result no
    transfer reads becomes the same sums onto each layer's owner, which
    keeps its sum among its layers; the loop builds those in a
    `tensor.empty` of the rank's layers, which replaces the reduce-scatter's
    result. The device then never holds the stack whole.
  }];
  let options = [Option<"overlap", "overlap", "bool", /*default=*/"true",
                        "Start a layer loop's transfers an iteration ahead "
                        "and wait for them an iteration later">];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::loom::LoomDialect"];
}

def LoomReshapeDestinations
    : Pass<"loom-reshape-destinations", "::mlir::ModuleOp"> {
  let summary = "Reshape the destination of a slice insertion instead of the "
                "value inserted";
  let description = [{
    `tensor.insert_slice (tensor.expand_shape %x) into %dest` (or a
    `collapse_shape`), where the slice spans the trailing dimensions of
    `%dest` whole, becomes `tensor.insert_slice %x` into the inverse reshape
    of `%dest`, reshaped back. A layer loop saves activations this way: the
    linear maps compute [tokens, features] and the stack holds
    [layers, batch, sequence, features]. Upstream's
    `eliminate-empty-tensors` does not look through reshapes; after this
    pass it makes the producer of `%x` write straight into the slice
    instead of a buffer that is then copied. The destination is reshaped
    right after its definition, where it dominates the producer.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def LoomDestinationOutputs
    : Pass<"loom-destination-outputs", "::mlir::ModuleOp"> {
  let summary = "Turn the results of entry points into destination arguments";
  let description = [{
    The runtime owns every buffer an entry point touches. For each public
    function with Loom argument attributes, a result marked `loom.updates`
    = i is written into argument i, and a result marked `loom.output` or
    `loom.grad` gets a new trailing argument (named by `loom.output`:
    "loss", "grad_norm", "grad.<param>") it is written into, both with
    `bufferization.materialize_in_destination`, placed right after the
    value is made and its destination last read rather than at the
    return: the value's own buffer is then free for what follows (ZeRO's
    parameters, gathered tensor by tensor at the end of a step, need one
    tensor's buffer at a time). After bufferization every result is then
    equivalent to an argument and `drop-equivalent-buffer-results` removes
    it, leaving functions without results.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def LoomLowerGridIndices : Pass<"loom-lower-grid-indices", "::mlir::ModuleOp"> {
  let summary = "Lower a rank's index on a grid axis to a runtime call";
  let description = [{
    `shard.process_multi_index on @grid axes = [a]`, with which a ZeRO
    step finds its shard, becomes a call of the runtime's
    `loom_rt_group_rank` for the communicator of axis `a` (pp, dp or tp of
    the pp x dp x tp grid). Runs after bufferization, like the lowering of
    the collectives, so that `--emit=parallel` and `--emit=linalg` keep the
    upstream op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def LoomStaticArena : Pass<"loom-static-arena", "::mlir::ModuleOp"> {
  let summary = "Place each function's buffers in one arena by liveness";
  let description = [{
    Runs on bufferized functions, before buffer deallocation. Every
    `memref.alloc` of a static, identity-layout buffer becomes a
    `memref.view` of one `memref<Nxi8>` allocated at the function's entry,
    at an offset no buffer live at the same time shares, so the function's
    memory is known at compile time and the heap serves it with one block.

    A buffer is live from its allocation to the end of the last op of its
    block that uses it or anything made from it (views, casts, pointers,
    what a region's terminator forwards it to), an op with regions counting
    whole; intervals come from numbering the ops in pre-order. A buffer an
    `scf.if` yields lives over the whole `scf.if`. A buffer an `scf.for`
    body yields to the next iteration, through one iteration argument that
    the body passes on no further, gets two slots taken in turn by even and
    odd iterations. Offsets are first-fit, the largest buffers first, at
    64-byte alignment or the allocation's own. Buffers of dynamic size, or
    allocated inside a loop whose iterations may run at once, stay on the
    heap, with a remark.

    The function gets `loom.arena = {bytes, live, communication}`: the
    arena's size, the most bytes of buffers live at once, and of those the
    bytes of buffers a function declared `loom.communication` reads or
    writes. With `device-scalars=N` (the CUDA pipeline's 64), N more bytes
    past the buffers, at 64-byte alignment, counted live throughout, and
    `scalars` says where they begin: slots through which a kernel of one
    thread hands what it computes to later kernels
    (`loom-parallel-loops-to-gpu`), so that the arena's figures, and the
    manifest's, include them. With `print`, each planned function prints
    one line.
  }];
  let options = [Option<"print", "print", "bool", /*default=*/"false",
                        "Print each function's arena">,
                 Option<"deviceScalars", "device-scalars", "int64_t",
                        /*default=*/"0",
                        "Bytes reserved past the buffers for scalars "
                        "kernels hand to later kernels">];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoomFoldFalseLoopFlags : Pass<"loom-fold-false-loop-flags"> {
  let summary = "Replace loop-carried i1 flags that are always false";
  let description = [{
    An `i1` iteration argument of an `scf.for` that starts as the constant
    false and is yielded as false, as one of a set of such arguments, or an
    `arith.ori` of those, is false in every iteration and after the loop:
    the pass finds the largest such set of each loop, inner loops first,
    and replaces the arguments' uses and the loop's results by the
    constant. Runs between MLIR's ownership-based deallocation and its
    lowering: the ownership flags of buffers a loop yields are of this form
    when every buffer is a view of the static arena, and a `bufferization.
    dealloc` still conditional on them would become a run-time alias check
    with heap buffers of its own.
  }];
}

#endif // LOOM_BUFFERIZATION_PASSES_TD
