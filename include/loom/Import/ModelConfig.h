//===- ModelConfig.h - Model descriptions read from JSON --------*- C++ -*-===//
//
// The in-memory form of a model description (docs/model-format.md): a GPT
// architecture, its training setup, an optional parallel plan and an optional
// cluster. It is read from Loom's JSON format or from a Hugging Face GPT-2
// `config.json`, checked field by field, and then turned into IR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_MODELCONFIG_H
#define LOOM_IMPORT_MODELCONFIG_H

#include "loom/Dialect/LoomConfig.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
namespace loom {

struct ModelConfig {
  std::string name;
  ArchitectureConfig arch;
  TrainingConfig training;
  std::optional<PlanConfig> plan;
  /// The plan is "auto": the cost model chooses it for the cluster.
  bool planAuto = false;
  std::optional<ClusterConfig> cluster;
};

/// Reports problems in a description file: "<file>: error: <message>".
/// Errors make loading fail; warnings (unknown keys) do not.
class ConfigDiagnostics {
public:
  ConfigDiagnostics(llvm::StringRef file, llvm::raw_ostream &os)
      : file(file.str()), os(os) {}
  void error(const llvm::Twine &message);
  void warning(const llvm::Twine &message);
  llvm::StringRef getFile() const { return file; }
  unsigned getNumErrors() const { return numErrors; }

private:
  std::string file;
  llvm::raw_ostream &os;
  unsigned numErrors = 0;
};

/// Parses a model description from JSON text. `diag` names the file in every
/// message. Returns std::nullopt after reporting at least one error.
std::optional<ModelConfig> parseModelConfig(llvm::StringRef text,
                                            ConfigDiagnostics &diag);

/// Reads and parses the description in `path`.
std::optional<ModelConfig> loadModelConfig(llvm::StringRef path,
                                           llvm::raw_ostream &errs);

/// Parses a plan written as "dp=2,tp=2,pp=1,zero=1,mb=8,schedule=1f1b,
/// recompute=selective,sp=1,precision=bf16". Keys left out keep the values
/// in `plan`; a precision is stored in `*precision`, and refused when
/// `precision` is null. "auto" is not a plan string: callers check for it
/// first (isAutoPlan). `field` names where the text came from in messages.
bool parsePlanString(llvm::StringRef text, llvm::StringRef field,
                     PlanConfig &plan, std::optional<Precision> *precision,
                     ConfigDiagnostics &diag);

/// Whether `text` asks the planner to choose ("auto").
inline bool isAutoPlan(llvm::StringRef text) { return text.trim() == "auto"; }

/// Fills the values a description may leave out (MLP width, padded
/// vocabulary, positions as long as the sequence) and checks the model
/// against its training setup, and the plan against both and the cluster
/// (with checkPlan, the rule the IR verifier applies too). Reports every
/// problem found.
bool finalizeModelConfig(ModelConfig &config, ConfigDiagnostics &diag);

/// The Hugging Face config.json of `arch`: GPT-2's, Llama's or Qwen2's, the
/// keys the readers take back, from which transformers'
/// AutoModelForCausalLM builds the model that loom-run's
/// --export-safetensors weights fill. Fails, saying why, for parts no
/// Hugging Face family combines.
llvm::Expected<std::string>
writeHuggingFaceConfig(const ArchitectureConfig &arch);

} // namespace loom
} // namespace mlir

#endif // LOOM_IMPORT_MODELCONFIG_H
