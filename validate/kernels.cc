#include "validate/kernels.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/compute/kernel_time.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"

namespace shardsim {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double Num(const Struct& s, const std::string& key) {
  const auto it = s.fields().find(key);
  return it == s.fields().end() ? 0 : it->second.number_value();
}
bool Has(const Struct& s, const std::string& key) {
  return s.fields().contains(key);
}
const Value* Field(const Struct& s, const std::string& key) {
  const auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

Kernel Gemm(int64_t m, int64_t n, int64_t k, Gemm::Layout layout) {
  Kernel kernel;
  kernel.set_name("gemm");
  kernel.mutable_gemm()->set_m(m);
  kernel.mutable_gemm()->set_n(n);
  kernel.mutable_gemm()->set_k(k);
  kernel.mutable_gemm()->set_batch(1);
  kernel.mutable_gemm()->set_layout(layout);
  return kernel;
}

Kernel Memory(const std::string& name, int64_t vector, int64_t general) {
  Kernel kernel;
  kernel.set_name(name);
  kernel.mutable_memory()->set_vector_bytes(vector);
  kernel.mutable_memory()->set_general_bytes(general);
  kernel.mutable_memory()->set_launches(1);
  return kernel;
}

// A LLaMA block (RMSNorm, SwiGLU, causal flash attention) of hidden size
// h, heads query heads and kv_heads key/value heads (0: as many), MLP ffn,
// over b sequences of s tokens, run with `kernels`.
std::vector<Unit> LlamaBlock(int64_t h, int heads, int kv_heads, int64_t ffn,
                             int64_t b, int64_t s,
                             const KernelOptions& kernels) {
  Model m;
  m.set_layers(1);
  m.set_hidden(h);
  m.set_heads(heads);
  m.set_kv_heads(kv_heads);
  m.set_ffn_hidden(ffn);
  m.set_vocab(32000);
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  Batch batch;
  batch.micro_batch_size = b;
  batch.seq_len = s;
  batch.flash_attention = true;
  batch.kernels = kernels;
  return BlockUnits(m, batch);
}

// An eager LLaMA block as both reference files time it: fused q/k/v,
// causal attention on PyTorch's fused SDPA. `accumulate`: the backward
// adds into existing .grad tensors (a loop that never zeroes them).
std::vector<Kernel> BlockKernels(const Struct& row, bool backward,
                                 bool accumulate) {
  const int64_t h = static_cast<int64_t>(Num(row, "h"));
  const int64_t b = static_cast<int64_t>(Num(row, "b"));
  const int64_t s = static_cast<int64_t>(Num(row, "s"));
  KernelOptions eager;
  eager.set_style(KernelOptions::EAGER);
  eager.set_fused_qkv(true);
  const std::vector<Unit> units =
      LlamaBlock(h, static_cast<int>(Num(row, "heads")), 0,
                 static_cast<int64_t>(Num(row, "ffn")), b, s, eager);
  std::vector<Kernel> out;
  if (!backward) {
    for (const Unit& u : units)
      out.insert(out.end(), u.forward.begin(), u.forward.end());
    return out;
  }
  for (auto u = units.rbegin(); u != units.rend(); ++u) {
    out.insert(out.end(), u->backward.begin(), u->backward.end());
  }
  if (accumulate) {
    for (const Unit& u : units) out.push_back(AccumulateKernel(u.params));
    out.push_back(AccumulateKernel(b * s * h));
  }
  return out;
}

// One elementwise op of a block, in the kernel style it was run in:
// RMSNorm over tokens x h, or rotary on q and k of tokens with heads and
// kv_heads of h / heads. Its kernels are the block's own (BlockUnits), so
// the two styles' definitions are checked, not restated.
absl::StatusOr<std::vector<Kernel>> OpKernels(const std::string& path,
                                              const Struct& row) {
  auto text = [&](const char* key) {
    const Value* v = Field(row, key);
    return v == nullptr ? std::string() : v->string_value();
  };
  const std::string op = text("op"), style = text("style"), pass = text("pass");
  const int64_t tokens = static_cast<int64_t>(Num(row, "tokens"));
  const int64_t h = static_cast<int64_t>(Num(row, "h"));
  const int heads = Has(row, "heads") ? static_cast<int>(Num(row, "heads")) : 1;
  const int kv_heads = static_cast<int>(Num(row, "kv_heads"));  // 0: heads
  const std::string what = absl::StrCat(path, ": op ", op, " ", style, " ",
                                        pass, " ", tokens, "x", h);
  if ((op != "rmsnorm" && op != "rotary") ||
      (style != "EAGER" && style != "FUSED") ||
      (pass != "forward" && pass != "backward")) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ": op must be rmsnorm or rotary, style EAGER or FUSED, pass "
        "forward or backward"));
  }
  if (tokens < 1 || h < 1 || heads < 1 || h % heads != 0 || kv_heads < 0 ||
      (kv_heads > 0 && heads % kv_heads != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ": tokens and h must be >= 1, heads must divide h and kv_heads "
        "heads"));
  }
  KernelOptions kernels;
  kernels.set_style(style == "EAGER" ? KernelOptions::EAGER
                                     : KernelOptions::FUSED);
  // The norm's own kernels (not the residual's gradient sum beside it);
  // rotary on q and then k.
  const std::string prefix = op == "rmsnorm" ? "rmsnorm" : "rotary";
  std::vector<Kernel> out;
  for (const Unit& u :
       LlamaBlock(h, heads, kv_heads, 4 * h, 1, tokens, kernels)) {
    if (op == "rmsnorm" && u.name != "input_layernorm") continue;
    for (const Kernel& k : pass == "forward" ? u.forward : u.backward) {
      if (absl::StartsWith(k.name(), prefix)) out.push_back(k);
    }
  }
  return out;
}

