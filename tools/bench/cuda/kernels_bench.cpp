// duet_kernels_bench: attention and matmul (float and block-quantized weights) TFLOP/s of every
// kernel tier the selection offers on each CUDA device, with each fast tier's output checked
// against the generic tier's on the same GPU. Prints why it skipped when there is no GPU.
//
//   build/tools/duet_kernels_bench [--quick]
//
// The devices and their capability records are the CUDA backend's, opened through the registry
// as every program opens them; the kernels are launched directly (duet/kernels/launch.h) on
// memory of the CUDA runtime, so that only the kernels are timed.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "duet/backends.h"
#include "duet/half.h"
#include "duet/kernels/arch.h"
#include "duet/kernels/launch.h"
#include "duet/kernels/select.h"
#include "duet/quantize.h"

namespace duet {
namespace {

// The CUDA backend alone, without cuBLASLt (the bench times the kernels of kernels/ only).
Registry open_cuda() {
  std::vector<BackendFactory> cuda;
  for (BackendFactory& f : builtin_backends())
    if (f.name == "cuda") cuda.push_back(std::move(f));
  BackendOptions o;
  o.values["cuda.cublas"] = "off";
  return Registry::open(cuda, o);
}

// The CUDA runtime's number of a device the registry calls "cuda:N".
int ordinal(const Device& d) {
  return std::stoi(d.id().substr(d.id().find(':') + 1));
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("  %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

struct DeviceTensor {
  void* p = nullptr;
  uint64_t bytes = 0;
  ~DeviceTensor() {
    if (p) cudaFree(p);
  }
};

bool upload_random(DeviceTensor& t, const TensorDesc& d, uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(d.numel()));
  for (float& x : v) x = u(rng);
  t.bytes = static_cast<uint64_t>(d.nbytes());
  std::vector<unsigned char> host(t.bytes);
  if (is_quantized(d.dtype)) {
    if (!quantize(d.dtype, v.data(), host.data(), d.numel()).ok()) return false;
  } else {
    convert(v.data(), DType::f32, host.data(), d.dtype, d.numel());
  }
  return check(cudaMalloc(&t.p, t.bytes), "cudaMalloc") &&
         check(cudaMemcpy(t.p, host.data(), t.bytes, cudaMemcpyHostToDevice), "upload");
}

std::vector<double> download(const DeviceTensor& t, const TensorDesc& d) {
  std::vector<unsigned char> host(t.bytes);
  cudaMemcpy(host.data(), t.p, t.bytes, cudaMemcpyDeviceToHost);
  std::vector<double> v(static_cast<size_t>(d.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = load_as_double(host.data(), d.dtype, static_cast<int64_t>(i));
  return v;
}

struct Result {
  double ms = 0;
  std::vector<double> out;
  bool ok = false;
};

Result time_choice(const DeviceCaps& caps, const OpDesc& op, const KernelChoice& k, int reps) {
  Result r;
  const Tier tier = k.tier;
  std::vector<DeviceTensor> in(op.inputs.size());
  std::vector<kernels::View> views;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!upload_random(in[i], op.inputs[i], 17 + i)) return r;
    views.push_back(kernels::make_view(op.inputs[i], in[i].p));
  }
  DeviceTensor out, ws;
  out.bytes = static_cast<uint64_t>(op.output.nbytes());
  if (!check(cudaMalloc(&out.p, out.bytes), "cudaMalloc")) return r;
  const uint64_t wsb = kernels::workspace_bytes(tier, op, k.launch);
  if (wsb && !check(cudaMalloc(&ws.p, wsb), "cudaMalloc workspace")) return r;
  kernels::Launch l;
  l.config = k.launch;
  l.workspace = ws.p;
  l.sm = kernels::arch_features(caps).sm;
  const kernels::View ov = kernels::make_view(op.output, out.p);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 2; ++i) {
    Status s = kernels::gpu::launch(tier, op, views, ov, l);
    if (!s.ok()) {
      std::printf("  %s: %s\n", std::string(tier_name(k.tier)).c_str(), s.message().c_str());
      return r;
    }
  }
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) (void)kernels::gpu::launch(tier, op, views, ov, l);
  cudaEventRecord(b);
  if (!check(cudaEventSynchronize(b), "run")) return r;
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  r.ms = ms / reps;
  r.out = download(out, op.output);
  r.ok = true;
  return r;
}

double nmse(const std::vector<double>& got, const std::vector<double>& want) {
  double e = 0, w = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    w += want[i] * want[i];
  }
  return w > 0 ? e / w : e;
}

