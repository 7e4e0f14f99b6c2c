#include "sim/scenario/megatron_args.h"

#include <cctype>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/did_you_mean.h"

namespace shardsim {
namespace {

// Sources: NVIDIA/Megatron-LM commit d98e8a6 (2026-08-22),
// megatron/training/arguments.py (its add_argument calls and
// validate_args), megatron/core/model_parallel_config.py and
// megatron/core/transformer/transformer_config.py (defaults).
enum class Kind {
  kModelled,    // read below
  kNoCost,      // changes no step time, memory or traffic: any value
  kUnmodelled,  // changes what shardsim does not model, unless at default
  // A store_true flag (argparse's action="store_true", off by default)
  // that changes what shardsim does not model: given at all, it is on.
  kUnmodelledFlag,
};

struct Rule {
  absl::string_view name;
  Kind kind;
  // kUnmodelled: Megatron's default as the file would write it ("" for a
  // flag that is off by default); an argument at it changes nothing.
  absl::string_view default_value;
  absl::string_view what;  // kUnmodelled: what shardsim leaves out
};

std::vector<Rule> MakeRules() {
  using K = Kind;
  std::vector<Rule> rules = {
      // Parallelism (ModelParallelConfig; arguments.py's distributed args).
      {"--tensor-model-parallel-size", K::kModelled, "", ""},
      {"--pipeline-model-parallel-size", K::kModelled, "", ""},
      {"--num-layers-per-virtual-pipeline-stage", K::kModelled, "", ""},
      {"--num-virtual-stages-per-pipeline-rank", K::kModelled, "", ""},
      {"--sequence-parallel", K::kModelled, "", ""},
      {"--context-parallel-size", K::kModelled, "", ""},
      {"--use-distributed-optimizer", K::kModelled, "", ""},
      {"--overlap-grad-reduce", K::kModelled, "", ""},
      {"--optimizer", K::kModelled, "", ""},
      // Batch (TrainingConfig).
      {"--micro-batch-size", K::kModelled, "", ""},
      {"--global-batch-size", K::kModelled, "", ""},
      {"--seq-length", K::kModelled, "", ""},
      // Recomputation and attention.
      {"--recompute-activations", K::kModelled, "", ""},
      {"--recompute-granularity", K::kModelled, "", ""},
      {"--recompute-method", K::kModelled, "", ""},
      {"--recompute-num-layers", K::kModelled, "", ""},
      {"--recompute-modules", K::kModelled, "", ""},
      {"--use-flash-attn", K::kModelled, "", ""},
      {"--attention-backend", K::kModelled, "", ""},
      // Precision: shardsim models 16-bit mixed precision.
      {"--bf16", K::kModelled, "", ""},
      {"--fp16", K::kModelled, "", ""},
      {"--accumulate-allreduce-grads-in-fp32", K::kModelled, "", ""},
      {"--grad-reduce-in-bf16", K::kModelled, "", ""},
      {"--main-grads-dtype", K::kModelled, "", ""},
      // The model's shape (TransformerConfig; arguments.py's network size).
      {"--num-layers", K::kModelled, "", ""},
      {"--hidden-dropout", K::kModelled, "", ""},
      {"--attention-dropout", K::kModelled, "", ""},
      {"--hidden-size", K::kModelled, "", ""},
      {"--num-attention-heads", K::kModelled, "", ""},
      {"--ffn-hidden-size", K::kModelled, "", ""},
      {"--kv-channels", K::kModelled, "", ""},
      {"--group-query-attention", K::kModelled, "", ""},
      {"--num-query-groups", K::kModelled, "", ""},
      {"--swiglu", K::kModelled, "", ""},
      {"--normalization", K::kModelled, "", ""},
      {"--untie-embeddings-and-output-weights", K::kModelled, "", ""},
      {"--position-embedding-type", K::kModelled, "", ""},
      {"--max-position-embeddings", K::kModelled, "", ""},
      {"--disable-bias-linear", K::kModelled, "", ""},
      {"--add-qkv-bias", K::kModelled, "", ""},
      {"--vocab-size", K::kModelled, "", ""},
      {"--make-vocab-size-divisible-by", K::kModelled, "", ""},
      // Not simulated at any value: they change no step's time, memory or
      // traffic (schedules of the learning rate, logging, checkpoint files,
      // data and tokenizer files, initialization, norm
      // epsilons, timeouts, the length of the run).
      {"--lr", K::kNoCost, "", ""},
      {"--min-lr", K::kNoCost, "", ""},
      {"--lr-decay-style", K::kNoCost, "", ""},
      {"--lr-decay-iters", K::kNoCost, "", ""},
      {"--lr-decay-samples", K::kNoCost, "", ""},
      {"--lr-warmup-iters", K::kNoCost, "", ""},
      {"--lr-warmup-fraction", K::kNoCost, "", ""},
      {"--lr-warmup-samples", K::kNoCost, "", ""},
      {"--weight-decay", K::kNoCost, "", ""},
      {"--clip-grad", K::kModelled, "", ""},
      {"--adam-beta1", K::kNoCost, "", ""},
      {"--adam-beta2", K::kNoCost, "", ""},
      {"--adam-eps", K::kNoCost, "", ""},
      {"--train-iters", K::kNoCost, "", ""},
      {"--train-samples", K::kNoCost, "", ""},
      {"--exit-duration-in-mins", K::kNoCost, "", ""},
      {"--log-interval", K::kNoCost, "", ""},
      {"--log-throughput", K::kNoCost, "", ""},
      {"--log-params-norm", K::kNoCost, "", ""},
      {"--timing-log-level", K::kNoCost, "", ""},
      {"--tensorboard-dir", K::kNoCost, "", ""},
      {"--wandb-project", K::kNoCost, "", ""},
      {"--wandb-exp-name", K::kNoCost, "", ""},
      {"--save", K::kNoCost, "", ""},
      {"--load", K::kNoCost, "", ""},
      {"--save-interval", K::kNoCost, "", ""},
      {"--ckpt-format", K::kNoCost, "", ""},
      {"--use-dist-ckpt", K::kNoCost, "", ""},
      {"--no-load-optim", K::kNoCost, "", ""},
      {"--no-load-rng", K::kNoCost, "", ""},
      {"--eval-interval", K::kNoCost, "", ""},
      {"--eval-iters", K::kNoCost, "", ""},
      {"--data-path", K::kNoCost, "", ""},
      {"--mock-data", K::kNoCost, "", ""},
      {"--split", K::kNoCost, "", ""},
      {"--num-workers", K::kNoCost, "", ""},
      {"--vocab-file", K::kNoCost, "", ""},
      {"--merge-file", K::kNoCost, "", ""},
      {"--tokenizer-type", K::kNoCost, "", ""},
      {"--tokenizer-model", K::kNoCost, "", ""},
      {"--seed", K::kNoCost, "", ""},
      {"--init-method-std", K::kNoCost, "", ""},
      {"--norm-epsilon", K::kNoCost, "", ""},
      {"--rotary-base", K::kNoCost, "", ""},
      {"--distributed-backend", K::kNoCost, "", ""},
      {"--distributed-timeout-minutes", K::kNoCost, "", ""},
      {"--use-mcore-models", K::kNoCost, "", ""},
      // Simulated only at Megatron's default.
      {"--transformer-impl", K::kUnmodelled, "transformer_engine",
       "runs other layer kernels"},
      {"--overlap-param-gather", K::kUnmodelledFlag, "",
       "overlaps the distributed optimizer's parameter all-gather with "
       "forward"},
      {"--tp-comm-overlap", K::kUnmodelledFlag, "",
       "overlaps tensor-parallel communication with GEMMs (Transformer "
       "Engine userbuffers)"},
      {"--fp8-format", K::kUnmodelled, "", "trains in FP8"},
      {"--cpu-offloading-num-layers", K::kUnmodelled, "0",
       "offloads activations to the CPU"},
      {"--num-experts", K::kUnmodelled, "", "a mixture of experts"},
      {"--expert-model-parallel-size", K::kUnmodelled, "1",
       "expert parallelism"},
      {"--decoder-first-pipeline-num-layers", K::kUnmodelled, "",
       "an uneven first pipeline stage"},
      {"--decoder-last-pipeline-num-layers", K::kUnmodelled, "",
       "an uneven last pipeline stage"},
      {"--account-for-embedding-in-pipeline-split", K::kUnmodelledFlag, "",
       "counts the embedding as a layer in the pipeline split"},
      {"--account-for-loss-in-pipeline-split", K::kUnmodelledFlag, "",
       "counts the loss as a layer in the pipeline split"},
  };
  return rules;
}

const Rule* FindRule(absl::string_view name) {
  static const auto* const rules = new std::vector<Rule>(MakeRules());
  for (const Rule& r : *rules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

bool IsMegatronName(absl::string_view name) {
  for (absl::string_view n : MegatronArgumentNames()) {
    if (n == name) return true;
  }
  return false;
}

struct Token {
  std::string text;
  int line = 0;
};

// Shell words: blanks separate them; quotes group; a backslash escapes the
// next character (a newline after it joins the lines); # at the start of a
// word comments out the rest of the line.
absl::StatusOr<std::vector<Token>> Tokenize(const std::string& text) {
  std::vector<Token> words;
  std::optional<Token> word;
  int line = 1;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        if (c == '\n') ++line;
        word->text += c;
      }
      continue;
    }
    if (c == '\\' && i + 1 < text.size()) {
      if (text[++i] == '\n') {
        ++line;
        continue;
      }
      if (!word) word = Token{"", line};
      word->text += text[i];
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (word) words.push_back(*std::move(word));
      word.reset();
      if (c == '\n') ++line;
      continue;
    }
    if (c == '#' && !word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (!word) word = Token{"", line};
    if (c == '\'' || c == '"') {
      quote = c;
    } else {
      word->text += c;
    }
  }
  if (quote != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        word->line, ": a quote ", std::string(1, quote), " is not closed"));
  }
  if (word) words.push_back(*std::move(word));
  return words;
}

