// How much a GEMM and an NCCL-like copy kernel slow each other down on one
// GPU, and how much a memory-bound kernel and that copy kernel do.
//
// NCCL runs a collective as one kernel of one block per channel (512
// threads, Simple protocol) that copies between HBM and the link buffers.
// With a single GPU there is no peer, so the stand-in is a kernel of B
// blocks x 512 threads that copies HBM to HBM as fast as it can: it takes
// SMs and HBM bandwidth the way NCCL's kernel does. Each case runs the two
// kernels on two streams of default priority, the second one sized to
// outlast the first, and times the first with CUDA events. Copy rates
// are bytes copied per second (HBM traffic is twice that: read + write).
//
// Build: nvcc -O2 -arch=sm_90 interference.cu -lcublas -o interference
// Run:   ./interference > interference.json
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                              \
  do {                                                        \
    cudaError_t e = (x);                                      \
    if (e != cudaSuccess) {                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, \
                   cudaGetErrorString(e));                    \
      std::exit(1);                                           \
    }                                                         \
  } while (0)

namespace {

// B blocks copy `n` 16-byte words `reps` times over, each block its own
// slice in chunks of one word per thread. With `chunk_ns` > 0 a block waits
// after each chunk until chunk_ns per chunk have passed: the whole kernel
// then copies at a set rate, as NCCL's kernel does when the link, not HBM,
// is what limits it (it still holds its SMs while it waits).
__global__ void CopyKernel(const int4* src, int4* dst, size_t n, int reps,
                           long long chunk_ns) {
  const size_t per_block = n / gridDim.x;
  const int4* s = src + blockIdx.x * per_block;
  int4* d = dst + blockIdx.x * per_block;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  long long chunks = 0;
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < per_block; i += blockDim.x) {
      if (i + threadIdx.x < per_block) d[i + threadIdx.x] = s[i + threadIdx.x];
      ++chunks;
      if (chunk_ns > 0) {
        do {
          asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (static_cast<long long>(now - start) < chunks * chunk_ns);
      }
    }
  }
}

// A memory-bound kernel laid out as PyTorch's elementwise kernels are: one
// short block per 4 x 512 pairs, so the block scheduler balances SMs.
__global__ void AddKernel(const __nv_bfloat162* a, const __nv_bfloat162* b,
                          __nv_bfloat162* c, size_t n) {
  const size_t base = (static_cast<size_t>(blockIdx.x) * 4) * blockDim.x;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const size_t i = base + j * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __hadd2(a[i], b[i]);
  }
}

struct Gemm {
  int m, n, k;
  __nv_bfloat16 *a, *b, *c;
};

cublasHandle_t g_cublas;

