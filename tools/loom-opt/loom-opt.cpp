//===- loom-opt.cpp - mlir-opt with Loom's dialects and passes ------------===//
//
// The tool every lit test drives: parses IR, runs the passes named on the
// command line (Loom's and all of MLIR's) and prints the result.
//
// Unlike mlir-opt, the output file is opened only once the passes have
// succeeded: a parse error, a verifier error or a failing pass leaves an
// existing `-o` file as it was instead of truncating and deleting it.
//
//===----------------------------------------------------------------------===//

#include "loom/InitLoom.h"
#include "loom/Version.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAllPasses();
  mlir::loom::registerLoomPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::loom::registerLoomDialects(registry);

  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "Loom " << LOOM_VERSION << "\n"; });
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "Loom optimizer driver: Loom's and MLIR's passes\n",
      registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    mlir::printRegisteredPasses();
    return 0;
  }

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // Standard output has nothing to protect, and passes that print reports
  // there interleave with the IR of each split input.
  if (outputFilename == "-")
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(llvm::outs(), std::move(input), registry, config));
  std::string result;
  llvm::raw_string_ostream os(result);
  if (mlir::failed(mlir::MlirOptMain(os, std::move(input), registry, config)))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  output->os() << result;
  output->os().flush();
  if (output->os().has_error()) {
    llvm::errs() << outputFilename
                 << ": cannot write: " << output->os().error().message()
                 << "\n";
    output->os().clear_error();
    return 1;
  }
  output->keep();
  return 0;
}
