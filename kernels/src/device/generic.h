// The generic tier: SIMT kernels for every op of v1, compiled for every architecture. They read
// any storage dtype (f32/f16/bf16, and integers where the op takes them) through strided views,
// compute in fp32 and round once to the output dtype, so every op runs on every CUDA device, and
// the fast tiers have a reference on the GPU itself. Also the split-KV combine and small helpers.
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "device/prim.h"
#include "device/q8_block.h"

DUET_DEV_BEGIN

inline constexpr float kGenInf = __builtin_huge_valf();

// Reductions over the whole block; `red` is nwarps() floats of shared memory. Every thread gets
// the result.
DUET_DEV float block_sum(float v, float* red) {
  v = warp_sum(v);
  if (lane() == 0) red[warp()] = v;
  sync();
  float t = 0.f;
  for (int i = 0; i < nwarps(); ++i) t += red[i];
  sync();
  return t;
}
DUET_DEV float block_max(float v, float* red) {
  v = warp_max(v);
  if (lane() == 0) red[warp()] = v;
  sync();
  float t = -kGenInf;
  for (int i = 0; i < nwarps(); ++i) t = fmaxf(t, red[i]);
  sync();
  return t;
}

DUET_DEV int64_t grid_tid() {
  return int64_t(bid_x()) * nthreads() + tid();
}
DUET_DEV int64_t grid_threads() {
  return int64_t(nbid_x()) * nthreads();
}

DUET_DEV float eltwise_apply(uint32_t op, float x, float y, float alpha) {
  switch (op) {
    case DUET_EW_ADD:
      return x + y;
    case DUET_EW_SUB:
      return x - y;
    case DUET_EW_MUL:
      return x * y;
    case DUET_EW_DIV:
      return x / y;
    case DUET_EW_SILU_MUL:
      return x / (1.f + expf(-x)) * y;
    case DUET_EW_LESS:
      return x < y ? 1.f : 0.f;
    case DUET_EW_LESS_EQUAL:
      return x <= y ? 1.f : 0.f;
    case DUET_EW_EQUAL:
      return x == y ? 1.f : 0.f;
    case DUET_EW_FMOD:
      return fmodf(x, y);
    case DUET_EW_SCALE:
      return x * alpha;
    case DUET_EW_SILU:
      return x / (1.f + expf(-x));
    // Both forms without the cancellation of 1 + erf / 1 + tanh for negative x.
    case DUET_EW_GELU:
      return 0.5f * x * erfcf(x * -0.70710678118654752f);
    case DUET_EW_GELU_TANH:
      return x / (1.f + expf(-1.5957691216057307f * (x + 0.044715f * x * x * x)));
    case DUET_EW_RELU:
      return x > 0.f ? x : 0.f;
    case DUET_EW_EXP:
      return expf(x);
    case DUET_EW_SIGMOID:
      return 1.f / (1.f + expf(-x));
    case DUET_EW_TANH:
      return tanhf(x);
    case DUET_EW_ERF:
      return erff(x);
    case DUET_EW_SQRT:
      return sqrtf(x);
    case DUET_EW_POW:
      return alpha == 2.f ? x * x : alpha == 0.5f ? sqrtf(x) : powf(x, alpha);
    case DUET_EW_ABS:
      return fabsf(x);
    case DUET_EW_LOG:
      return logf(x);
    case DUET_EW_SIN:
      return sinf(x);
    case DUET_EW_COS:
      return cosf(x);
    case DUET_EW_TAN:
      return tanf(x);
    case DUET_EW_ASIN:
      return asinf(x);
    case DUET_EW_ACOS:
      return acosf(x);
    case DUET_EW_ATAN:
      return atanf(x);
    case DUET_EW_SINH:
      return sinhf(x);
    case DUET_EW_COSH:
      return coshf(x);
    case DUET_EW_ASINH:
      return asinhf(x);
    case DUET_EW_ACOSH:
      return acoshf(x);
    case DUET_EW_ATANH:
      return atanhf(x);
  }
  return __builtin_nanf("");  // never another function (the host refuses unknown codes)
}

