//===- StaticArena.cpp - The loom-static-arena pass -----------------------===//
//
// Places every buffer a function allocates at a fixed offset of one arena,
// by liveness, so that the memory a rank's step needs is known when it is
// compiled and the step asks the heap for one block.
//
// A buffer is live from its allocation to the end of the last op of its
// block that uses it or anything made from it (a view, a cast, a pointer,
// a loop's iteration argument or result that it flows into), where an op
// with regions counts whole. Numbering the function's ops in pre-order
// gives each buffer an interval; two buffers live at once at run time
// always have overlapping intervals, since the op running then lies in
// both. A loop that allocates a buffer in one iteration and hands it to the
// next (the layer loop's hidden state, a sum over micro-batches) holds two
// of them at once: such a buffer gets two slots for the whole loop, taken
// in turn by even and odd iterations; a buffer made before the loop only
// to start it (nothing but the loop uses it from the loop on: a layer
// fetched ahead, an async transfer's first wait) takes the odd slot, which
// the first iteration does not use. Buffers of dynamic size, or made inside
// a loop whose iterations may run at once, stay on the heap.
//
//===----------------------------------------------------------------------===//

#include "loom/Bufferization/Passes.h"

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSTATICARENA
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Vector loads want cache-line alignment, and the heap gives no less.
constexpr int64_t kMinAlignment = 64;

/// One buffer's place: `slots` consecutive slots of `slotBytes` from
/// `offset`, live over the pre-order positions [start, end].
struct Buffer {
  memref::AllocOp alloc;
  int64_t start = 0, end = 0;
  int64_t slotBytes = 0, alignment = kMinAlignment;
  /// Two for a buffer a loop hands from one iteration to the next.
  int64_t slots = 1;
  scf::ForOp carrier;
  /// The iteration arguments of `carrier` the buffer (or its views) is
  /// handed on through.
  SmallVector<unsigned> carriedIndices;
  /// For a buffer that only starts a loop's carried buffer: that buffer's
  /// index, whose odd slot it takes.
  std::optional<size_t> oddSlotOf;
  /// Where in that odd slot.
  int64_t oddSlotOffset = 0;
  bool communication = false;
  /// Made by the forward pass and read by the backward pass: an
  /// activation kept for it.
  bool kept = false;
  /// Made by the backward pass and read after it (by the optimizer, the
  /// gradients' collectives, the function's results): gradients.
  bool gradient = false;
  int64_t offset = 0;

  int64_t bytes() const { return slots * slotBytes; }
};

/// Pre-order positions of a function's ops and the last position inside
/// each.
class Positions {
public:
  explicit Positions(Operation *root) { number(root); }
  int64_t first(Operation *op) const { return pos.lookup(op).first; }
  int64_t last(Operation *op) const { return pos.lookup(op).second; }

private:
  void number(Operation *op) {
    int64_t begin = next++;
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Operation &nested : block)
          number(&nested);
    pos[op] = {begin, next - 1};
  }
  int64_t next = 0;
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> pos;
};

/// Every op that uses `root` or a value made from it. Each result of an
/// op that uses a value of the set joins the set, but floats, and so does the
/// memory a value of it is stored into; an scf.yield passes it on to what it
/// forwards to (a loop's next iteration and results, an if's results).
/// What `stop` makes is not followed.
SmallVector<Operation *> collectUsers(Value root,
                                      llvm::SetVector<Value> &values,
                                      Operation *stop = nullptr) {
  SmallVector<Operation *> users;
  values.insert(root);
  for (size_t i = 0; i < values.size(); ++i) {
    Value value = values[i];
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      users.push_back(user);
      if (user == stop)
        continue;
      if (user->hasTrait<OpTrait::IsTerminator>()) {
        // Where an scf.yield forwards its operand; other terminators'
        // operands leave the block, which the buffer's block then cannot
        // hold.
        if (!isa<scf::YieldOp>(user))
          continue;
        unsigned index = use.getOperandNumber();
        Operation *parent = user->getParentOp();
        if (index < parent->getNumResults())
          values.insert(parent->getResult(index));
        if (auto loop = dyn_cast<scf::ForOp>(parent))
          values.insert(loop.getRegionIterArgs()[index]);
        continue;
      }
      // A loop's starting value reaches the loop's result in its place, and
      // those of the places the body passes it on to.
      if (auto loop = dyn_cast<scf::ForOp>(user);
          loop && use.getOperandNumber() >= loop.getNumControlOperands()) {
        unsigned index = use.getOperandNumber() - loop.getNumControlOperands();
        values.insert(loop.getResult(index));
        llvm::SetVector<Value> inside;
        collectUsers(loop.getRegionIterArgs()[index], inside, loop);
        for (auto [place, result] :
             llvm::zip(loop.getYieldedValues(), loop.getResults()))
          if (inside.contains(place))
            values.insert(result);
        continue;
      }
      // A float read from a buffer holds no address; any other result may
      // (a view, a pointer as an integer).
      for (Value result : user->getResults())
        if (!isa<FloatType>(result.getType()))
          values.insert(result);
      if (auto store = dyn_cast<memref::StoreOp>(user))
        if (store.getValueToStore() == value)
          values.insert(store.getMemRef());
      if (auto store = dyn_cast<LLVM::StoreOp>(user))
        if (store.getValue() == value)
          values.insert(store.getAddr());
    }
  }
  return users;
}

