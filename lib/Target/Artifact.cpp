//===- Artifact.cpp - Packaging a lowered module as an artifact -----------===//
//
// The artifact is a shared object: the runtime maps it with dlopen, finds
// the manifest and the entry points by symbol, and needs neither MLIR nor
// LLVM to do so. Linking uses the system's C compiler driver, which knows
// the platform's linker and its flags.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Artifact.h"
#include "loom/abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Support/FileUtilities.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <algorithm>

using namespace mlir;

namespace {
/// Runs over `module` the passes `makePasses` returns, with `builder`'s
/// analyses.
template <typename MakePasses>
void runPasses(llvm::Module &module, llvm::PassBuilder &builder,
               MakePasses makePasses) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = makePasses();
  mpm.run(module, mam);
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine,
              unsigned optLevel) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = optLevel > 1;
  tuning.SLPVectorization = optLevel > 1;
  // Loop bounds are static, and LLVM fully unrolls inner loops of a few
  // thousand iterations into basic blocks whose instruction scheduling is
  // quadratic: seconds per function. The vectorizer still interleaves.
  tuning.LoopUnrolling = false;
  llvm::PassBuilder builder(&machine, tuning);
  llvm::OptimizationLevel level = optLevel == 0   ? llvm::OptimizationLevel::O0
                                  : optLevel == 1 ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  runPasses(module, builder, [&] {
    return optLevel == 0 ? builder.buildO0DefaultPipeline(level)
                         : builder.buildPerModuleDefaultPipeline(level);
  });
}

/// Deletes the functions and globals nothing reaches. Run before the
/// module is split: a partition sees the internal symbols of the others as
/// hidden external ones, which it may not delete.
void removeDeadCode(llvm::Module &module) {
  llvm::PassBuilder builder;
  runPasses(module, builder, [] {
    llvm::ModulePassManager mpm;
    mpm.addPass(llvm::GlobalDCEPass());
    return mpm;
  });
}

/// A partition's object file, the machine compiling it and its failure.
/// The remover deletes the file when the object goes: never copied.
struct Compiled {
  Compiled() = default;
  Compiled(const Compiled &) = delete;
  Compiled &operator=(const Compiled &) = delete;
  llvm::SmallString<128> path;
  llvm::FileRemover remover;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::string error;
};

/// A step's outlined loop nests and entry points run to hundreds of
/// functions; a partition of fewer is not worth its copy.
constexpr unsigned kFunctionsPerPartition = 32;
constexpr unsigned kMaxPartitions = 8;

/// Optimizes `module` and writes its object file to `object.path`,
/// recording a failure in `object.error`.
void compile(llvm::Module &module, Compiled &object, unsigned optLevel) {
  llvm::TargetMachine &machine = *object.machine;
  optimize(module, machine, optLevel);
  std::error_code ec;
  llvm::raw_fd_ostream out(object.path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    object.error =
        "cannot write " + object.path.str().str() + ": " + ec.message();
    return;
  }
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, out, nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    object.error = "the target cannot emit object files";
    return;
  }
  codegen.run(module);
  // A full disk shows only when the file is closed.
  out.close();
  if (out.has_error()) {
    object.error = "cannot write " + object.path.str().str() + ": " +
                   out.error().message();
    out.clear_error();
  }
}
} // namespace

/// Records, as the artifact's LOOM_CPU_SYMBOL, the CPU its code is generated
/// for and which of the features in LOOM_X86_FEATURES that code may use, so
/// that the runtime can refuse a CPU without them before running any of it.
static void recordTargetCpu(llvm::Module &module,
                            const llvm::TargetMachine &machine) {
  std::string text = machine.getTargetCPU().str();
  if (machine.getTargetTriple().isX86()) {
    const llvm::MCSubtargetInfo &subtarget = *machine.getMCSubtargetInfo();
#define LOOM_RECORD_FEATURE(name, ...)                                         \
  if (subtarget.checkFeatures("+" name))                                       \
    text += " " name;
    LOOM_X86_FEATURES(LOOM_RECORD_FEATURE)
#undef LOOM_RECORD_FEATURE
  }
  llvm::Constant *value =
      llvm::ConstantDataArray::getString(module.getContext(), text);
  new llvm::GlobalVariable(module, value->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, value,
                           LOOM_CPU_SYMBOL);
}

