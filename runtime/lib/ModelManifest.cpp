//===- ModelManifest.cpp - The model an artifact's manifest describes ----===//
//
// Reads an artifact's manifest (docs/artifact.md) into its model: the
// header lines, each entry point and its arguments, then the checks of the
// whole against the model line (every parameter's whole shape) and, for a
// pipeline, of the ranks' steps against each other. Manifest.h reads the
// fields of a line; this decides what they mean.
//
//===----------------------------------------------------------------------===//

#include "Manifest.h"
#include "Model.h"
#include "loom/Version.h"
#include "loom/manifest.h"

#include <algorithm>
#include <set>
#include <sstream>

using namespace loom;

bool loom_model::parseLayerRuns(const std::string &text, Arg &arg) {
  // "first:count,first:count...", adding up to the argument's leading
  // dimension.
  std::stringstream ss(text);
  std::string run;
  int64_t held = 0;
  while (std::getline(ss, run, ',')) {
    // Plain digits, bounded like the model's layers, so that the runs' ends
    // and their sum stay far from overflowing.
    size_t colon = run.find(':');
    int64_t first = 0, count = 0;
    if (colon == std::string::npos ||
        !parseInteger(run.substr(0, colon), 0, kMaxManifestLayers - 1, first) ||
        !parseInteger(run.substr(colon + 1), 1, kMaxManifestLayers, count))
      return false;
    arg.layerRuns.push_back({first, count});
    held += count;
  }
  return !arg.layerRuns.empty() && !arg.shape.empty() && held == arg.shape[0] &&
         arg.kind != LOOM_ARG_INPUT && arg.kind != LOOM_ARG_OUTPUT;
}

bool loom_model::checkLogitsEntry(const std::string &name, int64_t rows) {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  // Its tokens and scores: one micro-batch, as @forward's.
  bool tokens = false, scores = false;
  for (const Arg &arg : entries[name].args) {
    if (arg.kind == LOOM_ARG_INPUT && arg.name == LOOM_INPUT_TOKENS)
      tokens = arg.shape == std::vector<int64_t>{rows, info.sequence};
    else if (arg.kind == LOOM_ARG_OUTPUT && arg.name == LOOM_OUTPUT_LOGITS)
      scores = arg.shape == std::vector<int64_t>{rows, info.sequence,
                                                 info.padded_vocab} &&
               arg.dtype == "f32";
    else if (arg.kind != LOOM_ARG_PARAM)
      return fail("entry point '" + name + "' has an argument '" + arg.kind +
                  " " + arg.name + "' it should not");
  }
  if (!tokens || !scores)
    return fail("entry point '" + name + "' does not take " +
                std::to_string(rows) + " x " + std::to_string(info.sequence) +
                " tokens and return their f32 scores over the padded "
                "vocabulary of " +
                std::to_string(info.padded_vocab));
  info.logits_rows = rows;
  return true;
}

bool loom_model::checkPipelineEntryNames() {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  for (int64_t r = 0; r < info.pp; ++r)
    if (!entries.count(stageEntry(r)))
      return fail("no '" + stageEntry(r) + "' entry point for pipeline rank " +
                  std::to_string(r) + " of " + std::to_string(info.pp));
  // With every rank's step there, and every rank's forward pass alone and
  // scores or none, any other entry is one too many.
  for (auto [prefix, entryOf] :
       {std::make_pair(LOOM_STAGE_EVAL_PREFIX, &loom::stageEvalEntry),
        std::make_pair(LOOM_STAGE_LOGITS_PREFIX, &loom::stageLogitsEntry)}) {
    int64_t found = 0;
    for (int64_t r = 0; r < info.pp; ++r)
      found += entries.count(entryOf(r));
    if (found != 0 && found != info.pp)
      return fail(std::string("pipeline ranks' ") + prefix +
                  "<rank> entry points: " + std::to_string(found) + " of " +
                  std::to_string(info.pp));
  }
  info.can_eval = entries.count(stageEvalEntry(0)) != 0;
  for (const auto &[entryName, entry] : entries) {
    bool own = false;
    for (int64_t r = 0; r < info.pp && !own; ++r)
      own = entryName == stageEntry(r) || entryName == stageEvalEntry(r) ||
            entryName == stageLogitsEntry(r);
    if (!own)
      return fail("entry point '" + entryName + "' in a pipeline artifact of " +
                  std::to_string(info.pp) +
                  " ranks, which run " LOOM_STAGE_STEP_PREFIX
                  "<rank>, " LOOM_STAGE_EVAL_PREFIX
                  "<rank> and " LOOM_STAGE_LOGITS_PREFIX "<rank>");
  }
  return true;
}

