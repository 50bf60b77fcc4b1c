//===- loom-opt.cpp - mlir-opt with Loom's dialects and passes ------------===//
//
// The tool every lit test drives: parses IR, runs the passes named on the
// command line (Loom's and all of MLIR's) and prints the result.
//
//===----------------------------------------------------------------------===//

#include "loom/InitLoom.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::loom::registerLoomPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::loom::registerLoomDialects(registry);

  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "Loom " << LOOM_VERSION << "\n"; });
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Loom optimizer driver: Loom's and MLIR's passes\n",
      registry));
}
