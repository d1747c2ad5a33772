// Rotary position embedding (rope.comp), with the cos/sin table made once per device.
#include <cstring>

#include "ops/ops.h"

namespace duet::vulkan::ops {

Status rope(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  const int64_t D = out.desc.dim(3);
  const int rd = rope_dims(c.op);
  DUET_ASSIGN_OR_RETURN(VkBuf * table, c.dev.rope_table(c.op.attrs.rope_theta, rd));
  const Arg* pos = in.size() > 1 ? &in[1] : nullptr;
  // Slicing L shifts positions: the slice's first row is at offset (in rows) from the start.
  const int64_t out_base = out.desc.offset;
  return split_emit(c.dev, {out, in[0]}, 2, {0, 1, 2}, [&](const std::vector<Arg>& p) -> Status {
    const int64_t L = p[0].desc.dim(2);
    // Which row of the full tensor the slice starts at: from the output's (dense) offset.
    const int64_t first_row = ((p[0].desc.offset - out_base) / D) % out.desc.dim(2);
    Dispatch d;
    d.shader = "rope_" + T(out.desc.dtype);
    d.dense_spec = true;
    d.spec = {static_cast<uint32_t>(c.block())};
    DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
    DUET_TRY(c.bind_into(d, 2, 1, p[1], false, c.op.input_name(0)));
    d.bind[3] = {table->vk(), table->base(), table->size(), false};
    DUET_TRY(c.bind_scalar(d, pos, "position", " is outside [0, 2^24)"));
    d.params.u = {static_cast<uint32_t>(D), static_cast<uint32_t>(rd),
                  c.op.attrs.rope_mode == RopeMode::gptj ? 1u : 0u, static_cast<uint32_t>(L)};
    d.params.u2 = {static_cast<uint32_t>(c.op.attrs.rope_offset + first_row), 0, 0, 0};
    d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel()), c.block());
    return c.dev.recorder().record(d);
  });
}

namespace {
// A write_slice's launch numbers: len * inner, cap, inner, len; its start.
std::array<uint32_t, 4> write_shape(const CacheWrite& w) {
  const int axis = w.c->op.attrs.axis;
  const TensorDesc& o = w.cache.desc;
  int64_t inner = 1;
  for (int d = axis + 1; d < o.rank; ++d) inner *= o.shape[static_cast<size_t>(d)];
  const int64_t len = w.x.desc.shape[static_cast<size_t>(axis)];
  return {static_cast<uint32_t>(len * inner),
          static_cast<uint32_t>(o.shape[static_cast<size_t>(axis)]), static_cast<uint32_t>(inner),
          static_cast<uint32_t>(len)};
}
// The write's error slot (its message names the write and its offset tensor).
Result<uint32_t> write_slot(const CacheWrite& w, const Arg& pos) {
  Dispatch tmp;
  const std::array<uint32_t, 4> s = write_shape(w);
  DUET_TRY(
      w.c->bind_scalar(tmp, &pos, "offset", write_slice_suffix(s[3], s[1], w.c->op.attrs.axis)));
  return tmp.params.rt[1];
}
}  // namespace

Status rope_write(const Ctx& c, const Arg& y, const Arg& x, const Arg& pos, const CacheWrite& k,
                  const CacheWrite* v) {
  const int64_t D = y.desc.dim(3);
  const int rd = rope_dims(c.op);
  DUET_ASSIGN_OR_RETURN(VkBuf * table, c.dev.rope_table(c.op.attrs.rope_theta, rd));
  Dispatch d;
  d.shader = "rope_write_f32";
  d.dense_spec = true;
  d.spec = {static_cast<uint32_t>(c.block())};
  DUET_TRY(c.bind_into(d, 1, 0, y, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, x, false, c.op.input_name(0)));
  d.bind[3] = {table->vk(), table->base(), table->size(), false};
  DUET_TRY(c.bind_scalar(d, &pos, "position", " is outside [0, 2^24)"));
  DUET_TRY(k.c->bind_into(d, 4, 2, k.cache, true, "output"));
  DUET_ASSIGN_OR_RETURN(d.params.rt[2], write_slot(k, pos));
  d.params.u = {static_cast<uint32_t>(D), static_cast<uint32_t>(rd),
                c.op.attrs.rope_mode == RopeMode::gptj ? 1u : 0u,
                static_cast<uint32_t>(y.desc.dim(2))};
  d.params.u2 = {static_cast<uint32_t>(c.op.attrs.rope_offset),
                 static_cast<uint32_t>(k.c->op.attrs.start), 0u, 0u};
  const std::array<uint32_t, 4> ks = write_shape(k);
  d.params.u3 = {ks[0], ks[1], ks[2], ks[3]};
  uint64_t nv = 0;
  if (v) {
    DUET_TRY(v->c->bind_into(d, 5, 3, v->x, false, v->c->op.input_name(1)));
    DUET_TRY(v->c->bind_into(d, 6, 4, v->cache, true, "output"));
    DUET_ASSIGN_OR_RETURN(d.params.rt[3], write_slot(*v, pos));
    nv = static_cast<uint64_t>(v->x.desc.numel());
    d.params.u2[2] = static_cast<uint32_t>(v->c->op.attrs.start);
    d.params.u2[3] = static_cast<uint32_t>(nv);
    const std::array<uint32_t, 4> vs = write_shape(*v);
    std::memcpy(d.params.f.data(), vs.data(), sizeof vs);
  }
  d.groups = flat_grid(static_cast<uint64_t>(y.desc.numel()) + nv, c.block());
  return c.dev.recorder().record(d);
}

}  // namespace duet::vulkan::ops
