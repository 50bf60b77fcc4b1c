//===- ModelArchitecture.cpp - The model section of a description ---------===//
//
// Each model family's architecture keys: GPT-2's, and the Llama family's
// (Llama, Mistral, Qwen2), as their Hugging Face config.json files write them
// (docs/model-format.md). Parts Loom does not build are refused by name.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::config_reader;

namespace {

/// Keys of a Hugging Face GPT-2 config.json that describe things Loom does
/// not model (dropout, generation, tokenizer ids, bookkeeping). They are
/// accepted without a warning because such files carry them as a matter of
/// course; docs/model-format.md lists them.
constexpr StringRef kIgnoredHuggingFaceKeys[] = {
    "_name_or_path",
    "add_cross_attention",
    "architectures",
    "attn_pdrop",
    "bos_token_id",
    "dtype",
    "embd_pdrop",
    "eos_token_id",
    "gradient_checkpointing",
    "initializer_range",
    "model_type",
    "n_ctx",
    "output_past",
    "pad_token_id",
    "reorder_and_upcast_attn",
    "resid_pdrop",
    "scale_attn_by_inverse_layer_idx",
    "scale_attn_weights",
    "summary_activation",
    "summary_first_dropout",
    "summary_proj_to_labels",
    "summary_type",
    "summary_use_proj",
    "task_specific_params",
    "torch_dtype",
    "transformers_version",
    "use_cache",
};

/// The architecture: GPT-2's config.json keys, either at the top level of a
/// Hugging Face file or under "model" in Loom's format. n_positions may be
/// left out in Loom's format, meaning "as long as the training sequence".
void readArchitecture(ObjectReader &reader, ArchitectureConfig &arch,
                      bool positionsRequired) {
  reader.readInt("n_layer", arch.layers, /*required=*/true);
  reader.readInt("n_embd", arch.width, /*required=*/true);
  reader.readInt("n_head", arch.heads, /*required=*/true);
  reader.readInt("vocab_size", arch.vocab, /*required=*/true);
  reader.readInt("n_positions", arch.positions, positionsRequired);
  reader.readInt("padded_vocab_size", arch.paddedVocab, /*required=*/false);
  // Hugging Face writes "n_inner": null for the default 4 * n_embd.
  if (const json::Value *inner = reader.get("n_inner", /*required=*/false))
    if (inner->kind() != json::Value::Null)
      reader.readInt("n_inner", arch.hidden, /*required=*/false);
  reader.readNumber("layer_norm_epsilon", arch.normEpsilon, false, positive,
                    "a positive number");
  reader.readBool("tie_word_embeddings", arch.tiedEmbeddings);
  std::string activation;
  if (reader.readString("activation_function", activation, false) &&
      !activation.empty() && activation != "gelu_new" &&
      activation != "gelu_pytorch_tanh")
    reader.error("activation_function",
                 "only GPT-2's tanh GELU (\"gelu_new\" or "
                 "\"gelu_pytorch_tanh\") is supported, got \"" +
                     activation + "\"");
}

/// Keys of Hugging Face Llama, Mistral and Qwen2 config.json files that
/// describe things Loom does not model, accepted without a warning.
constexpr StringRef kIgnoredLlamaKeys[] = {
    "_name_or_path",
    "architectures",
    "attention_dropout",
    "bos_token_id",
    "dtype",
    "eos_token_id",
    "initializer_range",
    "max_window_layers",
    "model_type",
    "pad_token_id",
    "pretraining_tp",
    "torch_dtype",
    "transformers_version",
    "use_cache",
};

/// A rotary embedding's object (rope_scaling, or transformers 5's
/// rope_parameters): the base and Llama 3's frequency scaling.
void readRopeParameters(ObjectReader &reader, ArchitectureConfig &arch) {
  std::string type = "default";
  // transformers 4 wrote "type" before "rope_type".
  if (!reader.readString("rope_type", type, false))
    reader.readString("type", type, false);
  reader.ignore({"type"});
  reader.readNumber(
      "rope_theta", arch.ropeTheta, false, [](double x) { return x > 1; },
      "a number above 1");
  if (type == "default")
    return;
  if (type != "llama3") {
    reader.error("rope_type", "only \"default\" and \"llama3\" rotary "
                              "positions are supported, got \"" +
                                  type + "\"");
    return;
  }
  ArchitectureConfig::RopeScaling &scaling = arch.ropeScaling;
  reader.readNumber(
      "factor", scaling.factor, true, [](double x) { return x >= 1; },
      "a number of at least 1");
  reader.readNumber("low_freq_factor", scaling.lowFreqFactor, true, positive,
                    "a positive number");
  reader.readNumber(
      "high_freq_factor", scaling.highFreqFactor, true,
      [&](double x) { return x > scaling.lowFreqFactor; },
      "a number above low_freq_factor");
  reader.readInt("original_max_position_embeddings", scaling.originalContext,
                 true);
}

/// Llama-family architectures: RMSNorm, rotary positions, a SwiGLU MLP and
/// an untied head unless tie_word_embeddings; Qwen2 adds biases to the
/// query, key and value projections. Hugging Face's keys, at the top level
/// of its config.json or under "model" in Loom's format.
void readLlamaArchitecture(ObjectReader &reader, StringRef family,
                           ArchitectureConfig &arch, bool positionsRequired,
                           ConfigDiagnostics &diag) {
  arch.norm = NormKind::rmsnorm;
  arch.position = PositionKind::rope;
  arch.mlp = MlpKind::swiglu;
  arch.biases = family == "qwen2" ? BiasKind::qkv : BiasKind::none;
  arch.tiedEmbeddings = false;
  arch.normEpsilon = 1e-6;
  reader.readInt("num_hidden_layers", arch.layers, /*required=*/true);
  reader.readInt("hidden_size", arch.width, /*required=*/true);
  reader.readInt("num_attention_heads", arch.heads, /*required=*/true);
  reader.readInt("intermediate_size", arch.hidden, /*required=*/true);
  reader.readInt("vocab_size", arch.vocab, /*required=*/true);
  reader.readInt("max_position_embeddings", arch.positions, positionsRequired);
  reader.readInt("padded_vocab_size", arch.paddedVocab, /*required=*/false);
  reader.readNumber("rms_norm_eps", arch.normEpsilon, false, positive,
                    "a positive number");
  auto aboveOne = [](double x) { return x > 1; };
  reader.readNumber("rope_theta", arch.ropeTheta, false, aboveOne,
                    "a number above 1");
  // Llama 3.1's scaling under rope_scaling; transformers 5 writes the base
  // and the scaling under rope_parameters.
  for (StringRef key : {"rope_scaling", "rope_parameters"}) {
    const json::Value *value = reader.get(key, /*required=*/false);
    if (!value || value->kind() == json::Value::Null)
      continue;
    if (const json::Object *rope = reader.readObject(key, false)) {
      ObjectReader ropeReader(*rope, reader.field(key), diag);
      readRopeParameters(ropeReader, arch);
      ropeReader.warnUnknown();
    }
  }
  if (const json::Value *types = reader.get("layer_types", false)) {
    const json::Array *array = types->getAsArray();
    if (!array || llvm::any_of(*array, [](const json::Value &type) {
          return type.getAsString() != StringRef("full_attention");
        }))
      reader.mismatch("layer_types",
                      "\"full_attention\" for every layer (sliding-window "
                      "attention is not supported)",
                      *types);
  }
  reader.readBool("tie_word_embeddings", arch.tiedEmbeddings);
  if (reader.readInt("num_key_value_heads", arch.kvHeads, false) &&
      arch.kvHeads && arch.heads && arch.heads % arch.kvHeads != 0)
    reader.error("num_key_value_heads",
                 "expected a divisor of num_attention_heads (" +
                     llvm::Twine(arch.heads) + "), got " +
                     llvm::Twine(arch.kvHeads));
  int64_t headDim = 0;
  if (reader.readInt("head_dim", headDim, false) && headDim && arch.heads &&
      headDim * arch.heads != arch.width)
    reader.error("head_dim", "expected hidden_size / num_attention_heads (" +
                                 llvm::Twine(arch.width / arch.heads) +
                                 "), got " + llvm::Twine(headDim));
  std::string activation;
  if (reader.readString("hidden_act", activation, false) &&
      !activation.empty() && activation != "silu")
    reader.error("hidden_act", "only SwiGLU's \"silu\" is supported, got \"" +
                                   activation + "\"");
  // Llama's optional biases: on the attention's four projections, on the
  // MLP's three. Mistral's and Qwen2's configurations have no such keys.
  bool attentionBias = false, mlpBias = false;
  for (auto [key, on] :
       {std::pair<StringRef, bool *>{"attention_bias", &attentionBias},
        {"mlp_bias", &mlpBias}})
    if (reader.readBool(key, *on) && *on && family != "llama")
      reader.error(key, "is not supported for model_type \"" + family +
                            "\"; expected false");
  if (family == "llama" && (attentionBias || mlpBias))
    arch.biases = !mlpBias        ? BiasKind::attention
                  : attentionBias ? BiasKind::all
                                  : BiasKind::mlp;
  // Sliding windows Loom does not build yet.
  bool sliding = false;
  if (reader.readBool("use_sliding_window", sliding) && sliding)
    reader.error("use_sliding_window", "is not supported; expected false");
  if (const json::Value *window = reader.get("sliding_window", false))
    if (window->kind() != json::Value::Null && family != "qwen2")
      reader.error("sliding_window",
                   "is not supported; expected null, got " + describe(*window));
}

/// The model families whose Hugging Face config.json Loom reads.
constexpr StringRef kLlamaFamilies[] = {"llama", "mistral", "qwen2"};

bool isLlamaFamily(StringRef type) {
  return llvm::is_contained(kLlamaFamilies, type);
}

} // namespace

/// Reads the architecture in the keys of its family's config.json: "gpt2"
/// when model_type is absent.
void config_reader::readAnyArchitecture(ObjectReader &reader,
                                        const json::Object &object,
                                        ArchitectureConfig &arch,
                                        bool positionsRequired,
                                        ConfigDiagnostics &diag) {
  StringRef family = "gpt2";
  if (const json::Value *type = object.get("model_type")) {
    std::optional<StringRef> name = type->getAsString();
    if (!name || (*name != "gpt2" && !isLlamaFamily(*name))) {
      reader.mismatch("model_type",
                      "one of \"gpt2\", \"llama\", \"mistral\", \"qwen2\"",
                      *type);
      reader.ignore({"model_type"});
      return;
    }
    family = *name;
  }
  if (family == "gpt2") {
    readArchitecture(reader, arch, positionsRequired);
    reader.ignore(kIgnoredHuggingFaceKeys);
    return;
  }
  readLlamaArchitecture(reader, family, arch, positionsRequired, diag);
  reader.ignore(kIgnoredLlamaKeys);
}
