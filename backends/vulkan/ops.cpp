// Turning a planned op into dispatches. Each tensor is bound as a window of its buffer; when a
// window would exceed maxStorageBufferRange the op is split along a dimension (rows, batch,
// heads, or the reduction dim of matmul, accumulating) until every window fits, so tensors
// larger than one binding still run.
#include <cmath>
#include <cstring>
#include <functional>

#include "vk_internal.h"
#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {

// A view of a device buffer.
struct Arg {
  TensorDesc desc;
  VkBuf* buf = nullptr;
};

std::string T(DType t) {
  return std::string(dtype_name(t));
}

int64_t elem_bytes(DType t) {
  return static_cast<int64_t>(dtype_size(t));
}

// The byte range [lo, hi) that a view touches, counted from the start of its VkBuffer.
std::pair<uint64_t, uint64_t> byte_range(const Arg& a) {
  const int64_t e = elem_bytes(a.desc.dtype);
  int64_t hi = a.desc.offset;
  for (int i = 0; i < a.desc.rank; ++i)
    hi += (a.desc.shape[static_cast<size_t>(i)] - 1) * a.desc.strides[static_cast<size_t>(i)];
  return {a.buf->base() + static_cast<uint64_t>(a.desc.offset * e),
          a.buf->base() + static_cast<uint64_t>((hi + 1) * e)};
}

bool fits(VulkanDevice& dev, const Arg& a) {
  auto [lo, hi] = byte_range(a);
  const uint64_t start = lo / dev.window_alignment() * dev.window_alignment();
  return hi - start <= dev.max_window();
}

GpuTensor gpu_tensor(const TensorDesc& d, uint32_t offset) {
  GpuTensor g;
  const int lead = kMaxRank - d.rank;
  for (int i = 0; i < d.rank; ++i) {
    g.shape[static_cast<size_t>(lead + i)] = static_cast<uint32_t>(d.shape[static_cast<size_t>(i)]);
    g.stride[static_cast<size_t>(lead + i)] =
        static_cast<uint32_t>(d.strides[static_cast<size_t>(i)]);
  }
  g.offset = offset;
  g.numel = static_cast<uint32_t>(d.numel());
  g.dense = d.is_contiguous() ? 1u : 0u;
  return g;
}

// Shaders index elements with 32-bit integers.
Status check_addressable(VulkanDevice& dev, const Arg& a, const std::string& name) {
  if (a.desc.storage_extent() <= (int64_t{1} << 32) - 1) return {};
  return Err(Code::unsupported)
      .tensor(name)
      .device(dev.id())
      .expected("fewer than 2^32 elements")
      .got(a.desc.str());
}

// Binds `a` as a window; its descriptor's offset is relative to the window start.
Result<std::pair<Window, GpuTensor>> bind(VulkanDevice& dev, const Arg& a, bool write,
                                          const std::string& name) {
  auto [lo, hi] = byte_range(a);
  const uint64_t align = dev.window_alignment();
  const uint64_t start = lo / align * align;
  if (hi - start > dev.max_window())
    return Err(Code::unsupported)
        .tensor(name)
        .device(dev.id())
        .expected("a window of at most " + std::to_string(dev.max_window()) + " bytes")
        .got(std::to_string(hi - start) + " bytes that cannot be split further");
  DUET_TRY(check_addressable(dev, a, name));
  const uint64_t e = static_cast<uint64_t>(elem_bytes(a.desc.dtype));
  Window w{a.buf->vk(), start, (hi - start + 3) / 4 * 4, write};
  // Keep the range inside the buffer (rounding up to a word may pass its end only by < 4 bytes).
  if (w.offset + w.range > a.buf->base() + ((a.buf->size() + 255) / 256 * 256))
    w.range = hi - start;
  return std::make_pair(w, gpu_tensor(a.desc, static_cast<uint32_t>((lo - start) / e)));
}

// ---- texel views (the "register_blocked" kernels' operands)
// ---------------------------------------------

// Elements per vector texel (R32G32B32A32_UINT): 4 f32, or 8 16-bit values.
int64_t texel_vec(DType t) {
  return 16 / elem_bytes(t);
}

// The texel view over `a` starts at its byte offset rounded down to the device's alignment; both
// a vector view (16-byte texels) and a scalar one (one element per texel) must stay within the
// device's texel count, so that either mode can be bound.
std::pair<uint64_t, uint64_t> texel_span(VulkanDevice& dev, const Arg& a) {
  auto [lo, hi] = byte_range(a);
  const uint64_t start = lo / dev.texel_alignment() * dev.texel_alignment();
  return {start, (hi - start + 15) / 16 * 16};
}

bool texels_fit(VulkanDevice& dev, const Arg& a) {
  const uint64_t range = texel_span(dev, a).second;
  return dev.max_texels() > 0 &&
         range / static_cast<uint64_t>(elem_bytes(a.desc.dtype)) <= dev.max_texels();
}

// Whether `a` can be read VEC elements per fetch along dimension `dim`: unit stride there, every
// other stride, the extent along `dim` and the start a multiple of the vector.
bool vector_ok(const Arg& a, int dim) {
  const int64_t v = texel_vec(a.desc.dtype);
  if (a.desc.strides[static_cast<size_t>(dim)] != 1 || a.desc.shape[static_cast<size_t>(dim)] % v)
    return false;
  for (int i = 0; i < a.desc.rank; ++i)
    if (i != dim && a.desc.shape[static_cast<size_t>(i)] > 1 &&
        a.desc.strides[static_cast<size_t>(i)] % v)
      return false;
  return byte_range(a).first % 16 == 0;
}

