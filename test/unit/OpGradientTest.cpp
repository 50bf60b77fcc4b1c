//===- OpGradientTest.cpp - Each op's VJP against finite differences ------===//
//
// For every differentiable loom op, a function holding just that op and a
// function holding the vector-Jacobian product its DifferentiableOpInterface
// builds are compiled through Loom's own lowering to native code and run.
// With a random cotangent R, the VJP's cotangent of each input element must
// match the central finite difference of <R, op(x)>. A wrong VJP shows here
// op by op, where the whole-model check in test/e2e only says that some op is
// wrong.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/InitLoom.h"
#include "loom/Lowering/Passes.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/runtime.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// A host buffer with the memref descriptor the C interface of a compiled
/// function takes: {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct Buffer {
  explicit Buffer(MemRefType type) : type(type) {
    data.assign(type.getNumElements(), 0);
    descriptor.resize(3 + 2 * type.getRank());
    int64_t stride = 1;
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      descriptor[3 + d] = type.getDimSize(d);
      descriptor[3 + type.getRank() + d] = stride;
      stride *= type.getDimSize(d);
    }
  }
  bool isFloat() const { return type.getElementType().isF32(); }
  float *floats() { return reinterpret_cast<float *>(data.data()); }
  int32_t *ints() { return reinterpret_cast<int32_t *>(data.data()); }
  /// The pointer the packed interface passes for this argument.
  void *descriptorPointer() {
    auto base = reinterpret_cast<int64_t>(data.data());
    descriptor[0] = descriptor[1] = base;
    descriptor[2] = 0;
    pointer = descriptor.data();
    return &pointer;
  }

  MemRefType type;
  std::vector<uint32_t> data; // f32 or i32 elements, four bytes each
  std::vector<int64_t> descriptor;
  void *pointer = nullptr;
};

/// Compiles `source` (a function @op holding one differentiable op) and a
/// function @vjp built from the op's interface, and runs both.
class OpUnderTest {
public:
  explicit OpUnderTest(llvm::StringRef source) {
    DialectRegistry registry;
    registerLoomDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(source, &context);
  }

  /// Builds @vjp(args..., cotangents...) -> (input cotangents...) and
  /// compiles both functions; returns an empty string or what went wrong.
  std::string compile() {
    if (!module)
      return "the test source does not parse";
    auto op = module->lookupSymbol<func::FuncOp>("op");
    if (!op)
      return "no @op";
    FunctionType opType = op.getFunctionType();
    Operation *target = &op.getBody().front().front();
    auto differentiable = dyn_cast<DifferentiableOpInterface>(target);
    if (!differentiable)
      return "the first op of @op is not differentiable";

    OpBuilder b(&context);
    b.setInsertionPointToEnd(module->getBody());
    SmallVector<Type> vjpInputs(opType.getInputs());
    llvm::append_range(vjpInputs, opType.getResults());
    auto vjp = func::FuncOp::create(b, op.getLoc(), "vjp",
                                    b.getFunctionType(vjpInputs, {}));
    Block *body = vjp.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping mapping;
    mapping.map(op.getArguments(),
                body->getArguments().take_front(opType.getNumInputs()));
    Operation *clone = b.clone(*target, mapping);
    SmallVector<Value> grads;
    IRRewriter rewriter(b);
    if (failed(cast<DifferentiableOpInterface>(clone).buildVJP(
            rewriter, body->getArguments().drop_front(opType.getNumInputs()),
            grads)))
      return "buildVJP failed";
    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    for (auto [i, operand] : llvm::enumerate(target->getOperands())) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || !grads[i])
        continue;
      gradArgs.push_back(arg.getArgNumber());
      results.push_back(grads[i]);
      resultTypes.push_back(grads[i].getType());
    }
    func::ReturnOp::create(b, op.getLoc(), results);
    vjp.setFunctionType(b.getFunctionType(vjpInputs, resultTypes));
    for (func::FuncOp f : {op, vjp})
      f->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), b.getUnitAttr());

    PassManager pm(&context);
    pm.addPass(createLoomLowerToLinalg());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createLoomExpandScalarFunctions());
    bufferization::OneShotBufferizePassOptions bufferize;
    bufferize.bufferizeFunctionBoundaries = true;
    bufferize.functionBoundaryTypeConversion =
        bufferization::LayoutMapOption::IdentityLayoutMap;
    pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
    // The caller owns every buffer: results become arguments.
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.modifyPublicFunctions = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
    bufferization::BufferDeallocationPipelineOptions dealloc;
    bufferization::buildBufferDeallocationPipeline(pm, dealloc);
    pm.addPass(createConvertLinalgToLoopsPass());
    pm.addPass(createCanonicalizerPass());
    buildLowerToLLVMPipeline(pm);
    // Function signatures after bufferization: remembered before lowering.
    opArgs = memrefTypes(opType.getInputs(), opType.getResults());
    vjpArgs = memrefTypes(vjpInputs, resultTypes);
    if (failed(pm.run(*module)))
      return "the lowering failed";

    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    ExecutionEngineOptions options;
    auto created = ExecutionEngine::create(*module, options);
    if (!created)
      return llvm::toString(created.takeError());
    engine = std::move(*created);
    return "";
  }

  static SmallVector<MemRefType> memrefTypes(TypeRange ins, TypeRange outs) {
    SmallVector<MemRefType> types;
    for (TypeRange range : {ins, outs})
      for (Type t : range) {
        auto tensor = cast<RankedTensorType>(t);
        types.push_back(
            MemRefType::get(tensor.getShape(), tensor.getElementType()));
      }
    return types;
  }

  bool run(llvm::StringRef name, std::vector<Buffer> &args) {
    SmallVector<void *> packed;
    for (Buffer &arg : args)
      packed.push_back(arg.descriptorPointer());
    return !static_cast<bool>(
        engine->invokePacked(("_mlir_ciface_" + name).str(), packed));
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
  SmallVector<MemRefType> opArgs, vjpArgs;
  /// The @op argument each @vjp result is the cotangent of.
  SmallVector<unsigned> gradArgs;
};

