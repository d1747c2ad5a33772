#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include "kernels/isa.h"
#include "ops/ops.h"

namespace duet::cpu {

// Flash-style attention on the CPU (docs/cpu-backend.md). The query rows that share a kv head
// (GQA/MQA: the heads of one group, position-major) are processed together against blocks of
// keys with an online softmax in f32:
//  - prefill path (many rows): blocks of bq rows. Scores are computed transposed, S^T = K Q^T,
//    with the GEMM register tile (keys from a packed K, queries in vector lanes), so the softmax
//    runs down columns in vectors and P^T feeds O += P V through the same tile with no
//    transpose. K and V are packed once per kv head, converted to f32.
//  - decode path (few rows, e.g. Lq = 1): dot products per key, softmax along the row, and
//    o += p v in vectors, reading K and V rows in place (f16 and bf16 widened in registers).
// Causal masking is aligned to the end of the keys (row i sees keys j <= i + Lk - Lq); key
// blocks past a block's last visible key are skipped. When there are fewer (batch, kv head,
// row block) items than threads, the keys are split too (split-K) and the partial (max, sum,
// output) triples are combined at the end.

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Everything a work item needs, resolved once per op.
struct Problem {
  const kernels::Kernels* kt = nullptr;
  Scratch* scratch = nullptr;  // every buffer below is grown through it
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0, group = 0;
  int64_t rows = 0;   // query rows per kv head: group * Lq, position-major (r = i * group + hg)
  int64_t shift = 0;  // Lk - Lq: row i sees keys j <= i + shift
  bool causal = false;
  float scale = 1.0f;
  HostArg q, k, v, out;
  const float* mask = nullptr;  // dense f32, read through mask_strides over [B, Hq, Lq, Lk]
  Dims mask_strides{};

  int64_t pos(int64_t r) const { return r / group; }
  int64_t head(int64_t hk, int64_t r) const { return hk * group + r % group; }
  // The last key row r may see (may be < 0: none).
  int64_t last_key(int64_t r) const { return causal ? pos(r) + shift : Lk - 1; }
  const std::byte* row(const HostArg& t, int64_t b, int64_t h, int64_t i) const {
    const TensorDesc& d = t.desc;
    return t.base + (d.offset + b * d.strides[0] + h * d.strides[1] + i * d.strides[2]) *
                        static_cast<int64_t>(dtype_size(d.dtype));
  }
  const float* mask_row(int64_t b, int64_t h, int64_t i) const {
    return mask + b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2];
  }

  // Masks scores s[j * js + r * rs] of keys [j0, j0 + nk) for rows [r0, r0 + nr): causal
  // positions become -inf, the additive mask is added.
  void apply_masks(float* s, int64_t js, int64_t rs, int64_t b, int64_t hk, int64_t r0, int64_t nr,
                   int64_t j0, int64_t nk) const {
    for (int64_t rr = 0; rr < nr; ++rr) {
      const int64_t r = r0 + rr;
      float* sr = s + rr * rs;
      if (mask) {
        const float* mr = mask_row(b, head(hk, r), pos(r));
        const int64_t ms = mask_strides[3];
        for (int64_t j = 0; j < nk; ++j) sr[j * js] += mr[(j0 + j) * ms];
      }
      if (causal)
        for (int64_t j = std::max<int64_t>(0, last_key(r) + 1 - j0); j < nk; ++j)
          sr[j * js] = kNegInf;
    }
  }

  // Writes o / l for row r (zeros when the row saw no key) in the output dtype.
  void write_row(int64_t b, int64_t hk, int64_t r, const float* o, float l, float* tmp) const {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int64_t e = ((b * Hq + head(hk, r)) * Lq + pos(r)) * D;
    const DType t = out.desc.dtype;
    float* dst = t == DType::f32 ? static_cast<float*>(out.elem0()) + e : tmp;
    for (int64_t d = 0; d < D; ++d) dst[d] = o[d] * inv;
    auto* h = static_cast<uint16_t*>(out.elem0()) + e;
    if (t == DType::f16) kt->f32_to_f16(tmp, h, D);
    if (t == DType::bf16) kt->f32_to_bf16(tmp, h, D);
  }
};