void bench(const DeviceCaps& caps, const std::string& label, const OpDesc& op, int reps) {
  const auto cs = kernels::choices(caps, op);
  Result ref;  // the generic tier's output
  for (const KernelChoice& k : cs)
    if (k.ok && k.tier == Tier::generic) ref = time_choice(caps, op, k, 1);
  for (const KernelChoice& k : cs) {
    bool same_dtypes = true;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      same_dtypes = same_dtypes && k.input_dtypes[i] == op.inputs[i].dtype;
    if (!same_dtypes) continue;
    if (!k.ok) {
      std::printf("%-44s %-8s %-5s refused: %s\n", label.c_str(),
                  std::string(tier_name(k.tier)).c_str(),
                  std::string(precision_name(k.precision)).c_str(), k.reason.c_str());
      continue;
    }
    const Result r =
        time_choice(caps, op, k, k.tier == Tier::generic ? std::max(1, reps / 10) : reps);
    if (!r.ok) continue;
    std::printf("%-44s %-8s %-5s %9.3f ms %8.2f TFLOP/s", label.c_str(),
                std::string(tier_name(k.tier)).c_str(),
                std::string(precision_name(k.precision)).c_str(), r.ms,
                op_flops(op) / (r.ms * 1e-3) / 1e12);
    if (ref.ok && k.tier != Tier::generic)
      std::printf("  nmse vs generic %.2g", nmse(r.out, ref.out));
    std::printf("  [%s]\n", k.launch.str().c_str());
  }
}

OpDesc attention(DType t, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D,
                 bool causal) {
  OpAttrs a;
  a.causal = causal;
  return *make_op(
      OpKind::attention, a,
      {TensorDesc::contiguous(t, {B, Hq, Lq, D}), TensorDesc::contiguous(t, {B, Hkv, Lk, D}),
       TensorDesc::contiguous(t, {B, Hkv, Lk, D})});
}

OpDesc matmul(DType t, int64_t M, int64_t N, int64_t K, bool tb) {
  OpAttrs a;
  a.transpose_b = tb;
  return *make_op(OpKind::matmul, a,
                  {TensorDesc::contiguous(t, {M, K}),
                   tb ? TensorDesc::contiguous(t, {N, K}) : TensorDesc::contiguous(t, {K, N})});
}

}  // namespace
}  // namespace duet

int main(int argc, char** argv) {
  using namespace duet;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const Registry registry = open_cuda();
  // The reason `duet devices` gives for an unavailable CUDA backend.
  for (const BackendReport& r : registry.backends())
    if (!r.available) {
      std::printf("duet_kernels_bench: skipped: cuda unavailable: %s\n", r.reason.c_str());
      return 0;
    }
  std::printf("kernels built for %s\n", kernels::this_build().str().c_str());
  const int reps = quick ? 5 : 20;
  for (const Device* device : registry.devices()) {
    const int d = ordinal(*device);
    if (cudaSetDevice(d) != cudaSuccess) return 1;
    const DeviceCaps& caps = device->caps();
    std::printf("\ndevice %d: %s (%s, %d SMs, %llu KiB shared per block opt-in)\n", d,
                caps.name.c_str(), caps.arch.c_str(), caps.compute_units,
                static_cast<unsigned long long>(caps.shared_mem_per_block_optin / 1024));
    for (DType t : {DType::f16, DType::bf16}) {
      const std::string ts = std::string(dtype_name(t));
      const int64_t L = quick ? 1024 : 4096;
      bench(caps, "attention " + ts + " B1 H32 L" + std::to_string(L) + " D128",
            attention(t, 1, 32, 32, L, L, 128, false), reps);
      bench(caps, "attention " + ts + " B1 H32 L" + std::to_string(L) + " D128 causal",
            attention(t, 1, 32, 32, L, L, 128, true), reps);
      bench(caps, "attention " + ts + " B4 H16 L2048 D64 causal",
            attention(t, 4, 16, 16, 2048, 2048, 64, true), reps);
      bench(caps, "attention " + ts + " decode Hq32 Hkv8 Lk8192 D128",
            attention(t, 1, 32, 8, 1, 8192, 128, false), reps);
      const int64_t S = quick ? 2048 : 4096;
      bench(caps, "matmul " + ts + " " + std::to_string(S) + "^3", matmul(t, S, S, S, false), reps);
      bench(caps, "matmul " + ts + " " + std::to_string(S) + "^3 (B transposed)",
            matmul(t, S, S, S, true), reps);
      bench(caps, "matmul " + ts + " 16x4096x4096 (decode)", matmul(t, 16, 4096, 4096, true), reps);
    }
    // Block-quantized weights (f16 activations, [N, K] weights): decode (1 and 8 rows) and
    // prefill (512 rows), on every tier that reads the format.
    for (DType q : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k, DType::q4_z}) {
      const std::string qs(dtype_name(q));
      for (int64_t M : {int64_t{1}, int64_t{8}, int64_t{512}}) {
        OpAttrs a;
        a.transpose_b = true;
        const OpDesc op = *make_op(OpKind::matmul, a,
                                   {TensorDesc::contiguous(DType::f16, {M, 4096}),
                                    TensorDesc::contiguous(q, {4096, 4096})});
        bench(caps, "matmul " + qs + " " + std::to_string(M) + "x4096x4096", op, reps);
      }
    }
  }
  return 0;
}