// Binds `a` as a uniform texel buffer view: vector texels or one element per texel.
Result<std::pair<TexelWindow, GpuTensor>> bind_texels(VulkanDevice& dev, const Arg& a, bool vec,
                                                      const std::string& name) {
  if (!texels_fit(dev, a))
    return Err(Code::unsupported)
        .tensor(name)
        .device(dev.id())
        .expected("a texel buffer view of at most " + std::to_string(dev.max_texels()) + " texels")
        .got(a.desc.str() + ", which cannot be split further");
  DUET_TRY(check_addressable(dev, a, name));
  auto [lo, hi] = byte_range(a);
  auto [start, range] = texel_span(dev, a);
  const uint64_t e = static_cast<uint64_t>(elem_bytes(a.desc.dtype));
  // Rounding up to 16 bytes may pass the tensor's end, never its allocation (256-byte granules).
  const uint64_t end = a.buf->base() + (a.buf->size() + 255) / 256 * 256;
  if (start + range > end) range = (end - start) / 16 * 16;
  VkFormat f = VK_FORMAT_R32G32B32A32_UINT;
  if (!vec) {
    f = e == 4 ? VK_FORMAT_R32_UINT : VK_FORMAT_R16_UINT;
    range = (hi - start + e - 1) / e * e;
  }
  return std::make_pair(TexelWindow{a.buf->vk(), start, range, f},
                        gpu_tensor(a.desc, static_cast<uint32_t>((lo - start) / e)));
}

TensorDesc slice_dim(const TensorDesc& d, int dim, int64_t s, int64_t e) {
  TensorDesc r = d;
  r.offset += s * d.strides[static_cast<size_t>(dim)];
  r.shape[static_cast<size_t>(dim)] = e - s;
  return r;
}

std::array<uint32_t, 3> grid(uint64_t groups) {
  const uint64_t x = std::min<uint64_t>(std::max<uint64_t>(groups, 1), 65535);
  return {static_cast<uint32_t>(x), static_cast<uint32_t>((groups + x - 1) / x), 1};
}

// Grid-stride kernels: enough workgroups to cover n elements, capped (each loops).
std::array<uint32_t, 3> flat_grid(uint64_t n, int block) {
  uint64_t g = (n + static_cast<uint64_t>(block) - 1) / static_cast<uint64_t>(block);
  return grid(std::min<uint64_t>(g, 65535ull * 16));
}

using Emit = std::function<Status(const std::vector<Arg>&)>;

// Splits args[0..n_sliced) (all indexed like args[0], the output) along dims in `dims` until every
// arg fits in a window, then emits. Args past n_sliced are bound whole.
Status split_emit(VulkanDevice& dev, std::vector<Arg> args, size_t n_sliced,
                  const std::vector<int>& dims, const Emit& emit,
                  const std::function<bool(const std::vector<Arg>&)>& extra_fits = {}) {
  bool ok = !extra_fits || extra_fits(args);
  for (const Arg& a : args) ok = ok && fits(dev, a);
  if (ok) return emit(args);
  for (int d : dims) {
    const int64_t n = args[0].desc.shape[static_cast<size_t>(d)];
    if (n <= 1) continue;
    const int64_t h = n / 2;
    for (auto [s, e] : {std::pair<int64_t, int64_t>{0, h}, {h, n}}) {
      std::vector<Arg> part = args;
      for (size_t i = 0; i < n_sliced; ++i) part[i].desc = slice_dim(args[i].desc, d, s, e);
      DUET_TRY(split_emit(dev, part, n_sliced, dims, emit, extra_fits));
    }
    return {};
  }
  // Nothing left to split: bind() reports which tensor is too large.
  return emit(args);
}

std::vector<int> leading_dims(int rank, int keep_last) {
  std::vector<int> d;
  for (int i = 0; i < rank - keep_last; ++i) d.push_back(i);
  return d;
}

struct Ctx {
  VulkanDevice& dev;
  const OpDesc& op;
  const KernelChoice& choice;
  Status bind_into(Dispatch& d, int binding, int td, const Arg& a, bool write,
                   const std::string& name) const {
    DUET_ASSIGN_OR_RETURN(auto wt, bind(dev, a, write, name));
    d.bind[static_cast<size_t>(binding)] = wt.first;
    if (td >= 0) d.params.td[td] = wt.second;
    return {};
  }
  Status bind_texels_into(Dispatch& d, int slot, int td, const Arg& a, bool vec,
                          const std::string& name) const {
    DUET_ASSIGN_OR_RETURN(auto wt, bind_texels(dev, a, vec, name));
    d.texel[static_cast<size_t>(slot)] = wt.first;
    d.params.td[td] = wt.second;
    return {};
  }
  // Binds the op's run-time scalar (when it has one) and an error slot through which the shader
  // reports a bad value of it: the message names the op and the scalar, then `word` and the value,
  // then `suffix`.
  Status bind_scalar(Dispatch& d, const Arg* scalar, const std::string& word,
                     const std::string& suffix) const {
    if (!scalar) return {};
    const int si = scalar_input(op);
    DUET_ASSIGN_OR_RETURN(
        auto wt, vulkan::bind(dev, *scalar, false, op.input_name(static_cast<size_t>(si))));
    DUET_ASSIGN_OR_RETURN(
        uint32_t slot,
        dev.recorder().error_slot(std::string(op_name(op.kind)) + " '" + op.name + "': tensor '" +
                                      op.input_name(static_cast<size_t>(si)) + "'",
                                  word, suffix));
    d.scalar = wt.first;
    d.errors = dev.recorder().error_window();
    d.params.rt = {1u + wt.second.offset, slot, 0, 0};
    return {};
  }
  int block() const { return choice.launch.block_threads > 0 ? choice.launch.block_threads : 64; }
  bool register_blocked() const { return choice.tier == Tier::register_blocked; }
};