struct Arg {
  std::string name;
  std::vector<std::string> values;
  int line = 0;
  std::string Shown() const {
    return values.empty() ? name
                          : absl::StrCat(name, " ", absl::StrJoin(values, " "));
  }
};

// Arguments in file order; an argument takes the words after it up to the
// next "--" (Megatron's nargs="+" lists, like --data-path's).
absl::StatusOr<std::vector<Arg>> GroupArgs(const std::vector<Token>& words) {
  std::vector<Arg> args;
  std::map<std::string, int> seen;
  for (const Token& w : words) {
    if (absl::StartsWith(w.text, "--")) {
      Arg a{w.text, {}, w.line};
      if (const size_t eq = w.text.find('='); eq != std::string::npos) {
        a.name = w.text.substr(0, eq);
        a.values.push_back(w.text.substr(eq + 1));
      }
      // argparse takes the last of an argument given twice; which one the
      // user meant is theirs to say.
      if (auto [it, fresh] = seen.emplace(a.name, a.line); !fresh) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.line, ": ", a.name, " is given twice (also line ",
                         it->second, ")"));
      }
      args.push_back(std::move(a));
      continue;
    }
    if (args.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          w.line, ": \"", w.text,
          "\" is not an argument: the file holds pretrain_gpt.py's arguments "
          "(--name value), not the command that runs it"));
    }
    args.back().values.push_back(w.text);
  }
  return args;
}

