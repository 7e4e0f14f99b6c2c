// GPU check of the cuDNN fused attention (hw/cuda/cudnn_sdpa.h): forward
// and backward on small shapes against a host fp32 reference computed from
// the same bf16 inputs, then the time of one forward and one backward at a
// training shape. Exit 0: every output within tolerance; 1: a mismatch or
// an error; 77: no GPU visible (ctest counts it as skipped).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "hw/cuda/cudnn_sdpa.h"

namespace {

using shardsim::hw::CudnnSdpa;
using shardsim::hw::SdpaShape;

// bf16 outputs hold ~8 mantissa bits and dQ/dK/dV go through bf16 P and dS
// in the fused kernels: errors are judged against the output's scale.
constexpr double kTolerance = 2e-2;

#define CHECK_CUDA(call)                                             \
  do {                                                               \
    cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                         \
      std::fprintf(stderr, "sdpa_gpu_check: %s failed: %s\n", #call, \
                   cudaGetErrorString(e_));                          \
      return false;                                                  \
    }                                                                \
  } while (0)

#define CHECK_OK(expr)                                                     \
  do {                                                                     \
    absl::Status s_ = (expr);                                              \
    if (!s_.ok()) {                                                        \
      std::fprintf(stderr, "sdpa_gpu_check: %s\n", s_.ToString().c_str()); \
      return false;                                                        \
    }                                                                      \
  } while (0)

uint16_t ToBf16(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float FromBf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
};

// Random bf16 values, N(0, 1): scores of std ~1 after the 1/sqrt(d) scale.
std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = ToBf16(dist(rng));
  return out;
}

std::vector<float> ToFloat(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromBf16(v[i]);
  return out;
}

struct Reference {
  std::vector<float> o, stats, dq, dk, dv;
};

// Naive attention in fp32 (double sums), BSHD layout, one thread per
// (batch, kv head) so the GQA sums over a group's heads need no locks.
Reference Attention(const SdpaShape& sh, const std::vector<float>& q,
                    const std::vector<float>& k, const std::vector<float>& v,
                    const std::vector<float>& d_o) {
  const int64_t b_n = sh.batch, h_n = sh.heads, hk_n = sh.kv_heads,
                s_n = sh.seq, d_n = sh.head_dim, group = h_n / hk_n;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_n));
  auto qi = [&](int64_t b, int64_t s, int64_t h) {
    return ((b * s_n + s) * h_n + h) * d_n;
  };
  auto ki = [&](int64_t b, int64_t s, int64_t h) {
    return ((b * s_n + s) * hk_n + h) * d_n;
  };
  Reference r;
  r.o.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  r.stats.assign(b_n * h_n * s_n, 0);

  auto work = [&](int64_t b, int64_t hk) {
    std::vector<double> p(s_n * s_n), dp(s_n), dk(s_n * d_n), dv(s_n * d_n);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      std::fill(p.begin(), p.end(), 0.0);
      for (int64_t i = 0; i < s_n; ++i) {
        const int64_t last = sh.causal ? i : s_n - 1;
        double* row = &p[i * s_n];
        double m = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < d_n; ++d) {
            dot += double(q[qi(b, i, h) + d]) * k[ki(b, j, hk) + d];
          }
          row[j] = dot * scale;
          m = std::max(m, row[j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= last; ++j) z += std::exp(row[j] - m);
        r.stats[(b * h_n + h) * s_n + i] = static_cast<float>(m + std::log(z));
        for (int64_t j = 0; j <= last; ++j) row[j] = std::exp(row[j] - m) / z;
        for (int64_t d = 0; d < d_n; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j) {
            acc += row[j] * v[ki(b, j, hk) + d];
          }
          r.o[qi(b, i, h) + d] = static_cast<float>(acc);
        }
      }
      // Backward: D_i = dO_i . O_i; dS = P (dP - D); dQ = scale dS K,
      // dK = scale dS^T Q, dV = P^T dO.
      for (int64_t i = 0; i < s_n; ++i) {
        const int64_t last = sh.causal ? i : s_n - 1;
        const double* row = &p[i * s_n];
        double big_d = 0;
        for (int64_t d = 0; d < d_n; ++d) {
          big_d += double(d_o[qi(b, i, h) + d]) * r.o[qi(b, i, h) + d];
        }
        for (int64_t j = 0; j <= last; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < d_n; ++d) {
            dot += double(d_o[qi(b, i, h) + d]) * v[ki(b, j, hk) + d];
          }
          dp[j] = row[j] * (dot - big_d) * scale;  // scaled dS
        }
        for (int64_t d = 0; d < d_n; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j)
            acc += dp[j] * k[ki(b, j, hk) + d];
          r.dq[qi(b, i, h) + d] = static_cast<float>(acc);
        }
        for (int64_t j = 0; j <= last; ++j) {
          for (int64_t d = 0; d < d_n; ++d) {
            dk[j * d_n + d] += dp[j] * q[qi(b, i, h) + d];
            dv[j * d_n + d] += row[j] * d_o[qi(b, i, h) + d];
          }
        }
      }
    }
    for (int64_t j = 0; j < s_n; ++j) {
      for (int64_t d = 0; d < d_n; ++d) {
        r.dk[ki(b, j, hk) + d] = static_cast<float>(dk[j * d_n + d]);
        r.dv[ki(b, j, hk) + d] = static_cast<float>(dv[j * d_n + d]);
      }
    }
  };

  std::vector<std::thread> threads;
  const int64_t jobs = b_n * hk_n;
  const int64_t n_threads = std::min<int64_t>(
      jobs, std::max(1u, std::thread::hardware_concurrency()));
  for (int64_t t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t job = t; job < jobs; job += n_threads) {
        work(job / hk_n, job % hk_n);
      }
    });
  }
  for (auto& t : threads) t.join();
  return r;
}