// ---- elementwise ----------------------------------------------------------------------------

// Whether an op over `p` (output first) runs as a *_vec shader (eltwise, softmax, norm, convert):
// on CPU devices, where a texel fetch of 16 bytes costs less than one storage-buffer element
// (docs/vulkan.md), when every tensor is dense and starts on 16 bytes, the length is whole texels
// and the output's offset in its window (`out_offset`, in elements) is too. Row ops also need
// rows of whole texels.
bool vector_path(const Ctx& c, const std::vector<Arg>& p, uint32_t out_offset) {
  const int64_t v = texel_vec(p[0].desc.dtype);
  if (c.dev.caps().type != DeviceType::cpu || c.dev.max_texels() == 0 ||
      p[0].desc.numel() % v != 0 || out_offset % v != 0)
    return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (!p[i].desc.is_contiguous() || byte_range(p[i]).first % 16 != 0 ||
        (i > 0 && !texels_fit(c.dev, p[i])))
      return false;
  return true;
}

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

// ---- rows: softmax, rmsnorm, layernorm -------------------------------------------------------

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

// ---- rope -------------------------------------------------------------------------------------

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

// ---- reductions ------------------------------------------------------------------------------

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

// ---- data movement ----------------------------------------------------------------------------

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
  DUET_TRY(c.bind_scalar(d, pos, "offset",
                         " puts the " + std::to_string(len) + " written rows outside [0, " +
                             std::to_string(cap) + ") along axis " + std::to_string(axis)));
  d.params.u = {static_cast<uint32_t>(len * inner), static_cast<uint32_t>(cap),
                static_cast<uint32_t>(inner), static_cast<uint32_t>(c.op.attrs.start)};
  d.params.u2 = {static_cast<uint32_t>(len), 0, 0, 0};
  d.groups = flat_grid(static_cast<uint64_t>(x.desc.numel()), c.block());
  return c.dev.recorder().record(d);
}

// ---- matmul -----------------------------------------------------------------------------------

struct MatmulJob {
  Arg a, b, y;  // a [b0,b1,M,K], b [b0,b1,K,N], y [b0,b1,M,N] (rank 4)
  bool accumulate = false;
};

Status matmul_emit_tiled(const Ctx& c, const MatmulJob& j) {
  const LaunchConfig& l = c.choice.launch;
  int tm = 4, tn = 4;
  if (std::sscanf(l.variant.c_str(), "tiled_%dx%d", &tm, &tn) != 2)
    return Err(Code::internal).device(c.dev.id()).note("matmul launch variant " + l.variant);
  Dispatch d;
  d.shader = "matmul_" + T(j.y.desc.dtype);
  d.spec = {static_cast<uint32_t>(l.block_threads),
            static_cast<uint32_t>(l.tile_m),
            static_cast<uint32_t>(l.tile_n),
            static_cast<uint32_t>(l.tile_k),
            static_cast<uint32_t>(tm),
            static_cast<uint32_t>(tn)};
  DUET_TRY(c.bind_into(d, 1, 0, j.y, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, j.a, false, c.op.input_name(0)));
  DUET_TRY(c.bind_into(d, 3, 2, j.b, false, c.op.input_name(1)));
  const int64_t M = j.y.desc.dim(2), N = j.y.desc.dim(3), K = j.a.desc.dim(3);
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K),
                j.accumulate ? 1u : 0u};
  const uint64_t batches = static_cast<uint64_t>(j.y.desc.dim(0) * j.y.desc.dim(1));
  d.groups = {static_cast<uint32_t>((N + l.tile_n - 1) / l.tile_n),
              static_cast<uint32_t>((M + l.tile_m - 1) / l.tile_m), static_cast<uint32_t>(batches)};
  if (d.groups[1] > 65535 || d.groups[2] > 65535)
    return Err(Code::unsupported)
        .op("matmul", c.op.name)
        .device(c.dev.id())
        .expected("at most 65535 row tiles and batch entries")
        .got(describe(c.op));
  return c.dev.recorder().record(d);
}

