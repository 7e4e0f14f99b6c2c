// A model from a Hugging Face transformers config.json (the `model` of a
// scenario or --model given as "hf:PATH/config.json").
//
// Supported `architectures` (exactly one entry):
//  - LlamaForCausalLM (LLaMA, Llama-2, Llama-3), MistralForCausalLM,
//    Qwen2ForCausalLM: SwiGLU MLP (hidden_act "silu" or its alias
//    "swish"), RMSNorm, rotary positions. Read: hidden_size,
//    num_hidden_layers, num_attention_heads, num_key_value_heads,
//    intermediate_size, vocab_size, tie_word_embeddings, hidden_act;
//    attention_dropout; Llama also attention_bias and mlp_bias. Qwen2's q_proj,
//    k_proj and v_proj always carry biases (modeling_qwen2.py: bias=True;
//    o_proj and the MLP none): Model's qkv_bias.
//  - GPT2LMHeadModel: GELU MLP, LayerNorm, biases on every linear layer of
//    a block, learned positions. Read: n_embd, n_layer, n_head, n_inner
//    (absent or null: 4 * n_embd), vocab_size, n_positions (rows of the
//    position table), activation_function, tie_word_embeddings, attn_pdrop
//    and resid_pdrop with embd_pdrop (Model's hidden_dropout: both or
//    neither).
//
// A key absent takes its transformers config class's default:
// num_key_value_heads (Llama only: num_attention_heads, LlamaConfig),
// tie_word_embeddings (false for LlamaConfig, MistralConfig and
// Qwen2Config; true for GPT2Config, PretrainedConfig's default),
// hidden_act ("silu"), activation_function ("gelu_new"), attention_dropout
// (0.0), attn_pdrop, resid_pdrop and embd_pdrop (0.1). The shape keys
// (hidden_size ... vocab_size; n_embd ... n_positions) are required, and
// so is num_key_value_heads for Mistral and Qwen2, whose class defaults (8
// and 32) are no safe guess.
//
// Errors, naming the file and key: an unknown architecture (with the
// supported list); a key that changes the shape but is not modelled:
// mixture-of-experts keys (num_local_experts, num_experts,
// n_routed_experts, num_experts_per_tok, moe_intermediate_size) when set;
// a head_dim other than hidden_size / num_attention_heads; Llama's
// attention_bias or mlp_bias alone (both: every linear layer biased, which
// Model's linear_bias expresses); Qwen2's use_sliding_window: true; GPT-2's
// add_cross_attention: true; a hidden_act or activation_function other
// than the SiLU or GELU the MLP is modelled with; a key of the wrong JSON
// type; malformed JSON (with line and column).
//
// Skipped, as they do not change one training step's cost: torch_dtype
// (the simulator trains in bf16 with fp32 master weights whatever the
// checkpoint's dtype), transformers_version, model_type, _name_or_path,
// bos_token_id, eos_token_id, pad_token_id, rope_theta, rope_scaling,
// max_position_embeddings (rotary tables hold no parameters), rms_norm_eps,
// layer_norm_epsilon, initializer_range, use_cache, pretraining_tp,
// max_window_layers, scale_attn_weights, scale_attn_by_inverse_layer_idx,
// reorder_and_upcast_attn, the summary_* and task_specific_params keys of
// GPT-2, and any other key not named above. Mistral's sliding_window
// (4096 when absent, null for none) is read into Model's sliding_window,
// and a scenario whose sequences exceed it is refused.
#ifndef SHARDSIM_SIM_MODEL_HF_CONFIG_H_
#define SHARDSIM_SIM_MODEL_HF_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/schema/model.pb.h"

namespace shardsim {

// The `architectures` values ModelFromHfConfig reads.
std::vector<std::string> SupportedHfArchitectures();

// The model `json` (a config.json's text) describes, named `name`. Errors
// start with `where` (the file). The result is not yet checked against
// ValidateModel's limits.
absl::StatusOr<Model> ModelFromHfConfigText(absl::string_view json,
                                            absl::string_view name,
                                            absl::string_view where);

// Reads `path` and calls ModelFromHfConfigText, naming the model after
// the directory that holds config.json (".../llama-3-8b/config.json":
// "llama-3-8b"), or after the file's stem when it is not config.json.
absl::StatusOr<Model> ModelFromHfConfig(const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_MODEL_HF_CONFIG_H_
