//===- manifest.h - The artifact's manifest: lines and fields --*- C++ -*-===//
//
// Every artifact carries a manifest (docs/artifact.md): text that
// loom-export-entries writes and the runtime reads (ModelManifest.cpp), a
// line per fact, `<line> [words...] <field>=<value>...`, the header's lines
// first, then each entry point's line followed by its memory, arena and
// argument lines, then `end`. The compiler and the runtime spell every line
// and field by these names, and the runtime refuses a manifest of another
// format (kFormatLine) or Loom version (kVersionLine and loom/Version.h).
// A change that gives a line or field another meaning is a new format
// number; one that adds a line or field the runtime needs is a new Loom
// version (the runtime refuses lines and fields it does not know).
//
// test/unit/ManifestRoundTripTest.cpp compiles models with the compiler's
// pipeline and reads their manifests with the runtime's reader.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_MANIFEST_H
#define LOOM_MANIFEST_H

namespace loom::manifest {

/// The first line: the manifest's format.
inline constexpr int kFormat = 2;
inline constexpr char kFormatLine[] = "loom-artifact 2";
/// The second line's word, followed by the Loom version that compiled it.
inline constexpr char kVersionLine[] = "loom-version";

/// The lines, each followed by its fields' names.
inline constexpr char kChecksumLine[] = "checksum";

/// `model <name> layers=... width=...`: the model's sizes.
inline constexpr char kModelLine[] = "model";
namespace model {
inline constexpr char kLayers[] = "layers";
inline constexpr char kWidth[] = "width";
inline constexpr char kHeads[] = "heads";
inline constexpr char kHidden[] = "hidden";
inline constexpr char kVocab[] = "vocab";
inline constexpr char kPaddedVocab[] = "padded_vocab";
inline constexpr char kPositions[] = "positions";
inline constexpr char kTied[] = "tied";
} // namespace model

/// `training batch=... sequence=... optimizer=...`: the training setup.
inline constexpr char kTrainingLine[] = "training";
namespace training {
inline constexpr char kBatch[] = "batch";
inline constexpr char kSequence[] = "sequence";
inline constexpr char kOptimizer[] = "optimizer";
inline constexpr char kLr[] = "lr";
inline constexpr char kBeta1[] = "beta1";
inline constexpr char kBeta2[] = "beta2";
inline constexpr char kEps[] = "eps";
inline constexpr char kWeightDecay[] = "weight_decay";
inline constexpr char kMomentum[] = "momentum";
inline constexpr char kGradClip[] = "grad_clip";
} // namespace training

/// `plan dp=... tp=... pp=... zero=... micro_batches=... recompute=...`, and
/// with pp > 1
/// the schedule and its virtual stages.
inline constexpr char kPlanLine[] = "plan";
namespace plan {
inline constexpr char kDp[] = "dp";
inline constexpr char kTp[] = "tp";
inline constexpr char kPp[] = "pp";
inline constexpr char kZero[] = "zero";
inline constexpr char kMicroBatches[] = "micro_batches";
/// What the backward pass recomputes: none, selective (attention's scores
/// and weighted sums), full (each layer's forward) or stage (each pipeline
/// stage's forward); it sets the hardware FLOPs that HFU counts.
inline constexpr char kRecompute[] = "recompute";
inline constexpr char kSchedule[] = "schedule";
inline constexpr char kVirtualStages[] = "virtual_stages";
/// Optional: what the host keeps (offload=optimizer: the master weights and
/// optimizer state; offload=parameters: also the step's copies of the
/// parameters, which the device fetches as it reads them).
inline constexpr char kOffload[] = "offload";
} // namespace plan

/// `memory parameters=... gradients=... optimizer=... activations=...`: a
/// rank's bytes as compiled, the module's or, after an entry line, that
/// entry's (a pipeline rank's). The same names key `loom.memory`.
inline constexpr char kMemoryLine[] = "memory";
namespace memory {
inline constexpr char kParameters[] = "parameters";
inline constexpr char kGradients[] = "gradients";
inline constexpr char kOptimizer[] = "optimizer";
inline constexpr char kActivations[] = "activations";
/// Optional, under offload: the bytes the host keeps and uses (master
/// weights, optimizer state and the host step's arena).
inline constexpr char kHost[] = "host";
} // namespace memory

/// `arena bytes=... live=... communication=... kept=... gradients=...`,
/// after an entry line: its static arena. The same names key `loom.arena`.
inline constexpr char kArenaLine[] = "arena";
namespace arena {
inline constexpr char kBytes[] = "bytes";
inline constexpr char kLive[] = "live";
inline constexpr char kCommunication[] = "communication";
inline constexpr char kKept[] = "kept";
inline constexpr char kGradients[] = "gradients";
} // namespace arena

/// `target cuda arch=sm_90`: where the step runs, when not the CPU.
inline constexpr char kTargetLine[] = "target";
namespace target {
inline constexpr char kArch[] = "arch";
} // namespace target

/// `stacked <prefix> <layers>`: the layers the stacked parameters hold.
inline constexpr char kStackedLine[] = "stacked";

/// `tensor <name> shape=... init=normal|zeros|ones [std=...] [rows=...]
/// [hf=...] [hf_transpose=1] [hf_rows=...] [hf_groups=...]`: a parameter of the
/// whole model, in the model's order, as the compiler derived it from the
/// description: its whole shape (a stacked one's leading with the layers), how
/// it starts (drawn from a normal distribution of `std`, or constant), the rows
/// of its first dimension that are real (`rows`, of a token table padded past
/// the vocabulary: the rest are zeros, drawn for nothing and left out of
/// exports), and its name in Hugging Face's checkpoints (`hf`, a `*`
/// standing for the layer of a stacked tensor), stored transposed there
/// with `hf_transpose=1`. An `hf` of several comma-separated names divides
/// the first dimension (a layer's, for a stacked tensor) among them: evenly,
/// or `hf_rows` rows each (comma-separated) in each of `hf_groups` groups,
/// one after the other.
inline constexpr char kTensorLine[] = "tensor";
namespace tensor {
inline constexpr char kShape[] = "shape";
inline constexpr char kInit[] = "init";
inline constexpr char kStd[] = "std";
inline constexpr char kRows[] = "rows";
inline constexpr char kHf[] = "hf";
inline constexpr char kHfTranspose[] = "hf_transpose";
inline constexpr char kHfRows[] = "hf_rows";
inline constexpr char kHfGroups[] = "hf_groups";
/// The values of `init`.
inline constexpr char kNormal[] = "normal";
inline constexpr char kZeros[] = "zeros";
inline constexpr char kOnes[] = "ones";
} // namespace tensor

/// `checkpoint llmc`: the tensor lines are those of llm.c's GPT-2
/// checkpoints, in its order, which the runtime then reads and writes.
inline constexpr char kCheckpointLine[] = "checkpoint";
inline constexpr char kLlmcCheckpoint[] = "llmc";

/// `entry <name> <symbol> <arguments>`: an entry point.
inline constexpr char kEntryLine[] = "entry";

/// `arg <kind> <name> <dtype> <shape> [shard=...] [tp_dim=... tp_blocks=...
/// [tp_shared=...]] [layers=first:count,...]`: the entry's next argument.
inline constexpr char kArgLine[] = "arg";
namespace arg {
inline constexpr char kShard[] = "shard";
inline constexpr char kTpDim[] = "tp_dim";
inline constexpr char kTpBlocks[] = "tp_blocks";
inline constexpr char kTpShared[] = "tp_shared";
inline constexpr char kLayers[] = "layers";
} // namespace arg

/// The last line.
inline constexpr char kEndLine[] = "end";

} // namespace loom::manifest

#endif // LOOM_MANIFEST_H
