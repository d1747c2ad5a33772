// Data movement: convert (cast, copy), concat, embedding, write_slice.
#include "ops/ops.h"

namespace duet::vulkan::ops {

Status convert(const Ctx& c, const Arg& dst, const Arg& src, const std::string& name) {
  return split_emit(c.dev, {dst, src}, 2, leading_dims(dst.desc.rank, 0),
                    [&](const std::vector<Arg>& p) -> Status {
                      Dispatch d;
                      const std::string types = T(src.desc.dtype) + "_" + T(dst.desc.dtype);
                      d.spec = {static_cast<uint32_t>(c.block())};
                      DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
                      // Float to float, dense: 8 elements per invocation through a texel view.
                      if (is_float(src.desc.dtype) && is_float(dst.desc.dtype) &&
                          p[0].desc.numel() % 8 == 0 && vector_path(c, p, d.params.td[0].offset)) {
                        d.shader = "convert_vec_" + types;
                        DUET_TRY(c.bind_texels_into(d, 0, 1, p[1], true, name));
                        d.groups =
                            flat_grid(static_cast<uint64_t>(p[0].desc.numel() / 8), c.block());
                        return c.dev.recorder().record(d);
                      }
                      d.shader = "convert_" + types;
                      d.dense_spec = true;
                      DUET_TRY(c.bind_into(d, 2, 1, p[1], false, name));
                      d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel()), c.block());
                      return c.dev.recorder().record(d);
                    });
}

Status concat(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  const int axis = c.op.attrs.axis < 0 ? c.op.attrs.axis + out.desc.rank : c.op.attrs.axis;
  int64_t at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t len = in[i].desc.shape[static_cast<size_t>(axis)];
    Arg dst{slice_dim(out.desc, axis, at, at + len), out.buf};
    DUET_TRY(convert(c, dst, in[i], c.op.input_name(i)));
    at += len;
  }
  return {};
}

// Where an embedding's shader reports a bad id.
Result<uint32_t> id_error_slot(const Ctx& c) {
  return c.dev.recorder().error_slot(
      std::string(op_name(c.op.kind)) + " '" + c.op.name + "': tensor '" + c.op.input_name(1) + "'",
      "id", " is outside the " + embedding_id_range(c.op));
}

Status embedding(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  const Arg& table = in[0];
  const int64_t V = table.desc.dim(0), D = table.desc.dim(1);
  // Output rows and ids as [rows, D] and [rows].
  const int64_t rows = out.desc.numel() / D;
  Arg out2{*reshape(out.desc, std::vector<int64_t>{rows, D}), out.buf};
  auto ids_flat = reshape(in[1].desc, std::vector<int64_t>{rows});
  if (!ids_flat.ok()) return ids_flat.status();
  Arg ids{*ids_flat, in[1].buf};
  // Table windows of whole rows.
  int64_t rows_per_window = V;
  while (rows_per_window > 1 &&
         !fits(c.dev, Arg{slice_dim(table.desc, 0, 0, rows_per_window), table.buf}))
    rows_per_window = (rows_per_window + 1) / 2;
  DUET_ASSIGN_OR_RETURN(uint32_t slot, id_error_slot(c));
  for (int64_t v0 = 0; v0 < V; v0 += rows_per_window) {
    const int64_t v1 = std::min(V, v0 + rows_per_window);
    Arg tw{slice_dim(table.desc, 0, v0, v1), table.buf};
    Status s = split_emit(c.dev, {out2, ids}, 2, {0}, [&](const std::vector<Arg>& p) -> Status {
      Dispatch d;
      d.shader = "embedding_" + T(table.desc.dtype);
      d.dense_spec = true;
      d.spec = {static_cast<uint32_t>(c.block())};
      DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
      DUET_TRY(c.bind_into(d, 2, 1, tw, false, c.op.input_name(0)));
      DUET_TRY(c.bind_into(d, 3, 2, p[1], false, c.op.input_name(1)));
      d.bind[4] = c.dev.recorder().error_window();
      d.params.u = {static_cast<uint32_t>(D), static_cast<uint32_t>(v0), static_cast<uint32_t>(v1),
                    static_cast<uint32_t>(V)};
      d.params.u2 = {slot, v0 == 0 ? 1u : 0u, c.op.attrs.negative_ids ? 1u : 0u, 0};
      d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel()), c.block());
      return c.dev.recorder().record(d);
    });
    if (!s.ok()) return s;
  }
  return {};
}

