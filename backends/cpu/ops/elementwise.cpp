#include <cmath>

#include "duet/eltwise.h"
#include "duet/internal/index.h"
#include "kernels/isa.h"
#include "ops/ops.h"

namespace duet::cpu {

namespace {

Status unknown(const OpArgs& a, uint32_t code) {
  return Err(Code::unsupported)
      .op(op_name(a.op.kind), a.op.name)
      .device(a.device)
      .note("no CPU kernel for element-wise function " + std::to_string(code) +
            " (duet/eltwise.h)");
}

template <class F>
void map_unary(const float* x, float* y, int64_t n, ThreadPool& pool, F f) {
  pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

// Each function of duet/eltwise.h; the vector kernels where there is one (kernels/kernels.h).
Status unary(const OpArgs& a, uint32_t code, const float* x, float* y, int64_t n) {
  const kernels::Kernels& kt = kernels::active_kernels();
  auto vector = [&](auto* k) {
    a.pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { k(x + b, y + b, e - b); });
  };
  switch (code) {
    case DUET_EW_SCALE: {
      const float s = eltwise_param(a.op);
      map_unary(x, y, n, a.pool, [s](float v) { return v * s; });
      return {};
    }
    case DUET_EW_RELU:
      map_unary(x, y, n, a.pool, [](float v) { return v > 0.0f ? v : 0.0f; });
      return {};
    case DUET_EW_EXP:
      vector(kt.exp);
      return {};
    case DUET_EW_SILU:
      vector(kt.silu);
      return {};
    case DUET_EW_GELU:
      vector(kt.gelu_erf);
      return {};
    case DUET_EW_GELU_TANH:
      vector(kt.gelu_tanh);
      return {};
    case DUET_EW_SIGMOID:
      vector(kt.sigmoid);
      return {};
    case DUET_EW_TANH:
      vector(kt.tanh);
      return {};
    case DUET_EW_ERF:
      vector(kt.erf);
      return {};
    case DUET_EW_SQRT:
      vector(kt.sqrt);
      return {};
    case DUET_EW_ABS:
      map_unary(x, y, n, a.pool, [](float v) { return std::fabs(v); });
      return {};
    case DUET_EW_LOG:
      map_unary(x, y, n, a.pool, [](float v) { return std::log(v); });
      return {};
    case DUET_EW_SIN:
      map_unary(x, y, n, a.pool, [](float v) { return std::sin(v); });
      return {};
    case DUET_EW_COS:
      map_unary(x, y, n, a.pool, [](float v) { return std::cos(v); });
      return {};
    case DUET_EW_TAN:
      map_unary(x, y, n, a.pool, [](float v) { return std::tan(v); });
      return {};
    case DUET_EW_ASIN:
      map_unary(x, y, n, a.pool, [](float v) { return std::asin(v); });
      return {};
    case DUET_EW_ACOS:
      map_unary(x, y, n, a.pool, [](float v) { return std::acos(v); });
      return {};
    case DUET_EW_ATAN:
      map_unary(x, y, n, a.pool, [](float v) { return std::atan(v); });
      return {};
    case DUET_EW_SINH:
      map_unary(x, y, n, a.pool, [](float v) { return std::sinh(v); });
      return {};
    case DUET_EW_COSH:
      map_unary(x, y, n, a.pool, [](float v) { return std::cosh(v); });
      return {};
    case DUET_EW_ASINH:
      map_unary(x, y, n, a.pool, [](float v) { return std::asinh(v); });
      return {};
    case DUET_EW_ACOSH:
      map_unary(x, y, n, a.pool, [](float v) { return std::acosh(v); });
      return {};
    case DUET_EW_ATANH:
      map_unary(x, y, n, a.pool, [](float v) { return std::atanh(v); });
      return {};
    case DUET_EW_POW: {
      // The exponents models use as they are (a square, a root) without pow's log and exp.
      const float p = eltwise_param(a.op);
      if (p == 0.5f)
        vector(kt.sqrt);
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
      return {};
    }
    default:
      return unknown(a, code);
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
  const std::optional<uint32_t> code = eltwise_code(a.op);
  if (!code) return unknown(a, DUET_EW_COUNT);
  F32Out y(a.out, a.scratch);
  if (*code >= DUET_EW_BINARY_END) {
    F32In x(a.in[0], a.pool, a.scratch);
    if (a.scratch.failed()) return {};
    DUET_TRY(unary(a, *code, x.data(), y.data(), a.op.output.numel()));
  } else {
    F32In x(a.in[0], a.pool, a.scratch), z(a.in[1], a.pool, a.scratch);
    if (a.scratch.failed()) return {};
    switch (*code) {
      case DUET_EW_ADD:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p + q; });
        break;
      case DUET_EW_SUB:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p - q; });
        break;
      case DUET_EW_MUL:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p * q; });
        break;
      case DUET_EW_DIV:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p / q; });
        break;
      case DUET_EW_LESS:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p < q ? 1.f : 0.f; });
        break;
      case DUET_EW_LESS_EQUAL:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p <= q ? 1.f : 0.f; });
        break;
      case DUET_EW_EQUAL:
        map_binary(a, x, z, y.data(), [](float p, float q) { return p == q ? 1.f : 0.f; });
        break;
      case DUET_EW_FMOD:
        map_binary(a, x, z, y.data(), [](float p, float q) { return std::fmod(p, q); });
        break;
      case DUET_EW_SILU_MUL: {
        // Without broadcasting: the vector silu, then the product, in place.
        const int64_t n = a.op.output.numel();
        if (x.desc().same_shape(a.op.output) && z.desc().same_shape(a.op.output) &&
            z.data() != y.data()) {
          DUET_TRY(unary(a, DUET_EW_SILU, x.data(), y.data(), n));
          float* py = y.data();
          const float* pz = z.data();
          a.pool.parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) py[i] *= pz[i];
          });
        } else {
          map_binary(a, x, z, y.data(),
                     [](float p, float q) { return p / (1.f + std::exp(-p)) * q; });
        }
        break;
      }
      default:
        return unknown(a, *code);
    }
  }
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
