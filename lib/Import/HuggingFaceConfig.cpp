//===- HuggingFaceConfig.cpp - A model as transformers describes it -------===//
//
// The inverse of the family readers in ModelArchitecture.cpp: the
// config.json that transformers' AutoModelForCausalLM builds the same model
// from, so that weights loom-run exports (--export-safetensors) load there.
// Each key written is one the readers take back.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir::loom;
namespace json = llvm::json;

namespace {
json::Value eotOfGpt2(const ArchitectureConfig &arch) {
  constexpr int64_t kGpt2Vocab = 50257;
  return arch.vocab == kGpt2Vocab ? json::Value(kGpt2Vocab - 1)
                                  : json::Value(nullptr);
}

json::Object gpt2Config(const ArchitectureConfig &arch) {
  return json::Object{
      {"model_type", "gpt2"},
      {"architectures", json::Array{"GPT2LMHeadModel"}},
      {"n_layer", arch.layers},
      {"n_embd", arch.width},
      {"n_head", arch.heads},
      {"n_inner", arch.hidden == 4 * arch.width ? json::Value(nullptr)
                                                : json::Value(arch.hidden)},
      {"vocab_size", arch.vocab},
      {"n_positions", arch.positions},
      {"n_ctx", arch.positions},
      {"layer_norm_epsilon", arch.normEpsilon},
      {"activation_function", "gelu_new"},
      {"tie_word_embeddings", arch.tiedEmbeddings},
      // Loom trains without dropout; transformers' defaults have some.
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"dtype", "float32"},
      // GPT-2's end of text, transformers' default, where the vocabulary is
      // GPT-2's; none otherwise.
      {"bos_token_id", eotOfGpt2(arch)},
      {"eos_token_id", eotOfGpt2(arch)},
  };
}

json::Object llamaConfig(const ArchitectureConfig &arch, bool qwen2) {
  json::Object config{
      {"model_type", qwen2 ? "qwen2" : "llama"},
      {"architectures",
       json::Array{qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"num_hidden_layers", arch.layers},
      {"hidden_size", arch.width},
      {"num_attention_heads", arch.heads},
      {"num_key_value_heads", arch.getKvHeads()},
      {"head_dim", arch.width / arch.heads},
      {"intermediate_size", arch.hidden},
      {"vocab_size", arch.vocab},
      {"max_position_embeddings", arch.positions},
      {"rms_norm_eps", arch.normEpsilon},
      {"rope_theta", arch.ropeTheta},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", arch.tiedEmbeddings},
      {"dtype", "float32"},
  };
  if (qwen2) {
    config["use_sliding_window"] = false;
  } else {
    config["attention_bias"] = arch.hasOutputBias();
    config["mlp_bias"] = arch.hasMlpBias();
  }
  const ArchitectureConfig::RopeScaling &scaling = arch.ropeScaling;
  if (scaling.factor > 0)
    config["rope_scaling"] = json::Object{
        {"rope_type", "llama3"},
        {"factor", scaling.factor},
        {"low_freq_factor", scaling.lowFreqFactor},
        {"high_freq_factor", scaling.highFreqFactor},
        {"original_max_position_embeddings", scaling.originalContext},
    };
  return config;
}
} // namespace

llvm::Expected<std::string>
mlir::loom::writeHuggingFaceConfig(const ArchitectureConfig &arch) {
  json::Object config;
  bool gpt2 = arch.norm == NormKind::layernorm &&
              arch.position == PositionKind::learned &&
              arch.mlp == MlpKind::gelu && arch.biases == BiasKind::all &&
              !arch.isGrouped();
  bool llama = arch.norm == NormKind::rmsnorm &&
               arch.position == PositionKind::rope &&
               arch.mlp == MlpKind::swiglu;
  if (gpt2)
    config = gpt2Config(arch);
  else if (llama)
    config = llamaConfig(arch, arch.biases == BiasKind::qkv);
  else
    return llvm::createStringError(
        "no Hugging Face model family has this model's parts (GPT-2: layer "
        "norm, learned positions, GELU, all biases; Llama and Qwen2: RMS "
        "norm, rotary positions, SwiGLU)");
  return llvm::formatv("{0:2}", json::Value(std::move(config))).str() + "\n";
}
