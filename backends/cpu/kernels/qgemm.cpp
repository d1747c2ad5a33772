#include "kernels/qgemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "duet/internal/log.h"
#include "duet/quantize.h"
#include "kernels/isa.h"

namespace duet::cpu::kernels {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Activations in 8 bits, with the per-sub-block scales and sums the products read.
struct Q8Activations {
  std::vector<int8_t> xq;
  std::vector<float> dsub, dxs;
  std::vector<int16_t> s16;
  int64_t subs = 0;
  Q8Rows rows() const { return {xq.data(), dsub.data(), dxs.data(), s16.data(), 0, subs}; }
};

// Scales per `block` (32 or 256) elements. False when `sc` could not give the memory.
bool quantize_activations(const QuantKernels& qk, const QuantMatmul& a, int sub, int block,
                          ThreadPool& pool, Scratch& sc, Q8Activations& q) {
  const int64_t K = a.k;
  q.subs = K / sub;
  if (!sc.grow(q.xq, a.m * K, "the activations in 8 bits") ||
      !sc.grow(q.dsub, a.m * q.subs, "the activations' scales") ||
      !sc.grow(q.dxs, a.m * q.subs, "the activations' scaled sums") ||
      !sc.grow(q.s16, a.m * K / 16, "the activations' sums per 16"))
    return false;
  pool.parallel_for(a.m, std::max<int64_t>(1, 16384 / K), [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> d_s;
    float* d = sc.grow(d_s, K / 32, "a row's block scales");
    if (!d) return;
    for (int64_t r = r0; r < r1; ++r) {
      int16_t* s16 = q.s16.data() + r * K / 16;
      qk.quantize_q8(a.x + r * a.ldx, K, block, q.xq.data() + r * K, d, s16);
      float* ds = q.dsub.data() + r * q.subs;
      float* dx = q.dxs.data() + r * q.subs;
      for (int64_t s = 0; s < q.subs; ++s) {
        const int64_t k0 = s * sub;
        const float scale = d[k0 / 32];
        int sum = 0;
        for (int64_t h = k0 / 16; h < (k0 + sub) / 16; ++h) sum += s16[h];
        ds[s] = scale;
        dx[s] = scale * static_cast<float>(sum);
      }
    }
  });
  return !sc.failed();
}

// Unpacks blocks [b0, b1) of `rows` weight rows into lane group g of a tile, through the exact
// integer form of duet::unpack_block. Lanes past `rows` are zero.
void unpack_generic(DType format, const uint8_t* w, int64_t row_bytes, int rows, int64_t b0,
                    int64_t b1, const QTile& t, int g) {
  const DTypeInfo& info = dtype_info(format);
  const int64_t be = info.block_elems, bb = info.block_bytes;
  const int sub = info.sub_elems, L = t.lanes;
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  uint8_t* ug = t.u + g * k4 * L * 4;
  float* sc = t.scale + g * subs * L;
  float* of = t.off + g * subs * L;
  // A q8_0 byte above 127 cannot be the AVX2 product's unsigned operand: keep it as int8.
  const int shift = t.signed_bytes && format == DType::q8_0 ? 128 : 0;
  UnpackedBlock ub;
  for (int lane = 0; lane < L; ++lane) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t kb = (b - b0) * be;  // first k of the block in the tile
      if (lane >= rows) {
        for (int64_t e = 0; e < be; ++e) ug[((kb + e) / 4 * L + lane) * 4 + (kb + e) % 4] = 0;
        for (int64_t s = kb / sub; s < (kb + be) / sub; ++s)
          sc[s * L + lane] = of[s * L + lane] = 0;
        continue;
      }
      unpack_block(format, w + lane * row_bytes + b * bb, &ub);
      for (int64_t e = 0; e < be; ++e)
        ug[((kb + e) / 4 * L + lane) * 4 + (kb + e) % 4] = static_cast<uint8_t>(ub.q[e] - shift);
      for (int j = 0; j < be / sub; ++j) {
        const int64_t s = kb / sub + j;
        sc[s * L + lane] = static_cast<float>(ub.scale[j]);
        of[s * L + lane] = static_cast<float>(ub.offset[j] - ub.scale[j] * (ub.zero[j] - shift));
      }
    }
  }
}

// The largest unsigned byte a format's weights unpack to (q8_0: the magnitude of its int8).
int max_unpacked_byte(DType format) {
  switch (format) {
    case DType::q2_k:
      return 3;
    case DType::q3_k:
      return 7;
    case DType::q5_0:
    case DType::q5_1:
    case DType::q5_k:
      return 31;
    case DType::q6_k:
      return 63;
    case DType::q8_0:
      return 255;
    default:
      return 15;
  }
}

// Rows of the output per task when few activation rows stream whole weight rows.
constexpr int64_t kRowDotGrain = 16;
// The k extent of a weight tile: a multiple of every block size, small enough that a tile of
// 4 lane groups stays in L2 beside the activation rows it meets.
constexpr int64_t kTileK = 4096;

// Several activation rows: each pass covers a k chunk whose activations (all rows) stay in L1
// while a block of weight rows streams through it; one row covers all of K at once.
constexpr int64_t kRowDotL1Bytes = 16 << 10;