bool loom_model::checkPipelineEntries() {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  if (!checkPipelineEntryNames())
    return false;
  // Every rank takes the replica's whole share of the batch and cuts it
  // into the plan's micro-batches; the scores are of one micro-batch.
  bool sampled = entries.count(stageLogitsEntry(0)) != 0;
  for (const auto &[entryName, entry] : entries) {
    if (sampled && entryName.rfind(LOOM_STAGE_LOGITS_PREFIX, 0) == 0)
      continue;
    for (const Arg &arg : entry.args)
      if (arg.kind == LOOM_ARG_INPUT &&
          (arg.name == LOOM_INPUT_TOKENS || arg.name == LOOM_INPUT_TARGETS) &&
          (arg.shape.size() != 2 || info.batch % info.dp ||
           arg.shape[0] != info.batch / info.dp ||
           arg.shape[1] != info.sequence))
        return fail("the " + arg.name + " of '" + entryName +
                    "' do not match the training batch of " +
                    std::to_string(info.batch) +
                    " over dp = " + std::to_string(info.dp) + " replicas");
  }
  if (planMicroBatches < 1 || (info.batch / info.dp) % planMicroBatches)
    return fail("a pipeline's plan line must give micro-batches that divide "
                "the batch");
  info.micro_batches = planMicroBatches;
  if (sampled)
    for (int64_t r = 0; r < info.pp; ++r)
      if (!checkLogitsEntry(stageLogitsEntry(r),
                            info.batch / info.dp / planMicroBatches))
        return false;
  // A rank's forward passes alone take parameters its step holds, as the
  // step holds them.
  for (int64_t r = 0; r < info.pp; ++r) {
    const Entry &step = entries[stageEntry(r)];
    for (const std::string &entryName :
         {stageEvalEntry(r), stageLogitsEntry(r)}) {
      auto it = entries.find(entryName);
      if (it == entries.end())
        continue;
      for (const Arg &arg : it->second.args) {
        if (arg.kind != LOOM_ARG_PARAM)
          continue;
        // Or, where the step keeps a slice of the master (ZeRO-1/2 under
        // offload), read whole as the device's copy holds it.
        bool held = std::any_of(
            step.args.begin(), step.args.end(), [&](const Arg &own) {
              auto same = [&](const Arg &as) {
                return as.shape == arg.shape && as.shard == arg.shard &&
                       as.tpSplit == arg.tpSplit &&
                       as.layerRuns == arg.layerRuns;
              };
              return own.kind == arg.kind && own.name == arg.name &&
                     (same(own) || same(step.partLayout(own)));
            });
        if (!held)
          return fail(arg.name + " of '" + entryName +
                      "' is not the parameter '" + stageEntry(r) + "' holds");
      }
    }
  }
  // Each layer of each stacked parameter on exactly one stage's step.
  std::map<std::string, std::vector<int>> holders;
  for (int64_t r = 0; r < info.pp; ++r) {
    const std::string entryName = stageEntry(r);
    for (const Arg &param : entries[entryName].args) {
      // Optimizer state takes its layers from its parameter (flattened by
      // ZeRO, it has none of its own), and a flattened master from its
      // device copy.
      if (param.kind != LOOM_ARG_PARAM)
        continue;
      const Arg &arg = entries[entryName].partLayout(param);
      bool stacked = arg.name.rfind(LOOM_STACKED_PREFIX, 0) == 0;
      if (stacked != !arg.layerRuns.empty())
        return fail(
            arg.name + " of '" + entryName + "' " +
            (stacked ? "gives no layers" : "is not stacked and gives layers"));
      if (!stacked)
        continue;
      std::vector<int> &count = holders[arg.name];
      count.resize(info.layers);
      for (const auto &[first, n] : arg.layerRuns)
        for (int64_t l = first; l < first + n; ++l) {
          if (l >= info.layers)
            return fail(arg.name + " of '" + entryName + "' holds layer " +
                        std::to_string(l) + " of a model of " +
                        std::to_string(info.layers));
          ++count[l];
        }
    }
  }
  for (const auto &[tensor, count] : holders)
    for (int64_t l = 0; l < static_cast<int64_t>(count.size()); ++l)
      if (count[l] != 1)
        return fail("layer " + std::to_string(l) + " of " + tensor + " is " +
                    (count[l] ? "held by " + std::to_string(count[l]) +
                                    " pipeline stages"
                              : "held by no pipeline stage"));
  if (stackedLayers != info.layers)
    return fail("parameters are stacked over " + std::to_string(stackedLayers) +
                " layers, the model has " + std::to_string(info.layers));
  info.name = name.c_str();
  info.optimizer = optimizer.c_str();
  info.schedule = schedule.c_str();
  return true;
}

