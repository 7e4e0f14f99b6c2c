#include "sim/scenario/platform_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "sim/base/did_you_mean.h"
#include "sim/scenario/data_dir.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/text_proto.h"

namespace shardsim {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

std::string DirOfFile(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string JoinPath(const std::string& dir, const std::string& path) {
  if (absl::StartsWith(path, "/") || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

// The same file reached by two spellings of its path is one file of a loop.
std::string Canonical(const std::string& path) {
  std::error_code error;
  const std::filesystem::path p =
      std::filesystem::weakly_canonical(path, error);
  return error ? path : p.string();
}

absl::Status BaseError(const std::string& file, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": field base: ", why));
}

// Where `base`, as the file `path` gives it, lies.
absl::StatusOr<std::string> BasePath(const std::string& base,
                                     const std::string& path,
                                     const BaseKind& kind) {
  if (absl::EndsWith(base, ".textproto")) {
    return JoinPath(DirOfFile(path), base);
  }
  absl::StatusOr<std::string> data = DataDir();
  if (!data.ok()) {
    return BaseError(path,
                     absl::StrCat("\"", base, "\": ", data.status().message()));
  }
  const std::string dir = absl::StrCat(*data, "/", kind.shipped);
  const std::string shipped = absl::StrCat(dir, "/", base, ".textproto");
  std::error_code error;
  if (!std::filesystem::is_regular_file(shipped, error)) {
    const std::vector<std::string> names = ShippedNames(kind.shipped);
    return absl::NotFoundError(
        absl::StrCat(path, ": field base: \"", base, "\": no such shipped ",
                     kind.noun, DidYouMean(base, names), " (in ", dir,
                     "; shipped: ", absl::StrJoin(names, ", "),
                     "; a file is a path ending in .textproto)"));
  }
  return shipped;
}

// `src` with every field but `field` cleared.
std::unique_ptr<Message> OnlyField(const Message& src,
                                   const FieldDescriptor* field) {
  std::unique_ptr<Message> copy(src.New());
  copy->CopyFrom(src);
  std::unique_ptr<Message> piece(src.New());
  copy->GetReflection()->SwapFields(copy.get(), piece.get(), {field});
  return piece;
}

// Merges into `dst` the fields of `src` that `tree` (the locations the
// parser recorded for `src`) shows were written.
void MergeWritten(const Message& src, const TextFormat::ParseInfoTree& tree,
                  Message* dst) {
  const google::protobuf::Descriptor* type = src.GetDescriptor();
  const Reflection* r = src.GetReflection();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* f = type->field(i);
    if (f->is_repeated()) {
      // Appended, as MergeFrom does.
      if (r->FieldSize(src, f) > 0) dst->MergeFrom(*OnlyField(src, f));
      continue;
    }
    if (tree.GetLocation(f, -1).line < 0) continue;  // not written
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      const TextFormat::ParseInfoTree* nested = tree.GetTreeForNested(f, -1);
      Message* into = r->MutableMessage(dst, f);
      if (nested == nullptr) {
        into->MergeFrom(r->GetMessage(src, f));
      } else {
        MergeWritten(r->GetMessage(src, f), *nested, into);
      }
      continue;
    }
    // Cleared to the zero value first: MergeFrom then copies the value
    // unless it is that zero (proto3), which the clear already wrote.
    r->ClearField(dst, f);
    dst->MergeFrom(*OnlyField(src, f));
  }
}

