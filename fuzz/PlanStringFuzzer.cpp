//===- PlanStringFuzzer.cpp - Fuzzing the plan string parser --------------===//
//
// Any bytes as a --plan string ("dp=2,tp=2,..."), then the plan's checks
// against a fixed model, batch and cluster, as loomc runs them.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mlir::loom;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  ConfigDiagnostics diag("--plan", llvm::nulls());
  PlanConfig plan;
  std::optional<Precision> precision;
  if (!parsePlanString(text, "--plan", plan, &precision, diag))
    return 0;
  ArchitectureConfig arch;
  arch.layers = 12;
  arch.width = 768;
  arch.heads = 12;
  arch.hidden = 3072;
  arch.vocab = arch.paddedVocab = 50304;
  arch.positions = 1024;
  TrainingConfig training;
  training.batchSize = 512;
  training.sequenceLength = 1024;
  ClusterConfig cluster;
  cluster.gpu = "A100-80GB";
  cluster.gpusPerNode = 8;
  cluster.nodes = 4;
  checkPlan(plan, &arch, &training, &cluster);
  return 0;
}