// The "register_blocked" GEMM (matmul_blocked.comp): each invocation a TM x TN register block,
// operands through texel views, vector texels where both operands' layouts allow (mode 1: B along
// K, mode 2: B along N), else one element per fetch (mode 0).
Status matmul_emit_blocked(const Ctx& c, const MatmulJob& j) {
  const LaunchConfig& l = c.choice.launch;
  int tm = 0, tn = 0;
  if (std::sscanf(l.variant.c_str(), "blocked_%dx%d", &tm, &tn) != 2 || tm < 1 || tn < 1)
    return Err(Code::internal).device(c.dev.id()).note("matmul launch variant " + l.variant);
  const int64_t M = j.y.desc.dim(2), N = j.y.desc.dim(3), K = j.a.desc.dim(3);
  const int64_t vec = texel_vec(j.a.desc.dtype);
  uint32_t mode = 0;
  if (vector_ok(j.a, 3)) {
    if (vector_ok(j.b, 2))
      mode = 1;
    else if (vector_ok(j.b, 3) && tn % vec == 0)
      mode = 2;
  }
  Dispatch d;
  d.shader = "matmul_blocked_" + T(j.y.desc.dtype);
  d.spec = {static_cast<uint32_t>(l.block_threads), static_cast<uint32_t>(tm),
            static_cast<uint32_t>(tn), mode};
  DUET_TRY(c.bind_into(d, 1, 0, j.y, true, "output"));
  DUET_TRY(c.bind_texels_into(d, 0, 1, j.a, mode != 0, c.op.input_name(0)));
  DUET_TRY(c.bind_texels_into(d, 1, 2, j.b, mode != 0, c.op.input_name(1)));
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K),
                j.accumulate ? 1u : 0u};
  const uint64_t batches = static_cast<uint64_t>(j.y.desc.dim(0) * j.y.desc.dim(1));
  const int64_t cols = static_cast<int64_t>(l.block_threads) * tn;
  d.groups = {static_cast<uint32_t>((N + cols - 1) / cols),
              static_cast<uint32_t>((M + tm - 1) / tm), static_cast<uint32_t>(batches)};
  if (d.groups[0] > 65535 || d.groups[1] > 65535 || d.groups[2] > 65535)
    return Err(Code::unsupported)
        .op("matmul", c.op.name)
        .device(c.dev.id())
        .expected("at most 65535 workgroups along columns, rows and batch entries")
        .got(describe(c.op));
  return c.dev.recorder().record(d);
}

// Splits until every operand fits what binds it (a storage-buffer window, or a texel view for
// the "register_blocked" kernel's A and B): batch first, then the dimension of the operand that is
// outermost in its memory (M or K for A; K or N for B), accumulating over K.
Status matmul_split(const Ctx& c, const MatmulJob& j) {
  const bool blocked = c.register_blocked();
  auto fits_in = [&](const Arg& a) { return blocked ? texels_fit(c.dev, a) : fits(c.dev, a); };
  const bool fa = fits_in(j.a), fb = fits_in(j.b), fy = fits(c.dev, j.y);
  if (fa && fb && fy) return blocked ? matmul_emit_blocked(c, j) : matmul_emit_tiled(c, j);
  auto halves = [](int64_t n) {
    return std::array<std::pair<int64_t, int64_t>, 2>{{{0, n / 2}, {n / 2, n}}};
  };
  for (int bd = 0; bd < 2; ++bd) {
    const int64_t n = j.y.desc.dim(bd);
    if (n <= 1) continue;
    for (auto [s, e] : halves(n)) {
      MatmulJob p = j;
      p.a.desc = slice_dim(j.a.desc, bd, s, e);
      p.b.desc = slice_dim(j.b.desc, bd, s, e);
      p.y.desc = slice_dim(j.y.desc, bd, s, e);
      DUET_TRY(matmul_split(c, p));
    }
    return {};
  }
  const int64_t M = j.y.desc.dim(2), N = j.y.desc.dim(3), K = j.a.desc.dim(3);
  enum { kM, kN, kK } dim;
  if (!fy || (!fa && j.a.desc.strides[2] >= j.a.desc.strides[3])) {
    dim = kM;
  } else if (!fa) {
    dim = kK;
  } else {
    dim = j.b.desc.strides[3] > j.b.desc.strides[2] ? kN : kK;
  }
  const int64_t n = dim == kM ? M : dim == kN ? N : K;
  if (n <= 1)
    return blocked ? matmul_emit_blocked(c, j) : matmul_emit_tiled(c, j);  // bind() says why
  bool first = true;
  for (auto [s, e] : halves(n)) {
    MatmulJob p = j;
    if (dim == kM) {
      p.a.desc = slice_dim(j.a.desc, 2, s, e);
      p.y.desc = slice_dim(j.y.desc, 2, s, e);
    } else if (dim == kN) {
      p.b.desc = slice_dim(j.b.desc, 3, s, e);
      p.y.desc = slice_dim(j.y.desc, 3, s, e);
    } else {
      p.a.desc = slice_dim(j.a.desc, 3, s, e);
      p.b.desc = slice_dim(j.b.desc, 2, s, e);
      p.accumulate = j.accumulate || !first;
    }
    first = false;
    DUET_TRY(matmul_split(c, p));
  }
  return {};
}

Status matmul(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  // Logical A [.., M, K] and B [.., K, N], broadcast to the output's batch dims, all rank 4.
  TensorDesc a = in[0].desc, b = in[1].desc;
  if (c.op.attrs.transpose_a) a = *transpose(a, -1, -2);
  if (c.op.attrs.transpose_b) b = *transpose(b, -1, -2);
  const TensorDesc& y = out.desc;
  std::vector<int64_t> ya(4, 1), yb(4, 1), yy(4, 1);
  for (int i = 0; i < y.rank; ++i)
    yy[static_cast<size_t>(4 - y.rank + i)] = y.shape[static_cast<size_t>(i)];
  ya = {yy[0], yy[1], a.dim(-2), a.dim(-1)};
  yb = {yy[0], yy[1], b.dim(-2), b.dim(-1)};
  DUET_ASSIGN_OR_RETURN(TensorDesc a4, broadcast_to(a, ya));
  DUET_ASSIGN_OR_RETURN(TensorDesc b4, broadcast_to(b, yb));
  DUET_ASSIGN_OR_RETURN(TensorDesc y4, reshape(y, yy));
  return matmul_split(c, MatmulJob{{a4, in[0].buf}, {b4, in[1].buf}, {y4, out.buf}, false});
}

