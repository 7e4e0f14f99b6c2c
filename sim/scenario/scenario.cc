#include "sim/scenario/scenario.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "sim/base/did_you_mean.h"
#include "sim/base/layout.h"
#include "sim/model/hf_config.h"
#include "sim/model/model.h"
#include "sim/scenario/data_dir.h"
#include "sim/scenario/deepspeed_check.h"
#include "sim/scenario/framework_inputs.h"
#include "sim/scenario/platform_file.h"
#include "sim/scenario/text_proto.h"
#include "sim/schedule/pipeline/order.h"
#include "sim/schema/limits.h"

namespace shardsim {
namespace {

std::string DirName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? "."
                                          : std::string(path.substr(0, slash));
}

std::string Join(absl::string_view dir, absl::string_view path) {
  if (absl::StartsWith(path, "/") || dir.empty()) return std::string(path);
  return absl::StrCat(dir, "/", path);
}

template <typename Message>
absl::StatusOr<Message> ReadTextProto(const std::string& path) {
  Message message;
  if (absl::Status s = ReadTextProtoFile(path, &message); !s.ok()) return s;
  return message;
}

absl::Status FieldError(absl::string_view file, absl::string_view field,
                        absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": field ", field, ": ", why));
}

// Reads GPU model `name` (shipped, or a .textproto path from `base_dir`);
// errors name `field` of `file`.
absl::StatusOr<GpuModel> ReadNamedGpuModel(absl::string_view name,
                                           absl::string_view base_dir,
                                           absl::string_view file,
                                           absl::string_view field) {
  const bool is_path = absl::EndsWith(name, ".textproto");
  std::string path;
  if (is_path) {
    path = Join(base_dir, name);
  } else {
    absl::StatusOr<std::string> data = DataDir();
    if (!data.ok()) {
      return FieldError(
          file, field,
          absl::StrCat("\"", name, "\": ", data.status().message()));
    }
    path = absl::StrCat(*data, "/platforms/gpus/", name, ".textproto");
    if (!std::ifstream(path)) {
      const std::vector<std::string> names = ShippedNames("platforms/gpus");
      return FieldError(
          file, field,
          absl::StrCat("\"", name, "\": no such shipped GPU model",
                       DidYouMean(name, names), " (", path,
                       "; shipped: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  GpuModel read;
  if (absl::Status s = ReadGpuModelWithBase(path, &read); !s.ok()) {
    return FieldError(file, field,
                      absl::StrCat("\"", name, "\": ", s.message()));
  }
  return read;
}

// Fills gpu, kernels and interference from the platform's GPU model (its
// bases merged, sim/scenario/platform_file.h); the platform's own fields
// win.
absl::Status ResolveGpuModel(Platform* p, absl::string_view base_dir,
                             absl::string_view file) {
  // LoadPlatform has merged and cleared it: only a scenario's platform_def
  // gets here with one, and its text is not at hand to merge from.
  if (p->has_base()) {
    return FieldError(
        file, "base",
        absl::StrCat("\"", p->base(),
                     "\": read in platform files only (give the file as "
                     "`platform`), not in platform_def"));
  }
  // Each degraded GPU set's own model, for the engine's classes.
  Degraded* degraded = p->mutable_degraded();
  for (int i = 0; i < degraded->gpus_size(); ++i) {
    Degraded::Gpus* g = degraded->mutable_gpus(i);
    if (g->gpu_model().empty()) continue;
    absl::StatusOr<GpuModel> m =
        ReadNamedGpuModel(g->gpu_model(), base_dir, file,
                          absl::StrCat("degraded.gpus[", i, "].gpu_model"));
    if (!m.ok()) return m.status();
    GpuModel model = *std::move(m);
    model.MergeFrom(g->model());
    *g->mutable_model() = std::move(model);
  }
  if (p->gpu_model().empty()) return absl::OkStatus();
  absl::StatusOr<GpuModel> read =
      ReadNamedGpuModel(p->gpu_model(), base_dir, file, "gpu_model");
  if (!read.ok()) return read.status();
  const GpuModel* model = &*read;
  Gpu gpu = model->gpu();
  gpu.MergeFrom(p->gpu());
  *p->mutable_gpu() = gpu;
  KernelModel kernels = model->kernels();
  kernels.MergeFrom(p->kernels());
  *p->mutable_kernels() = kernels;
  Interference interference = model->interference();
  interference.MergeFrom(p->interference());
  *p->mutable_interference() = interference;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Scenario> ReadScenario(const std::string& path) {
  return ReadTextProto<Scenario>(path);
}

absl::StatusOr<CollectiveScenario> ReadCollectiveScenario(
    const std::string& path) {
  return ReadTextProto<CollectiveScenario>(path);
}

std::string DirOf(const std::string& path) { return DirName(path); }

absl::StatusOr<Model> LoadModel(absl::string_view name_or_path,
                                absl::string_view base_dir) {
  constexpr absl::string_view kHf = "hf:";
  if (absl::StartsWith(name_or_path, kHf)) {
    const absl::string_view file = name_or_path.substr(kHf.size());
    if (file.empty()) {
      return absl::InvalidArgumentError(
          "hf: give the path of a Hugging Face config.json after it "
          "(hf:PATH/config.json)");
    }
    const std::string path = Join(base_dir, file);
    absl::StatusOr<Model> model = ModelFromHfConfig(path);
    if (!model.ok()) return model.status();
    if (absl::Status s = ValidateModel(*model); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    return model;
  }
  if (!absl::EndsWith(name_or_path, ".textproto")) {
    return BuiltinModel(name_or_path);
  }
  const std::string path = Join(base_dir, name_or_path);
  absl::StatusOr<Model> model = ReadTextProto<Model>(path);
  if (!model.ok()) return model.status();
  if (absl::Status s = ValidateModel(*model); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return model;
}

absl::StatusOr<Platform> LoadPlatform(absl::string_view name_or_path,
                                      absl::string_view base_dir) {
  const bool is_path = absl::EndsWith(name_or_path, ".textproto");
  std::string path;
  if (is_path) {
    path = Join(base_dir, name_or_path);
  } else {
    absl::StatusOr<std::string> data = DataDir();
    if (!data.ok()) {
      return absl::NotFoundError(absl::StrCat("platform \"", name_or_path,
                                              "\": ", data.status().message()));
    }
    path = absl::StrCat(*data, "/platforms/", name_or_path, ".textproto");
    if (!std::ifstream(path)) {
      const std::vector<std::string> names = ShippedNames("platforms");
      return absl::NotFoundError(absl::StrCat(
          "platform \"", name_or_path, "\": no such shipped platform",
          DidYouMean(name_or_path, names), " (", path,
          "; shipped: ", absl::StrJoin(names, ", "),
          "; a file is a path ending in .textproto)"));
    }
  }
  Platform platform;
  if (absl::Status s = ReadPlatformWithBase(path, &platform); !s.ok()) {
    return s;
  }
  if (absl::Status s = ResolveGpuModel(&platform, DirName(path), path);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidatePlatform(platform, path); !s.ok()) return s;
  return platform;
}

absl::StatusOr<Job> ResolveJob(const std::string& path, Scenario scenario) {
  const std::string dir = DirName(path);
  // The framework files set fields first, so that what they set is
  // validated as if the scenario had given it.
  std::vector<std::string> warnings;
  if (absl::Status s = ApplyFrameworkInputs(path, dir, &scenario, &warnings);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateScenario(scenario, path); !s.ok()) return s;
  Job job{path, dir, std::move(scenario), {}, {}, std::move(warnings)};
  const Scenario& s = job.scenario;

  if (s.has_model_def() == !s.model().empty()) {
    return FieldError(path, "model", "give exactly one of model and model_def");
  }
  if (s.has_model_def()) {
    job.model = s.model_def();
    if (absl::Status v = ValidateModel(job.model); !v.ok()) {
      return FieldError(path, "model_def", v.message());
    }
  } else {
    absl::StatusOr<Model> model = LoadModel(s.model(), dir);
    if (!model.ok()) return FieldError(path, "model", model.status().message());
    job.model = *std::move(model);
  }

  if (s.has_platform_def() == !s.platform().empty()) {
    return FieldError(path, "platform",
                      "give exactly one of platform and platform_def");
  }
  if (s.has_platform_def()) {
    job.platform = s.platform_def();
    if (absl::Status v = ResolveGpuModel(&job.platform, dir, path); !v.ok()) {
      return v;
    }
    if (absl::Status v = ValidatePlatform(job.platform, path); !v.ok()) {
      return v;
    }
  } else {
    absl::StatusOr<Platform> platform = LoadPlatform(s.platform(), dir);
    if (!platform.ok()) {
      return FieldError(path, "platform", platform.status().message());
    }
    job.platform = *std::move(platform);
  }
  if (s.kernels().float8().enabled() &&
      job.platform.gpu().fp8_peak_flops() <= 0) {
    return FieldError(
        path, "kernels.float8.enabled",
        absl::StrCat("FP8 training needs FP8 tensor cores, which the ",
                     job.platform.gpu().name(), " of platform \"",
                     job.platform.name(),
                     "\" lacks (its gpu.fp8_peak_flops is 0)"));
  }
  // What the model's shape makes of the scenario's fields: a window the
  // sequence runs past, and a recomputation interval no block reaches,
  // would each be silently the same as no window and no recomputation.
  if (const int w = job.model.sliding_window(); w > 0 && s.seq_len() > w) {
    return FieldError(
        path, "seq_len",
        absl::StrCat(s.seq_len(), " runs past model \"", job.model.name(),
                     "\"'s sliding window of ", w,
                     " keys (model sliding_window): attention beyond the "
                     "window is not modelled; give seq_len <= ",
                     w, ", where every query sees every earlier key"));
  }
  if (s.recompute_every_layers() > job.model.layers()) {
    return FieldError(
        path, "recompute_every_layers",
        absl::StrCat(s.recompute_every_layers(), " is more than model \"",
                     job.model.name(), "\"'s ", job.model.layers(),
                     " blocks: no block would be recomputed (that is "
                     "recompute_granularity RECOMPUTE_NONE)"));
  }
  for (int gpus : s.gpus()) {
    if (absl::Status v = CheckGpuCount(job, gpus); !v.ok()) return v;
  }
  if (absl::Status v = CheckDeepSpeedConfigs(&job); !v.ok()) return v;
  return job;
}

absl::Status CheckGpuCount(const Job& job, int gpus) {
  if (absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus); !mesh.ok()) {
    return FieldError(job.path, "gpus", mesh.status().message());
  }
  absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus);
  if (absl::StatusOr<Layout> l =
          Layout::Make(*mesh, job.scenario.parallelism());
      !l.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path, ": at ", gpus, " GPUs: ", l.status().message()));
  }
  if (absl::Status s = ValidateTensorParallel(
          job.model, std::max(1, job.scenario.parallelism().tp()));
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.path, ": field parallelism.tp: ", s.message()));
  }
  absl::StatusOr<Scenario> at = ScenarioAt(job.scenario, gpus);
  if (!at.ok()) {
    return FieldError(job.path, "global_batch_tokens", at.status().message());
  }
  // The schedule holds every layer's passes of every micro-batch.
  const int64_t passes =
      (int64_t{job.model.layers()} + 2) * at->micro_batches();
  if (passes > limits::kMaxLayerPasses) {
    return FieldError(
        job.path, "micro_batches",
        absl::StrCat(at->micro_batches(), " micro-batches of ",
                     job.model.layers(), " layers (+ embedding and head) ",
                     "at ", gpus, " GPUs are ", passes,
                     " layer passes, beyond the limit of ",
                     limits::kMaxLayerPasses));
  }
  if (const Parallelism& p = at->parallelism(); p.pp() > 1) {
    if (absl::Status v =
            CheckStageOrder(p.pipeline_schedule(), p.pp(), std::max(1, p.vpp()),
                            at->micro_batches());
        !v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(job.path, ": at ", gpus, " GPUs: ", v.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Scenario> ScenarioAt(const Scenario& scenario, int gpus) {
  Scenario s = scenario;
  if (s.global_batch_tokens() == 0) return s;
  int64_t per_gpu = 0, per_micro_batch = 0;
  if (absl::Status st = CheckedMul(s.micro_batch_size(), s.seq_len(),
                                   "micro_batch_size x seq_len", &per_gpu);
      !st.ok()) {
    return st;
  }
  // A micro-batch is one per data-parallel replica: tp, cp and pp ranks
  // share theirs (a cp group splits its sequences).
  const Parallelism& p = s.parallelism();
  const int64_t shared =
      int64_t{std::max(1, p.tp())} * std::max(1, p.cp()) * std::max(1, p.pp());
  if (gpus % shared != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        gpus, " GPUs are no whole number of tp x cp x pp = ", shared));
  }
  const int replicas = static_cast<int>(gpus / shared);
  if (absl::Status st = CheckedMul(replicas, per_gpu, "tokens per micro-batch",
                                   &per_micro_batch);
      !st.ok()) {
    return st;
  }
  if (per_micro_batch < 1 || s.global_batch_tokens() % per_micro_batch != 0 ||
      s.global_batch_tokens() < per_micro_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.global_batch_tokens(),
        " tokens are not a whole number of "
        "micro-batches of ",
        replicas, replicas == gpus ? " GPUs x " : " replicas x ",
        s.micro_batch_size(), " sequences x ", s.seq_len(), " tokens"));
  }
  const int64_t micro_batches = s.global_batch_tokens() / per_micro_batch;
  if (micro_batches > limits::kMaxMicroBatches) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.global_batch_tokens(), " tokens at ", gpus, " GPUs are ",
                     micro_batches, " micro-batches, beyond the limit of ",
                     limits::kMaxMicroBatches));
  }
  s.set_micro_batches(static_cast<int32_t>(micro_batches));
  s.clear_global_batch_tokens();
  return s;
}

