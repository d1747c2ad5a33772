// duet_bench_cpu: the CPU backend's f32 matmul and attention beside OpenBLAS, in one run.
//
//   OPENBLAS_CORETYPE=SkylakeX build/tools/duet_bench_cpu --threads 2 --rounds 5
//
// (OpenBLAS 0.3.21 falls back to an SSE3 kernel on Sapphire Rapids unless OPENBLAS_CORETYPE
// names a core it knows.) Each round times duet (the median of a few runs) and then the
// OpenBLAS equivalent; the report gives, over the rounds, the median GFLOP/s of each and the
// median of the per-round ratio, so that a machine shared with other work still gives a fair
// comparison. GFLOP/s count useful work (op_flops: causal attention counts visible pairs only),
// for both sides.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "duet/backends.h"
#include "kernels/isa.h"
#include "thread_pool.h"

#ifdef DUET_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace duet {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One op on the CPU device with random inputs, ready to run.
struct Prepared {
  Device* dev = nullptr;
  OpDesc op;
  KernelChoice choice;
  std::vector<std::shared_ptr<Buffer>> bufs;
  std::vector<TensorRef> in;
  TensorRef out;

  double run() {
    const auto t0 = Clock::now();
    Status s = dev->execute(PlannedOp{op, choice}, in, out);
    if (s.ok()) s = dev->synchronize();
    if (!s.ok()) {
      std::fprintf(stderr, "duet_bench_cpu: %s\n", s.message().c_str());
      std::exit(1);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const float* input(size_t i) const { return static_cast<const float*>(in[i].buffer->host_ptr()); }
  float* output() const { return static_cast<float*>(out.buffer->host_ptr()); }
};

Prepared prepare(Device& dev, OpKind kind, OpAttrs attrs, std::vector<TensorDesc> inputs) {
  auto op = make_op(kind, std::move(attrs), std::move(inputs));
  if (!op.ok()) {
    std::fprintf(stderr, "duet_bench_cpu: %s\n", op.status().message().c_str());
    std::exit(1);
  }
  Prepared p;
  p.dev = &dev;
  p.op = *op;
  p.choice = *dev.supports(p.op, Precision::f32);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto alloc = [&](const TensorDesc& d, bool fill) {
    auto b = *dev.allocate(static_cast<uint64_t>(d.nbytes()));
    if (fill) {
      auto* f = static_cast<float*>(b->host_ptr());
      for (int64_t i = 0; i < d.numel(); ++i) f[i] = u(rng);
    }
    p.bufs.push_back(b);
    return TensorRef{d, b.get()};
  };
  for (const TensorDesc& d : p.op.inputs) p.in.push_back(alloc(d, true));
  p.out = alloc(p.op.output, false);
  return p;
}

#ifdef DUET_HAVE_OPENBLAS
void blas_matmul(const Prepared& p) {
  const auto M = static_cast<blasint>(p.op.output.dim(-2)),
             N = static_cast<blasint>(p.op.output.dim(-1));
  const auto K = static_cast<blasint>(p.op.inputs[0].dim(-1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, p.input(0), K, p.input(1),
              N, 0.0f, p.output(), N);
}

// Unfused attention as one would write it over OpenBLAS, in its fastest form here: the heads
// split over the threads, each head on one thread with single-threaded OpenBLAS calls
// (OpenBLAS's own threads would otherwise spin against the softmax): S = scale Q K^T (sgemm,
// all Lq x Lk scores), a row softmax with the causal mask (duet's vector exp), O = P V (sgemm),
// rows divided by their sums.
void blas_attention(const Prepared& p, cpu::ThreadPool& pool, int threads) {
  const TensorDesc& q = p.op.inputs[0];
  const int64_t B = q.dim(0), Hq = q.dim(1), Lq = q.dim(2), D = q.dim(3);
  const int64_t Hkv = p.op.inputs[1].dim(1), Lk = p.op.inputs[1].dim(2), group = Hq / Hkv;
  const float scale = attention_scale(p.op);
  const bool causal = p.op.attrs.causal;
  const cpu::kernels::Kernels& kt = cpu::kernels::active_kernels();
  openblas_set_num_threads(1);
  pool.parallel_for(B * Hq, 1, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> s, inv;
    s.resize(static_cast<size_t>(Lq * Lk));
    inv.resize(static_cast<size_t>(Lq));
    for (int64_t bh = h0; bh < h1; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq;
      const float* qh = p.input(0) + bh * Lq * D;
      const int64_t kv = (b * Hkv + h / group) * Lk * D;
      float* oh = p.output() + bh * Lq * D;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(Lq),
                  static_cast<blasint>(Lk), static_cast<blasint>(D), scale, qh,
                  static_cast<blasint>(D), p.input(1) + kv, static_cast<blasint>(D), 0.0f, s.data(),
                  static_cast<blasint>(Lk));
      for (int64_t i = 0; i < Lq; ++i) {
        float* row = s.data() + i * Lk;
        const int64_t n = causal ? std::clamp<int64_t>(i + Lk - Lq + 1, 0, Lk) : Lk;
        float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
        kt.softmax_row(row, n, &m, &l);
        std::fill(row + n, row + Lk, 0.0f);
        inv[static_cast<size_t>(i)] = l > 0.0f ? 1.0f / l : 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(Lq),
                  static_cast<blasint>(D), static_cast<blasint>(Lk), 1.0f, s.data(),
                  static_cast<blasint>(Lk), p.input(2) + kv, static_cast<blasint>(D), 0.0f, oh,
                  static_cast<blasint>(D));
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t d = 0; d < D; ++d) oh[i * D + d] *= inv[static_cast<size_t>(i)];
    }
  });
  openblas_set_num_threads(threads);
}
#endif