std::string BlockName(const Struct& row, const char* pass) {
  return absl::StrFormat("block h%d %dx%d %s",
                         static_cast<int64_t>(Num(row, "h")),
                         static_cast<int64_t>(Num(row, "b")),
                         static_cast<int64_t>(Num(row, "s")), pass);
}

// Attention kernels (cuDNN's, flash-attn's) in a torch.profiler kernel list.
bool AttentionKernelName(const std::string& name) {
  return absl::StrContains(name, "sdpa") || absl::StrContains(name, "flash") ||
         absl::StrContains(name, "fmha") || absl::StrContains(name, "cudnn");
}
double AttentionSeconds(const Value* kernels) {
  double us = 0;
  if (kernels == nullptr) return 0;
  for (const Value& v : kernels->list_value().values()) {
    const Struct& k = v.struct_value();
    const Value* name = Field(k, "kernel");
    if (name != nullptr && AttentionKernelName(name->string_value())) {
      us += Num(k, "us");
    }
  }
  return us * 1e-6;
}

// validate/reference/h100_calibration.json and torch_reference.py's output.
absl::Status ReadReference(const std::string& path, const Struct& root,
                           std::vector<KernelSample>* out) {
  auto add = [&](std::string what, std::string family,
                 std::vector<Kernel> kernels, double seconds) {
    if (seconds > 0) {
      out->push_back({path, std::move(what), std::move(family),
                      std::move(kernels), seconds});
    }
  };
  if (const Value* gemm = Field(root, "gemm")) {
    for (const Value& v : gemm->list_value().values()) {
      const Struct& r = v.struct_value();
      const int64_t m = Num(r, "m"), n = Num(r, "n"), k = Num(r, "k");
      const std::string shape = absl::StrCat(m, "x", n, "x", k);
      if (Has(r, "s")) {
        add(absl::StrCat("gemm ", shape), "gemm",
            {Gemm(m, n, k, Gemm::FORWARD)}, Num(r, "s"));
      } else if (Has(r, "tflops")) {
        // Published tables give the rate: 2mnk FLOPs over their seconds.
        const double tflops = Num(r, "tflops");
        if (!(tflops > 0 && std::isfinite(tflops))) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": gemm ", shape, ": tflops must be a number > 0"));
        }
        add(absl::StrCat("gemm ", shape), "gemm",
            {Gemm(m, n, k, Gemm::FORWARD)}, 2.0 * m * n * k / (tflops * 1e12));
      }
      add(absl::StrCat("gemm ", shape), "gemm", {Gemm(m, n, k, Gemm::FORWARD)},
          Num(r, "fwd_s"));
      add(absl::StrCat("gemm dgrad ", shape), "gemm",
          {Gemm(m, n, k, Gemm::DGRAD)}, Num(r, "dgrad_s"));
      add(absl::StrCat("gemm wgrad ", shape), "gemm",
          {Gemm(m, n, k, Gemm::WGRAD)}, Num(r, "wgrad_s"));
    }
  }
  if (const Value* adam = Field(root, "adam")) {
    for (const Value& v : adam->list_value().values()) {
      const Struct& r = v.struct_value();
      const Value* fused = Field(r, "fused");
      if (fused == nullptr || !fused->bool_value()) continue;
      Kernel k;
      k.set_name("adam");
      k.mutable_optimizer()->set_params(static_cast<int64_t>(Num(r, "params")));
      k.mutable_optimizer()->set_bytes_per_param(28);
      add(absl::StrCat("adam ", static_cast<int64_t>(Num(r, "params"))),
          "optimizer", {k}, Num(r, "s"));
    }
  }
  if (const Value* ops = Field(root, "ops")) {
    for (const Value& v : ops->list_value().values()) {
      const Struct& r = v.struct_value();
      absl::StatusOr<std::vector<Kernel>> kernels = OpKernels(path, r);
      if (!kernels.ok()) return kernels.status();
      add(absl::StrFormat("%s %s %s %dx%d", Field(r, "op")->string_value(),
                          Field(r, "pass")->string_value(),
                          Field(r, "style")->string_value(),
                          static_cast<int64_t>(Num(r, "tokens")),
                          static_cast<int64_t>(Num(r, "h"))),
          "op", *std::move(kernels), Num(r, "s"));
    }
  }
  if (Has(root, "copy_gbps_rw")) {
    // A device-to-device copy: its read + write bytes at the rate given.
    const double bytes = 4e9;
    add("copy 2 GB", "memory", {Memory("copy", static_cast<int64_t>(bytes), 0)},
        bytes / (Num(root, "copy_gbps_rw") * 1e9));
  }
  if (const Value* mem = Field(root, "memory")) {
    // Elementwise ops over `elements`: vectorized kernels, and the dtype
    // cast (PyTorch's general path). Small sizes measure launches.
    const std::map<std::string, std::pair<int, int>> bytes = {
        {"add_bf16", {6, 0}},
        {"copy_bf16", {4, 0}},
        {"silu_bf16", {4, 0}},
        {"to_fp32", {0, 6}}};
    for (const Value& v : mem->list_value().values()) {
      const Struct& r = v.struct_value();
      const Value* op = Field(r, "op");
      if (op == nullptr || bytes.count(op->string_value()) == 0) continue;
      const int64_t n = static_cast<int64_t>(Num(r, "elements"));
      if (n < (int64_t{1} << 23)) continue;
      const auto [vec, gen] = bytes.at(op->string_value());
      add(absl::StrCat(op->string_value(), " ", n), "memory",
          {Memory(op->string_value(), vec * n, gen * n)}, Num(r, "s"));
    }
  }
  if (const Value* att = Field(root, "attention")) {
    for (const Value& v : att->list_value().values()) {
      const Struct& r = v.struct_value();
      const Value* backend = Field(r, "backend");
      const Value* causal = Field(r, "causal");
      // PyTorch's own choice of fused kernel, causal as decoders run it
      // (a causal kernel skips half the tiles but balances them worse: its
      // efficiency is its own).
      if (backend == nullptr || backend->string_value() != "default" ||
          causal == nullptr || !causal->bool_value() || Has(r, "error")) {
        continue;
      }
      Kernel k;
      k.set_name("attention");
      Attention* a = k.mutable_attention();
      a->set_batch(static_cast<int64_t>(Num(r, "b")));
      a->set_heads(static_cast<int>(Num(r, "heads")));
      a->set_kv_heads(a->heads());
      a->set_seq(static_cast<int64_t>(Num(r, "s")));
      a->set_head_dim(static_cast<int>(Num(r, "d")));
      a->set_causal(causal->bool_value());
      const std::string shape =
          absl::StrFormat("%dx%dx%d%s", a->batch(), a->heads(), a->seq(),
                          a->causal() ? " causal" : "");
      const double fwd = AttentionSeconds(Field(r, "fwd_kernels"));
      const double both = AttentionSeconds(Field(r, "fwdbwd_kernels"));
      add(absl::StrCat("attention ", shape), "attention", {k}, fwd);
      a->set_backward(true);
      add(absl::StrCat("attention backward ", shape), "attention", {k},
          both - fwd);
    }
  }
  // Blocks: the calibration file's rows (its loop accumulates into .grad,
  // as our replica's kernel list shows), and torch_reference's (timed with
  // .grad set to None: no accumulation), GPU-bound ones only.
  if (const Value* layers = Field(root, "layers")) {
    for (const Value& v : layers->list_value().values()) {
      const Struct& r = v.struct_value();
      add(BlockName(r, "forward"), "block", BlockKernels(r, false, false),
          Num(r, "fwd_s"));
      add(BlockName(r, "backward"), "block", BlockKernels(r, true, true),
          Num(r, "bwd_s"));
    }
  }
  if (const Value* blocks = Field(root, "blocks")) {
    for (const Value& v : blocks->list_value().values()) {
      const Struct& r = v.struct_value();
      const Value* compiled = Field(r, "compiled");
      if (compiled != nullptr && compiled->bool_value()) continue;
      const Value* profile = Field(r, "profile");
      // Host-bound rows (the GPU idles between kernels) time the host.
      if (profile != nullptr) {
        const Struct& p = profile->struct_value();
        const double kernels = Num(Field(p, "fwd")->struct_value(), "kernel_s");
        if (Num(r, "fwd_s") > 1.2 * kernels) continue;
      }
      add(BlockName(r, "forward"), "block", BlockKernels(r, false, false),
          Num(r, "fwd_s"));
      add(BlockName(r, "backward"), "block", BlockKernels(r, true, false),
          Num(r, "fwdbwd_fresh_s") - Num(r, "fwd_s"));
    }
  }
  return absl::OkStatus();
}

