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

#include "Loom/LoomEnums.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
namespace loom {

struct ArchitectureConfig {
  int64_t layers = 0;
  int64_t width = 0;
  int64_t heads = 0;
  int64_t hidden = 0; ///< MLP inner width; 4 * width unless given.
  int64_t vocab = 0;
  int64_t paddedVocab = 0; ///< Rows of the token table; >= vocab.
  int64_t positions = 0;
  bool tiedEmbeddings = true;
  double layerNormEpsilon = 1e-5;
};

struct TrainingConfig {
  int64_t batchSize = 0;
  int64_t sequenceLength = 0;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double learningRate = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double epsilon = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;
  double gradClip = 0.0; ///< 0: no clipping.
  Precision precision = Precision::fp32;
};

struct PlanConfig {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t zero = 0;
  int64_t microBatches = 1;
  Schedule schedule = Schedule::gpipe;
  Recompute recompute = Recompute::none;
  bool sequenceParallel = false;
};

struct ClusterConfig {
  std::string gpu;
  int64_t gpusPerNode = 0;
  int64_t nodes = 1;
  double intraNodeBandwidth = 0; ///< GB/s; 0: the catalogue's figure.
  double interNodeBandwidth = 0; ///< GB/s; 0: the catalogue's figure.
};

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

/// Schedule names as users write them: "gpipe" and "1f1b".
std::optional<Schedule> parseScheduleName(llvm::StringRef name);
llvm::StringRef getScheduleName(Schedule schedule);

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
/// against its training setup. Reports every problem found. The plan is
/// checked against the model when the IR is verified (LoomDialect), so that
/// hand-written IR gets the same checks.
bool finalizeModelConfig(ModelConfig &config, ConfigDiagnostics &diag);

} // namespace loom
} // namespace mlir

#endif // LOOM_IMPORT_MODELCONFIG_H