// The parsed arguments, read by name.
class Args {
 public:
  explicit Args(std::vector<Arg> args) : args_(std::move(args)) {}
  const std::vector<Arg>& all() const { return args_; }

  const Arg* Find(absl::string_view name) const {
    for (const Arg& a : args_) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }

  absl::StatusOr<bool> Flag(absl::string_view name) const {
    const Arg* a = Find(name);
    if (a == nullptr) return false;
    if (!a->values.empty()) return Bad(*a, "takes no value");
    return true;
  }

  absl::StatusOr<std::optional<std::string>> Str(absl::string_view name) const {
    const Arg* a = Find(name);
    if (a == nullptr) return std::optional<std::string>();
    if (a->values.size() != 1) return Bad(*a, "takes one value");
    return std::optional<std::string>(a->values[0]);
  }

  // A whole number >= 1.
  absl::StatusOr<std::optional<int64_t>> Int(absl::string_view name) const {
    absl::StatusOr<std::optional<std::string>> s = Str(name);
    if (!s.ok()) return s.status();
    if (!s->has_value()) return std::optional<int64_t>();
    int64_t v = 0;
    if (!absl::SimpleAtoi(**s, &v) || v < 1) {
      return Bad(*Find(name), "takes a whole number >= 1");
    }
    return std::optional<int64_t>(v);
  }

