// RUN: loom-opt %s --loom-stream-transfers=overlap=0 --split-input-file | FileCheck %s
// RUN: loom-opt %s --loom-stream-transfers --split-input-file | FileCheck %s --check-prefix=OVERLAP

// A layer loop stacks each iteration's gradient; the stack crosses to the
// host after the loop. The loop builds its stack in the host buffer
// instead, each iteration's slice crossing into its place as soon as it
// exists.
// CHECK-LABEL: func.func @stream(
// CHECK-SAME: %[[X:.*]]: tensor<8xf32>, %[[HOST:.*]]: tensor<4x8xf32>)
// CHECK-NOT: tensor.empty() : tensor<4x8xf32>
// CHECK: %[[R:.*]] = scf.for %[[L:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[HOST]]) -> (tensor<4x8xf32>)
// CHECK: %[[Y:.*]] = linalg.add ins(%[[X]], %[[X]] : tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[SLOT:.*]] = tensor.extract_slice %[[ACC]][%[[L]], 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
// CHECK-NEXT: %[[SENT:.*]] = loom.transfer %[[Y]] into %[[SLOT]] to host : tensor<8xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[SENT]] into %[[ACC]][%[[L]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
// CHECK-NEXT: scf.yield %[[IN]]
// CHECK-NOT: loom.transfer
// CHECK: return %[[R]]
// Overlapped: the slice's copy starts, and the loop hands its source to
// the next iteration, which waits for that copy before starting its own;
// the last is waited for after the loop. The first iteration waits on an
// empty tensor, for which no copy is in flight (the static arena puts its
// buffer in the odd slot of the loop's).
// OVERLAP-LABEL: func.func @stream(
// OVERLAP: %[[FIRST:.*]] = tensor.empty() : tensor<8xf32>
// OVERLAP: %[[R:.*]]:2 = scf.for %[[L:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[PREV:.*]] = %[[FIRST]]) -> (tensor<4x8xf32>, tensor<8xf32>)
// OVERLAP: %[[Y:.*]] = linalg.add
// OVERLAP-NEXT: %[[SLOT:.*]] = tensor.extract_slice %[[ACC]]
// OVERLAP-NEXT: loom.transfer_wait %[[PREV]] : tensor<8xf32>
// OVERLAP-NEXT: %[[SENT:.*]] = loom.transfer %[[Y]] into %[[SLOT]] to host async : tensor<8xf32>
// OVERLAP-NEXT: %[[IN:.*]] = tensor.insert_slice %[[SENT]]
// OVERLAP-NEXT: scf.yield %[[IN]], %[[Y]]
// OVERLAP: loom.transfer_wait %[[R]]#1 : tensor<8xf32>
// OVERLAP: return %[[R]]#0
func.func @stream(%x: tensor<8xf32>, %host: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack into %host to host : tensor<4x8xf32>
  return %sent : tensor<4x8xf32>
}

// -----

// A sum over micro-batches (accumulate): each slice adds to its place in
// the host's buffer, which the layer loop's stack starts from.
// CHECK-LABEL: func.func @sum(
// CHECK-SAME: %[[HOST:[a-z0-9]+]]: tensor<4x8xf32>, %[[MORE:[a-z0-9]+]]: i1)
// CHECK: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[HOST]])
// CHECK: %[[SLOT:.*]] = tensor.extract_slice %[[ACC]]
// CHECK-NEXT: loom.transfer %{{.*}} into %[[SLOT]] to host accumulate if %[[MORE]] : tensor<8xf32>
// OVERLAP-LABEL: func.func @sum(
// OVERLAP: loom.transfer %{{.*}} into %{{.*}} to host async accumulate if %{{.*}} : tensor<8xf32>
func.func @sum(%x: tensor<8xf32>, %host: tensor<4x8xf32>, %more: i1) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack into %host to host accumulate if %more : tensor<4x8xf32>
  return %sent : tensor<4x8xf32>
}

// -----

// The device reads the stack besides (a norm it sums over ranks): the whole
// stack stays, and crosses after the loop.
// CHECK-LABEL: func.func @read_besides(
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<4x8xf32>)
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK: loom.transfer %{{.*}} into %{{.*}} to host : tensor<4x8xf32>
func.func @read_besides(%x: tensor<8xf32>, %host: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sq = loom.sum_squares %stack : tensor<4x8xf32> -> tensor<f32>
  %sent = loom.transfer %stack into %host to host : tensor<4x8xf32>
  return %sent, %sq : tensor<4x8xf32>, tensor<f32>
}