/// Fills the op's float inputs with N(0, 1) and its integer ones (token ids,
/// targets) with ids below `idBound`.
void fillInputs(std::vector<Buffer> &args, size_t count, int32_t idBound,
                std::mt19937 &rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int32_t> ids(0, idBound - 1);
  for (size_t a = 0; a < count; ++a)
    for (size_t i = 0; i < args[a].data.size(); ++i) {
      if (args[a].isFloat())
        args[a].floats()[i] = normal(rng);
      else
        args[a].ints()[i] = ids(rng);
    }
}

/// max over all float input elements of |VJP - central difference|, over
/// the largest |VJP|.
double relativeVjpError(llvm::StringRef source, int32_t idBound) {
  OpUnderTest t(source);
  std::string error = t.compile();
  EXPECT_EQ(error, "");
  if (!error.empty())
    return INFINITY;

  std::mt19937 rng(1234);
  size_t numInputs = t.opArgs.size() - 1;
  std::vector<Buffer> opArgs;
  for (MemRefType type : t.opArgs)
    opArgs.emplace_back(type);
  fillInputs(opArgs, numInputs, idBound, rng);
  Buffer &out = opArgs.back();
  std::vector<float> cotangent(out.data.size());
  std::normal_distribution<float> normal;
  for (float &r : cotangent)
    r = normal(rng);

  // The VJP at x with cotangent R.
  std::vector<Buffer> vjpArgs;
  for (MemRefType type : t.vjpArgs)
    vjpArgs.emplace_back(type);
  for (size_t a = 0; a < numInputs; ++a)
    vjpArgs[a].data = opArgs[a].data;
  std::copy(cotangent.begin(), cotangent.end(), vjpArgs[numInputs].floats());
  EXPECT_TRUE(t.run("vjp", vjpArgs));

  auto objective = [&]() {
    EXPECT_TRUE(t.run("op", opArgs));
    double s = 0;
    for (size_t i = 0; i < cotangent.size(); ++i)
      s += static_cast<double>(cotangent[i]) * out.floats()[i];
    return s;
  };
  const float h = 1e-2f;
  double maxError = 0, maxGrad = 0;
  for (auto [result, argIndex] : llvm::enumerate(t.gradArgs)) {
    Buffer &grad = vjpArgs[numInputs + 1 + result];
    Buffer &x = opArgs[argIndex];
    for (size_t i = 0; i < x.data.size(); ++i) {
      float saved = x.floats()[i];
      x.floats()[i] = saved + h;
      double plus = objective();
      x.floats()[i] = saved - h;
      double minus = objective();
      x.floats()[i] = saved;
      double fd = (plus - minus) / (2.0 * h);
      maxError = std::max(maxError, std::abs(fd - grad.floats()[i]));
      maxGrad = std::max(maxGrad, std::abs(double(grad.floats()[i])));
    }
  }
  EXPECT_GT(maxGrad, 0.0);
  loom_release_cached_memory();
  std::printf("  max |VJP - central difference| / max |VJP| = %.2e\n",
              maxError / maxGrad);
  return maxError / maxGrad;
}