void RunGemm(const Gemm& g, cudaStream_t s) {
  const float one = 1, zero = 0;
  cublasSetStream(g_cublas, s);
  cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, g.n, g.m, g.k, &one, g.b,
               CUDA_R_16BF, g.k, g.a, CUDA_R_16BF, g.k, &zero, g.c, CUDA_R_16BF,
               g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// Seconds per call of `fn` on `s`, mean over `iters`.
template <typename Fn>
double Time(cudaStream_t s, int iters, Fn fn) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) fn();
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms / 1e3 / iters;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cublasCreate(&g_cublas);
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));

  const size_t copy_bytes = size_t{1} << 28;  // 256 MiB each way
  int4 *src, *dst;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  const size_t words = copy_bytes / sizeof(int4);
  const size_t add_n = size_t{1} << 27;  // bf16x2 pairs: 512 MiB per operand
  __nv_bfloat162 *a, *b, *c;
  CHECK(cudaMalloc(&a, add_n * 4));
  CHECK(cudaMalloc(&b, add_n * 4));
  CHECK(cudaMalloc(&c, add_n * 4));
  CHECK(cudaMemset(a, 0, add_n * 4));
  CHECK(cudaMemset(b, 0, add_n * 4));

  std::vector<Gemm> gemms = {
      {5120, 11008, 4096}, {2048, 4096, 4096}, {8192, 8192, 8192}};
  for (Gemm& g : gemms) {
    CHECK(cudaMalloc(&g.a, size_t{2} * g.m * g.k));
    CHECK(cudaMalloc(&g.b, size_t{2} * g.n * g.k));
    CHECK(cudaMalloc(&g.c, size_t{2} * g.m * g.n));
    CHECK(cudaMemset(g.a, 0, size_t{2} * g.m * g.k));
    CHECK(cudaMemset(g.b, 0, size_t{2} * g.n * g.k));
  }
  auto add = [&](cudaStream_t s) {
    const size_t blocks = (add_n + 4 * 512 - 1) / (4 * 512);
    AddKernel<<<blocks, 512, 0, s>>>(a, b, c, add_n);
  };
  // `rate`: copy bytes/s for the whole kernel (0 = as fast as it goes).
  auto copy = [&](cudaStream_t s, int blocks, int reps, double rate) {
    long long chunk_ns = 0;
    if (rate > 0)
      chunk_ns = static_cast<long long>(512.0 * 16 * blocks / rate * 1e9);
    CopyKernel<<<blocks, 512, 0, s>>>(src, dst, words, reps, chunk_ns);
  };
  for (int i = 0; i < 3; ++i) {
    for (const Gemm& g : gemms) RunGemm(g, s1);
    add(s1);
    copy(s1, 8, 1, 0);
  }
  CHECK(cudaDeviceSynchronize());

  const double add_alone = Time(s1, 20, [&] { add(s1); });
  std::printf("{\n \"gpu\": \"%s\", \"sms\": %d,\n", prop.name,
              prop.multiProcessorCount);
  std::printf(" \"add_alone_s\": %.9g, \"add_bytes\": %zu,\n", add_alone,
              add_n * 12);
  std::printf(" \"cases\": [\n");
  bool first = true;
  // (blocks, copy rate): unthrottled; NVLink-bound (A100 ring busbw 235 GB/s,
  // H100 about 350 GB/s); NIC-bound (HDR 25 GB/s, NDR 50 GB/s).
  const std::pair<int, double> kinds[] = {
      {8, 0},      {16, 0},     {32, 0},   {8, 235e9}, {16, 235e9},
      {16, 350e9}, {32, 350e9}, {8, 25e9}, {8, 50e9},  {16, 50e9}};
  for (const auto& kind : kinds) {
    const int blocks = kind.first;
    const double rate = kind.second;
    const double copy_alone =
        Time(s2, 1, [&] { copy(s2, blocks, 2, rate); }) / 2;
    const double copied = static_cast<double>(words / blocks * blocks) * 16;
    for (const Gemm& g : gemms) {
      const double alone = Time(s1, 20, [&] { RunGemm(g, s1); });
      // GEMMs while the copy kernel runs throughout.
      const int reps = static_cast<int>(1.5 * 20 * alone / copy_alone) + 1;
      copy(s2, blocks, reps, rate);
      const double with_copy = Time(s1, 20, [&] { RunGemm(g, s1); });
      CHECK(cudaDeviceSynchronize());
      // The copy kernel while GEMMs run throughout.
      const int gemms_needed =
          static_cast<int>(1.5 * 2 * copy_alone / alone) + 1;
      for (int i = 0; i < gemms_needed; ++i) RunGemm(g, s1);
      const double copy_with =
          Time(s2, 1, [&] { copy(s2, blocks, 2, rate); }) / 2;
      CHECK(cudaDeviceSynchronize());
      std::printf(
          "%s  {\"copy_blocks\": %d, \"copy_rate\": %.4g, "
          "\"gemm\": [%d, %d, %d], "
          "\"gemm_alone_s\": %.9g, \"gemm_with_copy_s\": %.9g, "
          "\"copy_alone_gbps\": %.6g, \"copy_with_gemm_gbps\": %.6g}",
          first ? "" : ",\n", blocks, rate, g.m, g.n, g.k, alone, with_copy,
          copied / copy_alone / 1e9, copied / copy_with / 1e9);
      first = false;
    }
    // The memory-bound kernel while the copy runs, and the other way round.
    const int reps = static_cast<int>(1.5 * 20 * add_alone / copy_alone) + 1;
    copy(s2, blocks, reps, rate);
    const double add_with = Time(s1, 20, [&] { add(s1); });
    CHECK(cudaDeviceSynchronize());
    const int adds = static_cast<int>(1.5 * 2 * copy_alone / add_alone) + 1;
    for (int i = 0; i < adds; ++i) add(s1);
    const double copy_with_add =
        Time(s2, 1, [&] { copy(s2, blocks, 2, rate); }) / 2;
    CHECK(cudaDeviceSynchronize());
    std::printf(
        ",\n  {\"copy_blocks\": %d, \"copy_rate\": %.4g, "
        "\"memory_kernel\": \"add_bf16\", "
        "\"add_alone_s\": %.9g, \"add_with_copy_s\": %.9g, "
        "\"copy_alone_gbps\": %.6g, \"copy_with_add_gbps\": %.6g}",
        blocks, rate, add_alone, add_with, copied / copy_alone / 1e9,
        copied / copy_with_add / 1e9);
  }
  std::printf("\n ]\n}\n");
  return 0;
}
