// Row ops: softmax, rmsnorm, layernorm (softmax.comp, norm.comp): one workgroup per row, or one
// invocation per row through texel views on a CPU device.
#include "ops/ops.h"

namespace duet::vulkan::ops {

namespace {

// Records a row op's *_vec shader (output already bound, parameters set): one invocation per
// row, a subgroup of rows per workgroup, the inputs p[1..] through texel views; `spec` are the
// shader's specialization constants after the workgroup size.
Status record_rows_vec(const Ctx& c, Dispatch& d, const std::vector<Arg>& p,
                       std::vector<uint32_t> spec = {}) {
  const uint32_t rows_per_group = static_cast<uint32_t>(std::max(c.dev.caps().subgroup_size, 1));
  d.spec = {rows_per_group};
  d.spec.insert(d.spec.end(), spec.begin(), spec.end());
  for (size_t i = 1; i < p.size(); ++i)
    DUET_TRY(c.bind_texels_into(d, static_cast<int>(i - 1), static_cast<int>(i), p[i], true,
                                c.op.input_name(i - 1)));
  const uint64_t rows = static_cast<uint64_t>(p[0].desc.numel() / p[0].desc.dim(-1));
  d.groups = grid((rows + rows_per_group - 1) / rows_per_group);
  return c.dev.recorder().record(d);
}

}  // namespace

Status softmax(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  std::vector<Arg> args{out, in[0]};
  if (in.size() > 1) {
    DUET_ASSIGN_OR_RETURN(TensorDesc m, broadcast_to(in[1].desc, out.desc.dims()));
    args.push_back({m, in[1].buf});
  }
  const int64_t n = out.desc.dim(-1);
  return split_emit(c.dev, args, args.size(), leading_dims(out.desc.rank, 1),
                    [&](const std::vector<Arg>& p) -> Status {
                      Dispatch d;
                      d.params.u[0] = static_cast<uint32_t>(n);
                      d.params.f[0] = softmax_scale(c.op);
                      DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
                      if (p.size() == 2 && n % texel_vec(out.desc.dtype) == 0 &&
                          vector_path(c, p, d.params.td[0].offset)) {
                        d.shader = "softmax_vec_" + T(out.desc.dtype);
                        return record_rows_vec(c, d, p);
                      }
                      d.shader = "softmax_" + T(out.desc.dtype);
                      d.dense_spec = true;
                      d.spec = {static_cast<uint32_t>(c.block())};
                      DUET_TRY(c.bind_into(d, 2, 1, p[1], false, c.op.input_name(0)));
                      if (p.size() > 2) {
                        DUET_TRY(c.bind_into(d, 3, 2, p[2], false, c.op.input_name(1)));
                        d.params.u[1] = 1;
                        d.params.u[2] = p[2].desc.dtype == DType::f32;
                      }
                      d.groups = grid(static_cast<uint64_t>(p[0].desc.numel() / n));
                      return c.dev.recorder().record(d);
                    });
}

Status norm(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  std::vector<Arg> args{out, in[0]};
  for (size_t i = 1; i < in.size(); ++i) args.push_back(in[i]);
  const int64_t n = out.desc.dim(-1);
  return split_emit(
      c.dev, args, 2, leading_dims(out.desc.rank, 1), [&](const std::vector<Arg>& p) -> Status {
        Dispatch d;
        const uint32_t mode = c.op.kind == OpKind::layernorm ? 1u : 0u;
        d.params.u[0] = static_cast<uint32_t>(n);
        d.params.u[1] = p.size() > 2;
        d.params.u[2] = p.size() > 3;
        d.params.f[0] = c.op.attrs.eps;
        DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
        if (n % texel_vec(out.desc.dtype) == 0 && vector_path(c, p, d.params.td[0].offset)) {
          d.shader = "norm_vec_" + T(out.desc.dtype);
          return record_rows_vec(c, d, p, {mode});
        }
        d.shader = "norm_" + T(out.desc.dtype);
        d.dense_spec = true;
        d.spec = {static_cast<uint32_t>(c.block()), mode};
        for (size_t i = 1; i < p.size(); ++i)
          DUET_TRY(c.bind_into(d, static_cast<int>(i + 1), static_cast<int>(i), p[i], false,
                               c.op.input_name(i - 1)));
        d.groups = grid(static_cast<uint64_t>(p[0].desc.numel() / n));
        return c.dev.recorder().record(d);
      });
}

Status norm_add(const Ctx& c, const Arg& y, const Arg& s, const Arg& a, const Arg& b,
                const Arg* w) {
  const int64_t n = y.desc.dim(-1);
  Dispatch d;
  d.params.u = {static_cast<uint32_t>(n), w ? 1u : 0u, 0u, 0u};
  d.params.f[0] = c.op.attrs.eps;
  DUET_TRY(c.bind_into(d, 1, 0, y, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, s, true, "output"));
  std::vector<Arg> p{y, a, b};
  if (w) p.push_back(*w);
  const int64_t vec = texel_vec(y.desc.dtype);
  if (n % vec == 0 && d.params.td[1].offset % vec == 0 &&
      vector_path(c, p, d.params.td[0].offset)) {
    d.shader = "norm_vec_add_" + T(y.desc.dtype);
    DUET_TRY(c.bind_texels_into(d, 0, 3, a, true, "a"));
    DUET_TRY(c.bind_texels_into(d, 2, 4, b, true, "b"));
    if (w) DUET_TRY(c.bind_texels_into(d, 1, 2, *w, true, c.op.input_name(1)));
    const uint32_t rows_per_group = static_cast<uint32_t>(std::max(c.dev.caps().subgroup_size, 1));
    d.spec = {rows_per_group, 0u};
    const uint64_t rows = static_cast<uint64_t>(y.desc.numel() / n);
    d.groups = grid((rows + rows_per_group - 1) / rows_per_group);
    return c.dev.recorder().record(d);
  }
  d.shader = "norm_add_" + T(y.desc.dtype);
  d.dense_spec = true;
  d.spec = {static_cast<uint32_t>(c.block()), 0u};
  if (w) DUET_TRY(c.bind_into(d, 3, 2, *w, false, c.op.input_name(1)));
  DUET_TRY(c.bind_into(d, 4, 3, a, false, "a"));
  DUET_TRY(c.bind_into(d, 5, 4, b, false, "b"));
  d.groups = grid(static_cast<uint64_t>(y.desc.numel() / n));
  return c.dev.recorder().record(d);
}

}  // namespace duet::vulkan::ops