bool loom_model::joinPipeline() {
  if (info.pp == 1)
    return true;
  if (loom_dist_init(info.pp, info.dp, info.tp))
    return setError("%s: %s", path.c_str(),
                    std::string(loom_last_error()).c_str());
  stepEntry = stageEntry(loom_dist_get_info()->pp_rank);
  evalEntry = stageEvalEntry(loom_dist_get_info()->pp_rank);
  logitsEntry = stageLogitsEntry(loom_dist_get_info()->pp_rank);
  const Entry &own = entries[stepEntry];
  if (!own.memory.empty())
    setMemory(own.memory);
  return true;
}

namespace {
namespace M = loom::manifest;

/// Reads a manifest's lines into `model`, one function per kind of line.
/// Each field is read in its range: a field nobody reads, or one out of
/// range, is an error, not a default.
class ManifestReader {
public:
  explicit ManifestReader(loom_model &model) : m(model) {}

  bool read(const char *text);

private:
  bool fail(const std::string &why) { return m.badManifest(why); }
  bool badLine(const std::string &lineName, const ManifestFields &fields) {
    return fail("the " + lineName + " line '" + lineText +
                "': " + fields.problem());
  }
  bool readVersion(std::istringstream &in);
  bool readLine(const std::string &key, std::istringstream &line);
  bool readChecksum(std::istringstream &line);
  bool readModel(std::istringstream &line);
  bool readTraining(std::istringstream &line);
  bool readPlan(std::istringstream &line);
  bool readMemory(std::istringstream &line);
  bool readArena(std::istringstream &line);
  bool readTarget(std::istringstream &line);
  bool readStacked(std::istringstream &line);
  bool readTensor(std::istringstream &line);
  bool readCheckpoint(std::istringstream &line);
  bool readEntry(std::istringstream &line);
  bool readArg(std::istringstream &line);
  /// Whether the current entry lists the arguments its entry line
  /// announced.
  bool argsComplete();
  /// The checks of the whole, once every line is read.
  bool finish();