/// Whether each execution of `op`'s block runs after the last one ended:
/// no enclosing op runs its regions' iterations at once.
bool runsInOrder(Operation *op, Operation *root) {
  for (Operation *parent = op->getParentOp(); parent && parent != root;
       parent = parent->getParentOp())
    if (!isa<scf::ForOp, scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(
            parent))
      return false;
  return true;
}

/// The last position of the ops of `block` that `users` lie in, or failure
/// when one lies outside the block or is its terminator.
FailureOr<int64_t> lastUseIn(Block &block, ArrayRef<Operation *> users,
                             const Positions &positions, int64_t start) {
  int64_t end = start;
  for (Operation *user : users) {
    Operation *op = block.findAncestorOpInBlock(*user);
    if (!op || op->hasTrait<OpTrait::IsTerminator>())
      return failure();
    end = std::max(end, positions.last(op));
  }
  return end;
}

bool isCommunication(Operation *op) {
  auto call = dyn_cast<CallOpInterface>(op);
  if (!call)
    return false;
  Operation *callee = call.resolveCallable();
  return callee && callee->hasAttr(LoomDialect::getCommunicationAttrName());
}

/// The pass `op`, or the op of `root` it is nested in, belongs to (as
/// loom-differentiate recorded it); none outside both.
std::optional<Phase> getPhaseIn(Operation *op, Operation *root) {
  for (; op && op != root; op = op->getParentOp())
    if (std::optional<Phase> phase = getPhase(op->getLoc()))
      return phase;
  return std::nullopt;
}

/// The buffer `alloc` makes, placed by its liveness, or failure when it
/// stays on the heap.
FailureOr<Buffer> analyze(memref::AllocOp alloc, Operation *root,
                          const Positions &positions,
                          const DataLayout &layout) {
  MemRefType type = alloc.getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace() || !runsInOrder(alloc, root))
    return failure();
  Buffer buffer;
  buffer.alloc = alloc;
  buffer.alignment =
      std::max<int64_t>(kMinAlignment, alloc.getAlignment().value_or(0));
  int64_t bytes =
      type.getNumElements() *
      static_cast<int64_t>(
          layout.getTypeSize(type.getElementType()).getFixedValue());
  buffer.slotBytes = llvm::alignTo(std::max<int64_t>(bytes, 1),
                                   static_cast<uint64_t>(buffer.alignment));

  llvm::SetVector<Value> values;
  SmallVector<Operation *> users = collectUsers(alloc.getResult(), values);
  buffer.communication = llvm::any_of(users, isCommunication);
  std::optional<Phase> phase = getPhase(alloc.getLoc());
  auto readIn = [&](auto &&inPass) {
    return llvm::any_of(
        users, [&](Operation *user) { return inPass(getPhaseIn(user, root)); });
  };
  buffer.kept = phase == Phase::forward && readIn([](std::optional<Phase> p) {
                  return p == Phase::backward;
                });
  // What the backward pass hands on, and the sums of it.
  buffer.gradient =
      (phase == Phase::backward &&
       readIn([](std::optional<Phase> p) { return p != Phase::backward; })) ||
      phase == Phase::accumulation;
  // The op whose span the buffer lives in at least: the allocation, or
  // the region op it leaves through a terminator.
  Operation *anchor = alloc;
  while (true) {
    SmallVector<Operation *> outside;
    for (Operation *user : users)
      if (!anchor->isAncestor(user))
        outside.push_back(user);
    FailureOr<int64_t> end = lastUseIn(*anchor->getBlock(), outside, positions,
                                       positions.last(anchor));
    if (succeeded(end)) {
      buffer.start = positions.first(anchor);
      buffer.end = *end;
      return buffer;
    }
    Block &block = *anchor->getBlock();
    Operation *parent = block.getParentOp();
    if (parent == root)
      return failure();
    if (isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(parent)) {
      anchor = parent;
      continue;
    }
    // Handed on by a loop's body: to the next iteration through iteration
    // arguments (one, or several views of it: a bucket's parts), which the
    // body passes on no further, and after the last to the loop's results.
    // An iteration's buffer is then dead once the next iteration ends, and
    // two slots taken in turn suffice.
    auto loop = dyn_cast<scf::ForOp>(parent);
    if (!loop || buffer.carrier)
      return failure();
    auto yield = cast<scf::YieldOp>(block.getTerminator());
    SmallVector<unsigned> carried;
    for (OpOperand &operand : yield->getOpOperands())
      if (values.contains(operand.get()))
        carried.push_back(operand.getOperandNumber());
    if (carried.empty())
      return failure();
    for (unsigned index : carried) {
      llvm::SetVector<Value> next;
      if (llvm::is_contained(
              collectUsers(loop.getRegionIterArgs()[index], next),
              yield.getOperation()))
        return failure();
    }
    buffer.slots = 2;
    buffer.carrier = loop;
    buffer.carriedIndices = carried;
    anchor = loop;
  }
}

