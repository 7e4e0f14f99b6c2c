#include "sim/model/hf_config.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace shardsim {
namespace {

using Json = nlohmann::json;

constexpr char kLlama[] = "LlamaForCausalLM";
constexpr char kMistral[] = "MistralForCausalLM";
constexpr char kQwen2[] = "Qwen2ForCausalLM";
constexpr char kGpt2[] = "GPT2LMHeadModel";

// Reads the keys of one config object, every error naming the file and
// the key.
class Keys {
 public:
  Keys(const Json& json, absl::string_view where)
      : json_(json), where_(where) {}

  absl::Status Error(absl::string_view key, absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": key \"", key, "\": ", why));
  }

  // Present, null or not.
  bool Present(absl::string_view key) const {
    return json_.find(std::string(key)) != json_.end();
  }

  // Present and not null.
  bool Has(absl::string_view key) const {
    auto it = json_.find(std::string(key));
    return it != json_.end() && !it->is_null();
  }

  // A whole number >= 1 that fits int32 (every shape key does).
  absl::StatusOr<int64_t> Count(absl::string_view key) const {
    if (!Has(key)) return Error(key, "missing (a positive integer)");
    const Json& v = json_.at(std::string(key));
    if (!v.is_number_integer()) {
      return Error(key,
                   absl::StrCat("must be a positive integer, got ", v.dump()));
    }
    const bool fits =
        v.is_number_unsigned()
            ? v.get<uint64_t>() >= 1 &&
                  v.get<uint64_t>() <= static_cast<uint64_t>(kMaxCount)
            : v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxCount;
    if (!fits) {
      return Error(
          key, absl::StrCat("must be in [1, ", kMaxCount, "], got ", v.dump()));
    }
    return v.get<int64_t>();
  }

  // Absent or null: `otherwise`.
  absl::StatusOr<bool> Bool(absl::string_view key, bool otherwise) const {
    if (!Has(key)) return otherwise;
    const Json& v = json_.at(std::string(key));
    if (!v.is_boolean()) {
      return Error(key, absl::StrCat("must be true or false, got ", v.dump()));
    }
    return v.get<bool>();
  }

  absl::StatusOr<std::string> String(absl::string_view key,
                                     absl::string_view otherwise) const {
    if (!Has(key)) return std::string(otherwise);
    const Json& v = json_.at(std::string(key));
    if (!v.is_string()) {
      return Error(key, absl::StrCat("must be a string, got ", v.dump()));
    }
    return v.get<std::string>();
  }

  // A probability in [0, 1); absent or null: `otherwise`.
  absl::StatusOr<double> Probability(absl::string_view key,
                                     double otherwise) const {
    if (!Has(key)) return otherwise;
    const Json& v = json_.at(std::string(key));
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1)) {
      return Error(
          key, absl::StrCat("must be a probability in [0, 1), got ", v.dump()));
    }
    return v.get<double>();
  }

  // A key that, set, changes the shape in a way Model cannot express:
  // absent, null, false or 0 are fine.
  absl::Status Unmodelled(absl::string_view key, absl::string_view what) const {
    if (!Has(key)) return absl::OkStatus();
    const Json& v = json_.at(std::string(key));
    const bool unset = (v.is_boolean() && !v.get<bool>()) ||
                       (v.is_number() && v.get<double>() == 0);
    if (unset) return absl::OkStatus();
    return Error(key, absl::StrCat(v.dump(), ": ", what,
                                   " is not modelled by shardsim"));
  }

 private:
  static constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
  const Json& json_;
  std::string where_;
};