DUET_KERNEL eltwise_kernel(const EltwiseParams p) {
  grid_dependency_sync();
  const bool binary = p.op < DUET_EW_BINARY_END;
  const bool da = dense_in(p.a, p.shape), db = binary && dense_in(p.b, p.shape);
  for (int64_t i = grid_tid(); i < p.n; i += grid_threads()) {
    const float x = load_f32(p.a.data, p.a.dtype, da ? i : offset_of(p.a, p.shape, i));
    const float y =
        binary ? load_f32(p.b.data, p.b.dtype, db ? i : offset_of(p.b, p.shape, i)) : 0.f;
    store_f32(p.out, p.out_dtype, i, eltwise_apply(p.op, x, y, p.alpha));
  }
}

// eltwise_kernel with its output also quantized for the int_dot mat-vecs reading it
// (EltwiseParams::q8; launch.h, fuses_eltwise: a dense f32 output, n and the block's threads
// multiples of 32): the same arithmetic (the same bits), and each warp's 32 values, one block,
// quantized as q8_act_kernel would. A kernel of its own, so that eltwise_kernel keeps its
// registers.
DUET_KERNEL eltwise_q8_kernel(const EltwiseParams p) {
  grid_dependency_sync();
  const bool binary = p.op < DUET_EW_BINARY_END;
  const bool da = dense_in(p.a, p.shape), db = binary && dense_in(p.b, p.shape);
  for (int64_t i = grid_tid(); i < p.n; i += grid_threads()) {  // the whole warp, n % 32 == 0
    const float x = load_f32(p.a.data, p.a.dtype, da ? i : offset_of(p.a, p.shape, i));
    const float y =
        binary ? load_f32(p.b.data, p.b.dtype, db ? i : offset_of(p.b, p.shape, i)) : 0.f;
    const float v = eltwise_apply(p.op, x, y, p.alpha);
    static_cast<float*>(p.out)[i] = v;
    q8_block_store(v, p.q8[i / 32]);
  }
}

DUET_KERNEL copy_kernel(const CopyParams p) {
  grid_dependency_sync();
  const int bytes = elt_bytes(p.x.dtype);
  const bool dx = dense_in(p.x, p.shape), dout = dense_in(p.out, p.shape);
  const auto* s = static_cast<const uint8_t*>(p.x.data);
  auto* d = static_cast<uint8_t*>(p.out.data);
  if (p.raw && dx && dout &&
      (reinterpret_cast<uintptr_t>(s) | reinterpret_cast<uintptr_t>(d)) % 16 == 0) {
    // Both dense and 16-byte aligned: the bytes in 16-byte pieces, the last few one a thread.
    const int64_t nb = p.n * bytes, n16 = nb / 16;
    for (int64_t i = grid_tid(); i < n16; i += grid_threads())
      store16(d + 16 * i, load16(s + 16 * i));
    for (int64_t i = 16 * n16 + grid_tid(); i < nb; i += grid_threads()) d[i] = s[i];
    return;
  }
  for (int64_t i = grid_tid(); i < p.n; i += grid_threads()) {
    const int64_t si = dx ? i : offset_of(p.x, p.shape, i),
                  di = dout ? i : offset_of(p.out, p.shape, i);
    if (p.raw)
      copy_elem(p.out.data, di, p.x.data, si, bytes);
    else
      store_f64(p.out.data, p.out.dtype, di, load_f64(p.x.data, p.x.dtype, si));
  }
}

DUET_DEV bool float_elt(Elt t) {
  return t == Elt::f32 || t == Elt::f16 || t == Elt::bf16;
}
// Element i of a float tensor (f32, f16, bf16) as its bits, then as a float: the loads of a row
// are issued without a branch on the dtype between them, and the conversions come after.
DUET_DEV uint32_t float_bits(const void* p, Elt t, int64_t i) {
  return t == Elt::f32 ? static_cast<const uint32_t*>(p)[i] : static_cast<const uint16_t*>(p)[i];
}
DUET_DEV float bits_value(uint32_t b, Elt t) {
  return t == Elt::f32   ? ffrom(b)
         : t == Elt::f16 ? h2f(static_cast<uint16_t>(b))
                         : b2f(static_cast<uint16_t>(b));
}