  // A probability in [0, 1).
  absl::StatusOr<std::optional<double>> Probability(
      absl::string_view name) const {
    absl::StatusOr<std::optional<std::string>> s = Str(name);
    if (!s.ok()) return s.status();
    if (!s->has_value()) return std::optional<double>();
    double v = 0;
    if (!absl::SimpleAtod(**s, &v) || !(v >= 0 && v < 1)) {
      return Bad(*Find(name), "takes a probability in [0, 1)");
    }
    return std::optional<double>(v);
  }

  static absl::Status Bad(const Arg& a, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(a.line, ": ", a.Shown(), ": ", why));
  }

 private:
  std::vector<Arg> args_;
};

// ---- classification ----

absl::Status Unknown(const Arg& a) {
  static const auto* const names = [] {
    auto* v = new std::vector<std::string>();
    for (absl::string_view n : MegatronArgumentNames()) v->emplace_back(n);
    return v;
  }();
  return absl::InvalidArgumentError(
      absl::StrCat(a.line, ": unknown argument ", a.name,
                   ": not among Megatron-LM's (megatron/training/arguments.py)",
                   DidYouMean(a.name, *names)));
}

absl::Status Classify(const Args& args, std::vector<std::string>* unmodelled) {
  for (const Arg& a : args.all()) {
    const Rule* r = FindRule(a.name);
    if (r == nullptr) {
      if (!IsMegatronName(a.name)) return Unknown(a);
      unmodelled->push_back(absl::StrCat(
          a.Shown(), ": changes what shardsim does not model (it reads ",
          "the parallelism, batch, recomputation, attention, precision and "
          "model arguments)"));
      continue;
    }
    if (r->kind == Kind::kUnmodelledFlag) {
      if (!a.values.empty()) return Args::Bad(a, "takes no value");
      unmodelled->push_back(absl::StrCat(a.Shown(), ": ", r->what));
      continue;
    }
    if (r->kind != Kind::kUnmodelled) continue;
    if (absl::StrJoin(a.values, " ") != r->default_value) {
      unmodelled->push_back(absl::StrCat(a.Shown(), ": ", r->what));
    }
  }
  return absl::OkStatus();
}

// ---- mapping ----

class Mapper {
 public:
  Mapper(const Args& args, FrameworkInput* out) : a_(args), out_(out) {}