// Where a work item leaves its rows: the output directly, or its slot of split-K partials
// (per row: m, l, then D unnormalised outputs).
struct Sink {
  float* partial = nullptr;  // null: write the output
  int64_t stride = 0;        // floats per row (D + 2)
};

void finish_rows(const Problem& p, const Sink& sink, int64_t b, int64_t hk, int64_t r0, int64_t nr,
                 const float* o, int64_t ldo, const float* m, const float* l, float* tmp) {
  for (int64_t rr = 0; rr < nr; ++rr) {
    if (!sink.partial) {
      p.write_row(b, hk, r0 + rr, o + rr * ldo, l[rr], tmp);
      continue;
    }
    float* dst = sink.partial + rr * sink.stride;
    dst[0] = m[rr];
    dst[1] = l[rr];
    std::memcpy(dst + 2, o + rr * ldo, static_cast<size_t>(p.D) * sizeof(float));
  }
}

// --- prefill path ---

struct PrefillShape {
  int64_t bq = 0;  // rows per block, a multiple of nr (query lanes of S^T)
  int64_t ld = 0;  // row stride of S^T: bq rounded up to mr (P V reads mr-row panels of P^T)
  int64_t bk = 0;  // keys per block, a multiple of mr (key rows of S^T)
};

PrefillShape prefill_shape(const kernels::Kernels& kt) {
  PrefillShape s;
  s.bq = kt.nr * ceil_div(96, kt.nr);
  s.ld = kt.mr * ceil_div(s.bq, kt.mr);
  s.bk = kt.mr * ceil_div(96, kt.mr);
  return s;
}

// One kv head's K and V as the prefill tiles read them: K packed into mr-key panels of [D][mr]
// (the A operand of S^T = K Q^T), V either packed into nr-wide panels of [keys][nr] or, when it
// is f32 with unit stride and D a multiple of nr, read in place (the B operand of O += P V).
struct KvHead {
  const float* kp = nullptr;
  const float* v = nullptr;
  int64_t v_panel = 0, v_row = 0;  // V panel dp, key j at v + dp * v_panel + j * v_row
};

struct KvLayout {
  int64_t lkp = 0, dpan = 0;  // keys padded to mr; nr-wide panels of D
  bool v_in_place = false;
};

KvLayout kv_layout(const Problem& p) {
  const kernels::Kernels& kt = *p.kt;
  KvLayout l;
  l.lkp = ceil_div(p.Lk, kt.mr) * kt.mr;
  l.dpan = ceil_div(p.D, kt.nr);
  l.v_in_place = p.v.desc.dtype == DType::f32 && p.v.desc.strides[3] == 1 && p.D % kt.nr == 0;
  return l;
}

// Packs keys [j0, j1) of kv head (b, hk) into kp (and vp unless V is read in place).
void pack_head_keys(const Problem& p, const KvLayout& lay, int64_t b, int64_t hk, int64_t j0,
                    int64_t j1, float* kp, float* vp, float* scratch) {
  const kernels::Kernels& kt = *p.kt;
  const int64_t mr = kt.mr, nr = kt.nr;
  const kernels::Elem te = to_elem(p.k.desc.dtype);
  const Dims &ks = p.k.desc.strides, &vs = p.v.desc.strides;
  const int64_t esize = static_cast<int64_t>(dtype_size(p.k.desc.dtype));
  for (int64_t j = j0; j < j1; j += mr)
    kt.pack(p.row(p.k, b, hk, j), te, ks[2], ks[3], static_cast<int>(std::min(mr, p.Lk - j)),
            static_cast<int>(mr), p.D, 1.0f, kp + j * p.D, scratch);
  if (lay.v_in_place) return;
  for (int64_t dp = 0; dp < lay.dpan; ++dp)
    kt.pack(p.row(p.v, b, hk, j0) + dp * nr * vs[3] * esize, te, vs[3], vs[2],
            static_cast<int>(std::min(nr, p.D - dp * nr)), static_cast<int>(nr), j1 - j0, 1.0f,
            vp + dp * lay.lkp * nr + j0 * nr, scratch);
}

KvHead kv_head(const Problem& p, const KvLayout& lay, int64_t b, int64_t hk, const float* kp,
               const float* vp) {
  KvHead h;
  h.kp = kp;
  if (lay.v_in_place) {
    h.v = reinterpret_cast<const float*>(p.row(p.v, b, hk, 0));
    h.v_panel = p.kt->nr;
    h.v_row = p.v.desc.strides[2];
  } else {
    h.v = vp;
    h.v_panel = lay.lkp * p.kt->nr;
    h.v_row = p.kt->nr;
  }
  return h;
}