// Central differences in f32 with h = 0.01 agree with the VJPs to 5e-5 of
// the largest gradient on these sizes; GELU's derivative with 2c in place of
// 3c in one term is off by 7e-3, a wrong VJP by order one.
constexpr double kTolerance = 5e-4;

struct OpCase {
  const char *name;
  /// @op, holding the op under test.
  const char *source;
  /// Integer inputs (token ids, targets) are drawn below this.
  int32_t idBound;
};

// clang-format off
const OpCase kCases[] = {
    {"Embedding", R"mlir(
    func.func @op(%tokens: tensor<2x3xi32>, %wte: tensor<5x4xf32>,
                  %wpe: tensor<4x4xf32>) -> tensor<2x3x4xf32> {
      %y = loom.embedding %tokens, %wte, %wpe : (tensor<2x3xi32>, tensor<5x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
      return %y : tensor<2x3x4xf32>
    })mlir", 5},
    {"LayerNorm", R"mlir(
    func.func @op(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>,
                  %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
      %y, %mean, %rstd = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
      return %y : tensor<2x3x8xf32>
    })mlir", 1},
    {"Linear", R"mlir(
    func.func @op(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>,
                  %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
      %y = loom.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      return %y : tensor<2x3x5xf32>
    })mlir", 1},
    {"LinearWithoutBias", R"mlir(
    func.func @op(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
      %y = loom.linear %x, %w : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
      return %y : tensor<2x3x5xf32>
    })mlir", 1},
    {"CausalAttention", R"mlir(
    func.func @op(%qkv: tensor<2x4x12xf32>) -> tensor<2x4x4xf32> {
      %y, %lse = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>, tensor<2x2x4xf32>
      return %y : tensor<2x4x4xf32>
    })mlir", 1},
    // Grouped-query attention: 4 query heads of 2 channels in 2 groups,
    // each group's key and value read by 2 query heads.
    {"GroupedAttention", R"mlir(
    func.func @op(%qkv: tensor<2x4x16xf32>) -> tensor<2x4x8xf32> {
      %y, %lse = loom.causal_attention %qkv {num_heads = 4 : i64, kv_heads = 2 : i64} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x4x4xf32>
      return %y : tensor<2x4x8xf32>
    })mlir", 1},
    {"GroupedRotary", R"mlir(
    func.func @op(%qkv: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
      %y = loom.rotary %qkv {num_heads = 4 : i64, kv_heads = 2 : i64, theta = 10000.0 : f64} : tensor<2x4x16xf32>
      return %y : tensor<2x4x16xf32>
    })mlir", 1},
    {"Gelu", R"mlir(
    func.func @op(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
      %y = loom.gelu %x : tensor<3x5xf32>
      return %y : tensor<3x5xf32>
    })mlir", 1},
    {"Add", R"mlir(
    func.func @op(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %y = loom.add %a, %b : tensor<2x3xf32>
      return %y : tensor<2x3xf32>
    })mlir", 1},
    // Eight logits of which the first six are classes: the padding gets no
    // probability and no gradient.
    {"CrossEntropyWithPaddedVocabulary", R"mlir(
    func.func @op(%logits: tensor<2x3x8xf32>, %targets: tensor<2x3xi32>) -> tensor<f32> {
      %y = loom.cross_entropy %logits, %targets {num_classes = 6 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
      return %y : tensor<f32>
    })mlir", 6},
};
// clang-format on

class OpGradient : public testing::TestWithParam<OpCase> {};

TEST_P(OpGradient, VjpMatchesCentralDifferences) {
  EXPECT_LT(relativeVjpError(GetParam().source, GetParam().idBound),
            kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGradient, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<OpCase> &info) {
                           return info.param.name;
                         });

} // namespace