  absl::Status Map() {
    for (absl::Status s : {Parallelism(), Batch(), Recompute(), Attention(),
                           Precision(), Optimizer(), ModelDef()}) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  void Unmodelled(const Arg& a, absl::string_view what) {
    out_->unmodelled.push_back(absl::StrCat(a.Shown(), ": ", what));
  }

  // A whole-number argument into an int32 field, when given.
  absl::Status IntInto(absl::string_view name, int32_t* out) {
    absl::StatusOr<std::optional<int64_t>> v = a_.Int(name);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return absl::OkStatus();
    if (**v > (int64_t{1} << 30)) {
      return Args::Bad(*a_.Find(name), "is beyond shardsim's limits");
    }
    *out = static_cast<int32_t>(**v);
    return absl::OkStatus();
  }

  absl::Status Parallelism() {
    int32_t tp = 0, pp = 0, cp = 0, vpp = 0, per_stage = 0, layers = 0;
    for (auto [name, out] :
         {std::pair<const char*, int32_t*>{"--tensor-model-parallel-size", &tp},
          {"--pipeline-model-parallel-size", &pp},
          {"--context-parallel-size", &cp},
          {"--num-virtual-stages-per-pipeline-rank", &vpp},
          {"--num-layers-per-virtual-pipeline-stage", &per_stage},
          {"--num-layers", &layers}}) {
      if (absl::Status s = IntInto(name, out); !s.ok()) return s;
    }
    ::shardsim::Parallelism* p = out_->scenario.mutable_parallelism();
    if (tp > 1) p->set_tp(tp);
    if (pp > 1) p->set_pp(pp);
    if (cp > 1) p->set_cp(cp);
    // validate_args: vpp = num_layers / pp / layers per virtual stage.
    if (per_stage > 0) {
      const Arg& arg = *a_.Find("--num-layers-per-virtual-pipeline-stage");
      const int64_t per_rank = int64_t{std::max(pp, 1)} * per_stage;
      if (layers == 0 || layers % per_rank != 0) {
        return Args::Bad(arg, absl::StrCat("needs --num-layers a multiple of "
                                           "--pipeline-model-parallel-size x ",
                                           per_stage));
      }
      vpp = static_cast<int32_t>(layers / per_rank);
    }
    if (vpp > 1) p->set_vpp(vpp);
    absl::StatusOr<bool> sp = a_.Flag("--sequence-parallel");
    if (!sp.ok()) return sp.status();
    // validate_args turns sequence parallelism off at tp 1.
    if (*sp && tp > 1) p->set_sequence_parallel(true);
    if (p->ByteSizeLong() == 0) out_->scenario.clear_parallelism();
    return absl::OkStatus();
  }

  // --global-batch-size counts sequences over the data-parallel replicas;
  // without it Megatron takes one micro-batch per replica.
  absl::Status Batch() {
    int32_t mbs = 0, seq = 0;
    if (absl::Status s = IntInto("--micro-batch-size", &mbs); !s.ok()) return s;
    if (absl::Status s = IntInto("--seq-length", &seq); !s.ok()) return s;
    absl::StatusOr<std::optional<int64_t>> gbs = a_.Int("--global-batch-size");
    if (!gbs.ok()) return gbs.status();
    if (mbs > 0) out_->scenario.set_micro_batch_size(mbs);
    if (seq > 0) out_->scenario.set_seq_len(seq);
    if (!gbs->has_value()) {
      if (mbs > 0) out_->scenario.set_micro_batches(1);
      return absl::OkStatus();
    }
    if (seq == 0) {
      return Args::Bad(*a_.Find("--global-batch-size"),
                       "needs --seq-length (its tokens are the scenario's "
                       "global_batch_tokens)");
    }
    out_->scenario.set_global_batch_tokens(**gbs * seq);
    return absl::OkStatus();
  }

  // --recompute-activations is selective (validate_args); full
  // recomputation is simulated per layer: --recompute-method uniform with
  // --recompute-num-layers 1.
  absl::Status Recompute() {
    absl::StatusOr<bool> activations = a_.Flag("--recompute-activations");
    absl::StatusOr<std::optional<std::string>> granularity =
        a_.Str("--recompute-granularity");
    absl::StatusOr<std::optional<std::string>> method =
        a_.Str("--recompute-method");
    absl::StatusOr<std::optional<int64_t>> num_layers =
        a_.Int("--recompute-num-layers");
    for (const absl::Status& s : {activations.status(), granularity.status(),
                                  method.status(), num_layers.status()}) {
      if (!s.ok()) return s;
    }
    std::string g = granularity->value_or(*activations ? "selective" : "");
    Scenario& sc = out_->scenario;
    if (g.empty()) {
      sc.set_recompute_granularity(RECOMPUTE_NONE);
    } else if (g == "selective") {
      sc.set_recompute_granularity(RECOMPUTE_SELECTIVE);
      if (const Arg* m = a_.Find("--recompute-modules");
          m != nullptr && m->values != std::vector<std::string>{"core_attn"}) {
        Unmodelled(*m, "recomputes other modules than the core attention");
      }
    } else if (g == "full") {
      sc.set_recompute_granularity(RECOMPUTE_FULL);
      if (*method != "uniform" || num_layers->value_or(1) != 1) {
        const Arg* m = a_.Find("--recompute-method");
        Unmodelled(m != nullptr ? *m : *a_.Find("--recompute-granularity"),
                   "recomputes groups of layers or the first layers of a "
                   "stage (simulated: every layer from its input)");
      }
    } else {
      return Args::Bad(*a_.Find("--recompute-granularity"),
                       "is full or selective");
    }
    return absl::OkStatus();
  }

  // Flash attention with --use-flash-attn; Transformer Engine's flash and
  // fused (cuDNN) backends, and its auto choice among them, keep no
  // score matrix either; unfused and local do.
  absl::Status Attention() {
    absl::StatusOr<bool> flash = a_.Flag("--use-flash-attn");
    absl::StatusOr<std::optional<std::string>> backend =
        a_.Str("--attention-backend");
    if (!flash.ok()) return flash.status();
    if (!backend.ok()) return backend.status();
    const std::string b = backend->value_or("auto");
    if (b != "auto" && b != "flash" && b != "fused" && b != "unfused" &&
        b != "local") {
      return Args::Bad(*a_.Find("--attention-backend"),
                       "is auto, flash, fused, unfused or local");
    }
    const bool stores_scores = b == "unfused" || b == "local";
    if (*flash || !stores_scores) out_->scenario.set_flash_attention(true);
    return absl::OkStatus();
  }

  // The gradient buffer's type (arguments.py validate_args): fp32 under
  // --bf16 unless --grad-reduce-in-bf16 or --main-grads-dtype bf16; under
  // --fp16 only with --accumulate-allreduce-grads-in-fp32, else fp16.
  absl::Status Precision() {
    absl::StatusOr<bool> bf16 = a_.Flag("--bf16");
    absl::StatusOr<bool> fp16 = a_.Flag("--fp16");
    absl::StatusOr<bool> fp32 = a_.Flag("--accumulate-allreduce-grads-in-fp32");
    absl::StatusOr<bool> bf16_reduce = a_.Flag("--grad-reduce-in-bf16");
    absl::StatusOr<std::optional<std::string>> main =
        a_.Str("--main-grads-dtype");
    for (const absl::StatusOr<bool>* f : {&bf16, &fp16, &fp32, &bf16_reduce}) {
      if (!f->ok()) return f->status();
    }
    if (!main.ok()) return main.status();
    const std::string main_dtype = main->value_or("fp32");
    if (main_dtype != "fp32" && main_dtype != "bf16") {
      return Args::Bad(*a_.Find("--main-grads-dtype"), "takes fp32 or bf16");
    }
    if (!*bf16 && !*fp16) {
      out_->unmodelled.push_back(
          "no --bf16 or --fp16: Megatron trains in fp32 (4-byte parameters, "
          "gradients and collectives), shardsim in 16-bit mixed precision");
    }
    const bool grad_fp32 =
        *fp32 || (*bf16 && !*bf16_reduce && main_dtype == "fp32");
    out_->scenario.mutable_execution()->set_grad_fp32(grad_fp32);
    return absl::OkStatus();
  }

  // Megatron's own data parallelism (strategy.cc ParseMegatron): its
  // distributed optimizer with --use-distributed-optimizer, its DDP
  // without.
  absl::Status Optimizer() {
    absl::StatusOr<bool> dist = a_.Flag("--use-distributed-optimizer");
    if (!dist.ok()) return dist.status();
    out_->scenario.add_strategies(*dist ? "megatron:DISTRIBUTED_OPTIMIZER"
                                        : "megatron:DDP");
    // --overlap-grad-reduce: each bucket reduced on its own stream as soon
    // as backward has filled it (async_op), in buckets of
    // max(40000000, 1000000 * dp_size) parameters
    // (distributed_data_parallel.py), still on the last micro-batch only.
    absl::StatusOr<bool> overlap = a_.Flag("--overlap-grad-reduce");
    if (!overlap.ok()) return overlap.status();
    if (*overlap) {
      Execution* e = out_->scenario.mutable_execution();
      e->set_overlap_comm(true);
      e->set_reduce_bucket_elements(40'000'000);
      e->set_reduce_bucket_elements_per_rank(1'000'000);
    }
    // Adam (the default) in mixed precision keeps an fp32 master copy and
    // two fp32 moments: 12 bytes per parameter.
    absl::StatusOr<std::optional<std::string>> opt = a_.Str("--optimizer");
    if (!opt.ok()) return opt.status();
    if (opt->value_or("adam") != "adam") {
      Unmodelled(*a_.Find("--optimizer"),
                 "keeps other states than Adam's (simulated: Adam's 12 "
                 "bytes per parameter)");
    }
    out_->scenario.set_optimizer_bytes_per_param(12);
    return GradNorm();
  }

  // --clip-grad (default 1.0): above 0 the optimizer takes the fp32 main
  // gradients' global norm before every step and scales them by it
  // (megatron/core/optimizer/optimizer.py step(): clip_grad_norm when
  // config.clip_grad > 0; clip_grads.py multi_tensor_l2norm,
  // multi_tensor_scale); at 0 nothing.
  absl::Status GradNorm() {
    absl::StatusOr<std::optional<std::string>> clip = a_.Str("--clip-grad");
    if (!clip.ok()) return clip.status();
    double max_norm = 1.0;
    if (clip->has_value() &&
        (!absl::SimpleAtod(**clip, &max_norm) || !(max_norm >= 0))) {
      return Args::Bad(*a_.Find("--clip-grad"), "takes a number >= 0");
    }
    out_->scenario.mutable_execution()->set_grad_norm(
        max_norm > 0 ? FOREACH_NORM : NO_GRAD_NORM);
    return absl::OkStatus();
  }

  absl::Status ModelDef();

  const Args& a_;
  FrameworkInput* out_;
};

// The model, from the architecture arguments, when --num-layers is given.
// Megatron's defaults: LayerNorm, GELU with ffn 4 x hidden (SwiGLU: 8/3 x
// hidden rounded down to 64), biases on, tied embeddings, learned
// positions; the vocabulary padded to a multiple of
// --make-vocab-size-divisible-by (128) x tp (training/vocab_utils.py).
absl::Status Mapper::ModelDef() {
  const Arg* layers_arg = a_.Find("--num-layers");
  if (layers_arg == nullptr) {
    for (const char* name : {"--attention-dropout", "--hidden-dropout"}) {
      if (const Arg* a = a_.Find(name); a != nullptr) {
        return Args::Bad(*a,
                         "sets the model's dropout: needs the model from this "
                         "file (--num-layers and the rest of its shape)");
      }
    }
    return absl::OkStatus();
  }
  int32_t layers = 0, heads = 0, groups = 0, divisible = 128, tp = 1;
  int32_t hidden = 0, ffn = 0, vocab = 0, positions = 0, kv_channels = 0;
  for (auto [name, out] :
       {std::pair<const char*, int32_t*>{"--num-layers", &layers},
        {"--num-attention-heads", &heads},
        {"--num-query-groups", &groups},
        {"--make-vocab-size-divisible-by", &divisible},
        {"--tensor-model-parallel-size", &tp},
        {"--hidden-size", &hidden},
        {"--ffn-hidden-size", &ffn},
        {"--vocab-size", &vocab},
        {"--max-position-embeddings", &positions},
        {"--kv-channels", &kv_channels}}) {
    if (absl::Status s = IntInto(name, out); !s.ok()) return s;
  }
  for (const char* need :
       {"--hidden-size", "--num-attention-heads", "--vocab-size"}) {
    if (a_.Find(need) == nullptr) {
      return Args::Bad(
          *layers_arg,
          absl::StrCat("the model needs ", need,
                       need == absl::string_view("--vocab-size")
                           ? " (Megatron takes it from the tokenizer, which "
                             "shardsim does not read)"
                           : ""));
    }
  }
  Model& m = *out_->scenario.mutable_model_def();
  m.set_name(absl::StrCat("megatron:", out_->path));
  m.set_layers(layers);
  m.set_hidden(hidden);
  m.set_heads(heads);
  if (kv_channels > 0 && int64_t{kv_channels} * heads != hidden) {
    Unmodelled(*a_.Find("--kv-channels"),
               "a head size other than hidden / heads");
  }
  for (auto [flag, field] : {std::pair<const char*, int>{"--swiglu", 0},
                             {"--group-query-attention", 1},
                             {"--untie-embeddings-and-output-weights", 2},
                             {"--disable-bias-linear", 3},
                             {"--add-qkv-bias", 4}}) {
    absl::StatusOr<bool> on = a_.Flag(flag);
    if (!on.ok()) return on.status();
    if (field == 0) m.set_mlp(*on ? Model::SWIGLU : Model::GELU);
    if (field == 1 && *on && groups > 0) m.set_kv_heads(groups);
    if (field == 2) m.set_tied_embeddings(!*on);
    if (field == 3) m.set_linear_bias(!*on);
    if (field == 4) m.set_qkv_bias(*on);
  }
  if (ffn == 0) {
    ffn =
        m.mlp() == Model::SWIGLU ? (4 * hidden * 2 / 3) / 64 * 64 : 4 * hidden;
  }
  m.set_ffn_hidden(ffn);
  const int64_t multiple = int64_t{divisible} * tp;
  m.set_vocab((vocab + multiple - 1) / multiple * multiple);
  absl::StatusOr<std::optional<std::string>> norm = a_.Str("--normalization");
  absl::StatusOr<std::optional<std::string>> pos =
      a_.Str("--position-embedding-type");
  if (!norm.ok()) return norm.status();
  if (!pos.ok()) return pos.status();
  const std::string n = norm->value_or("LayerNorm");
  if (n != "LayerNorm" && n != "RMSNorm") {
    return Args::Bad(*a_.Find("--normalization"), "is LayerNorm or RMSNorm");
  }
  m.set_norm(n == "RMSNorm" ? Model::RMSNORM : Model::LAYERNORM);
  // Both 0.1 by default (arguments.py; TransformerConfig's hidden_dropout
  // and attention_dropout).
  for (auto [name, set] :
       {std::pair<const char*, void (Model::*)(double)>{
            "--attention-dropout", &Model::set_attention_dropout},
        {"--hidden-dropout", &Model::set_hidden_dropout}}) {
    absl::StatusOr<std::optional<double>> p = a_.Probability(name);
    if (!p.ok()) return p.status();
    (m.*set)(p->value_or(0.1));
  }
  const std::string p = pos->value_or("learned_absolute");
  if (p == "learned_absolute") {
    if (positions == 0) {
      return Args::Bad(*layers_arg,
                       "learned positions (Megatron's default "
                       "--position-embedding-type) need "
                       "--max-position-embeddings");
    }
    m.set_learned_positions(positions);
  } else if (p != "rope") {
    Unmodelled(*a_.Find("--position-embedding-type"),
               "position embeddings other than learned or rotary "
               "(simulated: rotary)");
  }
  return absl::OkStatus();
}

absl::StatusOr<FrameworkInput> ReadText(const std::string& text,
                                        const std::string& path) {
  absl::StatusOr<std::vector<Token>> words = Tokenize(text);
  if (!words.ok()) return words.status();
  absl::StatusOr<std::vector<Arg>> grouped = GroupArgs(*words);
  if (!grouped.ok()) return grouped.status();
  const Args args(*std::move(grouped));
  FrameworkInput in;
  in.path = path;
  if (absl::Status s = Classify(args, &in.unmodelled); !s.ok()) return s;
  if (absl::Status s = Mapper(args, &in).Map(); !s.ok()) return s;
  return in;
}

}  // namespace

absl::StatusOr<FrameworkInput> ReadFrameworkFile(absl::string_view kind,
                                                 absl::string_view spec,
                                                 absl::string_view base_dir,
                                                 const FrameworkParser& parse) {
  std::string path(spec);
  if (!absl::StartsWith(spec, "/") && !base_dir.empty()) {
    path = absl::StrCat(base_dir, "/", spec);
  }
  auto in_file = [&](const absl::Status& s) {
    const absl::string_view m = s.message();
    const bool has_line =
        !m.empty() && std::isdigit(static_cast<unsigned char>(m[0]));
    return absl::Status(
        s.code(), absl::StrCat(kind, " ", path, has_line ? ":" : ": ", m));
  };
  std::ifstream file(path);
  if (!file) return in_file(absl::NotFoundError("cannot open the file"));
  std::ostringstream text;
  text << file.rdbuf();
  absl::StatusOr<FrameworkInput> in = parse(text.str(), path);
  if (!in.ok()) return in_file(in.status());
  return in;
}

absl::StatusOr<FrameworkInput> ReadMegatronArgs(absl::string_view spec,
                                                absl::string_view base_dir) {
  return ReadFrameworkFile("Megatron-LM arguments", spec, base_dir, ReadText);
}

}  // namespace shardsim