// ---- block-quantized weights ------------------------------------------------------------------

// A block-quantized weight or table [rows, K] bound as a uniform texel buffer of 32-bit words
// (the texel-buffer kernels) or as a storage-buffer window (the shared-memory kernels): the view
// starts at the device's alignment below row 0, `row0` is row 0's byte in the view and
// `row_bytes` the bytes from one row to the next. Blocks start on even bytes, so a kernel reads
// any field with at most two word fetches (quant.glsl); the view reaches one word past the last
// block where the allocation allows, for the second of them.
struct QuantView {
  TexelWindow win;
  uint32_t row0 = 0, row_bytes = 0;
};

std::pair<uint64_t, uint64_t> quant_span(VulkanDevice& dev, const Arg& w, bool storage) {
  const TensorDesc& d = w.desc;
  const int64_t be = dtype_block_elems(d.dtype), bb = dtype_block_bytes(d.dtype);
  const int64_t last = d.offset + (d.shape[0] - 1) * d.strides[0] + d.shape[1];
  const uint64_t lo = w.buf->base() + static_cast<uint64_t>(d.offset / be * bb);
  const uint64_t hi = w.buf->base() + static_cast<uint64_t>((last + be - 1) / be * bb);
  const uint64_t align = storage ? dev.window_alignment() : dev.texel_alignment();
  const uint64_t start = lo / align * align;
  const uint64_t end = w.buf->base() + (w.buf->size() + 255) / 256 * 256;
  return {start, (std::min(hi + 4, end) - start) / 4 * 4};
}

// Whether the weight fits one view: maxTexelBufferElements words, or maxStorageBufferRange bytes.
bool quant_fits(VulkanDevice& dev, const Arg& w, bool storage = false) {
  const uint64_t range = quant_span(dev, w, storage).second;
  return storage ? range <= dev.max_window()
                 : dev.max_texels() > 0 && range / 4 <= dev.max_texels();
}

Result<QuantView> bind_quant(const Ctx& c, const Arg& w, const std::string& name,
                             bool storage = false) {
  const TensorDesc& d = w.desc;
  const int64_t be = dtype_block_elems(d.dtype), bb = dtype_block_bytes(d.dtype);
  if (d.rank != 2 || d.strides[1] != 1 || d.offset % be != 0 || d.strides[0] % be != 0)
    return Err(Code::invalid_argument)
        .op(op_name(c.op.kind), c.op.name)
        .tensor(name)
        .device(c.dev.id())
        .expected("rows of whole " + std::string(dtype_name(d.dtype)) + " blocks")
        .got(d.str());
  if (!quant_fits(c.dev, w, storage))
    return Err(Code::unsupported)
        .tensor(name)
        .device(c.dev.id())
        .expected(storage ? "a storage buffer window of at most " +
                                std::to_string(c.dev.max_window()) + " bytes"
                          : "a texel buffer view of at most " + std::to_string(c.dev.max_texels()) +
                                " words")
        .got(d.str() + ", which cannot be split further");
  auto [start, range] = quant_span(c.dev, w, storage);
  const uint64_t lo = w.buf->base() + static_cast<uint64_t>(d.offset / be * bb);
  const uint64_t row_bytes = static_cast<uint64_t>(d.strides[0] / be * bb);
  if (lo - start + row_bytes * static_cast<uint64_t>(d.shape[0]) > (uint64_t{1} << 32) - 1)
    return Err(Code::unsupported)
        .tensor(name)
        .device(c.dev.id())
        .expected("fewer than 2^32 bytes per view")
        .got(d.str());
  return QuantView{TexelWindow{w.buf->vk(), start, range, VK_FORMAT_R32_UINT},
                   static_cast<uint32_t>(lo - start), static_cast<uint32_t>(row_bytes)};
}

// quantize_q8.comp: the activations a [b0, b1, M, K] as q8 blocks (three 16-byte texels per 32
// values, five in the `pairs` form; rows batch-major) in a scratch buffer, bound for the int_dot
// matmul at texel slot 0.
Result<TexelWindow> quantize_q8(const Ctx& c, const Arg& a, bool pairs) {
  const int64_t K = a.desc.dim(3), blocks = a.desc.numel() / 32;
  const uint64_t bytes = static_cast<uint64_t>(blocks) * (pairs ? 80 : 48);
  if (c.dev.max_texels() == 0 || bytes / 16 > c.dev.max_texels())
    return Err(Code::unsupported)
        .op("matmul", c.op.name)
        .tensor(c.op.input_name(0))
        .device(c.dev.id())
        .expected("q8 activation blocks within one texel view of " +
                  std::to_string(c.dev.max_texels()) + " texels")
        .got(a.desc.str());
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<VkBuf> q, c.dev.scratch(bytes));
  const uint32_t avec = vector_ok(a, 3) ? 1u : 0u;
  Dispatch d;
  d.shader = "quantize_q8_" + T(a.desc.dtype);
  d.spec = {static_cast<uint32_t>(c.block()), avec, pairs ? 1u : 0u};
  d.bind[1] = {q->vk(), q->base(), bytes, true};
  DUET_TRY(c.bind_texels_into(d, 0, 1, a, avec != 0, c.op.input_name(0)));
  d.params.u = {static_cast<uint32_t>(K), 0u, 0u, 0u};
  d.groups = flat_grid(static_cast<uint64_t>(blocks), c.block());
  DUET_TRY(c.dev.recorder().record(d));
  return TexelWindow{q->vk(), q->base(), bytes, VK_FORMAT_R32G32B32A32_UINT};
}

