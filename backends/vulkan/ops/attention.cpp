// Attention: flash attention (attention_flash, attention.comp; attention_decode,
// attention_decode.comp) and attention without shared memory (attention_blocked,
// attention_blocked.comp); split keys merged by attention_combine.comp.
#include <functional>
#include "ops/ops.h"

namespace duet::vulkan::ops {

namespace {

// Records an attention dispatch `d` and, when it wrote `parts` > 1 partial results per row into
// `part` (keys split), the attention_combine.comp dispatch that merges them into `out`.
Status record_attention(const Ctx& c, const Dispatch& d, const Arg& out,
                        const std::shared_ptr<VkBuf>& part, int64_t parts) {
  if (d.groups[0] > 65535 || d.groups[1] > 65535)
    return Err(Code::unsupported)
        .op("attention", c.op.name)
        .device(c.dev.id())
        .expected("at most 65535 row blocks and batch x KV heads")
        .got(describe(c.op));
  DUET_TRY(c.dev.recorder().record(d));
  if (parts == 1) return {};
  Dispatch m;
  m.shader = "attention_combine_" + T(out.desc.dtype);
  m.spec = {static_cast<uint32_t>(std::min(c.dev.caps().max_threads_per_block, 256u))};
  DUET_TRY(c.bind_into(m, 1, 0, out, true, "output"));
  m.bind[6] = {part->vk(), part->base(), part->size(), false};
  m.params.u = d.params.u;
  m.params.u2 = d.params.u2;
  m.params.u3 = d.params.u3;
  m.groups = flat_grid(static_cast<uint64_t>(out.desc.numel()), static_cast<int>(m.spec[0]));
  return c.dev.recorder().record(m);
}

// Binds where the kernel writes: the output itself, or, when the keys are split `splits` ways, a
// scratch buffer of `split_floats` floats per split and (batch, head) that record_attention's
// combine pass reduces into the output. Returns the scratch (null when the keys are not split).
Result<std::shared_ptr<VkBuf>> bind_output(const Ctx& c, Dispatch& d, const Arg& out, uint64_t bh,
                                           int64_t splits, int64_t split_floats) {
  std::shared_ptr<VkBuf> part;
  if (splits > 1) {
    DUET_ASSIGN_OR_RETURN(part,
                          c.dev.scratch(bh * static_cast<uint64_t>(splits * split_floats) * 4));
    d.bind[6] = {part->vk(), part->base(), part->size(), true};
  } else {
    DUET_TRY(c.bind_into(d, 1, 0, out, true, "output"));
  }
  return part;
}

// The attention without shared memory (attention_blocked.comp): R rows per invocation, LR
// invocations along rows and LK along keys, keys split `splits` ways more; the LK x splits
// partial results per row are merged by attention_combine.comp.
Status attention_blocked_emit(const Ctx& c, const std::vector<Arg>& p, const Arg* kv_len, int64_t G,
                              int64_t D) {
  const LaunchConfig& l = c.choice.launch;
  const int R = c.kernel.query_rows, LR = c.kernel.row_lanes;
  const int64_t Lq = p[1].desc.dim(2), Lk = p[2].desc.dim(2);
  const int64_t rows = G * Lq, LK = l.block_threads / LR;
  const int64_t splits = std::max(l.splits, 1), parts = splits * LK;
  const int64_t chunk = (Lk + splits - 1) / splits;
  const uint64_t bh = static_cast<uint64_t>(p[0].desc.dim(0) * p[2].desc.dim(1));
  const DType t = p[0].desc.dtype;
  Dispatch d;
  d.shader = "attention_blocked_" + T(t);
  const bool has_mask = p.size() > 4;
  const uint32_t qvec = vector_ok(p[1], 3), kvec = vector_ok(p[2], 3), vvec = vector_ok(p[3], 3);
  const uint32_t mask = !has_mask ? 0u : p[4].desc.dtype == DType::f32 ? 1u : 2u;
  // The output is dense: vector stores need only the head dim and the start aligned.
  const int64_t vec = texel_vec(t);
  const uint32_t ovec = D % vec == 0 && p[0].desc.offset % vec == 0 ? 1u : 0u;
  d.spec = {static_cast<uint32_t>(l.block_threads),
            static_cast<uint32_t>(R),
            static_cast<uint32_t>(LR),
            static_cast<uint32_t>(D),
            qvec,
            kvec,
            vvec,
            mask,
            ovec};
  const int64_t ps = 4 * ((D + 3) / 4 + 1);  // floats per partial: sum, then max and denominator
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<VkBuf> part, bind_output(c, d, p[0], bh, parts, rows * ps));
  DUET_TRY(c.bind_texels_into(d, 2, 1, p[1], qvec != 0, c.op.input_name(0)));
  DUET_TRY(c.bind_texels_into(d, 0, 2, p[2], kvec != 0, c.op.input_name(1)));
  DUET_TRY(c.bind_texels_into(d, 1, 3, p[3], vvec != 0, c.op.input_name(2)));
  if (has_mask) DUET_TRY(c.bind_texels_into(d, 3, 4, p[4], false, c.op.input_name(3)));
  d.params.u = {static_cast<uint32_t>(Lq), static_cast<uint32_t>(Lk), static_cast<uint32_t>(G),
                static_cast<uint32_t>(rows)};
  d.params.u2 = {c.op.attrs.causal ? 1u : 0u, 0u, 0u, static_cast<uint32_t>(parts)};
  d.params.u3 = {static_cast<uint32_t>(chunk), static_cast<uint32_t>(D), static_cast<uint32_t>(ps),
                 static_cast<uint32_t>(ps - 4)};
  d.params.f[0] = attention_scale(c.op);
  DUET_TRY(c.bind_scalar(d, kv_len, "key count",
                         " is more than the " + std::to_string(Lk) + " keys of k and v"));
  const int64_t per_group = static_cast<int64_t>(R) * LR;
  d.groups = {static_cast<uint32_t>((rows + per_group - 1) / per_group), static_cast<uint32_t>(bh),
              static_cast<uint32_t>(splits)};
  return record_attention(c, d, p[0], part, parts);
}

// The parameters the split-key kernels (attention.comp, attention_decode.comp) share: the shapes,
// causal, the mask and its dtype, the splits and their key chunk, the scale; the run-time key
// count bound.
Status split_key_params(const Ctx& c, Dispatch& d, const std::vector<Arg>& p, const Arg* kv_len,
                        int64_t G, int64_t D, int64_t splits, int64_t chunk) {
  const int64_t Lq = p[1].desc.dim(2), Lk = p[2].desc.dim(2);
  d.params.u = {static_cast<uint32_t>(Lq), static_cast<uint32_t>(Lk), static_cast<uint32_t>(G),
                static_cast<uint32_t>(G * Lq)};
  d.params.u2 = {c.op.attrs.causal ? 1u : 0u, p.size() > 4 ? 1u : 0u,
                 p.size() > 4 && p[4].desc.dtype == DType::f32 ? 1u : 0u,
                 static_cast<uint32_t>(splits)};
  d.params.u3 = {static_cast<uint32_t>(chunk), static_cast<uint32_t>(D), 0, 0};
  d.params.f[0] = attention_scale(c.op);
  return c.bind_scalar(d, kv_len, "key count",
                       " is more than the " + std::to_string(Lk) + " keys of k and v");
}

// The decode kernel (attention_decode.comp): MR query rows per workgroup, tiles of NT keys, the
// keys split `splits` ways; K and V read 16 bytes at a time where their rows allow.
Status attention_decode_emit(const Ctx& c, const std::vector<Arg>& p, const Arg* kv_len, int64_t G,
                             int64_t D) {
  const LaunchConfig& l = c.choice.launch;
  const int64_t MR = c.kernel.bm, NT = l.block_threads;
  const int64_t Lq = p[1].desc.dim(2), Lk = p[2].desc.dim(2), rows = G * Lq;
  const int64_t splits = std::max(l.splits, 1);
  const int64_t chunk = ((Lk + splits - 1) / splits + NT - 1) / NT * NT;
  const uint64_t bh = static_cast<uint64_t>(p[0].desc.dim(0) * p[2].desc.dim(1));
  const DType t = p[0].desc.dtype;
  Dispatch d;
  d.shader = "attention_decode_" + T(t);
  d.spec = {static_cast<uint32_t>(NT), static_cast<uint32_t>(MR), static_cast<uint32_t>(D), 0u, 0u};
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<VkBuf> part,
                        bind_output(c, d, p[0], bh, splits, rows * (D + 2)));
  for (size_t i = 1; i < p.size(); ++i)
    DUET_TRY(c.bind_into(d, static_cast<int>(i + 1), static_cast<int>(i), p[i], false,
                         c.op.input_name(i - 1)));
  const int64_t vec = texel_vec(t);
  for (size_t i : {2u, 3u}) {  // K, V: spec[3], spec[4]
    widen16(d.bind[i + 1], p[i]);
    d.spec[i + 1] = vec_rows(d.params.td[i], vec) ? 1u : 0u;
  }
  DUET_TRY(split_key_params(c, d, p, kv_len, G, D, splits, chunk));
  d.groups = {static_cast<uint32_t>((rows + MR - 1) / MR), static_cast<uint32_t>(bh),
              static_cast<uint32_t>(splits)};
  return record_attention(c, d, p[0], part, splits);
}

}  // namespace

