#include "sim/scenario/data_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardsim {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The directory of this executable (Linux: /proc/self/exe).
std::string ExecutableDir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  const std::string exe(buf.data(), n);
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

absl::StatusOr<std::string> Find() {
  if (const char* env = std::getenv("SHARDSIM_DATA_DIR"); env != nullptr) {
    if (IsDir(absl::StrCat(env, "/platforms"))) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("SHARDSIM_DATA_DIR=", env, ": no platforms/ there"));
  }
  const std::string bin = ExecutableDir();
  const std::vector<std::string> places = {bin + "/../share/shardsim",
                                           bin + "/share/shardsim"};
  for (const std::string& dir : places) {
    if (IsDir(dir + "/platforms")) return dir;
  }
  return absl::NotFoundError(absl::StrCat(
      "shipped data (platforms/) not found in ", absl::StrJoin(places, " or "),
      "; install with cmake --install, or set SHARDSIM_DATA_DIR"));
}

}  // namespace

absl::StatusOr<std::string> DataDir() {
  static const absl::StatusOr<std::string>* const dir =
      new absl::StatusOr<std::string>(Find());
  return *dir;
}

}  // namespace shardsim