// A Chrome trace whose X events carry "kernels" (shardsim-hw run --trace).
absl::Status ReadTrace(const std::string& path, const Struct& root,
                       std::vector<KernelSample>* out) {
  const Value* events = Field(root, "traceEvents");
  for (const Value& v : events->list_value().values()) {
    const Struct& e = v.struct_value();
    const Value* args = Field(e, "args");
    if (args == nullptr) continue;
    const Value* kernels = Field(args->struct_value(), "kernel_list");
    if (kernels == nullptr) continue;
    KernelSample s;
    s.file = path;
    s.what =
        Field(e, "name") != nullptr ? Field(e, "name")->string_value() : "";
    for (const Value& k : kernels->list_value().values()) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(k.struct_value(),
                                                        &json);
      Kernel kernel;
      if (!google::protobuf::util::JsonStringToMessage(json, &kernel).ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": event \"",
                                                       s.what,
                                                       "\": a kernel is not a "
                                                       "Kernel message: ",
                                                       json));
      }
      s.kernels.push_back(std::move(kernel));
    }
    if (s.kernels.size() == 1) {
      const Kernel& k = s.kernels[0];
      s.family = k.has_gemm()        ? "gemm"
                 : k.has_attention() ? "attention"
                 : k.has_optimizer() ? "optimizer"
                                     : "memory";
    } else {
      s.family = "block";
    }
    s.seconds = Num(e, "dur") * 1e-6;  // trace time is in microseconds
    if (s.seconds > 0 && !s.kernels.empty()) out->push_back(std::move(s));
  }
  return absl::OkStatus();
}