// Softmax, rmsnorm or layernorm of row r, read once into registers (element tid + k * nthreads
// in v[k]): a dense row of float storage of at most kRowRegs * nthreads elements. Every load of a
// thread is issued before the first reduction waits on them (a 4096-wide decode row was a chain
// of dependent loads through the dtype switch before).
DUET_DEV void row_in_registers(const RowParams& p, int64_t r, float* red) {
  const int64_t n = p.n, xb = offset_of(p.x, p.x.shape, r * n);
  const int t = tid(), nt = nthreads();
  const bool softmax = p.op == RowOp::softmax, has_w = !softmax && p.w.data;
  uint32_t xv[kRowRegs], wv[kRowRegs];
  DUET_UNROLL
  for (int k = 0; k < kRowRegs; ++k) {
    const int64_t j = t + int64_t(k) * nt;
    xv[k] = j < n ? float_bits(p.x.data, p.x.dtype, xb + j) : 0u;
    wv[k] = has_w && j < n ? float_bits(p.w.data, p.w.dtype, j * p.w.stride[3]) : 0u;
  }
  float v[kRowRegs];
  DUET_UNROLL
  for (int k = 0; k < kRowRegs; ++k) v[k] = bits_value(xv[k], p.x.dtype);  // 0 past the end
  if (softmax) {
    const int64_t mb = p.mask.data ? offset_of(p.mask, p.x.shape, r * n) : 0;
    float mx = -kGenInf;
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      const int64_t j = t + int64_t(k) * nt;
      if (j >= n) continue;
      v[k] *= p.scale;
      if (p.mask.data) v[k] += load_f32(p.mask.data, p.mask.dtype, mb + j * p.mask.stride[3]);
      mx = fmaxf(mx, v[k]);
    }
    mx = block_max(mx, red);
    float sum = 0.f;
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      v[k] = t + int64_t(k) * nt < n && mx != -kGenInf ? expf(v[k] - mx) : 0.f;
      sum += v[k];
    }
    sum = block_sum(sum, red);
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) v[k] = mx == -kGenInf ? 0.f : v[k] / sum;
  } else {
    float mean = 0.f;
    if (p.op == RowOp::layernorm) {
      float s = 0.f;
      DUET_UNROLL
      for (int k = 0; k < kRowRegs; ++k) s += v[k];
      mean = block_sum(s, red) / static_cast<float>(n);
    }
    float s2 = 0.f;
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      const float d = t + int64_t(k) * nt < n ? v[k] - mean : 0.f;
      s2 += d * d;
    }
    const float inv = 1.f / sqrtf(block_sum(s2, red) / static_cast<float>(n) + p.eps);
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      const int64_t j = t + int64_t(k) * nt;
      v[k] = (v[k] - mean) * inv;
      if (has_w) v[k] *= bits_value(wv[k], p.w.dtype);
      if (p.b.data && j < n) v[k] += load_f32(p.b.data, p.b.dtype, j * p.b.stride[3]);
    }
  }
  // Softmax and the norms have float outputs.
  const bool wide = p.out_dtype == Elt::f32, half = p.out_dtype == Elt::f16;
  DUET_UNROLL
  for (int k = 0; k < kRowRegs; ++k) {
    const int64_t j = t + int64_t(k) * nt, o = r * n + j;
    if (j >= n) continue;
    if (wide)
      static_cast<float*>(p.out)[o] = v[k];
    else
      static_cast<uint16_t*>(p.out)[o] = half ? f2h(v[k]) : f2b(v[k]);
  }
}