void prefill_item(const Problem& p, const PrefillShape& sh, const KvHead& kv, int64_t b, int64_t hk,
                  int64_t r0, int64_t kb0, int64_t kb1, const Sink& sink) {
  const kernels::Kernels& kt = *p.kt;
  const int64_t mr = kt.mr, nr = kt.nr, bq = sh.bq, ld = sh.ld, bk = sh.bk, D = p.D;
  const int64_t nq = std::min(bq, p.rows - r0);
  thread_local std::vector<float> qt_s, st_s, o_s, ml_s, line_s;
  Scratch& sc = *p.scratch;
  float* qt = sc.grow(qt_s, D * bq, "a block of Q transposed");
  float* st = sc.grow(st_s, bk * ld, "a block of scores");
  float* o = sc.grow(o_s, ld * D, "a block of outputs");
  float* ml = sc.grow(ml_s, 3 * ld, "row maxima and sums");
  float* line = sc.grow(line_s, D, "a row of Q");
  if (!qt || !st || !o || !ml || !line) return;
  float *m = ml, *l = ml + ld, *corr = ml + 2 * ld;
  std::fill(qt, qt + D * bq, 0.0f);
  std::fill(o, o + ld * D, 0.0f);
  std::fill(m, m + ld, kNegInf);
  std::fill(l, l + ld, 0.0f);

  // Q^T, pre-scaled: qt[d * bq + row].
  const kernels::Elem te = to_elem(p.q.desc.dtype);
  for (int64_t rr = 0; rr < nq; ++rr) {
    const int64_t r = r0 + rr;
    kt.load_line(p.row(p.q, b, p.head(hk, r), p.pos(r)), te, p.q.desc.strides[3], D, line);
    for (int64_t d = 0; d < D; ++d) qt[d * bq + rr] = line[d] * p.scale;
  }
  const int64_t last_lo = p.last_key(r0), last_hi = p.last_key(r0 + nq - 1);
  const int64_t qpan = ceil_div(nq, nr), ipan = ceil_div(nq, mr), dpan = ceil_div(D, nr);
  for (int64_t kb = kb0; kb < kb1; ++kb) {
    const int64_t j0 = kb * bk, nk = std::min(bk, p.Lk - j0);
    if (j0 > last_hi) break;  // every later key is masked for every row of the block
    // S^T[key][row] = K Q^T. A tile whose keys are all past its rows' causal limit is skipped:
    // apply_masks writes -inf over it.
    for (int64_t kp0 = 0; kp0 < nk; kp0 += mr)
      for (int64_t qp = 0; qp < qpan; ++qp) {
        if (j0 + kp0 > p.last_key(r0 + std::min(nq, (qp + 1) * nr) - 1)) continue;
        kt.tile(D, kv.kp + (j0 + kp0) * D, mr, qt + qp * nr, bq, st + kp0 * ld + qp * nr, ld,
                static_cast<int>(std::min(mr, nk - kp0)), static_cast<int>(nr), false);
      }
    if (p.mask || (p.causal && j0 + nk - 1 > last_lo))
      p.apply_masks(st, ld, 1, b, hk, r0, nq, j0, nk);
    kt.softmax_cols(st, ld, nk, static_cast<int>(nq), m, l, corr);
    for (int64_t rr = 0; rr < nq; ++rr)
      if (corr[rr] != 1.0f) kt.scale_add(o + rr * D, corr[rr], o + rr * D, 0.0f, D);
    // O += P V, with P^T = S^T read as the tile's A operand. Keys past the causal limit of a
    // row panel's last row have p = 0 for the whole panel: its depth stops there.
    for (int64_t ip = 0; ip < ipan; ++ip) {
      const int64_t rows = std::min(mr, nq - ip * mr);
      const int64_t depth = std::min(nk, p.last_key(r0 + ip * mr + rows - 1) - j0 + 1);
      if (depth <= 0) continue;
      for (int64_t dp = 0; dp < dpan; ++dp)
        kt.tile(depth, st + ip * mr, ld, kv.v + dp * kv.v_panel + j0 * kv.v_row, kv.v_row,
                o + ip * mr * D + dp * nr, D, static_cast<int>(rows),
                static_cast<int>(std::min(nr, D - dp * nr)), true);
    }
  }
  finish_rows(p, sink, b, hk, r0, nq, o, D, m, l, line);
}

