// Reductions (reduce.comp).
#include "ops/ops.h"

namespace duet::vulkan::ops {

// reduce.comp: one invocation per output element; split along the kept dims when a window is
// too large.
Status reduce(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  const std::optional<uint32_t> code = reduce_code(c.op);
  if (!code) return unsupported(c.dev, c.op, "not a reduction of duet/eltwise.h");
  const uint32_t mask = reduce_dims_mask(c.op);
  const int rank = out.desc.rank, lead = kMaxRank - rank;
  std::vector<int> kept;
  for (int d = 0; d < rank; ++d)
    if (!(mask >> d & 1u)) kept.push_back(d);
  const int64_t count = in[0].desc.numel() / out.desc.numel();
  return split_emit(c.dev, {out, in[0]}, 2, kept, [&](const std::vector<Arg>& p) -> Status {
    Dispatch d;
    d.shader = "reduce_" + T(out.desc.dtype);
    d.dense_spec = true;
    d.spec = {static_cast<uint32_t>(c.block()), *code};
    DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
    DUET_TRY(c.bind_into(d, 2, 1, p[1], false, c.op.input_name(0)));
    d.params.u = {mask << lead, static_cast<uint32_t>(count), 0, 0};
    d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel()), c.block());
    return c.dev.recorder().record(d);
  });
}

}  // namespace duet::vulkan::ops