// rmsnorm fused with the activation quantization of the int_dot mat-vecs that read its output
// (RowParams::q8; launch.h, fuses_norm: dense rows of float storage in registers, an f32
// output, n and the block's threads multiples of 32): row_in_registers' arithmetic in the same
// order (the same bits), then each warp's k-th values, one block of 32 all inside the row or
// all past its end, quantized as q8_act_kernel would. A kernel of its own, so that rows_kernel
// keeps its registers. With RowParams::sum, the add before the norm first (x + res in f32, as
// eltwise_kernel adds: the same bits), its sum written where the add's output is.
DUET_KERNEL_BOUNDED(1024) rmsnorm_q8_kernel(const RowParams p) {
  grid_dependency_sync();
  float* red = reinterpret_cast<float*>(smem());
  const int64_t n = p.n;
  const int t = tid(), nt = nthreads();
  for (int64_t r = bid_x(); r < p.rows; r += nbid_x()) {
    const int64_t xb = offset_of(p.x, p.x.shape, r * n);
    uint32_t xv[kRowRegs], wv[kRowRegs];
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      const int64_t j = t + int64_t(k) * nt;
      xv[k] = j < n ? float_bits(p.x.data, p.x.dtype, xb + j) : 0u;
      wv[k] = p.w.data && j < n ? float_bits(p.w.data, p.w.dtype, j * p.w.stride[3]) : 0u;
    }
    float v[kRowRegs], s2 = 0.f;
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) v[k] = bits_value(xv[k], p.x.dtype);  // 0 past the end
    if (p.sum) {
      const int64_t rb = offset_of(p.res, p.res.shape, r * n);
      DUET_UNROLL
      for (int k = 0; k < kRowRegs; ++k) {
        const int64_t j = t + int64_t(k) * nt;
        if (j >= n) continue;
        v[k] += load_f32(p.res.data, p.res.dtype, rb + j);
        p.sum[r * n + j] = v[k];
      }
    }
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) s2 += v[k] * v[k];
    const float inv = 1.f / sqrtf(block_sum(s2, red) / static_cast<float>(n) + p.eps);
    DUET_UNROLL
    for (int k = 0; k < kRowRegs; ++k) {
      const int64_t j = t + int64_t(k) * nt, o = r * n + j;
      if (j >= n) continue;  // the whole warp
      float y = v[k] * inv;
      if (p.w.data) y *= bits_value(wv[k], p.w.dtype);
      static_cast<float*>(p.out)[o] = y;
      q8_block_store(y, p.q8[(o - lane()) / 32]);
    }
  }
}

// Softmax, rmsnorm, layernorm: one block per row (grid-stride over rows). Dense rows of float
// storage that fit the block's registers take row_in_registers; any other row is read from
// memory in each pass.
DUET_KERNEL_BOUNDED(1024) rows_kernel(const RowParams p) {
  grid_dependency_sync();
  float* red = reinterpret_cast<float*>(smem());
  const int64_t n = p.n;
  const bool in_registers = (p.x.stride[3] == 1 || n == 1) && n <= int64_t(kRowRegs) * nthreads() &&
                            float_elt(p.x.dtype) && float_elt(p.out_dtype) &&
                            (!p.w.data || float_elt(p.w.dtype));
  for (int64_t r = bid_x(); r < p.rows; r += nbid_x()) {
    if (in_registers) {
      row_in_registers(p, r, red);
      continue;
    }
    const int64_t xb = offset_of(p.x, p.x.shape, r * n), xs = p.x.stride[3];
    auto x_at = [&](int64_t j) { return load_f32(p.x.data, p.x.dtype, xb + j * xs); };
    if (p.op == RowOp::softmax) {
      const int64_t mb = p.mask.data ? offset_of(p.mask, p.x.shape, r * n) : 0;
      auto v_at = [&](int64_t j) {
        float v = x_at(j) * p.scale;
        if (p.mask.data) v += load_f32(p.mask.data, p.mask.dtype, mb + j * p.mask.stride[3]);
        return v;
      };
      float mx = -kGenInf;
      for (int64_t j = tid(); j < n; j += nthreads()) mx = fmaxf(mx, v_at(j));
      mx = block_max(mx, red);
      float sum = 0.f;
      if (mx != -kGenInf)
        for (int64_t j = tid(); j < n; j += nthreads()) sum += expf(v_at(j) - mx);
      sum = block_sum(sum, red);
      for (int64_t j = tid(); j < n; j += nthreads())
        store_f32(p.out, p.out_dtype, r * n + j, mx == -kGenInf ? 0.f : expf(v_at(j) - mx) / sum);
    } else {
      float mean = 0.f;
      if (p.op == RowOp::layernorm) {
        float s = 0.f;
        for (int64_t j = tid(); j < n; j += nthreads()) s += x_at(j);
        mean = block_sum(s, red) / static_cast<float>(n);
      }
      float s2 = 0.f;
      for (int64_t j = tid(); j < n; j += nthreads()) {
        const float d = x_at(j) - mean;
        s2 += d * d;
      }
      const float inv = 1.f / sqrtf(block_sum(s2, red) / static_cast<float>(n) + p.eps);
      for (int64_t j = tid(); j < n; j += nthreads()) {
        float y = (x_at(j) - mean) * inv;
        if (p.w.data) y *= load_f32(p.w.data, p.w.dtype, j * p.w.stride[3]);
        if (p.b.data) y += load_f32(p.b.data, p.b.dtype, j * p.b.stride[3]);
        store_f32(p.out, p.out_dtype, r * n + j, y);
      }
    }
  }
}

