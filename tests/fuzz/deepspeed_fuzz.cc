// A DeepSpeed config (ds_config.json) given as a strategy: its
// zero_optimization keys -> factors and execution profile, then what
// strategy_run.h does with any strategy, on one mesh picked by the input's
// length (reading the file is most of the cost).
//
// ParseStrategy reads configs from files only, so each input is written to
// one temporary file per process (overwritten every run, removed at exit),
// in /dev/shm where there is one: opening files on disk is slow.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/strategy_run.h"

namespace {

std::string* config_path = nullptr;

void RemoveConfig() { unlink(config_path->c_str()); }

const std::string& ConfigPath() {
  if (config_path == nullptr) {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string name = std::string(dir) + "/shardsim_fuzz_ds_XXXXXX.json";
    const int fd = mkstemps(name.data(), 5);
    if (fd < 0) {
      std::perror("mkstemps");
      std::abort();
    }
    close(fd);
    config_path = new std::string(name);
    std::atexit(RemoveConfig);
  }
  return *config_path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ConfigPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  using shardsim::fuzz::kMeshes;
  shardsim::fuzz::RunStrategy(path, "", kMeshes[size % std::size(kMeshes)]);
  return 0;
}