Status attention(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  if (c.kernel.family != Family::attention_flash && c.kernel.family != Family::attention_blocked &&
      c.kernel.family != Family::attention_decode)
    return Err(Code::internal).device(c.dev.id()).note("attention launched as " + c.kernel.name());
  const bool blocked = c.kernel.family == Family::attention_blocked;
  const TensorDesc& q = in[0].desc;
  const int64_t B = q.dim(0), Hq = q.dim(1), Lq = q.dim(2), D = q.dim(3);
  const int64_t Hkv = in[1].desc.dim(1), Lk = in[1].desc.dim(2), G = Hq / Hkv;
  std::vector<Arg> args{out, in[0], in[1], in[2]};
  if (const int mi = attention_mask_input(c.op); mi >= 0) {
    const Arg& mask = in[static_cast<size_t>(mi)];
    DUET_ASSIGN_OR_RETURN(TensorDesc m,
                          broadcast_to(mask.desc, std::vector<int64_t>{B, Hq, Lq, Lk}));
    args.push_back({m, mask.buf});
  }
  const int si = scalar_input(c.op);
  const Arg* kv_len = si >= 0 ? &in[static_cast<size_t>(si)] : nullptr;
  const LaunchConfig& l = c.choice.launch;
  const int64_t splits = std::max(l.splits, 1);
  const int64_t chunk = ((Lk + splits - 1) / splits + std::max(l.tile_n, 1) - 1) /
                        std::max(l.tile_n, 1) * std::max(l.tile_n, 1);
  const int64_t rows = G * Lq;
  const DType t = out.desc.dtype;

  // Split over batch, then over KV heads (taking their query heads along).
  std::function<Status(std::vector<Arg>)> run = [&](std::vector<Arg> p) -> Status {
    bool ok = true;
    for (size_t i = 0; i < p.size(); ++i)
      ok = ok && (blocked && i > 0 ? texels_fit(c.dev, p[i]) : fits(c.dev, p[i]));
    const int64_t b = p[0].desc.dim(0), hkv = p[2].desc.dim(1);
    if (!ok && (b > 1 || hkv > 1)) {
      const bool by_batch = b > 1;
      const int64_t n = by_batch ? b : hkv;
      for (auto [s, e] : {std::pair<int64_t, int64_t>{0, n / 2}, {n / 2, n}}) {
        std::vector<Arg> part = p;
        for (size_t i = 0; i < p.size(); ++i) {
          const bool kv = i == 2 || i == 3;
          const int64_t f = by_batch || kv ? 1 : G;
          part[i].desc = slice_dim(p[i].desc, by_batch ? 0 : 1, s * f, e * f);
        }
        DUET_TRY(run(part));
      }
      return {};
    }
    if (blocked) return attention_blocked_emit(c, p, kv_len, G, D);
    if (c.kernel.family == Family::attention_decode)
      return attention_decode_emit(c, p, kv_len, G, D);
    const uint64_t bh = static_cast<uint64_t>(b * hkv);
    Dispatch d;
    d.shader = "attention_" + T(t);
    d.spec = {static_cast<uint32_t>(l.block_threads), static_cast<uint32_t>(l.tile_m),
              static_cast<uint32_t>(l.tile_n), static_cast<uint32_t>(D)};
    DUET_ASSIGN_OR_RETURN(std::shared_ptr<VkBuf> part,
                          bind_output(c, d, p[0], bh, splits, rows * (D + 2)));
    for (size_t i = 1; i < p.size(); ++i)
      DUET_TRY(c.bind_into(d, static_cast<int>(i + 1), static_cast<int>(i), p[i], false,
                           c.op.input_name(i - 1)));
    DUET_TRY(split_key_params(c, d, p, kv_len, G, D, splits, chunk));
    d.groups = {static_cast<uint32_t>((rows + l.tile_m - 1) / l.tile_m), static_cast<uint32_t>(bh),
                static_cast<uint32_t>(splits)};
    return record_attention(c, d, p[0], part, splits);
  };
  return run(args);
}

}  // namespace duet::vulkan::ops