// Reductions, one thread per output element walking its slab of x in f32.
DUET_KERNEL reduce_kernel(const ReduceParams p) {
  grid_dependency_sync();
  int64_t rs[4], os[4];
  for (int d = 0; d < 4; ++d) {
    rs[d] = (p.dims >> d & 1u) ? p.x.shape[d] : 1;
    os[d] = p.x.shape[d] / rs[d];
  }
  for (int64_t i = grid_tid(); i < p.n; i += grid_threads()) {
    int64_t rem = i, base = 0;
    for (int d = 3; d >= 0; --d) {
      base += (rem % os[d]) * p.x.stride[d];
      rem /= os[d];
    }
    float acc = p.op == DUET_RED_MAX    ? -kGenInf
                : p.op == DUET_RED_MIN  ? kGenInf
                : p.op == DUET_RED_PROD ? 1.f
                                        : 0.f;
    for (int64_t j = 0; j < p.count; ++j) {
      int64_t off = base, r = j;
      for (int d = 3; d >= 0; --d) {
        off += (r % rs[d]) * p.x.stride[d];
        r /= rs[d];
      }
      const float v = load_f32(p.x.data, p.x.dtype, off);
      if (p.op == DUET_RED_MAX)
        acc = v > acc || v != v ? v : acc;
      else if (p.op == DUET_RED_MIN)
        acc = v < acc || v != v ? v : acc;
      else if (p.op == DUET_RED_PROD)
        acc *= v;
      else
        acc += v;
    }
    if (p.op == DUET_RED_MEAN) acc /= static_cast<float>(p.count);
    store_f32(p.out, p.out_dtype, i, acc);
  }
}

// The keys that exist: the run-time count when there is one (a count outside [0, Lk] is reported
// through `error` and clamped), else Lk.
DUET_DEV int valid_keys(const int* kv_len, int Lk, unsigned long long* error) {
  if (!kv_len) return Lk;
  const int n = *kv_len;
  if (n >= 0 && n <= Lk) return n;
  if (tid() == 0) atomic_min_u64(error, uint32_t(n));
  return n < 0 ? 0 : Lk;
}

// Element u of row `row` of a rotary embedding, through store(index in the dense output, value):
// below rope_dims / 2 the pair (i0, i1) it rotates, past it the element rope_dims + u - half,
// copied. `first` is the position of the row's first L (offset plus the run-time position).
template <class Store>
DUET_DEV void rope_element(const RopeParams& p, int64_t first, int64_t row, int u, Store&& store) {
  const int half = p.rope_dims / 2;
  const int64_t ob = row * p.D;
  const int64_t xb = offset_of(p.x, p.x.shape, row * p.D), xs = p.x.stride[3];
  if (u >= half) {
    const int d = p.rope_dims + (u - half);
    store(ob + d, load_f32(p.x.data, p.x.dtype, xb + d * xs));
    return;
  }
  const int i0 = p.neox ? u : 2 * u, i1 = p.neox ? u + half : 2 * u + 1;
  const double pos = static_cast<double>(first + row % p.L);
  const double freq = pow(static_cast<double>(p.theta), -2.0 * u / p.rope_dims);
  const double c = cos(pos * freq), s = sin(pos * freq);
  const double x0 = load_f32(p.x.data, p.x.dtype, xb + i0 * xs);
  const double x1 = load_f32(p.x.data, p.x.dtype, xb + i1 * xs);
  store(ob + i0, static_cast<float>(x0 * c - x1 * s));
  store(ob + i1, static_cast<float>(x0 * s + x1 * c));
}

