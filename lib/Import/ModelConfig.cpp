//===- ModelConfig.cpp - Model descriptions read from JSON ----------------===//
//
// Reads docs/model-format.md. Every problem is reported with the file and the
// dotted path of the field ("training.optimizer.beta1"), and reading goes on
// after an error so that one run lists all of them.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "ConfigReader.h"

#include "loom/Dialect/LoomHardware.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/WithColor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::config_reader;
using llvm::StringRef;
namespace json = llvm::json;

void ConfigDiagnostics::error(const llvm::Twine &message) {
  ++numErrors;
  os << file << ": ";
  llvm::WithColor::error(os, "", /*DisableColors=*/true) << message << "\n";
}

void ConfigDiagnostics::warning(const llvm::Twine &message) {
  os << file << ": ";
  llvm::WithColor::warning(os, "", /*DisableColors=*/true) << message << "\n";
}

namespace {

constexpr StringRef kPrecisionChoices = "\"fp32\", \"bf16\", \"fp16\"";
constexpr StringRef kOptimizerChoices = "\"adamw\", \"sgd\"";
constexpr StringRef kScheduleChoices = "\"gpipe\", \"1f1b\", \"interleaved\"";
constexpr StringRef kRecomputeChoices =
    "\"none\", \"selective\", \"full\", \"stage\"";
constexpr StringRef kOffloadChoices = "\"none\", \"optimizer\", \"parameters\"";

void readOptimizer(ObjectReader &reader, TrainingConfig &training) {
  reader.readEnum("type", training.optimizer, /*required=*/true,
                  symbolizeOptimizerKind, kOptimizerChoices);
  reader.readNumber("learning_rate", training.learningRate, false, positive,
                    "a positive number");
  reader.readNumber("weight_decay", training.weightDecay, false, nonNegative,
                    "a non-negative number");
  bool adamw = training.optimizer == OptimizerKind::adamw;
  // Hyperparameters of the other optimizer are errors rather than unknown
  // keys: a user who sets them expects them to matter.
  for (StringRef key : {"beta1", "beta2", "epsilon"})
    if (!adamw && reader.has(key))
      reader.error(key, "applies to \"adamw\" only, the optimizer is \"sgd\"");
  if (adamw && reader.has("momentum"))
    reader.error("momentum",
                 "applies to \"sgd\" only, the optimizer is \"adamw\"");
  if (adamw) {
    reader.readNumber("beta1", training.beta1, false, unitInterval,
                      "a number in [0, 1)");
    reader.readNumber("beta2", training.beta2, false, unitInterval,
                      "a number in [0, 1)");
    reader.readNumber("epsilon", training.epsilon, false, positive,
                      "a positive number");
  } else {
    training.beta1 = training.beta2 = training.epsilon = 0;
    reader.readNumber("momentum", training.momentum, false, unitInterval,
                      "a number in [0, 1)");
  }
  reader.ignore({"beta1", "beta2", "epsilon", "momentum"});
}

void readTraining(ObjectReader &reader, TrainingConfig &training,
                  bool &precisionGiven, ConfigDiagnostics &diag) {
  reader.readInt("batch_size", training.batchSize, /*required=*/true);
  reader.readInt("sequence_length", training.sequenceLength,
                 /*required=*/true);
  precisionGiven = reader.readEnum("precision", training.precision, false,
                                   symbolizePrecision, kPrecisionChoices);
  reader.readNumber("grad_clip", training.gradClip, false, nonNegative,
                    "a non-negative number (0: no clipping)");
  if (const json::Object *optimizer = reader.readObject("optimizer", false)) {
    ObjectReader optReader(*optimizer, reader.field("optimizer"), diag);
    readOptimizer(optReader, training);
    optReader.warnUnknown();
  }
}

void readPlanObject(ObjectReader &reader, PlanConfig &plan,
                    std::optional<Precision> &precision) {
  reader.readInt("dp", plan.dp, false);
  reader.readInt("tp", plan.tp, false);
  reader.readInt("pp", plan.pp, false);
  reader.readInt("zero", plan.zero, false, /*min=*/0);
  if (plan.zero > 3)
    reader.error("zero", "expected a ZeRO stage from 0 to 3, got " +
                             llvm::Twine(plan.zero));
  reader.readInt("micro_batches", plan.microBatches, false);
  reader.readEnum("schedule", plan.schedule, false, parseScheduleName,
                  kScheduleChoices);
  reader.readInt("virtual_stages", plan.virtualStages, false);
  reader.readEnum("recompute", plan.recompute, false, symbolizeRecompute,
                  kRecomputeChoices);
  reader.readBool("sequence_parallel", plan.sequenceParallel);
  reader.readEnum("offload", plan.offload, false, symbolizeOffload,
                  kOffloadChoices);
  Precision value;
  if (reader.readEnum("precision", value, false, symbolizePrecision,
                      kPrecisionChoices))
    precision = value;
}

void readCluster(ObjectReader &reader, ClusterConfig &cluster) {
  if (reader.readString("gpu", cluster.gpu, /*required=*/true) &&
      !cluster.gpu.empty()) {
    if (const GpuSpec *spec = lookupGpu(cluster.gpu))
      cluster.gpu = spec->name.str();
    else
      reader.error("gpu", "unknown GPU kind \"" + cluster.gpu +
                              "\" (known: " + getGpuNames() + ")");
  }
  reader.readInt("gpus_per_node", cluster.gpusPerNode, /*required=*/true);
  reader.readInt("nodes", cluster.nodes, false);
  reader.readNumber("intra_node_bandwidth_GBps", cluster.intraNodeBandwidth,
                    false, positive, "a positive number (GB/s)");
  reader.readNumber("inter_node_bandwidth_GBps", cluster.interNodeBandwidth,
                    false, positive, "a positive number (GB/s)");
  reader.readNumber("memory_margin", cluster.memoryMargin, false, unitInterval,
                    "a share of the GPU's memory in [0, 1)");
}

/// Turns llvm::json's "[line:col, byte=N]: message" into "line L, column C:
/// message". llvm::json counts the column from 0 at the position just past
/// the offending character, which is that character's 1-based column except
/// at the very start of the input.
std::string formatParseError(llvm::Error error) {
  std::string text = llvm::toString(std::move(error));
  llvm::SmallVector<StringRef> groups;
  llvm::Regex pattern("^\\[([0-9]+):([0-9]+), byte=[0-9]+\\]: (.*)$");
  unsigned column;
  if (!pattern.match(text, &groups) || groups[2].getAsInteger(10, column))
    return text;
  return ("line " + groups[1] + ", column " +
          llvm::Twine(std::max(column, 1u)) + ": " + groups[3])
      .str();
}

/// llvm::json parses nested arrays and objects by recursion: input nested
/// deeply enough overflows the stack. A model description is a few levels
/// deep; anything past this is refused before parsing.
constexpr unsigned kMaxJsonDepth = 64;

/// A position in the text, counted as an editor does.
struct TextPosition {
  unsigned line = 1, column = 0;
  void advance(char c) {
    if (c == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
  }
};

/// The line and column of the first bracket that opens level
/// kMaxJsonDepth + 1, outside strings, if any.
std::optional<TextPosition> findTooDeep(StringRef text) {
  unsigned depth = 0;
  TextPosition at;
  bool inString = false, escaped = false;
  for (char c : text) {
    at.advance(c);
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if ((c == '[' || c == '{') && ++depth > kMaxJsonDepth)
      return at;
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return std::nullopt;
}

/// What llvm::json accepts beyond RFC 8259 and a reader must not let pass:
/// numbers such as `01`, `+1`, `.5` or `1.` (other readers refuse them, so a
/// file Loom accepted would fail elsewhere), and a key given twice in one
/// object (llvm::json keeps the last, Python's json too, others the first:
/// which value the user meant is unknown). Run on text llvm::json parsed, so
/// the structure is valid; returns "line L, column C: what" for the first.
std::optional<std::string> findNonStandardJson(StringRef text) {
  static const llvm::Regex number(
      "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$");
  // For each open bracket: whether it is an object, and its keys so far.
  SmallVector<std::pair<bool, llvm::StringSet<>>> open;
  TextPosition at;
  auto problem = [&](TextPosition where, const llvm::Twine &what) {
    return llvm::formatv("line {0}, column {1}: {2}", where.line,
                         std::max(where.column, 1u), what.str())
        .str();
  };
  for (size_t i = 0; i < text.size(); at.advance(text[i++])) {
    char c = text[i];
    if (c == '{' || c == '[') {
      open.emplace_back(c == '{', llvm::StringSet<>());
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == '"') {
      TextPosition start = at;
      start.advance(c);
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"')
        end += text[end] == '\\' ? 2 : 1;
      StringRef quoted = text.slice(i, end + 1);
      size_t next = text.find_first_not_of(" \t\r\n", end + 1);
      bool isKey = !open.empty() && open.back().first &&
                   next != StringRef::npos && text[next] == ':';
      if (isKey) {
        // Escapes spell the same key differently: compare decoded keys.
        std::string key = quoted.drop_front().drop_back().str();
        if (quoted.contains('\\')) {
          if (llvm::Expected<json::Value> decoded = json::parse(quoted))
            key = decoded->getAsString()->str();
          else
            llvm::consumeError(decoded.takeError());
        }
        if (!open.back().second.insert(key).second)
          return problem(start, "the key \"" + key +
                                    "\" is given twice in one object");
      }
      for (; i < end; ++i)
        at.advance(text[i]);
    } else if (llvm::StringRef("+-.0123456789").contains(c)) {
      TextPosition start = at;
      start.advance(c);
      size_t end = text.find_first_not_of("+-.0123456789eE", i);
      StringRef token = text.slice(i, end);
      if (!number.match(token))
        return problem(start, "the number '" + token +
                                  "' is not written as JSON writes numbers "
                                  "(no leading zeros or '+', digits on both "
                                  "sides of a '.')");
      for (; i + 1 < std::min(end, text.size()); ++i)
        at.advance(text[i]);
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<ModelConfig>
mlir::loom::parseModelConfig(StringRef text, ConfigDiagnostics &diag) {
  if (auto where = findTooDeep(text)) {
    diag.error(llvm::formatv("malformed JSON at line {0}, column {1}: arrays "
                             "and objects nested deeper than {2} levels",
                             where->line, where->column, kMaxJsonDepth)
                   .str());
    return std::nullopt;
  }
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    diag.error("malformed JSON at " + formatParseError(parsed.takeError()));
    return std::nullopt;
  }
  if (std::optional<std::string> problem = findNonStandardJson(text)) {
    diag.error("malformed JSON at " + *problem);
    return std::nullopt;
  }
  const json::Object *root = parsed->getAsObject();
  if (!root) {
    diag.error("expected a JSON object at the top level, got " +
               describe(*parsed));
    return std::nullopt;
  }

  ModelConfig config;
  config.name = llvm::sys::path::stem(diag.getFile()).str();
  ObjectReader reader(*root, "", diag);
  bool precisionGiven = false;

  // A Hugging Face config.json has the architecture at the top level and no
  // "model" section; Loom's format nests it.
  if (!root->get("model") &&
      (root->get("n_layer") || root->get("num_hidden_layers"))) {
    readAnyArchitecture(reader, *root, config.arch,
                        /*positionsRequired=*/true, diag);
    // Such files say nothing of training: one sequence of the full context,
    // overridable from the command line (docs/model-format.md).
    config.training.batchSize = 1;
    config.training.sequenceLength = config.arch.positions;
  } else {
    reader.readString("name", config.name, false);
    // Free text, but text: a number or an object here is a mistake.
    if (const json::Value *description = reader.get("description", false))
      if (!description->getAsString())
        reader.mismatch("description", "a string", *description);
    if (const json::Object *model = reader.readObject("model", true)) {
      ObjectReader modelReader(*model, "model", diag);
      readAnyArchitecture(modelReader, *model, config.arch,
                          /*positionsRequired=*/false, diag);
      modelReader.warnUnknown();
    }
    if (const json::Object *training = reader.readObject("training", true)) {
      ObjectReader trainingReader(*training, "training", diag);
      readTraining(trainingReader, config.training, precisionGiven, diag);
      trainingReader.warnUnknown();
    }
  }

  if (const json::Value *plan = reader.get("plan", false)) {
    PlanConfig planConfig;
    std::optional<Precision> planPrecision;
    std::optional<StringRef> str = plan->getAsString();
    if (str && isAutoPlan(*str)) {
      config.planAuto = true;
    } else if (str) {
      parsePlanString(*str, "plan", planConfig, &planPrecision, diag);
    } else if (const json::Object *object = plan->getAsObject()) {
      ObjectReader planReader(*object, "plan", diag);
      readPlanObject(planReader, planConfig, planPrecision);
      planReader.warnUnknown();
    } else {
      reader.mismatch("plan", "an object or a string such as \"dp=2,tp=2\"",
                      *plan);
    }
    if (planPrecision) {
      if (precisionGiven && *planPrecision != config.training.precision)
        diag.error("field 'plan.precision' (" +
                   stringifyPrecision(*planPrecision) +
                   ") contradicts 'training.precision' (" +
                   stringifyPrecision(config.training.precision) + ")");
      config.training.precision = *planPrecision;
    }
    if (!config.planAuto)
      config.plan = planConfig;
  }

  if (const json::Object *cluster = reader.readObject("cluster", false)) {
    ObjectReader clusterReader(*cluster, "cluster", diag);
    ClusterConfig clusterConfig;
    readCluster(clusterReader, clusterConfig);
    clusterReader.warnUnknown();
    config.cluster = clusterConfig;
  }
  reader.warnUnknown();

  if (diag.getNumErrors())
    return std::nullopt;
  return config;
}

std::optional<ModelConfig>
mlir::loom::loadModelConfig(StringRef path, llvm::raw_ostream &errs) {
  ConfigDiagnostics diag(path, errs);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!buffer) {
    diag.error("cannot read the file: " + buffer.getError().message());
    return std::nullopt;
  }
  return parseModelConfig((*buffer)->getBuffer(), diag);
}

bool mlir::loom::parsePlanString(StringRef text, StringRef field,
                                 PlanConfig &plan,
                                 std::optional<Precision> *precision,
                                 ConfigDiagnostics &diag) {
  unsigned errorsBefore = diag.getNumErrors();
  if (isAutoPlan(text)) {
    diag.error("field '" + field +
               "': \"auto\" stands alone; it cannot be read as plan keys");
    return false;
  }
  // A problem is reported once, however often the string repeats it.
  llvm::StringSet<> reported;
  auto report = [&](const llvm::Twine &message) {
    std::string text = ("field '" + field + "': " + message).str();
    if (reported.insert(text).second)
      diag.error(text);
  };
  auto fail = [&](StringRef key, const llvm::Twine &message) {
    report("'" + key + "' " + message);
  };
  llvm::SmallVector<StringRef> items;
  text.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  if (text.trim().empty()) {
    report("empty plan");
    return false;
  }
  llvm::StringSet<> seen;
  for (StringRef item : items) {
    auto [rawKey, rawValue] = item.split('=');
    StringRef key = rawKey.trim(), value = rawValue.trim();
    if (item.trim().empty()) {
      report("an empty item (two commas in a row, or one at an end); "
             "expected key=value");
      continue;
    }
    if (!item.contains('=') || key.empty() || value.empty()) {
      report("expected key=value, got '" + item.trim() + "'");
      continue;
    }
    if (!seen.insert(key).second) {
      fail(key, "is given twice");
      continue;
    }
    auto readInt = [&](int64_t &out, int64_t min) {
      int64_t number;
      if (value.getAsInteger(10, number) || number < min)
        fail(key, "expects an integer of at least " + llvm::Twine(min) +
                      ", got '" + value + "'");
      else
        out = number;
    };
    if (key == "dp") {
      readInt(plan.dp, 1);
    } else if (key == "tp") {
      readInt(plan.tp, 1);
    } else if (key == "pp") {
      readInt(plan.pp, 1);
    } else if (key == "mb" || key == "micro_batches") {
      readInt(plan.microBatches, 1);
    } else if (key == "zero") {
      readInt(plan.zero, 0);
      if (plan.zero > 3)
        fail(key, "expects a ZeRO stage from 0 to 3, got '" + value + "'");
    } else if (key == "schedule") {
      if (auto schedule = parseScheduleName(value))
        plan.schedule = *schedule;
      else
        fail(key,
             "expects one of gpipe, 1f1b, interleaved, got '" + value + "'");
    } else if (key == "v" || key == "virtual_stages") {
      readInt(plan.virtualStages, 1);
    } else if (key == "recompute") {
      if (auto recompute = symbolizeRecompute(value))
        plan.recompute = *recompute;
      else
        fail(key, "expects one of none, selective, full, stage, got '" + value +
                      "'");
    } else if (key == "sp" || key == "sequence_parallel") {
      if (value == "1" || value == "true")
        plan.sequenceParallel = true;
      else if (value == "0" || value == "false")
        plan.sequenceParallel = false;
      else
        fail(key, "expects 0, 1, true or false, got '" + value + "'");
    } else if (key == "offload") {
      if (auto offload = symbolizeOffload(value))
        plan.offload = *offload;
      else
        fail(key,
             "expects one of none, optimizer, parameters, got '" + value + "'");
    } else if (key == "precision" && precision) {
      if (auto parsed = symbolizePrecision(value))
        *precision = *parsed;
      else
        fail(key, "expects one of fp32, bf16, fp16, got '" + value + "'");
    } else {
      fail(key, "is not a plan key (expected dp, tp, pp, zero, mb, "
                "schedule, v, recompute, sp, offload" +
                    llvm::Twine(precision ? ", precision" : "") + ")");
    }
  }
  return diag.getNumErrors() == errorsBefore;
}

bool mlir::loom::finalizeModelConfig(ModelConfig &config,
                                     ConfigDiagnostics &diag) {
  unsigned errorsBefore = diag.getNumErrors();
  ArchitectureConfig &arch = config.arch;
  TrainingConfig &training = config.training;
  // Messages name the fields as the description's family spells them.
  bool llama = arch.norm == NormKind::rmsnorm;
  auto key = [&](StringRef gpt2, StringRef llamaKey) {
    return ("model." + (llama ? llamaKey : gpt2)).str();
  };
  std::string layersKey = key("n_layer", "num_hidden_layers"),
              widthKey = key("n_embd", "hidden_size"),
              headsKey = key("n_head", "num_attention_heads"),
              hiddenKey = key("n_inner", "intermediate_size"),
              positionsKey = key("n_positions", "max_position_embeddings");
  // Bounding every size (kMaxSize) keeps the sums and products below within
  // 64 bits (the products are checked further down).
  if (config.planAuto && !config.cluster)
    diag.error("field 'plan': \"auto\" needs a 'cluster' section (GPU "
               "kind, GPUs per node, nodes) to plan for");
  for (auto [field, value] :
       {std::pair<StringRef, int64_t>{widthKey, arch.width},
        {headsKey, arch.heads},
        {hiddenKey, arch.hidden},
        {"model.vocab_size", arch.vocab},
        {"model.padded_vocab_size", arch.paddedVocab},
        {positionsKey, arch.positions},
        {"training.batch_size", training.batchSize},
        {"training.sequence_length", training.sequenceLength}})
    if (value > kMaxSize)
      diag.error("field '" + field + "': " + llvm::Twine(value) +
                 " exceeds Loom's limit of 2^32");
  if (config.cluster) {
    // Bounded so that planning stays quick and the world's size and its
    // products fit in 64 bits; ten times the largest machines built.
    ClusterConfig &cluster = *config.cluster;
    for (auto [field, value] :
         {std::pair<StringRef, int64_t>{"cluster.gpus_per_node",
                                        cluster.gpusPerNode},
          {"cluster.nodes", cluster.nodes}})
      if (value > kMaxWorldSize)
        diag.error("field '" + field + "': " + llvm::Twine(value) +
                   " exceeds Loom's limit of " + llvm::Twine(kMaxWorldSize));
    if (cluster.gpusPerNode <= kMaxWorldSize &&
        cluster.nodes <= kMaxWorldSize &&
        cluster.getWorldSize() > kMaxWorldSize)
      diag.error(llvm::formatv("fields 'cluster.nodes', "
                               "'cluster.gpus_per_node': {0} nodes of {1} "
                               "GPUs exceed Loom's limit of {2} GPUs",
                               cluster.nodes, cluster.gpusPerNode,
                               kMaxWorldSize)
                     .str());
    const GpuSpec *gpu = lookupGpu(cluster.gpu);
    if (gpu && training.precision == Precision::bf16 &&
        !gpu->supports(Precision::bf16)) {
      if (!config.plan)
        diag.warning("field 'training.precision': the " + gpu->name +
                     " has no bf16 arithmetic; the planner considers fp16 "
                     "(with loss scaling) instead");
      else
        diag.error("field 'training.precision': the " + gpu->name +
                   " (cluster.gpu) has no bf16 arithmetic; use fp16 or fp32");
    }
  }
  if (diag.getNumErrors() != errorsBefore)
    return false;

  if (arch.hidden == 0)
    arch.hidden = 4 * arch.width;
  if (arch.paddedVocab == 0)
    arch.paddedVocab = arch.vocab;
  if (arch.positions == 0)
    arch.positions = training.sequenceLength;

  if (arch.width % arch.heads != 0)
    diag.error("field '" + widthKey + "': the width " +
               llvm::Twine(arch.width) + " is not divisible by " + headsKey +
               " (" + llvm::Twine(arch.heads) + ")");
  else if (arch.position == PositionKind::rope &&
           (arch.width / arch.heads) % 2 != 0)
    diag.error("field '" + headsKey +
               "': rotary positions turn pairs of "
               "channels and need an even head width, got " +
               llvm::Twine(arch.width / arch.heads));
  if (arch.paddedVocab < arch.vocab)
    diag.error(
        "field 'model.padded_vocab_size': " + llvm::Twine(arch.paddedVocab) +
        " is smaller than model.vocab_size (" + llvm::Twine(arch.vocab) + ")");
  // Sizes whose products overflow 64 bits cannot be described as tensors;
  // a layer count past this bound only builds IR nobody can use.
  constexpr int64_t kMaxLayers = 10000;
  if (arch.layers > kMaxLayers)
    diag.error("field '" + layersKey + "': " + llvm::Twine(arch.layers) +
               " exceeds Loom's limit of " + llvm::Twine(kMaxLayers) +
               " layers");
  auto fits = [](std::initializer_list<int64_t> factors) {
    int64_t product = 1;
    for (int64_t factor : factors)
      if (llvm::MulOverflow(product, factor, product))
        return false;
    return true;
  };
  int64_t widest = std::max({arch.paddedVocab, arch.hidden, arch.width});
  if (!fits({arch.layers, std::max(arch.width, arch.hidden), widest, 16}) ||
      !fits({arch.paddedVocab + arch.positions, arch.width, 2}))
    diag.error("fields '" + layersKey + "', '" + widthKey + "', '" + hiddenKey +
               "', 'model.vocab_size': the parameter count overflows 64 bits");
  if (!fits({training.batchSize, training.sequenceLength, widest, 3}) ||
      !fits({training.batchSize, training.sequenceLength,
             training.sequenceLength, arch.heads}))
    diag.error("fields 'training.batch_size', 'training.sequence_length': "
               "the activations of one step overflow 64 bits");

  if (training.sequenceLength > arch.positions)
    diag.error("field 'training.sequence_length': " +
               llvm::Twine(training.sequenceLength) + " exceeds the model's " +
               positionsKey + " (" + llvm::Twine(arch.positions) + ")");

  if (config.plan && diag.getNumErrors() == errorsBefore)
    for (const PlanViolation &violation :
         checkPlan(*config.plan, &arch, &training,
                   config.cluster ? &*config.cluster : nullptr))
      diag.error("field '" + violation.field + "': " + violation.message);

  return diag.getNumErrors() == errorsBefore;
}