double Objective(const Platform& p, const std::vector<const KernelSample*>& s) {
  double sum = 0;
  for (const KernelSample* x : s) {
    double t = 0;
    for (const Kernel& k : x->kernels) t += KernelSeconds(k, p);
    const double e = std::log(t / x->seconds);
    sum += e * e;
  }
  return sum;
}

// Golden-section search of f over [lo, hi] in log space (positive values).
double Minimize(const std::function<double(double)>& f, double lo, double hi) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = std::log(lo), b = std::log(hi);
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(std::exp(c)), fd = f(std::exp(d));
  for (int i = 0; i < 80; ++i) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - g * (b - a);
      fc = f(std::exp(c));
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + g * (b - a);
      fd = f(std::exp(d));
    }
  }
  return std::exp((a + b) / 2);
}

using Setter = std::function<void(KernelModel*, double)>;

struct Fitter {
  Platform p;
  std::vector<FittedParameter> params;

  FittedParameter& Param(const std::string& name, double base) {
    FittedParameter f;
    f.name = absl::StrCat("kernels.", name);
    f.base = f.value = base;
    params.push_back(f);
    return params.back();
  }

  static std::vector<std::string> Files(
      const std::vector<const KernelSample*>& s) {
    std::set<std::string> files;
    for (const KernelSample* x : s) files.insert(x->file);
    return {files.begin(), files.end()};
  }