// --- decode path ---

constexpr int64_t kDecodeBlock = 256;

void decode_item(const Problem& p, int64_t b, int64_t hk, int64_t kb0, int64_t kb1,
                 const Sink& sink) {
  const kernels::Kernels& kt = *p.kt;
  const int64_t R = p.rows, D = p.D, bk = kDecodeBlock;
  thread_local std::vector<float> q_s, s_s, o_s, ml_s, kbuf_s, vbuf_s, tmp_s;
  Scratch& sc = *p.scratch;
  float* q = sc.grow(q_s, R * D, "the query rows in f32");
  float* s = sc.grow(s_s, R * bk, "a block of scores");
  float* o = sc.grow(o_s, R * D, "the output rows");
  float* ml = sc.grow(ml_s, 3 * R, "row maxima and sums");
  float* tmp = sc.grow(tmp_s, D, "a row of the output");
  if (!q || !s || !o || !ml || !tmp) return;
  float *m = ml, *l = ml + R, *corr = ml + 2 * R;
  std::fill(o, o + R * D, 0.0f);
  std::fill(m, m + R, kNegInf);
  std::fill(l, l + R, 0.0f);
  const kernels::Elem te = to_elem(p.q.desc.dtype);
  for (int64_t r = 0; r < R; ++r)
    kt.load_line(p.row(p.q, b, p.head(hk, r), p.pos(r)), te, p.q.desc.strides[3], D, q + r * D);

  // K and V rows are read in place (the kernels widen f16 and bf16 in registers) when their
  // elements are contiguous along D; otherwise they are gathered into f32 block by block.
  auto rows_of = [&](const HostArg& t, int64_t j0, int64_t nk, std::vector<float>& buf, int64_t* ld,
                     kernels::Elem* type) -> const void* {
    const Dims& st = t.desc.strides;
    const std::byte* first = p.row(t, b, hk, j0);
    if (st[3] == 1) {
      *ld = st[2];
      *type = to_elem(t.desc.dtype);
      return first;
    }
    float* dst = sc.grow(buf, bk * D, "a block of keys or values in f32");
    if (!dst) return nullptr;
    const int64_t es = static_cast<int64_t>(dtype_size(t.desc.dtype));
    for (int64_t j = 0; j < nk; ++j)
      kt.load_line(first + j * st[2] * es, te, st[3], D, dst + j * D);
    *ld = D;
    *type = kernels::Elem::f32;
    return dst;
  };
  const int64_t last_hi = p.last_key(R - 1), last_lo = p.last_key(0);
  for (int64_t kb = kb0; kb < kb1; ++kb) {
    const int64_t j0 = kb * bk, nk = std::min(bk, p.Lk - j0);
    if (j0 > last_hi) break;
    int64_t ldk = 0, ldv = 0;
    kernels::Elem tk{}, tv{};
    const void* kr = rows_of(p.k, j0, nk, kbuf_s, &ldk, &tk);
    if (!kr) return;
    kt.dots(q, D, static_cast<int>(R), kr, tk, ldk, nk, D, p.scale, s, bk);
    if (p.mask || (p.causal && j0 + nk - 1 > last_lo)) p.apply_masks(s, 1, bk, b, hk, 0, R, j0, nk);
    for (int64_t r = 0; r < R; ++r) corr[r] = kt.softmax_row(s + r * bk, nk, m + r, l + r);
    const void* vr = rows_of(p.v, j0, nk, vbuf_s, &ldv, &tv);
    if (!vr) return;
    kt.pv_rows(s, bk, static_cast<int>(R), vr, tv, ldv, nk, D, corr, o, D);
  }
  finish_rows(p, sink, b, hk, 0, R, o, D, m, l, tmp);
}