// Records a quantized matmul dispatch over y [b0, b1, M, N]: workgroups of `cols` columns by
// `rows` rows, one batch entry each along z.
Status record_qmatmul(const Ctx& c, Dispatch& d, const Arg& y, int64_t cols, int64_t rows) {
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3);
  const uint64_t batches = static_cast<uint64_t>(y.desc.dim(0) * y.desc.dim(1));
  if ((N + cols - 1) / cols > 65535 || (M + rows - 1) / rows > 65535 || batches > 65535)
    return Err(Code::unsupported)
        .op("matmul", c.op.name)
        .device(c.dev.id())
        .expected("at most 65535 workgroups along columns, rows and batch entries")
        .got(describe(c.op));
  d.groups = {static_cast<uint32_t>((N + cols - 1) / cols),
              static_cast<uint32_t>((M + rows - 1) / rows), static_cast<uint32_t>(batches)};
  return c.dev.recorder().record(d);
}

// matmul_q_tiled.comp (tier "tiled"): the shared-memory kernel, every operand a storage-buffer
// window, BM x BN outputs per workgroup.
Status qmatmul_tiled_emit(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  const LaunchConfig& l = c.choice.launch;
  int bm = 0, bn = 0, tm = 0, tn = 0;
  if (std::sscanf(l.variant.c_str(), "qtiled_%dx%d_%dx%d", &bm, &bn, &tm, &tn) != 4 || bm < 1 ||
      bn < 1 || tm < 1 || tn < 1 || bm % tm || bn % tn)
    return Err(Code::internal).device(c.dev.id()).note("matmul launch variant " + l.variant);
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3), K = a.desc.dim(3);
  Dispatch d;
  d.shader = "matmul_q_tiled_" + T(y.desc.dtype) + "_" + T(w.desc.dtype);
  d.spec = {static_cast<uint32_t>((bm / tm) * (bn / tn)), static_cast<uint32_t>(bm),
            static_cast<uint32_t>(bn), static_cast<uint32_t>(tm), static_cast<uint32_t>(tn)};
  DUET_TRY(c.bind_into(d, 1, 0, y, true, "output"));
  DUET_TRY(c.bind_into(d, 2, 1, a, false, c.op.input_name(0)));
  DUET_ASSIGN_OR_RETURN(QuantView v, bind_quant(c, w, c.op.input_name(1), true));
  d.bind[3] = {v.win.buffer, v.win.offset, v.win.range, false};
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K), 0u};
  d.params.u2 = {v.row0, v.row_bytes, 0u, 0u};
  return record_qmatmul(c, d, y, bn, bm);
}

// matmul_q.comp (float path) or matmul_qdot.comp (int_dot: after quantize_q8): y [b0, b1, M, N]
// = a [b0, b1, M, K] x w [N, K]^T, w in blocks.
Status qmatmul_emit(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  if (c.choice.tier == Tier::tiled) return qmatmul_tiled_emit(c, a, w, y);
  const LaunchConfig& l = c.choice.launch;
  const bool int_dot = c.choice.tier == Tier::int_dot;
  int tm = 1, tn = 4;
  const int parsed = int_dot ? std::sscanf(l.variant.c_str(), "qdot_%dx%d", &tm, &tn)
                             : std::sscanf(l.variant.c_str(), "q_%dx%d", &tm, &tn);
  if (parsed != 2 || tm < 1 || tn < 1)
    return Err(Code::internal).device(c.dev.id()).note("matmul launch variant " + l.variant);
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3), K = a.desc.dim(3);
  Dispatch d;
  d.shader =
      std::string(int_dot ? "matmul_qdot_" : "matmul_q_") + T(y.desc.dtype) + "_" + T(w.desc.dtype);
  d.spec = {static_cast<uint32_t>(c.block()), static_cast<uint32_t>(tm), static_cast<uint32_t>(tn)};
  if (int_dot) {
    // "_swar": byte pairs multiplied in 32-bit words (matmul_qdot.comp's SWAR) instead of OpSDot.
    const bool swar = l.variant.find("_swar") != std::string::npos;
    d.spec.push_back(swar ? 1u : 0u);
    DUET_ASSIGN_OR_RETURN(d.texel[0], quantize_q8(c, a, swar));
  } else {
    const uint32_t avec = vector_ok(a, 3) ? 1u : 0u;
    d.spec.push_back(avec);
    DUET_TRY(c.bind_texels_into(d, 0, 1, a, avec != 0, c.op.input_name(0)));
  }
  DUET_TRY(c.bind_into(d, 1, 0, y, true, "output"));
  DUET_ASSIGN_OR_RETURN(QuantView v, bind_quant(c, w, c.op.input_name(1)));
  d.texel[1] = v.win;
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K), 0u};
  d.params.u2 = {v.row0, v.row_bytes, 0u, 0u};
  return record_qmatmul(c, d, y, static_cast<int64_t>(c.block()) * tn, tm);
}