/// Writes the linked artifact's checksum (abi.h) over the zeros its
/// manifest was compiled with.
static LogicalResult fillChecksum(ModuleOp module, llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return module.emitError()
           << "cannot read " << path << ": " << buffer.getError().message();
  std::string bytes = (*buffer)->getBuffer().str();
  // The checksum line as ExportEntries wrote it, its digits all zeros.
  const std::string zeroLine =
      "\n" LOOM_CHECKSUM_KEY + std::string(LOOM_CHECKSUM_DIGITS, '0') + "\n";
  size_t at = bytes.find(zeroLine);
  if (at == std::string::npos ||
      bytes.find(zeroLine, at + 1) != std::string::npos)
    return module.emitError("the linked artifact does not hold its manifest's "
                            "checksum line exactly once");
  uint64_t hash = loom_checksum(LOOM_CHECKSUM_SEED, bytes.data(), bytes.size());
  std::string digits = llvm::formatv("{0:x-16}", hash).str();
  bytes.replace(at + 1 + std::strlen(LOOM_CHECKSUM_KEY), LOOM_CHECKSUM_DIGITS,
                digits);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (!ec) {
    out << bytes;
    out.close();
    ec = out.error();
    out.clear_error();
  }
  if (ec)
    return module.emitError()
           << "cannot write " << path << ": " << ec.message();
  return success();
}

/// Links `objects` into the shared object at `path`, and fills in its
/// checksum.
static LogicalResult linkArtifact(ModuleOp module, ArrayRef<Compiled> objects,
                                  llvm::StringRef path) {
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return module.emitError("no C compiler driver 'cc' on PATH to link the "
                            "artifact (install gcc or clang)");
  // Link to a temporary name and rename, so that a failed link never leaves
  // a half-written artifact where the old one was. Renaming over anything
  // but a regular file would replace it (`-o /dev/null` would delete the
  // device node): such a target gets the linked bytes written into it, and
  // the link goes to the temporary directory, not next to it.
  llvm::sys::fs::file_status status;
  bool direct = !llvm::sys::fs::status(path, status) &&
                llvm::sys::fs::exists(status) &&
                !llvm::sys::fs::is_regular_file(status);
  llvm::SmallString<128> partial;
  if (direct) {
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("loom-artifact", "so", partial))
      return module.emitError()
             << "cannot create a temporary file: " << ec.message();
  } else {
    partial = (path + ".partial").str();
  }
  llvm::FileRemover removePartial(partial);
  llvm::SmallVector<llvm::StringRef> args = {*cc, "-shared", "-o", partial};
  for (const Compiled &object : objects)
    args.push_back(object.path);
  args.push_back("-lm");
  std::string message;
  int rc =
      llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0)
    return module.emitError()
           << "linking the artifact with " << *cc << " failed"
           << (message.empty() ? "" : ": " + message);
  if (failed(fillChecksum(module, partial)))
    return failure();
  std::error_code ec = direct ? llvm::sys::fs::copy_file(partial, path)
                              : llvm::sys::fs::rename(partial, path);
  if (ec)
    return module.emitError()
           << "cannot write " << path << ": " << ec.message();
  return success();
}

