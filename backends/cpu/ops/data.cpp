#include <cstring>

#include "duet/half.h"
#include "duet/internal/index.h"
#include "ops/ops.h"
#include "ops/rows.h"

namespace duet::cpu {

namespace {

// Copies a strided view into dense storage of the same dtype, row by row.
void gather(const HostArg& in, std::byte* dst, ThreadPool& pool) {
  const TensorDesc& d = in.desc;
  const size_t es = dtype_size(d.dtype);
  if (d.is_contiguous()) {
    const auto* src = static_cast<const std::byte*>(in.elem0());
    pool.parallel_for(d.nbytes(), 1 << 18,
                      [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, u(e - b)); });
    return;
  }
  const int64_t inner = d.rank ? d.dim(-1) : 1, rows = d.numel() / inner;
  const int64_t is = d.rank ? d.stride(-1) : 1;
  pool.parallel_for(rows, std::max<int64_t>(1, 4096 / inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const std::byte* src =
          in.base + (d.offset + row_offset(d, d.strides, r)) * static_cast<int64_t>(es);
      std::byte* out = dst + r * inner * static_cast<int64_t>(es);
      if (is == 1) {
        std::memcpy(out, src, u(inner) * es);
      } else {
        for (int64_t i = 0; i < inner; ++i)
          std::memcpy(out + i * static_cast<int64_t>(es), src + i * is * static_cast<int64_t>(es),
                      es);
      }
    }
  });
}

Status cast(const OpArgs& a) {
  const HostArg& in = a.in[0];
  if (in.desc.is_contiguous()) {
    convert_parallel(in.elem0(), in.desc.dtype, a.out.elem0(), a.out.desc.dtype, in.desc.numel(),
                     a.pool);
    return {};
  }
  std::vector<std::byte> dense;
  if (!a.scratch.grow(dense, in.desc.nbytes(), "a dense copy of the input")) return {};
  gather(in, dense.data(), a.pool);
  convert_parallel(dense.data(), in.desc.dtype, a.out.elem0(), a.out.desc.dtype, in.desc.numel(),
                   a.pool);
  return {};
}

Status concat(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  const int axis = a.op.attrs.axis;
  const size_t es = dtype_size(out.dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out.shape[u(d)];
  for (int d = axis + 1; d < out.rank; ++d) inner *= out.shape[u(d)];
  const int64_t out_row = out.shape[u(axis)] * inner * static_cast<int64_t>(es);
  auto* dst = static_cast<std::byte*>(a.out.elem0());
  int64_t at = 0;  // bytes into each output row
  std::vector<std::byte> dense;
  for (const HostArg& in : a.in) {
    const std::byte* src = static_cast<const std::byte*>(in.elem0());
    if (!in.desc.is_contiguous()) {
      if (!a.scratch.grow(dense, in.desc.nbytes(), "a dense copy of an input")) return {};
      gather(in, dense.data(), a.pool);
      src = dense.data();
    }
    const int64_t chunk = in.desc.shape[u(axis)] * inner * static_cast<int64_t>(es);
    a.pool.parallel_for(outer, std::max<int64_t>(1, 65536 / std::max<int64_t>(chunk, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t o = b; o < e; ++o)
                            std::memcpy(dst + o * out_row + at, src + o * chunk, u(chunk));
                        });
    at += chunk;
  }
  return {};
}

}  // namespace

Status resolve_ids(const OpArgs& a, std::vector<int32_t>& ids, int64_t V) {
  const bool neg = a.op.attrs.negative_ids;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (neg && ids[r] < 0 && ids[r] >= -V)
      ids[r] = static_cast<int32_t>(ids[r] + V);
    else if (ids[r] < 0 || ids[r] >= V)
      return Err(Code::invalid_argument)
          .op("embedding", a.op.name)
          .tensor(a.op.input_name(1))
          .device(a.device)
          .expected(embedding_id_range(a.op))
          .got("id " + std::to_string(ids[r]) + " at position " + std::to_string(r));
  }
  return {};
}