/// Finds the buffers made only to start a loop's carried buffer: the
/// loop's initial value of its iteration argument, which nothing uses from
/// the loop on but the loop (an async transfer's first wait, or the first
/// layer's fetch). The first iteration reads it while it makes the even
/// slot's buffer, and the odd slot is free until the second: it takes that
/// one, and the carried buffer's span reaches back to its allocation.
void shareStartingSlots(MutableArrayRef<Buffer> buffers) {
  // Each carried buffer's odd slot is filled from its start, in order.
  DenseMap<size_t, int64_t> filled;
  for (Buffer &init : buffers) {
    if (init.carrier)
      continue;
    // The loop it starts: its only use (or a cast's) in a loop's operands.
    scf::ForOp loop;
    unsigned index = 0, loops = 0;
    SmallVector<Value> casts = {init.alloc.getResult()};
    for (size_t i = 0; i < casts.size(); ++i)
      for (OpOperand &use : casts[i].getUses()) {
        if (auto cast = dyn_cast<memref::CastOp>(use.getOwner()))
          casts.push_back(cast.getResult());
        auto user = dyn_cast<scf::ForOp>(use.getOwner());
        if (!user || use.getOperandNumber() < user.getNumControlOperands())
          continue;
        ++loops;
        loop = user;
        index = use.getOperandNumber() - user.getNumControlOperands();
      }
    if (loops != 1 || loop->getBlock() != init.alloc->getBlock())
      continue;
    // Whatever else uses it (a transfer that fills it) comes before the
    // loop, not in it; what the loop makes of it is the carried buffer's.
    llvm::SetVector<Value> values;
    if (!llvm::all_of(collectUsers(init.alloc.getResult(), values, loop),
                      [&](Operation *user) {
                        Operation *op =
                            loop->getBlock()->findAncestorOpInBlock(*user);
                        return user == loop.getOperation() ||
                               (op && op->isBeforeInBlock(loop));
                      }))
      continue;
    // The buffer the loop carries through that iteration argument (or a
    // bucket carried through several, whose odd slot the starting buffers
    // of its parts share where they fit).
    for (auto [i, carried] : llvm::enumerate(buffers)) {
      if (carried.carrier != loop ||
          !llvm::is_contained(carried.carriedIndices, index) ||
          carried.alignment < init.alignment)
        continue;
      int64_t at = llvm::alignTo(filled.lookup(i),
                                 static_cast<uint64_t>(init.alignment));
      if (at + init.slotBytes > carried.slotBytes)
        break;
      init.oddSlotOf = i;
      init.oddSlotOffset = at;
      filled[i] = at + init.slotBytes;
      carried.start = std::min(carried.start, init.start);
      break;
    }
  }
}

/// Gives each buffer the lowest offset, at its alignment, that no buffer
/// live at the same time holds; the largest are placed first. Returns the
/// arena's size.
int64_t place(MutableArrayRef<Buffer> buffers) {
  SmallVector<Buffer *> order;
  for (Buffer &buffer : buffers)
    if (!buffer.oddSlotOf)
      order.push_back(&buffer);
  llvm::stable_sort(order, [](const Buffer *a, const Buffer *b) {
    return a->bytes() > b->bytes();
  });
  int64_t size = 0;
  SmallVector<Buffer *> placed;
  for (Buffer *buffer : order) {
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (Buffer *other : placed)
      if (other->start <= buffer->end && buffer->start <= other->end)
        taken.push_back({other->offset, other->offset + other->bytes()});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + buffer->bytes() <= begin)
        break;
      offset =
          std::max(offset, static_cast<int64_t>(llvm::alignTo(
                               end, static_cast<uint64_t>(buffer->alignment))));
    }
    buffer->offset = offset;
    size = std::max(size, offset + buffer->bytes());
    placed.push_back(buffer);
  }
  for (Buffer &buffer : buffers)
    if (buffer.oddSlotOf) {
      const Buffer &carried = buffers[*buffer.oddSlotOf];
      buffer.offset = carried.offset + carried.slotBytes + buffer.oddSlotOffset;
    }
  return size;
}