  // One parameter in [lo, hi].
  void Fit1(const std::string& name, double base, const Setter& set,
            const std::vector<const KernelSample*>& s, double lo, double hi,
            const std::string& how) {
    FittedParameter& f = Param(name, base);
    if (s.empty()) {
      f.why = "no samples: kept";
      return;
    }
    const double v = Minimize(
        [&](double x) {
          Platform q = p;
          set(q.mutable_kernels(), x);
          return Objective(q, s);
        },
        lo, hi);
    set(p.mutable_kernels(), v);
    f.value = v;
    f.identified = true;
    f.points = static_cast<int>(s.size());
    f.files = Files(s);
    f.why = how;
  }

  // An efficiency e and a length x0 (e x / (x + x0)), when at least two
  // lengths are measured; else e alone.
  void Fit2(const std::string& e_name, double e_base, const Setter& set_e,
            const std::string& x_name, double x_base, const Setter& set_x,
            const std::vector<const KernelSample*>& s, size_t lengths,
            const std::string& how) {
    if (lengths < 2) {
      Fit1(e_name, e_base, set_e, s, 0.05, 1.0, how);
      FittedParameter& x = Param(x_name, x_base);
      x.why = s.empty() ? "no samples: kept" : "one length measured: kept";
      return;
    }
    double best_x = 0, best = INFINITY;
    for (double x = 0; x <= 8192; x = x < 8 ? x + 8 : x * 1.1) {
      Platform q = p;
      set_x(q.mutable_kernels(), x);
      const double e = Minimize(
          [&](double v) {
            Platform r = q;
            set_e(r.mutable_kernels(), v);
            return Objective(r, s);
          },
          0.05, 1.0);
      set_e(q.mutable_kernels(), e);
      const double o = Objective(q, s);
      if (o < best) {
        best = o;
        best_x = x;
      }
    }
    set_x(p.mutable_kernels(), best_x);
    Fit1(e_name, e_base, set_e, s, 0.05, 1.0, how);
    FittedParameter& x = Param(x_name, x_base);
    x.value = best_x;
    x.identified = true;
    x.points = static_cast<int>(s.size());
    x.files = Files(s);
    x.why = how;
  }
};