// Combines split-K partials (m, l, o) of one row into the output.
void combine_row(const Problem& p, const float* part, int64_t splits, int64_t stride, int64_t b,
                 int64_t hk, int64_t r, float* acc) {
  float mx = kNegInf;
  for (int64_t s = 0; s < splits; ++s) mx = std::max(mx, part[s * stride]);
  std::fill(acc, acc + p.D, 0.0f);
  float l = 0.0f;
  if (mx != kNegInf) {
    for (int64_t s = 0; s < splits; ++s) {
      const float* ps = part + s * stride;
      if (ps[0] == kNegInf) continue;
      const float w = std::exp(ps[0] - mx);
      l += ps[1] * w;
      p.kt->scale_add(acc, 1.0f, ps + 2, w, p.D);
    }
  }
  p.write_row(b, hk, r, acc, l, acc);
}

}  // namespace

Status attention(const OpArgs& a) {
  const OpDesc& op = a.op;
  Problem p;
  p.kt = &kernels::active_kernels();
  p.scratch = &a.scratch;
  const kernels::Kernels& kt = *p.kt;
  const TensorDesc& qd = a.in[0].desc;
  p.B = qd.dim(0);
  p.Hq = qd.dim(1);
  p.Lq = qd.dim(2);
  p.D = qd.dim(3);
  p.Hkv = a.in[1].desc.dim(1);
  const int64_t capacity = a.in[1].desc.dim(2);
  p.Lk = capacity;
  if (const int si = scalar_input(op); si >= 0) {
    // A cache of `capacity` rows holding n keys: only those are read.
    const int64_t n = *static_cast<const int32_t*>(a.in[static_cast<size_t>(si)].elem0());
    if (n < 0 || n > capacity)
      return Err(Code::invalid_argument)
          .op("attention", op.name)
          .tensor(op.input_name(static_cast<size_t>(si)))
          .device(a.device)
          .expected("a key count in [0, " + std::to_string(capacity) + "]")
          .got(std::to_string(n));
    p.Lk = n;
  }
  p.group = p.Hq / p.Hkv;
  p.rows = p.group * p.Lq;
  p.shift = p.Lk - p.Lq;
  p.causal = op.attrs.causal;
  p.scale = attention_scale(op);
  p.q = a.in[0];
  p.k = a.in[1];
  p.v = a.in[2];
  p.out = a.out;
  std::optional<F32In> mask;
  if (const int mi = attention_mask_input(op); mi >= 0) {
    mask.emplace(a.in[static_cast<size_t>(mi)], a.pool, a.scratch);
    if (!mask->data()) return {};
    p.mask = mask->data();
    p.mask_strides = broadcast_strides(
        mask->desc(), TensorDesc::contiguous(DType::f32, {p.B, p.Hq, p.Lq, capacity}));
  }

  const int64_t threads = a.pool.size();
  const bool decode = p.rows * 2 <= kt.nr;
  const PrefillShape sh = prefill_shape(kt);
  const int64_t bk = decode ? kDecodeBlock : sh.bk;
  const int64_t qblocks = decode ? 1 : ceil_div(p.rows, sh.bq);
  const int64_t row_block = decode ? p.rows : sh.bq;
  const int64_t kblocks = ceil_div(p.Lk, bk);
  const int64_t items = p.B * p.Hkv * qblocks;
  // Split the keys when there are too few items for the threads (decode with few heads).
  int64_t splits = 1;
  if (items < 2 * threads && kblocks >= 4)
    splits = std::min(ceil_div(2 * threads, items), kblocks / 2);

  const int64_t pstride = p.D + 2;
  thread_local std::vector<float> partial_storage;
  float* const partial = splits > 1
                             ? a.scratch.grow(partial_storage, items * splits * row_block * pstride,
                                              "split-K partials")
                             : nullptr;
  if (splits > 1 && !partial) return {};

  if (decode) {
    a.pool.parallel_for(items * splits, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t it = s0; it < s1; ++it) {
        const int64_t sp = it % splits, bh = it / splits;
        Sink sink;
        if (splits > 1) sink = {partial + (bh * splits + sp) * row_block * pstride, pstride};
        decode_item(p, bh / p.Hkv, bh % p.Hkv, sp * kblocks / splits, (sp + 1) * kblocks / splits,
                    sink);
      }
    });
  } else if (splits == 1 && p.B * p.Hkv >= 2 * threads) {
    // Enough kv heads for the threads: a work item is a whole head, whose K and V are packed
    // right before use into the worker's buffers (they stay in its L2), then every row block.
    const KvLayout lay = kv_layout(p);
    a.pool.parallel_for(p.B * p.Hkv, 1, [&](int64_t s0, int64_t s1) {
      thread_local std::vector<float> kp_s, vp_s, scratch_s;
      float* kp = a.scratch.grow(kp_s, lay.lkp * p.D, "a packed K head");
      float* vp = lay.v_in_place
                      ? nullptr
                      : a.scratch.grow(vp_s, lay.dpan * lay.lkp * kt.nr, "a packed V head");
      float* scratch = a.scratch.grow(scratch_s, std::max(p.D, p.Lk), "packing lines");
      if (!kp || (!vp && !lay.v_in_place) || !scratch) return;
      for (int64_t bh = s0; bh < s1; ++bh) {
        const int64_t b = bh / p.Hkv, hk = bh % p.Hkv;
        pack_head_keys(p, lay, b, hk, 0, p.Lk, kp, vp, scratch);
        const KvHead kv = kv_head(p, lay, b, hk, kp, vp);
        for (int64_t qb = 0; qb < qblocks; ++qb)
          prefill_item(p, sh, kv, b, hk, qb * sh.bq, 0, kblocks, Sink{});
      }
    });
  } else {
    // Few heads: pack every head's K and V first (in parallel, into buffers of the calling
    // thread, reused across calls), then share them among items of row blocks and key splits.
    // Workers get pointers: naming a thread_local inside the lambdas would reach their own.
    const KvLayout lay = kv_layout(p);
    const int64_t ksz = lay.lkp * p.D, vsz = lay.v_in_place ? 0 : lay.dpan * lay.lkp * kt.nr;
    thread_local std::vector<float> kp_storage, vp_storage;
    float* const kp = a.scratch.grow(kp_storage, p.B * p.Hkv * ksz, "packed K");
    float* const vp = a.scratch.grow(vp_storage, p.B * p.Hkv * vsz, "packed V");
    if (!kp || !vp) return {};
    const int64_t chunk = kt.mr * 8, chunks = ceil_div(p.Lk, chunk);
    a.pool.parallel_for(p.B * p.Hkv * chunks, 1, [&](int64_t s0, int64_t s1) {
      thread_local std::vector<float> scratch_s;
      float* scratch = a.scratch.grow(scratch_s, std::max(p.D, chunk), "packing lines");
      if (!scratch) return;
      for (int64_t it = s0; it < s1; ++it) {
        const int64_t c = it % chunks, bh = it / chunks;
        pack_head_keys(p, lay, bh / p.Hkv, bh % p.Hkv, c * chunk, std::min(p.Lk, (c + 1) * chunk),
                       kp + bh * ksz, vp + bh * vsz, scratch);
      }
    });
    if (a.scratch.failed()) return {};
    a.pool.parallel_for(items * splits, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t it = s0; it < s1; ++it) {
        const int64_t sp = it % splits, item = it / splits;
        const int64_t qb = item % qblocks, bh = item / qblocks;
        const int64_t b = bh / p.Hkv, hk = bh % p.Hkv;
        Sink sink;
        if (splits > 1) sink = {partial + (item * splits + sp) * row_block * pstride, pstride};
        prefill_item(p, sh, kv_head(p, lay, b, hk, kp + bh * ksz, vp + bh * vsz), b, hk, qb * sh.bq,
                     sp * kblocks / splits, (sp + 1) * kblocks / splits, sink);
      }
    });
  }

  if (splits > 1 && !a.scratch.failed()) {
    a.pool.parallel_for(items * row_block, 16, [&](int64_t s0, int64_t s1) {
      thread_local std::vector<float> acc_s;
      float* acc = a.scratch.grow(acc_s, p.D, "a combined row");
      if (!acc) return;
      for (int64_t x = s0; x < s1; ++x) {
        const int64_t rr = x % row_block, item = x / row_block;
        const int64_t qb = item % qblocks, bh = item / qblocks;
        const int64_t r = qb * row_block + rr;
        if (r >= p.rows) continue;
        const float* part = partial + (item * splits * row_block + rr) * pstride;
        combine_row(p, part, splits, row_block * pstride, bh / p.Hkv, bh % p.Hkv, r, acc);
      }
    });
  }
  return {};
}

}  // namespace duet::cpu
