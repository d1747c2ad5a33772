// Rotary position embedding (rope.comp), with the cos/sin table made once per device.
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

}  // namespace duet::vulkan::ops