std::vector<const KernelSample*> Select(
    const std::vector<KernelSample>& samples,
    const std::function<bool(const KernelSample&)>& keep) {
  std::vector<const KernelSample*> out;
  for (const KernelSample& s : samples) {
    if (keep(s)) out.push_back(&s);
  }
  return out;
}

bool OnlyMemory(const KernelSample& s, bool general) {
  if (s.family != "memory") return false;
  for (const Kernel& k : s.kernels) {
    if (!k.has_memory() || (k.memory().general_bytes() > 0) != general) {
      return false;
    }
  }
  return true;
}

bool MovesGeneralBytes(const KernelSample& s) {
  for (const Kernel& k : s.kernels) {
    if (k.has_memory() && k.memory().general_bytes() > 0) return true;
  }
  return false;
}

}  // namespace

bool IsKernelFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  if (absl::StrContains(*text, "\"kernel_list\"")) return true;
  // A reference file: a top-level list of GEMMs (or of blocks, layers).
  Struct root;
  if (!google::protobuf::util::JsonStringToMessage(*text, &root).ok()) {
    return false;
  }
  for (const char* key : {"gemm", "layers", "blocks", "ops"}) {
    const Value* v = Field(root, key);
    if (v != nullptr && v->has_list_value()) return true;
  }
  return false;
}

absl::StatusOr<std::vector<KernelSample>> ReadKernelSamples(
    const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  const std::string path = parts[0];
  std::set<std::string> only;
  const std::set<std::string> families = {"gemm",      "attention", "memory",
                                          "optimizer", "block",     "op"};
  for (size_t i = 1; i < parts.size(); ++i) {
    if (!absl::StartsWith(parts[i], "only=")) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec, ": unknown option \"", parts[i],
                       "\" (kernel files take only=)"));
    }
    for (absl::string_view f : absl::StrSplit(parts[i].substr(5), ',')) {
      if (families.count(std::string(f)) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec, ": only=", f,
                         " is not one of gemm, attention, memory, "
                         "optimizer, block, op"));
      }
      only.insert(std::string(f));
    }
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Struct root;
  if (auto s = google::protobuf::util::JsonStringToMessage(*text, &root);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not JSON: ", s.ToString()));
  }
  std::vector<KernelSample> samples;
  if (Has(root, "traceEvents")) {
    if (absl::Status s = ReadTrace(path, root, &samples); !s.ok()) return s;
  } else {
    if (absl::Status s = ReadReference(path, root, &samples); !s.ok()) {
      return s;
    }
  }
  if (!only.empty()) {
    samples.erase(std::remove_if(samples.begin(), samples.end(),
                                 [&](const KernelSample& s) {
                                   return only.count(s.family) == 0;
                                 }),
                  samples.end());
  }
  if (samples.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no kernel samples",
                     only.empty() ? "" : " of the families asked for"));
  }
  return samples;
}