  loom_model &m;
  std::string lineText;
  std::set<std::string> seen;
  Entry *current = nullptr;
};

bool ManifestReader::read(const char *text) {
  std::istringstream in(text);
  if (!readVersion(in))
    return false;
  bool ended = false;
  while (!ended && std::getline(in, lineText)) {
    std::istringstream line(lineText);
    std::string key;
    line >> key;
    // Lines of the header come once each.
    if (key != M::kArgLine && key != M::kEntryLine && key != M::kMemoryLine &&
        key != M::kArenaLine && key != M::kTensorLine &&
        !seen.insert(key).second)
      return fail("a second '" + key + "' line");
    if (key == M::kEndLine)
      ended = true;
    else if (!readLine(key, line))
      return false;
  }
  if (!ended)
    return fail("no 'end' line: the manifest is cut short");
  return finish();
}

bool ManifestReader::readVersion(std::istringstream &in) {
  if (!std::getline(in, lineText) || lineText != M::kFormatLine) {
    if (lineText.rfind("loom-artifact ", 0) == 0)
      return setError("%s: a manifest of another format ('%s'; this "
                      "runtime reads '%s'): recompile it with this "
                      "version's loomc",
                      m.path.c_str(), lineText.c_str(), M::kFormatLine);
    return fail(std::string("expected '") + M::kFormatLine +
                "' first, the only format this runtime reads");
  }
  if (!std::getline(in, lineText) ||
      lineText != std::string(M::kVersionLine) + " " + LOOM_VERSION)
    return setError("%s: compiled by another Loom version (%s); this runtime "
                    "is %s: recompile it with this version's loomc",
                    m.path.c_str(), lineText.c_str(), LOOM_VERSION);
  return true;
}

bool ManifestReader::readLine(const std::string &key,
                              std::istringstream &line) {
  using Reader = bool (ManifestReader::*)(std::istringstream &);
  static const std::map<std::string, Reader> readers = {
      {M::kChecksumLine, &ManifestReader::readChecksum},
      {M::kModelLine, &ManifestReader::readModel},
      {M::kTrainingLine, &ManifestReader::readTraining},
      {M::kPlanLine, &ManifestReader::readPlan},
      {M::kMemoryLine, &ManifestReader::readMemory},
      {M::kArenaLine, &ManifestReader::readArena},
      {M::kTargetLine, &ManifestReader::readTarget},
      {M::kStackedLine, &ManifestReader::readStacked},
      {M::kTensorLine, &ManifestReader::readTensor},
      {M::kCheckpointLine, &ManifestReader::readCheckpoint},
      {M::kEntryLine, &ManifestReader::readEntry},
      {M::kArgLine, &ManifestReader::readArg}};
  auto reader = readers.find(key);
  if (reader == readers.end())
    return fail("unknown line '" + lineText + "'");
  return (this->*reader->second)(line);
}

bool ManifestReader::readChecksum(std::istringstream &line) {
  // Its value was checked against the file's bytes before loading.
  std::string digits, rest;
  line >> digits;
  if (digits.size() != LOOM_CHECKSUM_DIGITS || line >> rest)
    return fail("bad checksum line '" + lineText + "'");
  return true;
}

bool ManifestReader::readModel(std::istringstream &line) {
  loom_model_info &info = m.info;
  line >> m.name;
  ManifestFields f(line);
  int64_t tied = 0;
  if (m.name.empty() ||
      !f.integer(M::model::kLayers, info.layers, 1, kMaxManifestLayers) ||
      !f.integer(M::model::kWidth, info.width, 1, kMaxManifestSize) ||
      !f.integer(M::model::kHeads, info.heads, 1, kMaxManifestSize) ||
      !f.integer(M::model::kHidden, info.hidden, 1, kMaxManifestSize) ||
      !f.integer(M::model::kVocab, info.vocab, 1, kMaxManifestSize) ||
      !f.integer(M::model::kPaddedVocab, info.padded_vocab, 1,
                 kMaxManifestSize) ||
      !f.integer(M::model::kPositions, info.positions, 1, kMaxManifestSize) ||
      !f.integer(M::model::kTied, tied, 0, 1) || !f.allRead())
    return badLine(M::kModelLine, f);
  info.tied = static_cast<int>(tied);
  if (info.width % info.heads || info.padded_vocab < info.vocab)
    return fail("the model line '" + lineText +
                "' contradicts itself: heads must divide width, "
                "padded_vocab be at least vocab");
  return true;
}

bool ManifestReader::readTraining(std::istringstream &line) {
  loom_model_info &info = m.info;
  ManifestFields f(line);
  double ignored;
  if (!f.integer(M::training::kBatch, info.batch, 1, kMaxManifestSize) ||
      !f.integer(M::training::kSequence, info.sequence, 1, kMaxManifestSize) ||
      !f.text(M::training::kOptimizer, m.optimizer) ||
      !f.number(M::training::kLr, info.lr, 1e-300, 1e300) ||
      !f.number(M::training::kBeta1, ignored, 0, 1) ||
      !f.number(M::training::kBeta2, ignored, 0, 1) ||
      !f.number(M::training::kEps, ignored, 0, 1e300) ||
      !f.number(M::training::kWeightDecay, ignored, 0, 1e300) ||
      !f.number(M::training::kMomentum, ignored, 0, 1) ||
      !f.number(M::training::kGradClip, ignored, 0, 1e300) || !f.allRead())
    return badLine(M::kTrainingLine, f);
  if (m.optimizer != "adamw" && m.optimizer != "sgd")
    return fail("the training line '" + lineText + "': unknown optimizer '" +
                m.optimizer + "'");
  return true;
}

bool ManifestReader::readPlan(std::istringstream &line) {
  loom_model_info &info = m.info;
  ManifestFields f(line);
  if (!f.integer(M::plan::kDp, info.dp, 1, kMaxManifestRanks) ||
      !f.integer(M::plan::kTp, info.tp, 1, kMaxManifestRanks) ||
      !f.integer(M::plan::kPp, info.pp, 1, kMaxManifestRanks) ||
      !f.integer(M::plan::kZero, info.zero, 0, 3) ||
      !f.integer(M::plan::kMicroBatches, m.planMicroBatches, 1,
                 kMaxManifestSize) ||
      !f.text(M::plan::kRecompute, m.recompute))
    return badLine(M::kPlanLine, f);
  if (m.recompute != "none" && m.recompute != "selective" &&
      m.recompute != "full" && m.recompute != "stage")
    return fail("bad recomputation in the plan line '" + lineText + "'");
  if (info.pp > 1) {
    if (!f.text(M::plan::kSchedule, m.schedule) ||
        !f.integer(M::plan::kVirtualStages, info.virtual_stages, 1,
                   kMaxManifestLayers))
      return badLine(M::kPlanLine, f);
    if (m.schedule != "gpipe" && m.schedule != "1f1b" &&
        m.schedule != "interleaved")
      return fail("bad pipeline schedule in the plan line '" + lineText + "'");
  }
  if (f.has(M::plan::kOffload)) {
    if (!f.text(M::plan::kOffload, m.offload))
      return badLine(M::kPlanLine, f);
    if (m.offload != "optimizer" && m.offload != "parameters")
      return fail("bad offload in the plan line '" + lineText + "'");
  }
  if (!f.allRead())
    return badLine(M::kPlanLine, f);
  return true;
}

bool ManifestReader::readMemory(std::istringstream &line) {
  // After an entry line, that entry's figures (a pipeline rank's).
  ManifestFields f(line);
  std::vector<int64_t> bytes(5);
  if (!f.integer(M::memory::kParameters, bytes[0], 0, INT64_MAX / 8) ||
      !f.integer(M::memory::kGradients, bytes[1], 0, INT64_MAX / 8) ||
      !f.integer(M::memory::kOptimizer, bytes[2], 0, INT64_MAX / 8) ||
      !f.integer(M::memory::kActivations, bytes[3], 0, INT64_MAX / 8) ||
      (f.has(M::memory::kHost) &&
       !f.integer(M::memory::kHost, bytes[4], 0, INT64_MAX / 8)) ||
      !f.allRead())
    return badLine(M::kMemoryLine, f);
  if (current && !current->memory.empty())
    return fail("a second 'memory' line for entry point '" +
                current->symbolName + "'");
  if (current)
    current->memory = bytes;
  else if (!seen.insert(M::kMemoryLine).second)
    return fail("a second 'memory' line");
  else
    m.setMemory(bytes);
  return true;
}

bool ManifestReader::readArena(std::istringstream &line) {
  // After an entry line: its arena, and how much of it is live at once,
  // communicated, kept for the backward pass and gradients (for reports).
  ManifestFields f(line);
  int64_t bytes = 0, live = 0, communication = 0, kept = 0, gradients = 0;
  if (!f.integer(M::arena::kBytes, bytes, 0, INT64_MAX / 8) ||
      !f.integer(M::arena::kLive, live, 0, bytes) ||
      !f.integer(M::arena::kCommunication, communication, 0, live) ||
      !f.integer(M::arena::kKept, kept, 0, live - communication) ||
      !f.integer(M::arena::kGradients, gradients, 0,
                 live - communication - kept) ||
      !f.allRead())
    return badLine(M::kArenaLine, f);
  if (!current)
    return fail("an 'arena' line before any entry line");
  if (current->arena >= 0)
    return fail("a second 'arena' line for entry point '" +
                current->symbolName + "'");
  current->arena = bytes;
  return true;
}

bool ManifestReader::readTarget(std::istringstream &line) {
  std::string target, arch;
  line >> target;
  ManifestFields f(line);
  if (target != "cuda")
    return fail("unknown target '" + target + "'");
  if (!f.text(M::target::kArch, arch) || !f.allRead())
    return badLine(M::kTargetLine, f);
  if (!useCuda(arch))
    return setError("%s: %s", m.path.c_str(),
                    std::string(loom_last_error()).c_str());
  // Blocks the heap kept from a CPU artifact are host memory.
  loom_release_cached_memory();
  return true;
}

bool ManifestReader::readStacked(std::istringstream &line) {
  std::string prefix, count, rest;
  line >> prefix >> count;
  if (prefix + "." != LOOM_STACKED_PREFIX ||
      !parseInteger(count, 1, kMaxManifestLayers, m.stackedLayers) ||
      line >> rest)
    return fail("bad stacked line '" + lineText + "'");
  return true;
}

bool ManifestReader::readTensor(std::istringstream &line) {
  std::string name, init, shape;
  line >> name;
  ManifestFields f(line);
  TensorSpec spec;
  int64_t transpose = 0;
  std::string hfRows;
  if (name.empty() || !f.text(M::tensor::kShape, shape) ||
      !f.text(M::tensor::kInit, init))
    return badLine(M::kTensorLine, f);
  if (!parseShape(shape, spec.shape))
    return fail("bad shape '" + shape + "' of tensor " + name);
  if (init == M::tensor::kNormal)
    spec.init = TensorSpec::Init::Normal;
  else if (init == M::tensor::kOnes)
    spec.init = TensorSpec::Init::Ones;
  else if (init != M::tensor::kZeros)
    return fail("the tensor line '" + lineText + "': unknown init '" + init +
                "' (normal, zeros or ones)");
  if ((spec.init == TensorSpec::Init::Normal) != f.has(M::tensor::kStd))
    return fail("the tensor line '" + lineText +
                "': std goes with init=normal, and only with it");
  if ((f.has(M::tensor::kStd) &&
       !f.number(M::tensor::kStd, spec.std, 0, 1e6)) ||
      (f.has(M::tensor::kRows) &&
       !f.integer(M::tensor::kRows, spec.rows, 1, kMaxManifestSize)) ||
      (f.has(M::tensor::kHf) && !f.text(M::tensor::kHf, spec.hfName)) ||
      (f.has(M::tensor::kHfTranspose) &&
       !f.integer(M::tensor::kHfTranspose, transpose, 0, 1)) ||
      (f.has(M::tensor::kHfRows) && !f.text(M::tensor::kHfRows, hfRows)) ||
      (f.has(M::tensor::kHfGroups) &&
       !f.integer(M::tensor::kHfGroups, spec.hfGroups, 1, kMaxManifestSize)) ||
      !f.allRead())
    return badLine(M::kTensorLine, f);
  if (!hfRows.empty() && !parseRowList(hfRows, spec.hfRows))
    return fail("the tensor line '" + lineText + "': bad hf_rows '" + hfRows +
                "'");
  spec.hfTranspose = transpose != 0;
  // The rows are of an unstacked tensor's first dimension (a token
  // table's); a transposed tensor is a matrix (a layer's, for a stacked
  // one).
  bool stacked = name.rfind(LOOM_STACKED_PREFIX, 0) == 0;
  size_t layerRank = spec.shape.size() - (stacked ? 1 : 0);
  if (spec.rows && (stacked || spec.rows > spec.shape[0]))
    return fail("the tensor line '" + lineText +
                "': rows of a stacked tensor, or past its first dimension");
  if (spec.hfTranspose && layerRank != 2)
    return fail("the tensor line '" + lineText +
                "': hf_transpose=1 on a tensor that is not a matrix");
  // A comma-separated hf names parts of the first dimension (of a layer's,
  // for a stacked tensor): even ones, or hf_rows each in hf_groups groups
  // (Hugging Face's q, k and v projections for one fused matrix).
  int64_t parts = std::count(spec.hfName.begin(), spec.hfName.end(), ',') + 1;
  int64_t first = layerRank ? spec.shape[stacked ? 1 : 0] : 0;
  int64_t perGroup = 0;
  for (int64_t rows : spec.hfRows)
    perGroup += rows;
  bool grouped = !spec.hfRows.empty() || spec.hfGroups != 1;
  bool fits = grouped ? static_cast<int64_t>(spec.hfRows.size()) == parts &&
                            perGroup * spec.hfGroups == first
                      : first % parts == 0;
  if ((parts > 1 || grouped) &&
      (spec.hfTranspose || spec.rows || layerRank == 0 || !fits ||
       spec.hfName.find(",,") != std::string::npos ||
       spec.hfName.front() == ',' || spec.hfName.back() == ','))
    return fail("the tensor line '" + lineText + "': hf names " +
                std::to_string(parts) +
                " parts, which must fill the first dimension (evenly, or "
                "hf_rows each in hf_groups groups), without hf_transpose "
                "or rows");
  if (!m.tensorSpecs.emplace(name, spec).second)
    return fail("a second tensor line of " + name);
  m.tensorOrder.push_back(name);
  return true;
}

bool ManifestReader::readCheckpoint(std::istringstream &line) {
  std::string format, rest;
  line >> format;
  if (format != M::kLlmcCheckpoint || line >> rest)
    return fail("bad checkpoint line '" + lineText + "' (only 'checkpoint " +
                M::kLlmcCheckpoint + "')");
  m.llmcLayout = true;
  return true;
}

bool ManifestReader::readEntry(std::istringstream &line) {
  if (!argsComplete())
    return false;
  std::string entryName, symbol, count, rest;
  line >> entryName >> symbol >> count;
  if (entryName.empty() || m.entries.count(entryName) ||
      symbol != LOOM_ENTRY_PREFIX + entryName || line >> rest)
    return fail("bad entry line '" + lineText + "'");
  current = &m.entries[entryName];
  current->symbolName = symbol;
  if (!parseInteger(count, 1, 1 << 20, current->declaredArgs))
    return fail("bad entry line '" + lineText + "'");
  // A model read from its manifest alone (openManifest) has no code.
  current->fn = m.handle
                    ? reinterpret_cast<EntryFn>(dlsym(m.handle, symbol.c_str()))
                    : nullptr;
  if (m.handle && !current->fn)
    return fail("entry point '" + symbol + "' is missing");
  return true;
}

bool ManifestReader::readArg(std::istringstream &line) {
  if (!current)
    return fail("argument before any entry");
  Arg arg;
  std::string shape;
  line >> arg.kind >> arg.name >> arg.dtype >> shape;
  if (arg.kind != LOOM_ARG_PARAM && arg.kind != LOOM_ARG_STATE &&
      arg.kind != LOOM_ARG_INPUT && arg.kind != LOOM_ARG_OUTPUT &&
      arg.kind != LOOM_ARG_PARAM_COPY)
    return fail("argument of unknown kind '" + arg.kind + "': '" + lineText +
                "'");
  // Every buffer the runtime binds holds floats, but the tokens; the
  // device's copies of the parameters are in the step's precision.
  bool tokens = arg.kind == LOOM_ARG_INPUT && (arg.name == LOOM_INPUT_TOKENS ||
                                               arg.name == LOOM_INPUT_TARGETS);
  bool copy = arg.kind == LOOM_ARG_PARAM_COPY &&
              (arg.dtype == "bf16" || arg.dtype == "f16");
  if (!copy && arg.dtype != (tokens ? "i32" : "f32"))
    return fail("argument " + arg.name + " of type '" + arg.dtype +
                "', expected " + (tokens ? "i32" : "f32"));
  if (!parseShape(shape, arg.shape))
    return fail("bad shape '" + shape + "' of " + arg.name);
  ManifestFields f(line);
  int64_t rank = static_cast<int64_t>(arg.shape.size());
  bool divisible = arg.kind == LOOM_ARG_PARAM || arg.kind == LOOM_ARG_STATE;
  // Dimensions of the argument's shape (`shard`), and of the whole tensor,
  // of the same rank (`tp_dim`).
  if (f.has(M::arg::kShard) &&
      (!divisible || !f.integer(M::arg::kShard, arg.shard, 0, rank - 1)))
    return fail("bad shard dimension of " + arg.name + ": '" + lineText + "'");
  // A parameter's, or its device copy's where the master is a ZeRO-1/2
  // slice (offload).
  bool parted = arg.kind == LOOM_ARG_PARAM || arg.kind == LOOM_ARG_PARAM_COPY;
  TpSplit &split = arg.tpSplit;
  if (f.has(M::arg::kTpDim) &&
      (!parted || !f.integer(M::arg::kTpDim, split.dim, 0, rank - 1)))
    return fail("bad tp_dim of " + arg.name + ": '" + lineText + "'");
  // Whether the part holds more than its shared elements is checked with
  // the whole's shape (TpSplit::wholeExtent).
  if (f.has(M::arg::kTpShared) &&
      (split.dim < 0 ||
       !f.integer(M::arg::kTpShared, split.shared, 1, kMaxManifestSize)))
    return fail("bad tp_shared of " + arg.name + ": '" + lineText + "'");
  // Blocks shared by teams divide the whole, not the part.
  if (split.dim >= 0 || f.has(M::arg::kTpBlocks)) {
    if (split.dim < 0 ||
        !f.integer(M::arg::kTpBlocks, split.blocks, 1, kMaxManifestSize) ||
        (!split.shared && arg.shape[split.dim] % split.blocks))
      return fail("bad tp_blocks of " + arg.name + ": '" + lineText + "'");
  }
  std::string layers;
  if (f.has(M::arg::kLayers) && (!f.text(M::arg::kLayers, layers) ||
                                 !loom_model::parseLayerRuns(layers, arg)))
    return fail("bad layers of " + arg.name + ": '" + lineText + "'");
  // A stage's layers are whole layers: tensor parallelism never divides
  // the dimension that stacks them.
  if (!arg.layerRuns.empty() && split.dim == 0)
    return fail("bad tp_dim of " + arg.name +
                " (a pipeline stage's layers, which tensor parallelism does "
                "not divide): '" +
                lineText + "'");
  if (!f.allRead())
    return badLine(M::kArgLine, f);
  current->args.push_back(arg);
  return true;
}

bool ManifestReader::argsComplete() {
  if (!current ||
      static_cast<int64_t>(current->args.size()) == current->declaredArgs)
    return true;
  return fail("entry point '" + current->symbolName + "' announces " +
              std::to_string(current->declaredArgs) + " arguments and lists " +
              std::to_string(current->args.size()));
}

bool ManifestReader::finish() {
  loom_model_info &info = m.info;
  if (!argsComplete())
    return false;
  for (const char *line :
       {M::kChecksumLine, M::kModelLine, M::kTrainingLine, M::kStackedLine})
    if (!seen.count(line))
      return fail(std::string("no '") + line + "' line");
  if (!m.checkModelShapes() || (m.llmcLayout && !m.checkLlmcHeader()))
    return false;
  if (info.pp > 1)
    return m.checkPipelineEntries();
  for (const char *needed : {"train_step", "forward", "forward_grad"})
    if (!m.entries.count(needed))
      return fail(std::string("no '") + needed + "' entry point");
  // The step takes one replica's share of the batch, forward and
  // forward_grad one micro-batch of it.
  auto tokenRows = [&](const char *entryName) -> int64_t {
    for (const Arg &arg : m.entries[entryName].args)
      if (arg.kind == LOOM_ARG_INPUT && arg.name == LOOM_INPUT_TOKENS &&
          arg.shape.size() == 2)
        return arg.shape[0];
    return 0;
  };
  int64_t stepRows = tokenRows("train_step"), microRows = tokenRows("forward");
  if (info.batch % info.dp || stepRows != info.batch / info.dp ||
      microRows <= 0 || stepRows % microRows ||
      tokenRows("forward_grad") != microRows)
    return fail("the entry points' token shapes do not match the training "
                "batch of " +
                std::to_string(info.batch) +
                " over dp = " + std::to_string(info.dp) + " replicas");
  info.micro_batches = stepRows / microRows;
  m.forwardChunks = info.batch / microRows;
  if (m.entries.count(LOOM_OUTPUT_LOGITS) &&
      !m.checkLogitsEntry(LOOM_OUTPUT_LOGITS, microRows))
    return false;
  if (m.planMicroBatches && m.planMicroBatches != info.micro_batches)
    return fail("the plan's " + std::to_string(m.planMicroBatches) +
                " micro-batches do not match the entry points' shapes");
  if (m.stackedLayers != info.layers)
    return fail("parameters are stacked over " +
                std::to_string(m.stackedLayers) + " layers, the model has " +
                std::to_string(info.layers));
  info.name = m.name.c_str();
  info.optimizer = m.optimizer.c_str();
  return true;
}
} // namespace