absl::Status ReadChain(const std::string& path, const BaseKind& kind,
                       const AbsolutePathsFn& absolute_paths,
                       std::vector<std::string>* chain, Message* out) {
  const std::string canonical = Canonical(path);
  if (std::find(chain->begin(), chain->end(), canonical) != chain->end()) {
    std::vector<std::string> loop = *chain;
    loop.push_back(canonical);
    return BaseError(chain->back(),
                     absl::StrCat("the ", kind.noun, " bases form a loop: ",
                                  absl::StrJoin(loop, " -> ")));
  }
  if (absl::Status s = ReadTextProtoFile(path, out); !s.ok()) return s;
  const FieldDescriptor* base_field =
      out->GetDescriptor()->FindFieldByName("base");
  const Reflection* r = out->GetReflection();
  if (base_field == nullptr || !r->HasField(*out, base_field)) {
    return absl::OkStatus();
  }
  const std::string base = r->GetString(*out, base_field);
  absl::StatusOr<std::string> base_path = BasePath(base, path, kind);
  if (!base_path.ok()) return base_path.status();

  chain->push_back(canonical);
  std::unique_ptr<Message> merged(out->New());
  absl::Status s =
      ReadChain(*base_path, kind, absolute_paths, chain, merged.get());
  chain->pop_back();
  if (!s.ok()) {
    // A loop names its files itself; other errors say which base led there.
    if (absl::StrContains(s.message(), "bases form a loop")) return s;
    return absl::Status(s.code(), absl::StrCat(path, ": field base: \"", base,
                                               "\": ", s.message()));
  }
  if (absolute_paths) absolute_paths(DirOfFile(*base_path), merged.get());

  // Read again for what the text writes (the first read kept only the
  // values).
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  if (absl::Status m = MergeSetFields(text.str(), merged.get()); !m.ok()) {
    return absl::Status(m.code(), absl::StrCat(path, ":", m.message()));
  }
  r->ClearField(merged.get(), base_field);
  out->GetReflection()->Swap(out, merged.get());
  return absl::OkStatus();
}

}  // namespace

absl::Status MergeSetFields(absl::string_view text, Message* over) {
  TextFormat::ParseInfoTree tree;
  std::unique_ptr<Message> written(over->New());
  if (absl::Status s = ParseTextProto(text, written.get(), &tree); !s.ok()) {
    return s;
  }
  MergeWritten(*written, tree, over);
  return absl::OkStatus();
}

absl::Status ReadWithBase(const std::string& path, const BaseKind& kind,
                          const AbsolutePathsFn& absolute_paths, Message* out) {
  std::vector<std::string> chain;
  return ReadChain(path, kind, absolute_paths, &chain, out);
}

absl::Status ReadPlatformWithBase(const std::string& path, Platform* out) {
  // A GPU model's path is relative to the file that names it.
  const auto absolute_path = [](const std::string& dir, std::string* path) {
    if (!absl::EndsWith(*path, ".textproto") || absl::StartsWith(*path, "/")) {
      return;
    }
    std::error_code error;
    const std::filesystem::path absolute =
        std::filesystem::absolute(JoinPath(dir, *path), error);
    if (!error) *path = absolute.lexically_normal().string();
  };
  const auto absolute_paths = [&](const std::string& dir, Message* m) {
    Platform* p = static_cast<Platform*>(m);
    absolute_path(dir, p->mutable_gpu_model());
    for (Degraded::Gpus& g : *p->mutable_degraded()->mutable_gpus()) {
      absolute_path(dir, g.mutable_gpu_model());
    }
  };
  return ReadWithBase(path, BaseKind{"platform", "platforms"}, absolute_paths,
                      out);
}

absl::Status ReadGpuModelWithBase(const std::string& path, GpuModel* out) {
  return ReadWithBase(path, BaseKind{"GPU model", "platforms/gpus"}, nullptr,
                      out);
}

std::vector<std::string> ShippedNames(absl::string_view subdir) {
  std::vector<std::string> names;
  absl::StatusOr<std::string> data = DataDir();
  if (!data.ok()) return names;
  std::error_code error;
  for (std::filesystem::directory_iterator
           it(absl::StrCat(*data, "/", subdir), error),
       end;
       !error && it != end; it.increment(error)) {
    const std::filesystem::path& p = it->path();
    if (p.extension() == ".textproto" && it->is_regular_file(error)) {
      names.push_back(p.stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> PlatformText(absl::string_view name_or_path) {
  absl::StatusOr<Platform> platform = LoadPlatform(name_or_path, ".");
  if (!platform.ok()) return platform.status();
  std::string text;
  if (!TextFormat::PrintToString(*platform, &text)) {
    return absl::InternalError("cannot print the platform as text");
  }
  return text;
}

}  // namespace shardsim