absl::Status MoeKeys(const Keys& keys) {
  for (const char* key :
       {"num_local_experts", "num_experts", "n_routed_experts",
        "num_experts_per_tok", "moe_intermediate_size"}) {
    if (absl::Status s = keys.Unmodelled(key, "a mixture of experts");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM: the same block
// (modeling_llama.py, modeling_mistral.py, modeling_qwen2.py), but for
// Qwen2's q/k/v biases and Llama's optional ones.
absl::Status ReadLlamaLike(const Keys& keys, absl::string_view arch, Model* m) {
  absl::StatusOr<int64_t> hidden = keys.Count("hidden_size");
  if (!hidden.ok()) return hidden.status();
  absl::StatusOr<int64_t> layers = keys.Count("num_hidden_layers");
  if (!layers.ok()) return layers.status();
  absl::StatusOr<int64_t> heads = keys.Count("num_attention_heads");
  if (!heads.ok()) return heads.status();
  absl::StatusOr<int64_t> ffn = keys.Count("intermediate_size");
  if (!ffn.ok()) return ffn.status();
  absl::StatusOr<int64_t> vocab = keys.Count("vocab_size");
  if (!vocab.ok()) return vocab.status();
  // LlamaConfig: num_key_value_heads None -> num_attention_heads (MHA, as
  // in LLaMA-1 configs, which predate the key).
  int64_t kv_heads = *heads;
  if (keys.Has("num_key_value_heads") || arch != kLlama) {
    absl::StatusOr<int64_t> kv = keys.Count("num_key_value_heads");
    if (!kv.ok()) return kv.status();
    kv_heads = *kv;
  }
  if (keys.Has("head_dim")) {
    absl::StatusOr<int64_t> head_dim = keys.Count("head_dim");
    if (!head_dim.ok()) return head_dim.status();
    if (*head_dim * *heads != *hidden) {
      return keys.Error(
          "head_dim",
          absl::StrCat(*head_dim, " is not hidden_size / num_attention_heads",
                       " (", *hidden, " / ", *heads,
                       "): attention narrower or wider than the residual "
                       "stream is not modelled by shardsim"));
    }
  }
  absl::StatusOr<bool> tied = keys.Bool("tie_word_embeddings", false);
  if (!tied.ok()) return tied.status();
  absl::StatusOr<std::string> act = keys.String("hidden_act", "silu");
  if (!act.ok()) return act.status();
  if (*act != "silu" && *act != "swish") {
    return keys.Error("hidden_act",
                      absl::StrCat("\"", *act,
                                   "\": only \"silu\" (SwiGLU) is modelled "
                                   "for ",
                                   arch));
  }
  if (absl::Status s = MoeKeys(keys); !s.ok()) return s;
  // On the attention weights (LlamaAttention and its kin; 0.0 by default).
  absl::StatusOr<double> dropout = keys.Probability("attention_dropout", 0);
  if (!dropout.ok()) return dropout.status();
  m->set_attention_dropout(*dropout);

  bool linear_bias = false, qkv_bias = false;
  if (arch == kLlama) {
    absl::StatusOr<bool> attention = keys.Bool("attention_bias", false);
    if (!attention.ok()) return attention.status();
    absl::StatusOr<bool> mlp = keys.Bool("mlp_bias", false);
    if (!mlp.ok()) return mlp.status();
    if (*attention != *mlp) {
      return keys.Error(
          *attention ? "attention_bias" : "mlp_bias",
          "true without the other: biases on only the attention's (q, k, v "
          "and o) or only the MLP's projections are not modelled by "
          "shardsim (both true: every linear layer, Model's linear_bias)");
    }
    linear_bias = *attention;
  } else if (arch == kMistral) {
    // MistralConfig's sliding_window: 4096 when the file leaves it out
    // (configuration_mistral.py's default, Mistral-7B-v0.1's value), null
    // for none (v0.2 on).
    if (!keys.Present("sliding_window")) {
      m->set_sliding_window(4096);
    } else if (keys.Has("sliding_window")) {
      absl::StatusOr<int64_t> w = keys.Count("sliding_window");
      if (!w.ok()) return w.status();
      m->set_sliding_window(static_cast<int32_t>(*w));
    }
  } else if (arch == kQwen2) {
    qkv_bias = true;
    if (absl::Status s =
            keys.Unmodelled("use_sliding_window", "sliding-window attention");
        !s.ok()) {
      return s;
    }
  }

  m->set_layers(static_cast<int32_t>(*layers));
  m->set_hidden(*hidden);
  m->set_heads(static_cast<int32_t>(*heads));
  if (kv_heads != *heads) m->set_kv_heads(static_cast<int32_t>(kv_heads));
  m->set_ffn_hidden(*ffn);
  m->set_vocab(*vocab);
  m->set_mlp(Model::SWIGLU);
  m->set_norm(Model::RMSNORM);
  m->set_linear_bias(linear_bias);
  m->set_qkv_bias(qkv_bias);
  m->set_tied_embeddings(*tied);
  return absl::OkStatus();
}

// GPT2LMHeadModel (modeling_gpt2.py): Conv1D layers with biases, LayerNorm,
// a GELU MLP, a learned position table of n_positions rows.
absl::Status ReadGpt2(const Keys& keys, Model* m) {
  absl::StatusOr<int64_t> hidden = keys.Count("n_embd");
  if (!hidden.ok()) return hidden.status();
  absl::StatusOr<int64_t> layers = keys.Count("n_layer");
  if (!layers.ok()) return layers.status();
  absl::StatusOr<int64_t> heads = keys.Count("n_head");
  if (!heads.ok()) return heads.status();
  absl::StatusOr<int64_t> vocab = keys.Count("vocab_size");
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<int64_t> positions = keys.Count("n_positions");
  if (!positions.ok()) return positions.status();
  // GPT2MLP: inner_dim = n_inner if not None else 4 * hidden_size.
  int64_t ffn = 4 * *hidden;
  if (keys.Has("n_inner")) {
    absl::StatusOr<int64_t> inner = keys.Count("n_inner");
    if (!inner.ok()) return inner.status();
    ffn = *inner;
  }
  absl::StatusOr<bool> tied = keys.Bool("tie_word_embeddings", true);
  if (!tied.ok()) return tied.status();
  absl::StatusOr<std::string> act =
      keys.String("activation_function", "gelu_new");
  if (!act.ok()) return act.status();
  if (*act != "gelu_new" && *act != "gelu" && *act != "gelu_fast" &&
      *act != "gelu_pytorch_tanh") {
    return keys.Error("activation_function",
                      absl::StrCat("\"", *act,
                                   "\": only GELU (gelu, gelu_new, "
                                   "gelu_fast, gelu_pytorch_tanh) is "
                                   "modelled for ",
                                   kGpt2));
  }
  if (absl::Status s =
          keys.Unmodelled("add_cross_attention", "cross-attention");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = MoeKeys(keys); !s.ok()) return s;
  // GPT2Config's dropouts, 0.1 each by default: on the attention weights,
  // on each residual branch (resid_pdrop) and on the embedding's output
  // (embd_pdrop), the last two one hidden dropout in Model.
  absl::StatusOr<double> attn = keys.Probability("attn_pdrop", 0.1);
  if (!attn.ok()) return attn.status();
  absl::StatusOr<double> resid = keys.Probability("resid_pdrop", 0.1);
  if (!resid.ok()) return resid.status();
  absl::StatusOr<double> embd = keys.Probability("embd_pdrop", 0.1);
  if (!embd.ok()) return embd.status();
  if ((*embd > 0) != (*resid > 0)) {
    return keys.Error("embd_pdrop",
                      "dropout on the embedding but not on the residual "
                      "branches, or the reverse, is not modelled by shardsim "
                      "(give both or neither)");
  }
  m->set_attention_dropout(*attn);
  m->set_hidden_dropout(*resid);

  m->set_layers(static_cast<int32_t>(*layers));
  m->set_hidden(*hidden);
  m->set_heads(static_cast<int32_t>(*heads));
  m->set_ffn_hidden(ffn);
  m->set_vocab(*vocab);
  m->set_mlp(Model::GELU);
  m->set_norm(Model::LAYERNORM);
  m->set_linear_bias(true);
  m->set_tied_embeddings(*tied);
  m->set_learned_positions(*positions);
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> SupportedHfArchitectures() {
  return {kLlama, kMistral, kQwen2, kGpt2};
}

absl::StatusOr<Model> ModelFromHfConfigText(absl::string_view json,
                                            absl::string_view name,
                                            absl::string_view where) {
  Json config;
  try {
    config = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 3,
    // column 5: ...", or out_of_range for a number like 1e999.
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not valid JSON: ", e.what()));
  }
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": must be a JSON object (a config.json)"));
  }
  const Keys keys(config, where);
  const std::vector<std::string> supported = SupportedHfArchitectures();
  const std::string supported_list = absl::StrJoin(supported, ", ");
  if (!keys.Has("architectures")) {
    return keys.Error("architectures",
                      absl::StrCat("missing; supported: ", supported_list));
  }
  const Json& archs = config.at("architectures");
  if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string()) {
    return keys.Error(
        "architectures",
        absl::StrCat("must be a list of one name, got ", archs.dump(),
                     "; supported: ", supported_list));
  }
  const std::string arch = archs[0].get<std::string>();
  Model model;
  model.set_name(std::string(name));
  absl::Status read;
  if (arch == kLlama || arch == kMistral || arch == kQwen2) {
    read = ReadLlamaLike(keys, arch, &model);
  } else if (arch == kGpt2) {
    read = ReadGpt2(keys, &model);
  } else {
    // No "did you mean": a near name is another model (Mixtral is not
    // Mistral), not a typo.
    return keys.Error("architectures",
                      absl::StrCat("\"", arch, "\" is not supported; ",
                                   "supported: ", supported_list));
  }
  if (!read.ok()) return read;
  return model;
}

absl::StatusOr<Model> ModelFromHfConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (a Hugging Face config.json)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  // ".../llama-3-8b/config.json" -> "llama-3-8b"; "gpt2.json" -> "gpt2".
  std::string name = path;
  const size_t slash = path.rfind('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  if (file == "config.json" && slash != std::string::npos) {
    const std::string dir = path.substr(0, slash);
    const size_t up = dir.rfind('/');
    name = up == std::string::npos ? dir : dir.substr(up + 1);
  } else {
    if (absl::EndsWith(file, ".json")) file.resize(file.size() - 5);
    name = file;
  }
  return ModelFromHfConfigText(text.str(), name, path);
}

}  // namespace shardsim
