#include <cmath>

#include "kernels/isa.h"
#include "ops/ops.h"

namespace duet::cpu {

namespace {

size_t u(int64_t i) {
  return static_cast<size_t>(i);
}

template <class F>
void map_unary(const float* x, float* y, int64_t n, ThreadPool& pool, F f) {
  pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

void unary(const OpArgs& a, const float* x, float* y, int64_t n) {
  const kernels::Kernels& kt = kernels::active_kernels();
  const OpAttrs& at = a.op.attrs;
  switch (a.op.kind) {
    case OpKind::scale: {
      const float s = at.alpha;
      map_unary(x, y, n, a.pool, [s](float v) { return v * s; });
      break;
    }
    case OpKind::relu:
      map_unary(x, y, n, a.pool, [](float v) { return v > 0.0f ? v : 0.0f; });
      break;
    case OpKind::exp:
      a.pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { kt.exp(x + b, y + b, e - b); });
      break;
    case OpKind::silu:
      a.pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { kt.silu(x + b, y + b, e - b); });
      break;
    case OpKind::gelu:
    case OpKind::sigmoid:
    case OpKind::tanh:
    case OpKind::erf:
    case OpKind::sqrt: {
      auto* k = a.op.kind == OpKind::sigmoid         ? kt.sigmoid
                : a.op.kind == OpKind::tanh          ? kt.tanh
                : a.op.kind == OpKind::erf           ? kt.erf
                : a.op.kind == OpKind::sqrt          ? kt.sqrt
                : at.gelu_approx == GeluApprox::tanh ? kt.gelu_tanh
                                                     : kt.gelu_erf;
      a.pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { k(x + b, y + b, e - b); });
      break;
    }
    case OpKind::pow: {
      // The exponents models use as they are (a square, a root) without pow's log and exp.
      const float p = at.exponent;
      if (p == 0.5f)
        a.pool.parallel_for(n, 1 << 14,
                            [&](int64_t b, int64_t e) { kt.sqrt(x + b, y + b, e - b); });
      else if (p == 1.0f)
        map_unary(x, y, n, a.pool, [](float v) { return v; });
      else if (p == 2.0f)
        map_unary(x, y, n, a.pool, [](float v) { return v * v; });
      else if (p == 3.0f)
        map_unary(x, y, n, a.pool, [](float v) { return v * v * v; });
      else if (p == -1.0f)
        map_unary(x, y, n, a.pool, [](float v) { return 1.0f / v; });
      else
        map_unary(x, y, n, a.pool, [p](float v) { return std::pow(v, p); });
      break;
    }
    default:
      break;
  }
}

template <class F>
void map_binary(const OpArgs& a, const F32In& x, const F32In& z, float* y, F f) {
  const TensorDesc& out = a.op.output;
  const Dims sx = broadcast_strides(x.desc(), out), sz = broadcast_strides(z.desc(), out);
  const int r = out.rank;
  const int64_t inner = r ? out.dim(-1) : 1, rows = out.numel() / inner;
  const int64_t ix = r ? sx[u(r - 1)] : 0, iz = r ? sz[u(r - 1)] : 0;
  a.pool.parallel_for(rows, std::max<int64_t>(1, 4096 / inner), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t ox = 0, oz = 0, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        const int64_t i = rem % out.shape[u(d)];
        rem /= out.shape[u(d)];
        ox += i * sx[u(d)];
        oz += i * sz[u(d)];
      }
      const float* px = x.data() + ox;
      const float* pz = z.data() + oz;
      float* py = y + row * inner;
      if (ix == 1 && iz == 1) {
        for (int64_t i = 0; i < inner; ++i) py[i] = f(px[i], pz[i]);
      } else {
        for (int64_t i = 0; i < inner; ++i) py[i] = f(px[i * ix], pz[i * iz]);
      }
    }
  });
}

}  // namespace

Status elementwise(const OpArgs& a) {
  F32Out y(a.out);
  if (is_unary_elementwise(a.op.kind)) {
    F32In x(a.in[0], a.pool);
    unary(a, x.data(), y.data(), a.op.output.numel());
  } else {
    F32In x(a.in[0], a.pool), z(a.in[1], a.pool);
    switch (a.op.kind) {
      case OpKind::add:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p + q; });
        break;
      case OpKind::sub:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p - q; });
        break;
      case OpKind::mul:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p * q; });
        break;
      case OpKind::div:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p / q; });
        break;
      default:
        return Status(Code::internal, "cpu elementwise: not a binary op");
    }
  }
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
