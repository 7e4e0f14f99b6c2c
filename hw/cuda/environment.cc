#include "hw/cuda/environment.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace shardsim::hw {

std::vector<std::pair<std::string, std::string>> CudaEnvironment(
    int device, int rank, int world, const Mesh& mesh, cublasHandle_t cublas,
    const std::string& compute) {
  std::vector<std::pair<std::string, std::string>> env;
  auto add = [&](std::string k, std::string v) {
    env.emplace_back(std::move(k), std::move(v));
  };
  add("backend", "nccl");
  add("rank", absl::StrCat(rank));
  add("world_size", absl::StrCat(world));
  add("mesh",
      absl::StrCat(mesh.nodes, " nodes x ", mesh.gpus_per_node, " GPUs"));
  add("cuda.device", absl::StrCat(device));
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    add("gpu", prop.name);
    add("gpu.compute_capability", absl::StrCat(prop.major, ".", prop.minor));
    add("gpu.memory_bytes", absl::StrCat(prop.totalGlobalMem));
    add("gpu.sms", absl::StrCat(prop.multiProcessorCount));
  } else {
    add("gpu", "unknown (cudaGetDeviceProperties failed)");
  }
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) {
    add("gpu.pci_bus_id", bus);
  }
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) {
    add("cuda.driver", absl::StrCat(v / 1000, ".", (v % 1000) / 10));
  }
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
    add("cuda.runtime", absl::StrCat(v / 1000, ".", (v % 1000) / 10));
  }
  if (ncclGetVersion(&v) == ncclSuccess) {
    // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch (>= 2.9).
    add("nccl.version",
        absl::StrCat(v / 10000, ".", (v / 100) % 100, ".", v % 100));
  }
  if (cublas != nullptr &&
      cublasGetVersion(cublas, &v) == CUBLAS_STATUS_SUCCESS) {
    add("cublas.version", absl::StrCat(v));
  }
  add("compute", compute);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    add(absl::StrCat("env.", std::string(*e, eq - *e)), std::string(eq + 1));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess) {
    add("local.device_count", absl::StrCat(devices));
    // Peer access between local GPUs; native atomics over a peer link
    // usually means NVLink (PCIe peers rarely have them).
    std::string p2p;
    for (int a = 0; a < devices; ++a) {
      for (int b = 0; b < devices; ++b) {
        if (a == b) continue;
        int access = 0, atomics = 0, perf_rank = 0;
        cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, a, b);
        cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported,
                                  a, b);
        cudaDeviceGetP2PAttribute(&perf_rank, cudaDevP2PAttrPerformanceRank, a,
                                  b);
        absl::StrAppend(&p2p, p2p.empty() ? "" : " ", a, "-", b,
                        ":access=", access, ",atomics=", atomics,
                        ",perf_rank=", perf_rank);
      }
    }
    add("local.p2p", p2p.empty() ? "none (one device)" : p2p);
    std::string buses;
    for (int d = 0; d < devices; ++d) {
      char id[64] = {0};
      if (cudaDeviceGetPCIBusId(id, sizeof(id), d) == cudaSuccess) {
        absl::StrAppend(&buses, buses.empty() ? "" : " ", d, "=", id);
      }
    }
    add("local.pci_bus_ids", buses);
  }
  return env;
}

}  // namespace shardsim::hw