// Max |gpu - ref| over max |ref|: one number per output, robust to the
// many near-zero elements a relative-per-element error would blow up.
bool Compare(const char* name, const std::vector<float>& gpu,
             const std::vector<float>& ref) {
  double max_err = 0, max_ref = 0;
  bool finite = true;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(gpu[i])) finite = false;
    max_err = std::max(max_err, std::fabs(double(gpu[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(double(ref[i])));
  }
  const double rel = max_ref > 0 ? max_err / max_ref : max_err;
  const bool ok = finite && rel <= kTolerance;
  std::printf("  %-5s max abs err %.3e  max |ref| %.3e  rel %.3e  %s\n", name,
              max_err, max_ref, rel,
              ok ? "ok" : (finite ? "FAIL" : "FAIL (not finite)"));
  return ok;
}

bool Check(CudnnSdpa& sdpa, const SdpaShape& sh, cudaStream_t stream) {
  std::printf("%s\n", sh.ToString().c_str());
  const size_t nq = sh.batch * sh.seq * sh.heads * sh.head_dim;
  const size_t nk = sh.batch * sh.seq * sh.kv_heads * sh.head_dim;
  const size_t ns = sh.batch * sh.heads * sh.seq;
  const auto q = RandomBf16(nq, 1), k = RandomBf16(nk, 2),
             v = RandomBf16(nk, 3), d_o = RandomBf16(nq, 4);

  DeviceBuffer dq_in, dk_in, dv_in, ddo, dout, dstats, ddq, ddk, ddv;
  for (auto [buf, bytes] : {std::pair{&dq_in, nq * 2},
                            {&dk_in, nk * 2},
                            {&dv_in, nk * 2},
                            {&ddo, nq * 2},
                            {&dout, nq * 2},
                            {&dstats, ns * 4},
                            {&ddq, nq * 2},
                            {&ddk, nk * 2},
                            {&ddv, nk * 2}}) {
    CHECK_CUDA(cudaMalloc(&buf->p, bytes));
    // NaN poison: an output the graph fails to write is caught.
    CHECK_CUDA(cudaMemset(buf->p, 0xff, bytes));
  }
  CHECK_CUDA(cudaMemcpy(dq_in.p, q.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk_in.p, k.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv_in.p, v.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(ddo.p, d_o.data(), nq * 2, cudaMemcpyHostToDevice));

  float* stats = static_cast<float*>(dstats.p);
  CHECK_OK(sdpa.Forward(sh, dq_in.p, dk_in.p, dv_in.p, dout.p, stats, stream));
  CHECK_OK(sdpa.Backward(sh, dq_in.p, dk_in.p, dv_in.p, dout.p, ddo.p, stats,
                         ddq.p, ddk.p, ddv.p, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::printf("  engines: forward %lld, backward %lld; workspace %lld bytes\n",
              static_cast<long long>(sdpa.engine_id(sh, false)),
              static_cast<long long>(sdpa.engine_id(sh, true)),
              static_cast<long long>(sdpa.workspace_bytes()));

  auto fetch_bf16 = [](const DeviceBuffer& b, size_t n,
                       std::vector<float>& out) {
    std::vector<uint16_t> raw(n);
    if (cudaMemcpy(raw.data(), b.p, n * 2, cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
      return false;
    }
    out = ToFloat(raw);
    return true;
  };
  std::vector<float> o, gq, gk, gv, gstats(ns);
  if (!fetch_bf16(dout, nq, o) || !fetch_bf16(ddq, nq, gq) ||
      !fetch_bf16(ddk, nk, gk) || !fetch_bf16(ddv, nk, gv)) {
    std::fprintf(stderr, "sdpa_gpu_check: copying outputs back failed\n");
    return false;
  }
  CHECK_CUDA(
      cudaMemcpy(gstats.data(), dstats.p, ns * 4, cudaMemcpyDeviceToHost));

  const Reference ref =
      Attention(sh, ToFloat(q), ToFloat(k), ToFloat(v), ToFloat(d_o));
  bool ok = Compare("O", o, ref.o);
  ok &= Compare("stats", gstats, ref.stats);
  ok &= Compare("dQ", gq, ref.dq);
  ok &= Compare("dK", gk, ref.dk);
  ok &= Compare("dV", gv, ref.dv);
  return ok;
}

// Mean microseconds of `iters` calls after `warmup`, timed with events.
template <typename F>
bool TimeUs(F&& call, int warmup, int iters, cudaStream_t stream, double* us) {
  for (int i = 0; i < warmup; ++i) CHECK_OK(call());
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) CHECK_OK(call());
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *us = 1000.0 * ms / iters;
  return true;
}

bool Time(CudnnSdpa& sdpa, const SdpaShape& sh, cudaStream_t stream) {
  const size_t nq = sh.batch * sh.seq * sh.heads * sh.head_dim;
  const size_t nk = sh.batch * sh.seq * sh.kv_heads * sh.head_dim;
  const size_t ns = sh.batch * sh.heads * sh.seq;
  DeviceBuffer q, k, v, o, d_o, stats, dq, dk, dv;
  for (auto [buf, bytes] : {std::pair{&q, nq * 2},
                            {&k, nk * 2},
                            {&v, nk * 2},
                            {&o, nq * 2},
                            {&d_o, nq * 2},
                            {&stats, ns * 4},
                            {&dq, nq * 2},
                            {&dk, nk * 2},
                            {&dv, nk * 2}}) {
    CHECK_CUDA(cudaMalloc(&buf->p, bytes));
  }
  // Real values (not zeros): softmax and exp cost the same, but keep the
  // run representative and finite.
  for (auto [buf, n, seed] : {std::tuple{&q, nq, 11u},
                              {&k, nk, 12u},
                              {&v, nk, 13u},
                              {&d_o, nq, 14u}}) {
    const auto host = RandomBf16(n, seed);
    CHECK_CUDA(cudaMemcpy(buf->p, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
  float* st = static_cast<float*>(stats.p);
  double fwd_us = 0, bwd_us = 0;
  if (!TimeUs([&] { return sdpa.Forward(sh, q.p, k.p, v.p, o.p, st, stream); },
              10, 50, stream, &fwd_us) ||
      !TimeUs(
          [&] {
            return sdpa.Backward(sh, q.p, k.p, v.p, o.p, d_o.p, st, dq.p, dk.p,
                                 dv.p, stream);
          },
          10, 50, stream, &bwd_us)) {
    return false;
  }
  // Matmul FLOPs: forward 2 (QK^T, PV), backward 5 (QK^T again, dP, dV,
  // dQ, dK) of 2 b h s^2 d each; a causal mask halves the work.
  const double mm = 2.0 * sh.batch * sh.heads * double(sh.seq) * sh.seq *
                    sh.head_dim * (sh.causal ? 0.5 : 1.0);
  std::printf("timing %s (10 warmup, 50 iterations)\n", sh.ToString().c_str());
  std::printf("  forward  %9.1f us  %6.1f TFLOP/s  (engine %lld)\n", fwd_us,
              2 * mm / fwd_us * 1e-6,
              static_cast<long long>(sdpa.engine_id(sh, false)));
  std::printf("  backward %9.1f us  %6.1f TFLOP/s  (engine %lld)\n", bwd_us,
              5 * mm / bwd_us * 1e-6,
              static_cast<long long>(sdpa.engine_id(sh, true)));
  std::printf("  workspace %lld bytes\n",
              static_cast<long long>(sdpa.workspace_bytes()));
  return true;
}

int Run() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("sdpa_gpu_check: no GPU visible: skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("GPU %s (sm_%d%d), cuDNN %zu (built with %d)\n", prop.name,
                prop.major, prop.minor, cudnnGetVersion(), CUDNN_VERSION);
  }
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::fprintf(stderr, "sdpa_gpu_check: cudaStreamCreate failed\n");
    return 1;
  }
  auto sdpa = CudnnSdpa::Create(stream);
  if (!sdpa.ok()) {
    std::fprintf(stderr, "sdpa_gpu_check: %s\n",
                 sdpa.status().ToString().c_str());
    return 1;
  }
  // b, h, kv_h, s, d, causal. The GQA shape checks the head-group sums of
  // dK and dV; s=200 a sequence that is not a multiple of the tiles.
  const SdpaShape checked[] = {
      {2, 4, 4, 128, 64, true},    {2, 4, 4, 128, 64, false},
      {1, 32, 32, 512, 128, true}, {2, 8, 2, 128, 64, true},
      {1, 2, 2, 200, 64, true},
  };
  bool ok = true;
  for (const SdpaShape& sh : checked) ok &= Check(**sdpa, sh, stream);
  ok &= Time(**sdpa, {10, 32, 32, 512, 128, true}, stream);
  std::printf("%s\n", ok ? "sdpa_gpu_check: ok" : "sdpa_gpu_check: FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main() { return Run(); }