// Splits until the weight's view, the activations' view and the output's window fit: weight rows
// (N) first, then batch entries, then activation rows (M). The reduction is never split. The
// texel-buffer kernels' views are bounded by maxTexelBufferElements, the shared-memory kernel's
// windows by maxStorageBufferRange; weight windows hold whole rows, so whole blocks.
Status qmatmul_split(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  const bool storage = c.choice.tier == Tier::tiled;
  const bool fw = quant_fits(c.dev, w, storage), fy = fits(c.dev, y);
  const bool fa = storage ? fits(c.dev, a) : texels_fit(c.dev, a);
  if (fw && fa && fy) return qmatmul_emit(c, a, w, y);
  auto halves = [](int64_t n) {
    return std::array<std::pair<int64_t, int64_t>, 2>{{{0, n / 2}, {n / 2, n}}};
  };
  const int64_t N = w.desc.dim(0);
  if (!fw && N > 1) {
    for (auto [s, e] : halves(N))
      DUET_TRY(qmatmul_split(c, a, {slice_dim(w.desc, 0, s, e), w.buf},
                             {slice_dim(y.desc, 3, s, e), y.buf}));
    return {};
  }
  for (int dim : {0, 1, 2}) {
    const int64_t n = y.desc.dim(dim);
    if (n <= 1 || (fa && fy)) continue;
    for (auto [s, e] : halves(n))
      DUET_TRY(qmatmul_split(c, {slice_dim(a.desc, dim, s, e), a.buf}, w,
                             {slice_dim(y.desc, dim, s, e), y.buf}));
    return {};
  }
  return qmatmul_emit(c, a, w, y);  // the binding says what does not fit
}

Status qmatmul(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  TensorDesc a = in[0].desc;
  if (c.op.attrs.transpose_a) a = *transpose(a, -1, -2);
  const TensorDesc& y = out.desc;
  std::vector<int64_t> yy(4, 1);
  for (int i = 0; i < y.rank; ++i)
    yy[static_cast<size_t>(4 - y.rank + i)] = y.shape[static_cast<size_t>(i)];
  DUET_ASSIGN_OR_RETURN(TensorDesc a4,
                        broadcast_to(a, std::vector<int64_t>{yy[0], yy[1], a.dim(-2), a.dim(-1)}));
  DUET_ASSIGN_OR_RETURN(TensorDesc y4, reshape(y, yy));
  return qmatmul_split(c, {a4, in[0].buf}, in[1], {y4, out.buf});
}

// embedding_q.comp: rows of a block-quantized table dequantized, in windows of rows: gathered by
// ids (embedding, f32 out) or all of them in order (cast, `ids` null).
Status qrows(const Ctx& c, const Arg& out, const Arg& table, const Arg* ids_in) {
  const int64_t D = table.desc.dim(-1);
  const int64_t rows = out.desc.numel() / D;
  Arg out2{*reshape(out.desc, std::vector<int64_t>{rows, D}), out.buf};
  Arg tab = table;
  if (!ids_in) {
    DUET_ASSIGN_OR_RETURN(tab.desc, reshape(table.desc, std::vector<int64_t>{rows, D}));
  }
  const int64_t V = tab.desc.dim(0);
  Arg ids;
  uint32_t slot = 0;
  if (ids_in) {
    DUET_ASSIGN_OR_RETURN(TensorDesc flat, reshape(ids_in->desc, std::vector<int64_t>{rows}));
    ids = {flat, ids_in->buf};
    DUET_ASSIGN_OR_RETURN(slot, id_error_slot(c));
  }
  int64_t rows_per_window = V;
  // A cast's output rows are the table's: both must fit one window.
  while (rows_per_window > 1 &&
         (!quant_fits(c.dev, Arg{slice_dim(tab.desc, 0, 0, rows_per_window), tab.buf}) ||
          (!ids_in && !fits(c.dev, Arg{slice_dim(out2.desc, 0, 0, rows_per_window), out.buf}))))
    rows_per_window = (rows_per_window + 1) / 2;
  for (int64_t v0 = 0; v0 < V; v0 += rows_per_window) {
    const int64_t v1 = std::min(V, v0 + rows_per_window);
    const Arg tw{slice_dim(tab.desc, 0, v0, v1), tab.buf};
    auto emit = [&](const std::vector<Arg>& p) -> Status {
      Dispatch d;
      d.shader = "embedding_q_" + T(out.desc.dtype) + "_" + T(table.desc.dtype);
      d.dense_spec = true;
      d.spec = {static_cast<uint32_t>(c.block()), ids_in ? 1u : 0u};
      DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
      if (ids_in) {
        DUET_TRY(c.bind_into(d, 3, 2, p[1], false, c.op.input_name(1)));
        d.bind[4] = c.dev.recorder().error_window();
      }
      DUET_ASSIGN_OR_RETURN(QuantView v, bind_quant(c, tw, c.op.input_name(0)));
      d.texel[0] = v.win;
      d.params.u = {static_cast<uint32_t>(D), static_cast<uint32_t>(v0), static_cast<uint32_t>(v1),
                    static_cast<uint32_t>(V)};
      d.params.u2 = {slot, v0 == 0 ? 1u : 0u, c.op.attrs.negative_ids ? 1u : 0u, 0};
      d.params.u3 = {v.row0, v.row_bytes, 0, 0};
      d.groups = flat_grid(static_cast<uint64_t>(p[0].desc.numel() / 32), c.block());
      return c.dev.recorder().record(d);
    };
    // A cast writes the window's own rows; an embedding every output row whose id it holds.
    Status s = ids_in ? split_emit(c.dev, {out2, ids}, 2, {0}, emit)
                      : emit({Arg{slice_dim(out2.desc, 0, v0, v1), out.buf}});
    if (!s.ok()) return s;
  }
  return {};
}

// ---- attention --------------------------------------------------------------------------------

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