/// What the buffers live at once hold at the first moment they hold most.
struct LivePeak {
  int64_t live = 0;
  /// Buffers a collective or message reads or writes.
  int64_t communication = 0;
  /// Activations the forward pass kept for the backward pass, and
  /// gradients, not counted as communication; the rest are the
  /// temporaries of the moment.
  int64_t kept = 0, gradients = 0;
};

LivePeak livePeak(ArrayRef<Buffer> buffers) {
  // At a peak some buffer has just started.
  LivePeak peak;
  for (const Buffer &at : buffers) {
    LivePeak here;
    for (const Buffer &buffer : buffers) {
      // A starting buffer's bytes are its loop's carried buffer's.
      if (buffer.oddSlotOf || buffer.start > at.start || at.start > buffer.end)
        continue;
      here.live += buffer.bytes();
      if (buffer.kept)
        here.kept += buffer.bytes();
      else if (buffer.gradient)
        here.gradients += buffer.bytes();
      else if (buffer.communication)
        here.communication += buffer.bytes();
    }
    if (here.live > peak.live)
      peak = here;
  }
  return peak;
}

/// Replaces the buffer's allocation by its view of the arena: for a loop's
/// carried buffer, the slot of the iteration's parity.
void rewrite(Buffer &buffer, Value arena) {
  memref::AllocOp alloc = buffer.alloc;
  OpBuilder b(alloc);
  Location loc = alloc.getLoc();
  Value offset = arith::ConstantIndexOp::create(b, loc, buffer.offset);
  if (buffer.carrier) {
    scf::ForOp loop = buffer.carrier;
    Value iteration = arith::DivUIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc, loop.getInductionVar(),
                              loop.getLowerBound()),
        loop.getStep());
    Value parity = arith::RemUIOp::create(
        b, loc, iteration, arith::ConstantIndexOp::create(b, loc, 2));
    Value slot = arith::MulIOp::create(
        b, loc, parity,
        arith::ConstantIndexOp::create(b, loc, buffer.slotBytes));
    offset = arith::AddIOp::create(b, loc, offset, slot);
  }
  Value view = memref::ViewOp::create(b, loc, alloc.getType(), arena, offset,
                                      ValueRange{});
  alloc.replaceAllUsesWith(view);
  alloc.erase();
}

/// For a rank's training step, what the rank holds at most: the
/// parameters and optimizer state the runtime keeps between steps (the
/// step's `loom.memory`, or the module's) and the step's arena, where its
/// gradients are.
void printRankPeak(func::FuncOp func, int64_t arena) {
  bool hostFunction = func->hasAttr(LoomDialect::getHostAttrName());
  auto memory =
      func->getAttrOfType<DictionaryAttr>(LoomDialect::getMemoryAttrName());
  // A host function's figures are those of the step that calls it: a
  // pipeline rank's own, or the module's.
  if (!memory && hostFunction)
    func->getParentOp()->walk([&](func::CallOp call) {
      if (call.getCallee() == func.getName())
        if (auto caller = call->getParentOfType<func::FuncOp>())
          memory = caller->getAttrOfType<DictionaryAttr>(
              LoomDialect::getMemoryAttrName());
    });
  if (!memory && (func.getName() == LoomDialect::getTrainStepFunctionName() ||
                  hostFunction))
    memory = func->getParentOp()->getAttrOfType<DictionaryAttr>(
        LoomDialect::getMemoryAttrName());
  if (!memory)
    return;
  auto bytesOf = [&](StringRef key) {
    auto value = memory.getAs<IntegerAttr>(key);
    return value ? value.getInt() : 0;
  };
  int64_t parameters = bytesOf(LoomDialect::getMemoryParametersKey()),
          optimizer = bytesOf(LoomDialect::getMemoryOptimizerKey());
  // Offload: the host keeps the master weights, the optimizer state and
  // the gradients the device sends, the device the parameters' copies,
  // each memory an arena of its own.
  if (memory.get(LoomDialect::getMemoryHostKey())) {
    int64_t host = bytesOf(LoomDialect::getMemoryHostKey());
    int64_t peak = (hostFunction ? host : parameters) + arena;
    // offload=parameters: the host keeps the parameters' copies as well.
    auto plan = func->getParentOfType<ModuleOp>()->getAttrOfType<PlanAttr>(
        LoomDialect::getPlanAttrName());
    bool copies = plan && plan.getOffload() == Offload::parameters;
    llvm::outs() << "compiled    " << func.getName() << ": the rank's "
                 << (hostFunction ? "host" : "device") << " peak " << peak
                 << " B = "
                 << (!hostFunction ? "parameters "
                     : copies ? "master weights, optimizer state, gradients "
                                "and parameters "
                              : "master weights, optimizer state and "
                                "gradients ")
                 << (hostFunction ? host : parameters) << " B + arena " << arena
                 << " B (" << llvm::format("%.2f", peak / double(1 << 20))
                 << " MiB)\n";
    return;
  }
  int64_t peak = parameters + optimizer + arena;
  llvm::outs() << "compiled    " << func.getName() << ": the rank's peak "
               << peak << " B = parameters " << parameters
               << " B + optimizer state " << optimizer << " B + arena " << arena
               << " B, its gradients in the arena ("
               << llvm::format("%.2f", peak / double(1 << 20)) << " MiB)\n";
}