absl::StatusOr<Mesh> JobMesh(const Platform& platform, int gpus) {
  if (gpus < 1 || gpus > limits::kMaxGpus) {
    return absl::InvalidArgumentError(
        absl::StrCat(gpus, " GPUs: must be in [1, ", limits::kMaxGpus, "]"));
  }
  const int per_node = platform.gpus_per_node();
  if (per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "platform ", platform.name(), ": gpus_per_node must be >= 1"));
  }
  absl::StatusOr<Mesh> mesh = MeshOf(gpus, per_node);
  if (!mesh.ok()) return mesh.status();
  if (platform.nodes() > 0 && mesh->nodes > platform.nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gpus, " GPUs need ", mesh->nodes, " nodes; platform ",
                     platform.name(), " has ", platform.nodes()));
  }
  return mesh;
}

Batch ScenarioBatch(const Scenario& s) {
  Batch b;
  b.micro_batch_size = s.micro_batch_size();
  b.seq_len = s.seq_len();
  b.recompute_granularity = s.recompute_granularity();
  if (b.recompute_granularity == RECOMPUTE_GRANULARITY_UNSPECIFIED) {
    b.recompute_granularity = s.recompute() ? RECOMPUTE_FULL : RECOMPUTE_NONE;
  }
  b.recompute = b.recompute_granularity == RECOMPUTE_FULL;
  b.recompute_every_layers = s.recompute_every_layers();
  b.flash_attention = s.flash_attention();
  b.kernels = s.kernels();
  const Parallelism& p = s.parallelism();
  b.tp = std::max(1, p.tp());
  b.sequence_parallel = p.sequence_parallel();
  b.cp = std::max(1, p.cp());
  return b;
}

}  // namespace shardsim