bool loom_model::parseManifest(const char *text) {
  // One rank unless the plan says otherwise.
  info.pp = info.dp = info.tp = 1;
  info.virtual_stages = 1;
  info.schedule = "";
  // A pipeline artifact may lack its ranks' forward passes alone; one rank's
  // always has @forward.
  info.can_eval = 1;
  return ManifestReader(*this).read(text);
}

bool loom_model::checkModelShapes() {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  if (info.sequence > info.positions)
    return fail("the training line's sequence of " +
                std::to_string(info.sequence) +
                " exceeds the model line's positions (" +
                std::to_string(info.positions) + ")");
  for (const auto &[entryName, entry] : entries) {
    std::map<std::string, int64_t> paramSizes;
    for (const Arg &arg : entry.args)
      if (arg.kind == LOOM_ARG_PARAM)
        paramSizes[arg.name] = arg.size();
    for (const Arg &arg : entry.args) {
      std::string where = arg.kind + " " + arg.name + " of '" + entryName + "'";
      bool tokens =
          arg.name == LOOM_INPUT_TOKENS || arg.name == LOOM_INPUT_TARGETS;
      static const std::string gradPrefix = LOOM_OUTPUT_GRAD_PREFIX;
      if (arg.kind == LOOM_ARG_INPUT && tokens) {
        if (arg.shape.size() != 2 || arg.shape[1] != info.sequence)
          return fail(where + " is " + formatShape(arg.shape) +
                      ", not sequences of the training line's " +
                      std::to_string(info.sequence) + " tokens");
      } else if (arg.kind == LOOM_ARG_OUTPUT &&
                 arg.name.rfind(gradPrefix, 0) == 0) {
        auto param = paramSizes.find(arg.name.substr(gradPrefix.size()));
        if (param == paramSizes.end() || param->second != arg.size())
          return fail(where + " is not the size of a parameter of the entry");
      } else if (arg.kind == LOOM_ARG_OUTPUT &&
                 arg.name == LOOM_OUTPUT_LOGITS) {
        // Its shape is the logits entry's check (checkLogitsEntry).
      } else if (arg.kind == LOOM_ARG_INPUT || arg.kind == LOOM_ARG_OUTPUT) {
        // The scalars: lr, step, the loss scale, the loss and the norm.
        if (!arg.shape.empty())
          return fail(where + " is " + formatShape(arg.shape) +
                      ", expected a scalar");
      } else if (arg.kind == LOOM_ARG_PARAM) {
        // The whole tensor: the argument's shape with the plan's parts
        // multiplied back, and a pipeline stage's layers the model's. A
        // master weight kept as ZeRO-1/2 keep the state (offload) is a
        // slice of its flattened part, which its device copy holds.
        const Arg &part = entry.partLayout(arg);
        std::vector<int64_t> whole = part.shape;
        auto spec = tensorSpecs.find(arg.name);
        if (spec == tensorSpecs.end())
          return fail(where + " has no tensor line");
        const std::vector<int64_t> &expected = spec->second.shape;
        if (&part != &arg && part.size() != arg.size() * info.dp)
          return fail(where + " is not a slice of its device copy");
        if (part.shard >= 0)
          whole[part.shard] *= info.dp;
        if (const TpSplit &split = part.tpSplit; split.dim >= 0) {
          int64_t extent = whole[split.dim];
          whole[split.dim] = split.wholeExtent(extent, info.tp);
          if (split.shared && !whole[split.dim])
            return fail(where + ": tp = " + std::to_string(info.tp) +
                        " ranks cannot hold parts of " +
                        std::to_string(extent) + " along tp_dim " +
                        std::to_string(split.dim) + " of " +
                        std::to_string(split.blocks) +
                        " blocks shared by teams, the last " +
                        std::to_string(split.shared) +
                        " of each shared (tp_blocks, tp_shared)");
        }
        if (!part.layerRuns.empty())
          whole[0] = info.layers;
        if (whole != expected)
          return fail(where + " makes a whole tensor of " + formatShape(whole) +
                      ", but its tensor line says " + formatShape(expected));
      }
    }
  }
  return true;
}

loom_model *loom::openManifest(const char *text, bool layout) {
  auto model = std::make_unique<loom_model>();
  model->path = "manifest";
  if (!model->parseManifest(text))
    return nullptr;
  // A pipeline's layout depends on the rank, which needs the job.
  if (layout && model->info.pp > 1) {
    setError("manifest: a pipeline artifact's tensors are laid out by rank, "
             "on open");
    return nullptr;
  }
  if (layout && !model->layoutParams())
    return nullptr;
  return model.release();
}