LogicalResult mlir::loom::writeArtifact(ModuleOp module, llvm::StringRef path,
                                        const ArtifactOptions &options,
                                        TimingScope *timing) {
  auto timer = [&](StringRef name) {
    return timing ? timing->nest(name) : TimingScope();
  };
  TimingScope translateTimer = timer("translate to LLVM IR");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  // A CUDA step's kernels are embedded as constants (the gpu dialect's
  // translation) and launched through the runtime's mgpu* functions.
  DialectRegistry translations;
  registerBuiltinDialectTranslation(translations);
  registerLLVMDialectTranslation(translations);
  registerGPUDialectTranslation(translations);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(translations);
  module.getContext()->appendDialectRegistry(translations);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "loom");
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");

  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError()
           << "no LLVM target for " << triple.str() << ": " << error;
  std::string cpu =
      options.cpu.empty() ? llvm::sys::getHostCPUName().str() : options.cpu;
  llvm::SubtargetFeatures features;
  if (options.cpu.empty())
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      features.AddFeature(name, enabled);
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features.getString(), targetOptions, llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return module.emitError() << "cannot generate code for CPU '" << cpu << "'";
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  recordTargetCpu(*llvmModule, *machine);
  translateTimer.stop();

  // Optimization and code generation take most of a large step's compile
  // and see one function at a time: the module is cut into partitions of
  // about equal numbers of functions, optimized and compiled in parallel,
  // up to a thread per core. Their number depends on the module alone, so
  // that an artifact does not depend on the cores of the machine compiling
  // it. Each partition's internal symbols become hidden external ones:
  // LLVM's whole-module passes no longer see all their uses, but the
  // step's functions call its loop nests through the runtime's threads,
  // by address, where those passes could do little anyway.
  TimingScope codegenTimer = timer("LLVM optimization and code generation");
  unsigned functions = llvm::count_if(
      *llvmModule, [](llvm::Function &f) { return !f.isDeclaration(); });
  unsigned partCount =
      std::clamp(functions / kFunctionsPerPartition, 1u, kMaxPartitions);
  // A module belongs to one LLVMContext, which one thread uses at a time:
  // each partition travels to its thread as bitcode.
  std::vector<llvm::SmallString<0>> parts;
  if (partCount > 1) {
    removeDeadCode(*llvmModule);
    llvm::SplitModule(
        *llvmModule, partCount,
        [&](std::unique_ptr<llvm::Module> part) {
          llvm::raw_svector_ostream os(parts.emplace_back());
          llvm::WriteBitcodeToFile(*part, os);
        },
        /*PreserveLocals=*/false, /*RoundRobin=*/true);
  }
  std::vector<Compiled> objects(std::max<size_t>(parts.size(), 1));
  for (Compiled &object : objects) {
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "loom-artifact", "o", object.path))
      return module.emitError()
             << "cannot create a temporary object file: " << ec.message();
    object.remover.setFile(object.path);
    // A TargetMachine serves one thread.
    object.machine =
        machine
            ? std::move(machine)
            : std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
                  triple, cpu, features.getString(), targetOptions,
                  llvm::Reloc::PIC_, std::nullopt,
                  llvm::CodeGenOptLevel::Aggressive));
    if (!object.machine)
      return module.emitError()
             << "cannot generate code for CPU '" << cpu << "'";
  }
  if (parts.empty()) {
    compile(*llvmModule, objects.front(), options.optLevel);
  } else {
    llvm::DefaultThreadPool pool(
        llvm::heavyweight_hardware_concurrency(parts.size()));
    for (size_t i = 0; i < parts.size(); ++i)
      pool.async([&, i] {
        llvm::LLVMContext context;
        llvm::Expected<std::unique_ptr<llvm::Module>> part =
            llvm::parseBitcodeFile(
                llvm::MemoryBufferRef(parts[i].str(), "partition"), context);
        if (!part) {
          objects[i].error = llvm::toString(part.takeError());
          return;
        }
        compile(**part, objects[i], options.optLevel);
      });
    pool.wait();
  }
  for (const Compiled &object : objects)
    if (!object.error.empty())
      return module.emitError() << object.error;
  codegenTimer.stop();
  TimingScope linkTimer = timer("link");
  return linkArtifact(module, objects, path);
}

LogicalResult mlir::loom::writePtx(ModuleOp module, llvm::StringRef path) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (auto object : binary.getObjects().getAsRange<gpu::ObjectAttr>()) {
      if (object.getFormat() != gpu::CompilationTarget::Assembly)
        continue;
      os << "// loom-kernel-module " << binary.getName() << "\n"
         << object.getObject().getValue().rtrim('\0') << "\n";
    }
  if (text.empty())
    return module.emitError("the step has no PTX kernels (not lowered with "
                            "--target=cuda?)");
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(path, &error);
  if (!output)
    return module.emitError() << error;
  output->os() << text;
  output->keep();
  return success();
}