// The "register_blocked" attention (attention_blocked.comp): R rows per invocation, LR invocations
// along rows and LK along keys (variant "blocked_RxLR"), keys split `splits` ways more; the LK x
// splits partial results per row are merged by attention_combine.comp.
Status attention_blocked_emit(const Ctx& c, const std::vector<Arg>& p, const Arg* kv_len, int64_t G,
                              int64_t D) {
  const LaunchConfig& l = c.choice.launch;
  int R = 0, LR = 0;
  if (std::sscanf(l.variant.c_str(), "blocked_%dx%d", &R, &LR) != 2 || R < 1 || LR < 1 ||
      l.block_threads % LR != 0)
    return Err(Code::internal).device(c.dev.id()).note("attention launch variant " + l.variant);
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
  std::shared_ptr<VkBuf> part;
  if (parts > 1) {
    DUET_ASSIGN_OR_RETURN(part, c.dev.scratch(bh * static_cast<uint64_t>(parts * rows * ps) * 4));
    d.bind[6] = {part->vk(), part->base(), part->size(), true};
  } else {
    DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
  }
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

Status attention(const Ctx& c, const Arg& out, std::span<const Arg> in) {
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
      ok = ok && (c.register_blocked() && i > 0 ? texels_fit(c.dev, p[i]) : fits(c.dev, p[i]));
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
    if (c.register_blocked()) return attention_blocked_emit(c, p, kv_len, G, D);
    const uint64_t bh = static_cast<uint64_t>(b * hkv);
    Dispatch d;
    d.shader = "attention_" + T(t);
    d.spec = {static_cast<uint32_t>(l.block_threads), static_cast<uint32_t>(l.tile_m),
              static_cast<uint32_t>(l.tile_n), static_cast<uint32_t>(D)};
    std::shared_ptr<VkBuf> part;
    if (splits > 1) {
      DUET_ASSIGN_OR_RETURN(part,
                            c.dev.scratch(bh * static_cast<uint64_t>(splits * rows * (D + 2)) * 4));
      d.bind[6] = {part->vk(), part->base(), part->size(), true};
    } else {
      DUET_TRY(c.bind_into(d, 1, 0, p[0], true, "output"));
    }
    for (size_t i = 1; i < p.size(); ++i)
      DUET_TRY(c.bind_into(d, static_cast<int>(i + 1), static_cast<int>(i), p[i], false,
                           c.op.input_name(i - 1)));
    d.params.u = {static_cast<uint32_t>(Lq), static_cast<uint32_t>(Lk), static_cast<uint32_t>(G),
                  static_cast<uint32_t>(rows)};
    d.params.u2 = {c.op.attrs.causal ? 1u : 0u, p.size() > 4 ? 1u : 0u,
                   p.size() > 4 && p[4].desc.dtype == DType::f32 ? 1u : 0u,
                   static_cast<uint32_t>(splits)};
    d.params.u3 = {static_cast<uint32_t>(chunk), static_cast<uint32_t>(D), 0, 0};
    d.params.f[0] = attention_scale(c.op);
    DUET_TRY(c.bind_scalar(d, kv_len, "key count",
                           " is more than the " + std::to_string(Lk) + " keys of k and v"));
    d.groups = {static_cast<uint32_t>((rows + l.tile_m - 1) / l.tile_m), static_cast<uint32_t>(bh),
                static_cast<uint32_t>(splits)};
    return record_attention(c, d, p[0], part, splits);
  };
  return run(args);
}

}  // namespace

Status record_op(VulkanDevice& dev, const PlannedOp& p, std::span<const TensorRef> inputs,
                 const TensorRef& output) {
  // Arguments checked by Device::execute (core/src/device.cpp).
  const OpDesc& op = p.op;
  KernelChoice choice = p.choice;
  if (choice.launch.block_threads == 0) {
    // A choice made without a launch shape (e.g. by hand): take the rules' for this device.
    for (const KernelChoice& k : dev.choices(op))
      if (k.ok && k.tier == choice.tier && k.precision == choice.precision) choice = k;
  }
  std::vector<Arg> in;
  for (const TensorRef& r : inputs) in.push_back({r.desc, static_cast<VkBuf*>(r.buffer)});
  Arg out{output.desc, static_cast<VkBuf*>(output.buffer)};
  Ctx c{dev, op, choice};
  switch (op.kind) {
    case OpKind::matmul:
      return is_quantized(in[1].desc.dtype) ? qmatmul(c, out, in) : matmul(c, out, in);
    case OpKind::attention:
      return attention(c, out, in);
    case OpKind::softmax:
      return softmax(c, out, in);
    case OpKind::rmsnorm:
    case OpKind::layernorm:
      return norm(c, out, in);
    case OpKind::rope:
      return rope(c, out, in);
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
    case OpKind::reduce_max:
    case OpKind::reduce_min:
      return reduce(c, out, in);
    case OpKind::cast:
    case OpKind::copy:
      if (is_quantized(in[0].desc.dtype)) return qrows(c, out, in[0], nullptr);
      return convert(c, out, in[0], op.input_name(0));
    case OpKind::concat:
      return concat(c, out, in);
    case OpKind::embedding:
      return is_quantized(in[0].desc.dtype) ? qrows(c, out, in[0], &in[1]) : embedding(c, out, in);
    case OpKind::write_slice:
      return write_slice(c, out, in);
    default:
      if (op_class(op.kind) == OpClass::elementwise) return eltwise(c, out, in);
      return unsupported(dev, op, "no Vulkan kernel for this op");
  }
}

}  // namespace duet::vulkan