// Rotary embedding, one thread per rotated pair of a row (its angle's pow, cos and sin once for
// both elements) and per element past rope_dims. Angles in double: positions reach the
// thousands, where an fp32 angle would already be off by 1e-4 radians.
DUET_KERNEL rope_kernel(const RopeParams p) {
  grid_dependency_sync();
  const int half = p.rope_dims / 2, per_row = half + (p.D - p.rope_dims);
  const int64_t total = p.rows * per_row;
  const int64_t first = p.offset + (p.pos ? *p.pos : 0);
  if (first < 0) {
    if (grid_tid() == 0) atomic_min_u64(p.error, uint32_t(int32_t(first)));
    return;
  }
  for (int64_t e = grid_tid(); e < total; e += grid_threads())
    rope_element(p, first, e / per_row, static_cast<int>(e % per_row),
                 [&](int64_t i, float y) { store_f32(p.out, p.out_dtype, i, y); });
}

// Attention, one block per (query, head, batch): scores for a chunk of keys (one per thread),
// online softmax over chunks, O accumulated in shared memory (thread t owns dims t, t + nt, ...).
// Shared memory: q[D], acc[D], p[nthreads], red[nwarps].
DUET_KERNEL gen_attention_kernel(const GenAttnParams p) {
  grid_dependency_sync();
  const int i = bid_x(), h = bid_y(), b = bid_z(), nt = nthreads(), t0 = tid();
  const int hk = h / (p.Hq / p.Hkv);
  float* qv = reinterpret_cast<float*>(smem());
  float* acc = qv + p.D;
  float* pj = acc + p.D;
  float* red = pj + nt;
  const int64_t qb = b * p.q.stride[0] + h * p.q.stride[1] + i * p.q.stride[2];
  const int64_t kb = b * p.k.stride[0] + hk * p.k.stride[1];
  const int64_t vb = b * p.v.stride[0] + hk * p.v.stride[1];
  const int64_t mb = b * p.mask.stride[0] + h * p.mask.stride[1] + i * p.mask.stride[2];
  for (int d = t0; d < p.D; d += nt) {
    qv[d] = load_f32(p.q.data, p.q.dtype, qb + d * p.q.stride[3]);
    acc[d] = 0.f;
  }
  sync();
  const int Lk = valid_keys(p.kv_len, p.Lk, p.error);
  int kv_end = Lk;
  if (p.causal && i + (Lk - p.Lq) + 1 < kv_end) kv_end = i + (Lk - p.Lq) + 1;
  float m = -kGenInf, l = 0.f;
  for (int j0 = 0; j0 < kv_end; j0 += nt) {
    const int j = j0 + t0;
    float s = -kGenInf;
    if (j < kv_end) {
      float dot = 0.f;
      const int64_t kr = kb + j * p.k.stride[2];
      for (int d = 0; d < p.D; ++d)
        dot += qv[d] * load_f32(p.k.data, p.k.dtype, kr + d * p.k.stride[3]);
      s = dot * p.scale;
      if (p.mask.data) s += load_f32(p.mask.data, p.mask.dtype, mb + j * p.mask.stride[3]);
    }
    const float m_new = fmaxf(m, block_max(s, red));
    const float m_use = m_new == -kGenInf ? 0.f : m_new;
    const float alpha = expf(m - m_use);
    const float pe = expf(s - m_use);
    pj[t0] = pe;
    l = l * alpha + block_sum(pe, red);  // its barrier also publishes pj
    m = m_new;
    const int n = kv_end - j0 < nt ? kv_end - j0 : nt;
    for (int d = t0; d < p.D; d += nt) {
      float a = acc[d] * alpha;
      for (int jj = 0; jj < n; ++jj)
        a += pj[jj] *
             load_f32(p.v.data, p.v.dtype, vb + (j0 + jj) * p.v.stride[2] + d * p.v.stride[3]);
      acc[d] = a;
    }
    sync();
  }
  const int64_t ob = ((int64_t(b) * p.Hq + h) * p.Lq + i) * p.D;
  for (int d = t0; d < p.D; d += nt)
    store_f32(p.out, p.out_dtype, ob + d, l > 0.f ? acc[d] / l : 0.f);
}

