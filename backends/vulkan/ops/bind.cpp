// Binding tensors as storage-buffer windows and texel views, and splitting ops until they fit
// (ops.h).
#include <algorithm>

#include "ops/ops.h"

namespace duet::vulkan::ops {

namespace {

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

// The texel view over `a` starts at its byte offset rounded down to the device's alignment; both
// a vector view (16-byte texels) and a scalar one (one element per texel) must stay within the
// device's texel count, so that either mode can be bound.
std::pair<uint64_t, uint64_t> texel_span(VulkanDevice& dev, const Arg& a) {
  auto [lo, hi] = byte_range(a);
  const uint64_t start = lo / dev.texel_alignment() * dev.texel_alignment();
  return {start, (hi - start + 15) / 16 * 16};
}

}  // namespace

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

// ---- texel views

// Elements per vector texel (R32G32B32A32_UINT): 4 f32, or 8 16-bit values.
int64_t texel_vec(DType t) {
  return 16 / elem_bytes(t);
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
                  const std::function<bool(const std::vector<Arg>&)>& extra_fits) {
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

Status Ctx::bind_into(Dispatch& d, int binding, int td, const Arg& a, bool write,
                      const std::string& name) const {
  DUET_ASSIGN_OR_RETURN(auto wt, ops::bind(dev, a, write, name));
  d.bind[static_cast<size_t>(binding)] = wt.first;
  if (td >= 0) d.params.td[td] = wt.second;
  return {};
}

Status Ctx::bind_texels_into(Dispatch& d, int slot, int td, const Arg& a, bool vec,
                             const std::string& name) const {
  DUET_ASSIGN_OR_RETURN(auto wt, bind_texels(dev, a, vec, name));
  d.texel[static_cast<size_t>(slot)] = wt.first;
  d.params.td[td] = wt.second;
  return {};
}

Status Ctx::bind_scalar(Dispatch& d, const Arg* scalar, const std::string& word,
                        const std::string& suffix) const {
  if (!scalar) return {};
  const int si = scalar_input(op);
  DUET_ASSIGN_OR_RETURN(auto wt,
                        ops::bind(dev, *scalar, false, op.input_name(static_cast<size_t>(si))));
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

}  // namespace duet::vulkan::ops