void row_dots(const QuantKernels& qk, const QuantMatmul& a, const Q8Activations& q, int sub,
              ThreadPool& pool) {
  const QuantKernels::RowDot dot = qk.row_dot[static_cast<int>(a.format)];
  const int64_t be = dtype_block_elems(a.format), bb = dtype_block_bytes(a.format);
  const int64_t unit = std::max<int64_t>(be, 256);  // keeps chunks on every format's blocks
  const int64_t kc = a.m == 1 ? a.k : std::max(unit, kRowDotL1Bytes / a.m / unit * unit);
  pool.parallel_for(a.n, kRowDotGrain, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = n0; r0 < n1; r0 += kRowDotGrain) {
      const int rows = static_cast<int>(std::min(kRowDotGrain, n1 - r0));
      for (int64_t k0 = 0; k0 < a.k; k0 += kc) {
        Q8Rows x = q.rows();
        x.ldq = a.k;
        x.xq += k0;
        x.dsub += k0 / sub;
        x.dxs += k0 / sub;
        x.s16 += k0 / 16;
        dot(a.w + r0 * a.w_row_bytes + k0 / be * bb, a.w_row_bytes, rows, std::min(kc, a.k - k0), x,
            static_cast<int>(a.m), a.y + r0, a.ldy, k0 > 0);
      }
    }
  });
}

void tiled(const QuantKernels& qk, const QuantMatmul& a, const Q8Activations& q, int sub,
           ThreadPool& pool, Scratch& sc) {
  const int L = qk.lanes, MR = qk.mr;
  const int64_t NT = 4 * L;
  const int64_t be = dtype_block_elems(a.format);
  const int64_t tk = std::min(a.k, kTileK);
  const QuantKernels::Unpack fast = qk.unpack[static_cast<int>(a.format)];
  pool.parallel_for(ceil_div(a.n, NT), 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<uint8_t> u_storage;
    thread_local std::vector<float> s_storage, o_storage;
    QTile t;
    t.lanes = L;
    t.sub = sub;
    t.signed_bytes = qk.signed_bytes && a.format == DType::q8_0;
    t.i16_steps = std::max(1, 32767 / (2 * 127 * max_unpacked_byte(a.format)));
    t.u = sc.grow(u_storage, NT * tk, "a tile of unpacked weights");
    t.scale = sc.grow(s_storage, NT / L * (tk / sub) * L, "a tile's scales");
    t.off = sc.grow(o_storage, NT / L * (tk / sub) * L, "a tile's offsets");
    if (!t.u || !t.scale || !t.off) return;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t n0 = task * NT, nrows = std::min(NT, a.n - n0);
      const int groups = static_cast<int>(ceil_div(nrows, L));
      for (int64_t k0 = 0; k0 < a.k; k0 += tk) {
        t.k = std::min(tk, a.k - k0);
        for (int g = 0; g < groups; ++g) {
          const int rows = static_cast<int>(std::min<int64_t>(L, nrows - g * L));
          const uint8_t* wg = a.w + (n0 + g * L) * a.w_row_bytes;
          if (fast)
            fast(wg, a.w_row_bytes, rows, k0 / be, (k0 + t.k) / be, t, g);
          else
            unpack_generic(a.format, wg, a.w_row_bytes, rows, k0 / be, (k0 + t.k) / be, t, g);
        }
        for (int64_t m0 = 0; m0 < a.m; m0 += MR) {
          Q8Rows x = q.rows();
          x.xq += m0 * a.k + k0;
          x.ldq = a.k;
          x.dsub += m0 * q.subs + k0 / sub;
          x.dxs += m0 * q.subs + k0 / sub;
          x.s16 += (m0 * a.k + k0) / 16;
          const int mm = static_cast<int>(std::min<int64_t>(MR, a.m - m0));
          for (int g = 0; g < groups; ++g)
            qk.qgemm_tile(t, g, 0, t.k / sub, x, mm, a.y + m0 * a.ldy + n0 + g * L, a.ldy,
                          static_cast<int>(std::min<int64_t>(L, nrows - g * L)), k0 > 0);
        }
      }
    }
  });
}

}  // namespace

QuantPath quant_path(const QuantKernels& qk, DType format, int64_t m) {
  const int slot = static_cast<int>(format);
  if (m <= qk.row_dot_rows && qk.row_dot[slot]) return QuantPath::row_dot;
  return qk.unpack[slot] ? QuantPath::tile : QuantPath::tile_portable_unpack;
}

void quantized_matmul(const QuantKernels& qk, const QuantMatmul& a, ThreadPool& pool, Scratch& sc) {
  const int sub = dtype_info(a.format).sub_elems;
  const QuantPath path = quant_path(qk, a.format, a.m);
  const int block =
      path == QuantPath::row_dot && qk.act_block[static_cast<int>(a.format)] == 256 ? 256 : 32;
  Q8Activations q;
  if (!quantize_activations(qk, a, sub, block, pool, sc, q)) return;
  if (path == QuantPath::tile_portable_unpack && qk.isa != Isa::generic) {
    // Never silent: a SIMD table without its own decoder for a format says so, once per format.
    static std::atomic<uint32_t> said{0};
    const uint32_t bit = 1u << static_cast<int>(a.format);
    if (!(said.fetch_or(bit) & bit))
      log().warn(
          "cpu: the {} kernels have no decoder for {}; its tiles are unpacked by the "
          "portable code (several times slower)",
          isa_name(qk.isa), dtype_name(a.format));
  }
  if (path == QuantPath::row_dot)
    row_dots(qk, a, q, sub, pool);
  else
    tiled(qk, a, q, sub, pool, sc);
}

}  // namespace duet::cpu::kernels