// SIMT matmul: 64x64 tiles, 256 threads of 4x4 outputs, 16-deep k steps through shared memory.
DUET_KERNEL gen_matmul_kernel(const MatmulParams p) {
  grid_dependency_sync();
  constexpr int T = 64, BK = 16;
  float* as = reinterpret_cast<float*>(smem());  // [BK][T]
  float* bs = as + BK * T;                       // [BK][T]
  const int t0 = tid(), tx = t0 % 16, ty = t0 / 16;
  const int m0 = bid_y() * T, n0 = bid_x() * T;
  const int bz = bid_z(), bo = bz / p.batch_inner, bi = bz % p.batch_inner;
  const int64_t ab = bo * p.a_batch[0] + bi * p.a_batch[1];
  const int64_t bb = bo * p.b_batch[0] + bi * p.b_batch[1];
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    for (int e = t0; e < T * BK; e += 256) {
      const int mm = e / BK, kk = e % BK, gm = m0 + mm, gk = k0 + kk;
      as[kk * T + mm] =
          gm < p.M && gk < p.K ? load_f32(p.a, p.dtype, ab + gm * p.a_m + gk * p.a_k) : 0.f;
      const int kk2 = e / T, nn = e % T, gk2 = k0 + kk2, gn = n0 + nn;
      bs[kk2 * T + nn] =
          gn < p.N && gk2 < p.K ? load_f32(p.b, p.dtype, bb + gk2 * p.b_k + gn * p.b_n) : 0.f;
    }
    sync();
    for (int kk = 0; kk < BK; ++kk) {
      float av[4], bv[4];
      for (int r = 0; r < 4; ++r) av[r] = as[kk * T + ty + 16 * r];
      for (int c = 0; c < 4; ++c) bv[c] = bs[kk * T + tx + 16 * c];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] += av[r] * bv[c];
    }
    sync();
  }
  const int64_t cb = int64_t(bz) * p.M * p.N;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      const int gm = m0 + ty + 16 * r, gn = n0 + tx + 16 * c;
      if (gm < p.M && gn < p.N) store_f32(p.c, p.dtype, cb + int64_t(gm) * p.N + gn, acc[r][c]);
    }
}

// Embedding rows, one thread per output element. Bad ids write zeros and record the smallest
// position holding one (with the id) in *error, which the host reports.
DUET_KERNEL embedding_kernel(const EmbedParams p) {
  grid_dependency_sync();
  const int bytes = elt_bytes(p.table.dtype);
  for (int64_t e = grid_tid(); e < p.n_ids * p.D; e += grid_threads()) {
    const int64_t r = e / p.D, d = e % p.D;
    const int32_t v = static_cast<const int32_t*>(p.ids.data)[offset_of(p.ids, p.ids.shape, r)];
    const int64_t id = p.negative_ids && v < 0 ? v + p.V : v;
    if (id < 0 || id >= p.V) {
      if (d == 0) atomic_min_u64(p.error, (static_cast<unsigned long long>(r) << 32) | uint32_t(v));
      store_f32(p.out, p.out_dtype, e, 0.f);
      continue;
    }
    copy_elem(p.out, e, p.table.data, id * p.table.stride[2] + d * p.table.stride[3], bytes);
  }
}

// write_slice, one thread per element of x. An offset putting the slice outside [0, cap) writes
// nothing and is reported.
DUET_KERNEL write_slice_kernel(const WriteParams p) {
  grid_dependency_sync();
  const int64_t s = p.start + (p.pos ? *p.pos : 0);
  if (s < 0 || s + p.len > p.cap) {
    if (grid_tid() == 0) atomic_min_u64(p.error, uint32_t(int32_t(s)));
    return;
  }
  const int64_t chunk = p.len * p.inner;
  const int bytes = elt_bytes(p.out_dtype);
  for (int64_t i = grid_tid(); i < p.n; i += grid_threads()) {
    const int64_t o = i / chunk, r = i % chunk;
    const int64_t di = (o * p.cap + s) * p.inner + r, si = offset_of(p.x, p.x.shape, i);
    if (p.x.dtype == p.out_dtype)
      copy_elem(p.out, di, p.x.data, si, bytes);
    else
      store_f64(p.out, p.out_dtype, di, load_f64(p.x.data, p.x.dtype, si));
  }
}

