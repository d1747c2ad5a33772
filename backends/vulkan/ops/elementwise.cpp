// Element-wise ops (eltwise.comp): one function of duet/eltwise.h per invocation and element.
#include "ops/ops.h"

namespace duet::vulkan::ops {

Status eltwise(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  // The shader's OP constant: a function of duet/eltwise.h, shared with shaders/eltwise.comp.
  const std::optional<uint32_t> code = eltwise_code(c.op);
  if (!code) return unsupported(c.dev, c.op, "not an element-wise function of duet/eltwise.h");
  std::vector<Arg> args{out};
  for (const Arg& a : in) {
    DUET_ASSIGN_OR_RETURN(TensorDesc b, broadcast_to(a.desc, out.desc.dims()));
    args.push_back({b, a.buf});
  }
  const DType t = out.desc.dtype;
  return split_emit(
      c.dev, args, args.size(), leading_dims(out.desc.rank, 0),
      [&](const std::vector<Arg>& p) -> Status {
        Dispatch d;
        d.spec = {static_cast<uint32_t>(c.block()), *code};
        d.params.f[0] = eltwise_param(c.op);
        DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
        const int64_t v = texel_vec(t);
        if (vector_path(c, p, d.params.td[0].offset)) {
          d.shader = "eltwise_vec_" + T(t);
          for (size_t i = 1; i < p.size(); ++i)
            DUET_TRY(c.bind_texels_into(d, static_cast<int>(i - 1), static_cast<int>(i), p[i], true,
                                        c.op.input_name(i - 1)));
          d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel() / v), c.block());
          return c.dev.recorder().record(d);
        }
        d.shader = "eltwise_" + T(t);
        d.dense_spec = true;
        for (size_t i = 1; i < p.size(); ++i)
          DUET_TRY(c.bind_into(d, static_cast<int>(i + 1), static_cast<int>(i), p[i], false,
                               c.op.input_name(i - 1)));
        d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel()), c.block());
        return c.dev.recorder().record(d);
      });
}

}  // namespace duet::vulkan::ops