struct StaticArenaPass
    : public loom::impl::LoomStaticArenaBase<StaticArenaPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        planFunction(func);
  }

  void planFunction(func::FuncOp func) {
    Positions positions(func);
    DataLayout layout = DataLayout::closest(func);
    SmallVector<Buffer> buffers;
    int64_t onHeap = 0;
    func.walk([&](memref::AllocOp alloc) {
      FailureOr<Buffer> buffer = analyze(alloc, func, positions, layout);
      if (succeeded(buffer))
        buffers.push_back(*buffer);
      else
        ++onHeap;
    });
    if (buffers.empty() && !onHeap)
      return;
    shareStartingSlots(buffers);
    int64_t size = place(buffers);
    LivePeak peak = livePeak(buffers);
    std::optional<int64_t> scalars;
    // Not an offload plan's host function, whose code runs on the host.
    if (deviceScalars > 0 && !buffers.empty() &&
        !func->hasAttr(LoomDialect::getHostAttrName())) {
      scalars = llvm::alignTo(size, kMinAlignment);
      size = *scalars + llvm::alignTo(deviceScalars, kMinAlignment);
      peak.live += size - *scalars;
    }
    if (!buffers.empty()) {
      OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
      Value arena = memref::AllocOp::create(
          b, func.getLoc(), MemRefType::get({size}, b.getI8Type()),
          b.getI64IntegerAttr(kMinAlignment));
      for (Buffer &buffer : buffers)
        rewrite(buffer, arena);
    }
    Builder b(func.getContext());
    SmallVector<NamedAttribute> figures = {
        b.getNamedAttr(LoomDialect::getArenaBytesKey(),
                       b.getI64IntegerAttr(size)),
        b.getNamedAttr(LoomDialect::getArenaLiveKey(),
                       b.getI64IntegerAttr(peak.live)),
        b.getNamedAttr(LoomDialect::getArenaCommunicationKey(),
                       b.getI64IntegerAttr(peak.communication)),
        b.getNamedAttr(LoomDialect::getArenaKeptKey(),
                       b.getI64IntegerAttr(peak.kept)),
        b.getNamedAttr(LoomDialect::getArenaGradientsKey(),
                       b.getI64IntegerAttr(peak.gradients))};
    if (scalars)
      figures.push_back(b.getNamedAttr(LoomDialect::getArenaScalarsKey(),
                                       b.getI64IntegerAttr(*scalars)));
    func->setAttr(LoomDialect::getArenaAttrName(),
                  b.getDictionaryAttr(figures));
    if (onHeap)
      func.emitRemark() << onHeap
                        << " buffer(s) of dynamic size or made inside a "
                           "parallel loop stay on the heap, outside the arena";
    if (print)
      llvm::outs() << "compiled    " << func.getName() << ": arena " << size
                   << " B; at most " << peak.live
                   << " B of buffers live at once: " << peak.kept
                   << " B of activations kept for the backward pass, "
                   << peak.gradients << " B of gradients, "
                   << peak.communication << " B read or written by "
                   << "communication, "
                   << peak.live - peak.kept - peak.gradients -
                          peak.communication
                   << " B of temporaries\n";
    if (print)
      printRankPeak(func, size);
  }
};
} // namespace