// rope_kernel and write_slice_kernel in one (RopeWriteParams): a thread per rotated pair (or
// element past rope_dims) of the rope, then one per element of V. Each op reports its own bad
// position and then writes nothing, as it would alone.
DUET_KERNEL rope_write_kernel(const RopeWriteParams p) {
  grid_dependency_sync();
  const RopeParams& r = p.rope;
  const WriteParams &k = p.k, &v = p.v;
  const int half = r.rope_dims / 2, per_row = half + (r.D - r.rope_dims);
  const int64_t total = r.rows * per_row;
  const int64_t first = r.offset + (r.pos ? *r.pos : 0);
  const int64_t sk = k.start + (k.pos ? *k.pos : 0), sv = v.start + (v.pos ? *v.pos : 0);
  const bool rope_ok = first >= 0, k_ok = sk >= 0 && sk + k.len <= k.cap,
             v_ok = sv >= 0 && sv + v.len <= v.cap;
  if (grid_tid() == 0) {
    if (!rope_ok) atomic_min_u64(r.error, uint32_t(int32_t(first)));
    if (!k_ok) atomic_min_u64(k.error, uint32_t(int32_t(sk)));
    if (v.n > 0 && !v_ok) atomic_min_u64(v.error, uint32_t(int32_t(sv)));
  }
  const int64_t kchunk = k.len * k.inner, vchunk = v.len * v.inner;
  // Element i of the rope's dense output, y, also at its row of the K cache.
  auto store = [&](int64_t i, float y) {
    store_f32(r.out, r.out_dtype, i, y);
    if (k_ok) store_f32(k.out, k.out_dtype, (i / kchunk * k.cap + sk) * k.inner + i % kchunk, y);
  };
  for (int64_t e = grid_tid(); e < total + v.n; e += grid_threads()) {
    if (e >= total) {
      if (!v_ok) continue;
      const int64_t i = e - total;
      const int64_t di = (i / vchunk * v.cap + sv) * v.inner + i % vchunk,
                    si = offset_of(v.x, v.x.shape, i);
      if (v.x.dtype == v.out_dtype)
        copy_elem(v.out, di, v.x.data, si, elt_bytes(v.out_dtype));
      else
        store_f64(v.out, v.out_dtype, di, load_f64(v.x.data, v.x.dtype, si));
      continue;
    }
    if (rope_ok) rope_element(r, first, e / per_row, static_cast<int>(e % per_row), store);
  }
}

DUET_KERNEL fill_u64_kernel(const FillParams p) {
  grid_dependency_sync();
  if (tid() == 0 && bid_x() == 0) *p.p = p.v;
}

// Splits of attention_combine whose partial rows a thread loads before it adds any of them.
inline constexpr int kCombineBatch = 8;

// Merges split-KV partials of the attention kernels: out = sum_s w_s O_s / sum_s w_s with
// w_s = 2^(lse_s - max lse); rows no split saw a key for are 0. One block per output row: the
// weights once into shared memory ([splits], then nwarps floats for the reductions), then a
// thread per dim with a batch of splits' loads in flight together (a warp per row walking the
// splits one by one took 15 us for a decode step's 32 rows on an H200). Splits without a key
// (weight 0) are not read.
DUET_KERNEL attention_combine(const CombineParams p) {
  grid_dependency_sync();
  float* wgt = reinterpret_cast<float*>(smem());
  float* red = wgt + p.splits;
  const int64_t row = bid_x();
  float mx = -kGenInf;
  for (int s = tid(); s < p.splits; s += nthreads()) {
    wgt[s] = p.part_lse[s * p.rows + row];
    mx = fmaxf(mx, wgt[s]);
  }
  mx = block_max(mx, red);  // its barriers also publish wgt
  for (int s = tid(); s < p.splits; s += nthreads())
    wgt[s] = mx == -kGenInf ? 0.f : exp2_fast(wgt[s] - mx);
  sync();
  float wsum = 0.f;
  for (int s = 0; s < p.splits; ++s) wsum += wgt[s];
  for (int d = tid(); d < p.D; d += nthreads()) {
    float acc = 0.f;
    for (int s0 = 0; s0 < p.splits; s0 += kCombineBatch) {
      float o[kCombineBatch];
      DUET_UNROLL
      for (int k = 0; k < kCombineBatch; ++k) {
        const int s = s0 + k;
        o[k] = s < p.splits && wgt[s] != 0.f ? p.part_o[(s * p.rows + row) * p.D + d] : 0.f;
      }
      DUET_UNROLL
      for (int k = 0; k < kCombineBatch; ++k)
        if (s0 + k < p.splits) acc += wgt[s0 + k] * o[k];
    }
    store_f32(p.out, p.out_dtype, row * p.D + d, wsum > 0.f ? acc / wsum : 0.f);
  }
}

DUET_DEV_END