// -----

// A loop that carries its value from one iteration to the next (a sum over
// micro-batches) is not a stack: it crosses whole, after the loop.
// CHECK-LABEL: func.func @carried(
// CHECK: scf.for
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK: loom.transfer %{{.*}} into %{{.*}} to host : tensor<8xf32>
func.func @carried(%x: tensor<8xf32>, %host: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<8xf32>
  %sum = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<8xf32>) {
    %y = loom.add %acc, %x : tensor<8xf32>
    scf.yield %y : tensor<8xf32>
  }
  %sent = loom.transfer %sum into %host to host : tensor<8xf32>
  return %sent : tensor<8xf32>
}

// -----

// The destination is made after the loop (it does not dominate it), is read
// besides, or the loop stacks along another dimension, whose slices are not
// contiguous: each stack crosses whole, after the loop.
// CHECK-LABEL: func.func @not_streamed(
// CHECK: scf.for
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK-COUNT-3: loom.transfer %{{.*}} into %{{.*}} to host : tensor<4x8xf32>
func.func @not_streamed(%x: tensor<8xf32>, %host: tensor<4x8xf32>, %col: tensor<4xf32>, %cols: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %later = tensor.empty() : tensor<4x8xf32>
  %late = loom.transfer %stack into %later to host : tensor<4x8xf32>
  %empty2 = tensor.empty() : tensor<4x8xf32>
  %stack2 = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty2) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %read = loom.transfer %stack2 into %host to host : tensor<4x8xf32>
  %empty3 = tensor.empty() : tensor<4x8xf32>
  %stack3 = scf.for %l = %c0 to %c8 step %c1 iter_args(%acc = %empty3) -> (tensor<4x8xf32>) {
    %y = loom.add %col, %col : tensor<4xf32>
    %in = tensor.insert_slice %y into %acc[0, %l] [4, 1] [1, 1] : tensor<4xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack3 into %cols to host : tensor<4x8xf32>
  return %late, %read, %sent, %host : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A layer's parameters fetched from host memory at the top of each
// iteration (offload=parameters). Overlapped, the first is fetched before
// the loop, and each iteration starts the next one's fetch (where there is
// a next) into a buffer the loop hands on, then waits for its own, which
// the previous iteration started, and reads it.
// CHECK-LABEL: func.func @fetch(
// CHECK: scf.for
// CHECK: %[[BUF:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: loom.transfer %{{.*}} into %[[BUF]] to device : tensor<8xf32>
// OVERLAP-LABEL: func.func @fetch(
// OVERLAP-SAME: %[[W:.*]]: tensor<4x8xf32>, %[[X:.*]]: tensor<8xf32>)
// OVERLAP-DAG: %[[C0:.*]] = arith.constant 0 : index
// OVERLAP-DAG: %[[C1:.*]] = arith.constant 1 : index
// OVERLAP-DAG: %[[C3:.*]] = arith.constant 3 : index
// OVERLAP-DAG: %[[C4:.*]] = arith.constant 4 : index
// OVERLAP: %[[I0:.*]] = arith.subi %[[C3]], %[[C0]] : index
// OVERLAP-NEXT: %[[S0:.*]] = tensor.extract_slice %[[W]][%[[I0]], 0] [1, 8] [1, 1]
// OVERLAP-NEXT: %[[B0:.*]] = tensor.empty() : tensor<8xf32>
// OVERLAP-NEXT: %[[F0:.*]] = loom.transfer %[[S0]] into %[[B0]] to device async : tensor<8xf32>
// OVERLAP: %[[R:.*]]:2 = scf.for %[[L:.*]] = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%[[ACC:.*]] = %[[X]], %[[CUR:.*]] = %[[F0]])
// OVERLAP: %[[NEXT:.*]] = arith.addi %[[L]], %[[C1]] : index
// OVERLAP-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[C4]] : index
// OVERLAP-NEXT: %[[BUF:.*]] = tensor.empty() : tensor<8xf32>
// OVERLAP-NEXT: %[[AHEAD:.*]] = scf.if %[[MORE]] -> (tensor<8xf32>) {
// OVERLAP-NEXT: %[[IN:.*]] = arith.subi %[[C3]], %[[NEXT]] : index
// OVERLAP-NEXT: %[[SN:.*]] = tensor.extract_slice %[[W]][%[[IN]], 0] [1, 8] [1, 1]
// OVERLAP-NEXT: %[[FN:.*]] = loom.transfer %[[SN]] into %[[BUF]] to device async : tensor<8xf32>
// OVERLAP-NEXT: scf.yield %[[FN]]
// OVERLAP-NEXT: } else {
// OVERLAP-NEXT: scf.yield %[[BUF]]
// OVERLAP-NEXT: }
// OVERLAP-NEXT: loom.transfer_wait %[[CUR]] : tensor<8xf32>
// OVERLAP-NEXT: %[[Y:.*]] = loom.add %[[ACC]], %[[CUR]] : tensor<8xf32>
// OVERLAP-NEXT: scf.yield %[[Y]], %[[AHEAD]]
// OVERLAP: return %[[R]]#0
func.func @fetch(%w: tensor<4x8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<8xf32>) {
    %i = arith.subi %c3, %l : index
    %slice = tensor.extract_slice %w[%i, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %buffer = tensor.empty() : tensor<8xf32>
    %layer = loom.transfer %slice into %buffer to device : tensor<8xf32>
    %y = loom.add %acc, %layer : tensor<8xf32>
    scf.yield %y : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// A fetch whose offset the loop computes in a way that cannot be redone for
// another iteration (a value it carries) is not fetched ahead.
// OVERLAP-LABEL: func.func @fetch_carried_offset(
// OVERLAP-NOT: async
// OVERLAP: loom.transfer %{{.*}} into %{{.*}} to device : tensor<8xf32>
// OVERLAP-NOT: async
// OVERLAP: return
func.func @fetch_carried_offset(%w: tensor<4x8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r:2 = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %x, %i = %c0) -> (tensor<8xf32>, index) {
    %slice = tensor.extract_slice %w[%i, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %buffer = tensor.empty() : tensor<8xf32>
    %layer = loom.transfer %slice into %buffer to device : tensor<8xf32>
    %y = loom.add %acc, %layer : tensor<8xf32>
    %next = arith.addi %i, %c1 : index
    scf.yield %y, %next : tensor<8xf32>, index
  }
  return %r#0 : tensor<8xf32>
}

// -----

// A loop whose trip count is not known to be positive: its fetch is not
// started before it.
// OVERLAP-LABEL: func.func @fetch_unknown_bounds(
// OVERLAP-NOT: async
// OVERLAP: return
func.func @fetch_unknown_bounds(%w: tensor<4x8xf32>, %x: tensor<8xf32>, %n: index) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %l = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<8xf32>) {
    %slice = tensor.extract_slice %w[%l, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %buffer = tensor.empty() : tensor<8xf32>
    %layer = loom.transfer %slice into %buffer to device : tensor<8xf32>
    %y = loom.add %acc, %layer : tensor<8xf32>
    scf.yield %y : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// The slice sent is a view of a value from outside the loop: handed to the
// next iteration, bufferization would copy it at the yield, and the wait
// would name the copy. It is streamed, but its transfer is waited for.
// OVERLAP-LABEL: func.func @send_outside_view(
// OVERLAP: scf.for
// OVERLAP-NOT: async
// OVERLAP: loom.transfer %{{.*}} into %{{.*}} to host : tensor<8xf32>
// OVERLAP-NOT: async
// OVERLAP: return
func.func @send_outside_view(%all: tensor<4x8xf32>, %host: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = tensor.extract_slice %all[%l, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack into %host to host : tensor<4x8xf32>
  return %sent : tensor<4x8xf32>
}

// -----

// ZeRO-2: this rank's layers of the stack, reduce-scattered along the
// layers over the replicas (grid axis 1), cross to the host. Each layer is
// instead summed onto the rank that owns it (two layers a rank) as the
// loop makes it, and only the owner sends it, into its place among its
// layers in the host's buffer, where the loop builds the rank's stack.
// Overlapped, the wait for the previous layer's copy stays outside the
// condition: the next iteration's buffer is the one before's either way.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @owned_layers(
// CHECK-SAME: %[[X:.*]]: tensor<8xf32>, %[[HOST:.*]]: tensor<16xf32>)
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @grid axes = [1] : index
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[RANK]], %[[C2]] : index
// CHECK: %[[MINE:.*]] = tensor.expand_shape %[[HOST]] {{\[\[}}0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
// CHECK: %[[R:.*]] = scf.for %[[L:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[MINE]]) -> (tensor<2x8xf32>)
// CHECK: %[[Y:.*]] = linalg.add
// CHECK-NEXT: %[[OWNER:.*]] = arith.divui %[[L]], %[[C2]] : index
// CHECK-NEXT: %[[SUM:.*]] = shard.reduce %[[Y]] on @grid grid_axes = [1] root = [%[[OWNER]]] : (tensor<8xf32>, index) -> tensor<8xf32>
// CHECK-NEXT: %[[OWNED:.*]] = arith.cmpi eq, %[[OWNER]], %[[RANK]] : index
// CHECK-NEXT: %[[PLACED:.*]] = scf.if %[[OWNED]] -> (tensor<2x8xf32>) {
// CHECK-NEXT: %[[AT:.*]] = arith.subi %[[L]], %[[FIRST]] : index
// CHECK-NEXT: %[[SLOT:.*]] = tensor.extract_slice %[[ACC]][%[[AT]], 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK-NEXT: %[[SENT:.*]] = loom.transfer %[[SUM]] into %[[SLOT]] to host : tensor<8xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[SENT]] into %[[ACC]][%[[AT]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<2x8xf32>
// CHECK-NEXT: scf.yield %[[IN]]
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[ACC]]
// CHECK: scf.yield %[[PLACED]]
// CHECK-NOT: shard.reduce_scatter
// CHECK: %[[ARRIVED:.*]] = tensor.collapse_shape %[[R]] {{\[\[}}0, 1]] : tensor<2x8xf32> into tensor<16xf32>
// CHECK: return %[[ARRIVED]]
// OVERLAP-LABEL: func.func @owned_layers(
// OVERLAP: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[PREV:.*]] = %{{.*}}) -> (tensor<2x8xf32>, tensor<8xf32>)
// OVERLAP: %[[SUM:.*]] = shard.reduce
// OVERLAP-NEXT: arith.cmpi
// OVERLAP-NEXT: loom.transfer_wait %[[PREV]] : tensor<8xf32>
// OVERLAP-NEXT: scf.if
// OVERLAP: loom.transfer %[[SUM]] into %{{.*}} to host async : tensor<8xf32>
// OVERLAP: scf.yield %{{.*}}, %[[SUM]]
func.func @owned_layers(%x: tensor<8xf32>, %host: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %mine = shard.reduce_scatter %stack on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %rows = tensor.collapse_shape %mine [[0, 1]] : tensor<2x8xf32> into tensor<16xf32>
  %sent = loom.transfer %rows into %host to host : tensor<16xf32>
  return %sent : tensor<16xf32>
}

// -----

// ZeRO-2 on the device: the same sums onto each layer's owner, which keeps
// its sum among the rank's layers; the loop builds those in a tensor of
// their own, and the stack is never whole.
// CHECK-LABEL: func.func @kept_layers(
// CHECK: %[[MINE:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @grid axes = [1] : index
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[RANK]], %[[C2]] : index
// CHECK: %[[R:.*]] = scf.for %[[L:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[MINE]]) -> (tensor<2x8xf32>)
// CHECK: %[[Y:.*]] = linalg.add
// CHECK-NEXT: %[[OWNER:.*]] = arith.divui %[[L]], %[[C2]] : index
// CHECK-NEXT: %[[SUM:.*]] = shard.reduce %[[Y]] on @grid grid_axes = [1] root = [%[[OWNER]]] : (tensor<8xf32>, index) -> tensor<8xf32>
// CHECK-NEXT: %[[OWNED:.*]] = arith.cmpi eq, %[[OWNER]], %[[RANK]] : index
// CHECK-NEXT: %[[PLACED:.*]] = scf.if %[[OWNED]] -> (tensor<2x8xf32>) {
// CHECK-NEXT: %[[AT:.*]] = arith.subi %[[L]], %[[FIRST]] : index
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[SUM]] into %[[ACC]][%[[AT]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<2x8xf32>
// CHECK-NEXT: scf.yield %[[IN]]
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[ACC]]
// CHECK: scf.yield %[[PLACED]]
// CHECK-NOT: shard.reduce_scatter
// CHECK: return %[[R]]
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
func.func @kept_layers(%x: tensor<8xf32>) -> tensor<2x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %mine = shard.reduce_scatter %stack on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  return %mine : tensor<2x8xf32>
}

// -----

// A stack something else reads stays whole, reduce-scattered after the
// loop.
// CHECK-LABEL: func.func @stack_read_twice(
// CHECK-NOT: shard.reduce %
// CHECK: shard.reduce_scatter
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
func.func @stack_read_twice(%x: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %mine = shard.reduce_scatter %stack on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  return %mine, %stack : tensor<2x8xf32>, tensor<4x8xf32>
}