struct Row {
  std::string name;
  double duet_gflops = 0, ref_gflops = 0, ratio = 0, duet_ms = 0, ref_ms = 0;
};

template <class F>
std::vector<double> time_runs(int iters, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) t.push_back(f());
  return t;
}

}  // namespace
}  // namespace duet

int main(int argc, char** argv) {
  using namespace duet;
  CLI::App app{"CPU backend matmul and attention GFLOP/s beside OpenBLAS"};
  int threads = 2, rounds = 5;
  bool quick = false;
  app.add_option("--threads", threads, "Threads for duet and for OpenBLAS (default 2)");
  app.add_option("--rounds", rounds, "Rounds; medians are reported (default 5)");
  app.add_flag("--quick", quick, "Only the 1024 matmul and the prefill attention");
  CLI11_PARSE(app, argc, argv);

  BackendOptions opts;
  opts.values["cpu.threads"] = std::to_string(threads);
  Registry reg = open_registry(opts);
  Device* dev = reg.find("cpu:0");
  if (!dev) {
    std::fprintf(stderr, "duet_bench_cpu: no CPU device\n");
    return 1;
  }
  cpu::ThreadPool ref_pool(threads);
  std::string blas = "not built with OpenBLAS";
#ifdef DUET_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
  blas = std::string("OpenBLAS ") + openblas_get_config() + ", core " + openblas_get_corename();
  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  blas += std::string(" (OPENBLAS_CORETYPE=") + (ct ? ct : "unset") + ")";
#endif
  std::printf("machine: %s, %d threads\nduet: ISA %s\nreference: %s\n", dev->caps().name.c_str(),
              threads, std::string(cpu::kernels::isa_name(cpu::kernels::active_isa())).c_str(),
              blas.c_str());

  auto F = [](std::initializer_list<int64_t> s) { return TensorDesc::contiguous(DType::f32, s); };
  struct Case {
    std::string name;
    OpKind kind;
    OpAttrs attrs;
    std::vector<TensorDesc> in;
  };
  OpAttrs causal;
  causal.causal = true;
  std::vector<Case> cases = {
      {"matmul f32 1024x1024x1024", OpKind::matmul, {}, {F({1024, 1024}), F({1024, 1024})}},
      {"attention f32 B1 H16 L1024 D64 causal",
       OpKind::attention,
       causal,
       {F({1, 16, 1024, 64}), F({1, 16, 1024, 64}), F({1, 16, 1024, 64})}},
  };
  if (!quick) {
    cases.insert(
        cases.begin() + 1,
        Case{"matmul f32 2048x2048x2048", OpKind::matmul, {}, {F({2048, 2048}), F({2048, 2048})}});
    cases.push_back(
        {"matmul f32 4096x4096x64 (tall)", OpKind::matmul, {}, {F({4096, 64}), F({64, 4096})}});
    cases.push_back(
        {"matmul f32 1x4096x4096 (one row)", OpKind::matmul, {}, {F({1, 4096}), F({4096, 4096})}});
    cases.push_back({"attention f32 decode B1 Hq32 Hkv8 Lk4096 D128",
                     OpKind::attention,
                     {},
                     {F({1, 32, 1, 128}), F({1, 8, 4096, 128}), F({1, 8, 4096, 128})}});
  }

  std::vector<Row> rows;
  for (const Case& c : cases) {
    Prepared p = prepare(*dev, c.kind, c.attrs, c.in);
    const double flops = op_flops(p.op);
    const double first = p.run();
    const int iters = std::clamp(static_cast<int>(0.25 / std::max(first, 1e-6)), 3, 50);
    std::vector<double> dg, rg, ratio, dt, rt;
    for (int r = 0; r < rounds; ++r) {
      const double td = median(time_runs(iters, [&] { return p.run(); }));
      dt.push_back(td);
      dg.push_back(flops / td * 1e-9);
#ifdef DUET_HAVE_OPENBLAS
      // OpenBLAS threads keep spinning after a call (about 2^28 cycles, ~0.1 s) before they
      // sleep; pause so that neither side runs against the other's spinning threads.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const double tr = median(time_runs(iters, [&] {
        const auto t0 = Clock::now();
        if (c.kind == OpKind::matmul)
          blas_matmul(p);
        else
          blas_attention(p, ref_pool, threads);
        return std::chrono::duration<double>(Clock::now() - t0).count();
      }));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      rt.push_back(tr);
      rg.push_back(flops / tr * 1e-9);
      ratio.push_back(tr / td);
#endif
    }
    Row row{c.name,
            median(dg),
            rg.empty() ? 0 : median(rg),
            ratio.empty() ? 0 : median(ratio),
            median(dt) * 1e3,
            rt.empty() ? 0 : median(rt) * 1e3};
    std::printf("%-48s duet %7.1f GFLOP/s %8.2f ms | OpenBLAS %7.1f GFLOP/s %8.2f ms | %5.1f%%\n",
                row.name.c_str(), row.duet_gflops, row.duet_ms, row.ref_gflops, row.ref_ms,
                100.0 * row.ratio);
    std::fflush(stdout);
    rows.push_back(row);
  }
  return 0;
}