std::string write_slice_suffix(int64_t len, int64_t cap, int axis) {
  return " puts the " + std::to_string(len) + " written rows outside [0, " + std::to_string(cap) +
         ") along axis " + std::to_string(axis);
}

Status cast_write(const Ctx& c, const Arg& out, const Arg& src, const Ctx& w, const Arg& cache,
                  const Arg& pos) {
  const int axis = w.op.attrs.axis;
  const TensorDesc& o = cache.desc;
  int64_t inner = 1;
  for (int d = axis + 1; d < o.rank; ++d) inner *= o.shape[static_cast<size_t>(d)];
  const int64_t len = out.desc.shape[static_cast<size_t>(axis)],
                cap = o.shape[static_cast<size_t>(axis)];
  Dispatch d;
  d.shader = "cast_write_" + T(cache.desc.dtype);
  d.dense_spec = true;
  d.spec = {static_cast<uint32_t>(c.block())};
  DUET_TRY(w.bind_into(d, 1, 0, cache, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, src, false, c.op.input_name(0)));
  DUET_TRY(c.bind_into(d, 3, 2, out, true, "output"));
  DUET_TRY(w.bind_scalar(d, &pos, "offset", write_slice_suffix(len, cap, axis)));
  d.params.u = {static_cast<uint32_t>(len * inner), static_cast<uint32_t>(cap),
                static_cast<uint32_t>(inner), static_cast<uint32_t>(w.op.attrs.start)};
  d.params.u2 = {static_cast<uint32_t>(len), 0, 0, 0};
  d.groups = flat_grid(static_cast<uint64_t>(src.desc.numel()), c.block());
  return c.dev.recorder().record(d);
}

// state with x written along the axis at start + pos. The output is the state itself when the
// planner writes in place; otherwise the state is copied into it first.
Status write_slice(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  const Arg &st = in[0], &x = in[1];
  const Arg* pos = in.size() > 2 ? &in[2] : nullptr;
  if (st.buf != out.buf || st.desc.offset != out.desc.offset)
    DUET_TRY(convert(c, out, st, c.op.input_name(0)));
  const int axis = c.op.attrs.axis;
  const TensorDesc& o = out.desc;
  int64_t inner = 1;
  for (int d = axis + 1; d < o.rank; ++d) inner *= o.shape[static_cast<size_t>(d)];
  const int64_t len = x.desc.shape[static_cast<size_t>(axis)],
                cap = o.shape[static_cast<size_t>(axis)];
  Dispatch d;
  d.shader = "write_slice_" + std::to_string(8 * elem_bytes(o.dtype));
  d.dense_spec = true;
  d.spec = {static_cast<uint32_t>(c.block())};
  DUET_TRY(c.bind_into(d, 1, 0, out, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, x, false, c.op.input_name(1)));
  DUET_TRY(c.bind_scalar(d, pos, "offset", write_slice_suffix(len, cap, axis)));
  d.params.u = {static_cast<uint32_t>(len * inner), static_cast<uint32_t>(cap),
                static_cast<uint32_t>(inner), static_cast<uint32_t>(c.op.attrs.start)};
  d.params.u2 = {static_cast<uint32_t>(len), 0, 0, 0};
  d.groups = flat_grid(static_cast<uint64_t>(x.desc.numel()), c.block());
  return c.dev.recorder().record(d);
}

}  // namespace duet::vulkan::ops
