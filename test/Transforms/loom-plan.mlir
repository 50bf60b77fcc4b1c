// RUN: loom-opt %s --loom-plan --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --emit=loom | loom-opt --loom-plan | FileCheck %s --check-prefix=AUTO
// RUN: loomc %S/Inputs/auto-plan.json --emit=loom | loom-opt --loom-plan=report=plan | FileCheck %s --check-prefix=REPORT
// RUN: loomc %S/Inputs/auto-plan.json --emit=loom | not loom-opt --loom-plan=report=speed 2>&1 | FileCheck %s --check-prefix=BADREPORT
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,zero=1 --emit=loom | loom-opt --loom-plan=report=memory | FileCheck %s --check-prefix=MEMORY
// RUN: loomc %p/../../examples/gpt2-124m.json --plan pp=4,mb=4 --emit=loom | loom-opt --loom-plan | FileCheck %s --check-prefix=STAGES
// RUN: loomc %p/../../examples/gpt2-tiny.json --plan pp=2,mb=2,schedule=interleaved,v=2 --emit=loom | loom-opt --loom-plan | FileCheck %s --check-prefix=CHUNKS

// A module without a plan gets the single-rank one.
// CHECK-LABEL: module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>}
module {
}

// -----

// A plan given is kept.
// CHECK-LABEL: module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>}
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>} {
}

// -----

// "auto" needs a cluster to plan for.
// expected-error @+1 {{planning needs a 'loom.cluster' attribute (a 'cluster' section in the model description: GPU kind, GPUs per node, nodes)}}
module attributes {loom.plan = "auto"} {
}

// The cost model's choice for two GPUs replaces "auto"; the precision it
// plans in is recorded in the training setup.
// AUTO: module @"auto-plan" attributes {loom.cluster = #loom.cluster<gpu = "A100-80GB", gpus_per_node = 2, nodes = 1>
// AUTO-SAME: loom.plan = #loom.plan<dp = {{[12]}}, tp = {{[12]}}, pp = {{[12]}},
// AUTO-NOT: "auto"

// REPORT: model: auto-plan, {{[0-9]+}} parameters, 2 layers; global batch 4 x 4 tokens
// REPORT: cluster: A100-80GB x 2 GPUs per node x 1 nodes = 2 GPUs
// REPORT: chosen plan: dp=
// REPORT: module @"auto-plan"

// BADREPORT: error: loom-plan: report must be 'plan', 'cost', 'memory' or 'schedule', got 'speed'

// The state's bytes per rank under the plan: ZeRO-1 shards the optimizer
// state (AdamW's two moments) over the two replicas.
// MEMORY: cost model  per rank: parameters 7680 B, gradients 7680 B, optimizer state 7680 B (0.02 MiB)

// -----

// A pipeline plan's stages are given as they are.
// CHECK-LABEL: module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [3, 1]>}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [3, 1]>} {
}

// Else the cost model balances them, without a cluster on one it makes
// up: GPT-2's head (a 50257-row GEMM and the loss over it) weighs about
// four layers, so the last stage takes one layer besides; the stages off
// the critical path are as even as the layers allow.
// STAGES: pp = 4, {{.*}} stage_layers = [3, 4, 4, 1]
// Interleaved, each rank's chunks are stages of their own: 2 * 2 of them.
// CHUNKS: pp = 2, {{.*}} virtual_stages = 2, stage_layers = [1, 1, 1, 1]