namespace {

Status embedding(const OpArgs& a) {
  const HostArg& table = a.in[0];
  const int64_t V = table.desc.dim(0), D = table.desc.dim(1);
  const size_t es = dtype_size(table.desc.dtype);
  std::vector<int32_t> ids;
  if (!a.scratch.grow(ids, a.in[1].desc.numel(), "the ids")) return {};
  ids.resize(u(a.in[1].desc.numel()));  // within the capacity just grown (numel may be 0)
  gather(a.in[1], reinterpret_cast<std::byte*>(ids.data()), a.pool);
  DUET_TRY(resolve_ids(a, ids, V));
  auto* dst = static_cast<std::byte*>(a.out.elem0());
  const int64_t s0 = table.desc.strides[0], s1 = table.desc.strides[1];
  a.pool.parallel_for(static_cast<int64_t>(ids.size()), 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const std::byte* src =
          table.base + (table.desc.offset + ids[u(r)] * s0) * static_cast<int64_t>(es);
      std::byte* out = dst + r * D * static_cast<int64_t>(es);
      if (s1 == 1) {
        std::memcpy(out, src, u(D) * es);
      } else {
        for (int64_t i = 0; i < D; ++i)
          std::memcpy(out + i * static_cast<int64_t>(es), src + i * s1 * static_cast<int64_t>(es),
                      es);
      }
    }
  });
  return {};
}

// state with x written along the axis at start + pos; in place when the output is the state.
Status write_slice(const OpArgs& a) {
  const HostArg &st = a.in[0], &x = a.in[1];
  const TensorDesc& out = a.op.output;
  const int axis = a.op.attrs.axis;
  const int64_t len = x.desc.shape[u(axis)], cap = out.shape[u(axis)];
  int64_t s = a.op.attrs.start;
  if (const int si = scalar_input(a.op); si >= 0)
    s += *static_cast<const int32_t*>(a.in[u(si)].elem0());
  if (s < 0 || s + len > cap)
    return Err(Code::invalid_argument)
        .op("write_slice", a.op.name)
        .tensor(a.op.input_name(1))
        .device(a.device)
        .expected("a slice inside [0, " + std::to_string(cap) + ") along axis " +
                  std::to_string(axis))
        .got("[" + std::to_string(s) + ", " + std::to_string(s + len) + ")");
  auto* dst = static_cast<std::byte*>(a.out.elem0());
  if (st.base != a.out.base || st.desc.offset != a.out.desc.offset) gather(st, dst, a.pool);
  const std::byte* src = static_cast<const std::byte*>(x.elem0());
  std::vector<std::byte> dense;
  if (!x.desc.is_contiguous()) {
    if (!a.scratch.grow(dense, x.desc.nbytes(), "a dense copy of the slice")) return {};
    gather(x, dense.data(), a.pool);
    src = dense.data();
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out.shape[u(d)];
  for (int d = axis + 1; d < out.rank; ++d) inner *= out.shape[u(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(out.dtype));
  const int64_t xs = static_cast<int64_t>(dtype_size(x.desc.dtype));
  const int64_t chunk = len * inner;
  a.pool.parallel_for(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(chunk, 1)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o) {
                          std::byte* to = dst + (o * cap + s) * inner * es;
                          const std::byte* from = src + o * chunk * xs;
                          if (x.desc.dtype == out.dtype)
                            std::memcpy(to, from, u(chunk * es));
                          else
                            convert_fast(from, x.desc.dtype, to, out.dtype, chunk);
                        }
                      });
  return {};
}

}  // namespace

Status data_movement(const OpArgs& a) {
  switch (a.op.kind) {
    case OpKind::cast:
      return cast(a);
    case OpKind::copy:
      gather(a.in[0], static_cast<std::byte*>(a.out.elem0()), a.pool);
      return {};
    case OpKind::concat:
      return concat(a);
    case OpKind::embedding:
      return embedding(a);
    case OpKind::write_slice:
      return write_slice(a);
    default:
      return Status(Code::internal, "cpu data_movement: unexpected op");
  }
}

}  // namespace duet::cpu