absl::StatusOr<KernelFitResult> FitKernelModel(
    const Platform& base, const std::vector<KernelSample>& samples) {
  if (absl::Status s = ValidatePlatform(base, "base platform"); !s.ok()) {
    return s;
  }
  Fitter f{base, {}};
  f.Fit1(
      "vector_fraction", base.kernels().vector_fraction(),
      [](KernelModel* m, double v) { m->set_vector_fraction(v); },
      Select(samples,
             [](const KernelSample& s) { return OnlyMemory(s, false); }),
      0.05, 1.0, "memory-bound kernels with vectorized bytes only");
  f.Fit1(
      "optimizer_fraction", base.kernels().optimizer_fraction(),
      [](KernelModel* m, double v) { m->set_optimizer_fraction(v); },
      Select(samples,
             [](const KernelSample& s) { return s.family == "optimizer"; }),
      0.05, 1.0, "fused Adam steps");
  const std::vector<const KernelSample*> gemms =
      Select(samples, [](const KernelSample& s) { return s.family == "gemm"; });
  std::set<int64_t> ks;
  for (const KernelSample* s : gemms) ks.insert(s->kernels[0].gemm().k());
  f.Fit2(
      "gemm_efficiency", base.kernels().gemm_efficiency(),
      [](KernelModel* m, double v) { m->set_gemm_efficiency(v); },
      "gemm_k_overhead", base.kernels().gemm_k_overhead(),
      [](KernelModel* m, double v) { m->set_gemm_k_overhead(v); }, gemms,
      ks.size(), "single GEMMs");
  for (const bool backward : {false, true}) {
    const std::vector<const KernelSample*> att =
        Select(samples, [&](const KernelSample& s) {
          return s.family == "attention" &&
                 s.kernels[0].attention().backward() == backward;
        });
    std::set<int64_t> seqs;
    for (const KernelSample* s : att)
      seqs.insert(s->kernels[0].attention().seq());
    const char* dir = backward ? "bwd" : "fwd";
    f.Fit2(
        absl::StrCat("attention_", dir, "_efficiency"),
        backward ? base.kernels().attention_bwd_efficiency()
                 : base.kernels().attention_fwd_efficiency(),
        [backward](KernelModel* m, double v) {
          backward ? m->set_attention_bwd_efficiency(v)
                   : m->set_attention_fwd_efficiency(v);
        },
        absl::StrCat("attention_", dir, "_seq"),
        backward ? base.kernels().attention_bwd_seq()
                 : base.kernels().attention_fwd_seq(),
        [backward](KernelModel* m, double v) {
          backward ? m->set_attention_bwd_seq(v) : m->set_attention_fwd_seq(v);
        },
        att, seqs.size(),
        backward ? "fused attention, backward" : "fused attention, forward");
  }
  f.Fit1(
      "general_fraction", base.kernels().general_fraction(),
      [](KernelModel* m, double v) { m->set_general_fraction(v); },
      Select(samples, MovesGeneralBytes), 0.05, 1.0,
      "samples moving general-path bytes (blocks: the rest of each block "
      "as fitted above)");
  KernelFitResult r;
  r.model = f.p.kernels();
  r.parameters = std::move(f.params);
  return r;
}

std::vector<KernelCheck> CheckKernels(
    const Platform& platform, const std::vector<KernelSample>& samples) {
  std::vector<KernelCheck> out;
  for (const KernelSample& s : samples) {
    double t = 0;
    for (const Kernel& k : s.kernels) t += KernelSeconds(k, platform);
    out.push_back({&s, t, t / s.seconds - 1});
  }
  return out;
}

std::string KernelCheckTable(const std::vector<KernelCheck>& checks) {
  std::string out =
      absl::StrFormat("%-10s %-44s %12s %12s %8s\n", "family", "sample",
                      "measured us", "simulated us", "error");
  for (const KernelCheck& c : checks) {
    absl::StrAppendFormat(&out, "%-10s %-44s %12.1f %12.1f %+7.1f%%\n",
                          c.sample->family, c.sample->what,
                          c.sample->seconds * 1e6, c.predicted * 1e6,
                          100 * c.error);
  }
  // Per family: how many, the median error and the median |error|, so a
  // family the model gets wrong is not hidden by the others.
  std::map<std::string, std::vector<double>> by_family;
  for (const KernelCheck& c : checks)
    by_family[c.sample->family].push_back(c.error);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  for (const auto& [family, errors] : by_family) {
    std::vector<double> abs_errors;
    for (double e : errors) abs_errors.push_back(std::abs(e));
    absl::StrAppendFormat(&out,
                          "# %-10s %5d samples, median error %+6.1f%%, "
                          "median |error| %5.1f%%\n",
                          family, errors.size(), 100 * median(errors),
                          100 * median(abs_errors));
  }
  return out;
}

}  // namespace shardsim
