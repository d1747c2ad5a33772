// Block-quantized weights: matmul by qgemm_tiled (matmul_q_tiled.comp), qgemm_blocked
// (matmul_q.comp), qgemm_dot (quantize_q8.comp, then matmul_qdot.comp), the mat-vec (matvec.comp)
// or cooperative matrices (matmul_coopmat.comp); rows of a table
// dequantized (embedding_q.comp).
#include "ops/ops.h"

namespace duet::vulkan::ops {

namespace {

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

// matmul_q_tiled.comp (qgemm_tiled): the shared-memory kernel, every operand a storage-buffer
// window, BM x BN outputs per workgroup.
Status qmatmul_tiled_emit(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  const int bm = c.kernel.bm, bn = c.kernel.bn, tm = c.kernel.tm, tn = c.kernel.tn;
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

// matvec.comp (matvec) or matmul_coopmat.comp (gemm_coopmat): the weight a storage-buffer
// window of 32-bit words.
Status qmatmul_gpu_emit(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  Dispatch d = gpu_matmul_dispatch(c, w.desc.dtype);
  DUET_TRY(c.bind_into(d, 1, 0, y, true, "output"));
  DUET_TRY(bind_vec_a(c, d, a, c.kernel.family == Family::matvec ? 2 : 1));
  DUET_ASSIGN_OR_RETURN(QuantView v, bind_quant(c, w, c.op.input_name(1), true));
  d.bind[3] = {v.win.buffer, v.win.offset, v.win.range, false};
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3), K = a.desc.dim(3);
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K), 0u};
  d.params.u2 = {v.row0, v.row_bytes, 0u, 0u};
  return record_gpu_matmul(c, d, y);
}

// matmul_q.comp (float path) or matmul_qdot.comp (int_dot: after quantize_q8): y [b0, b1, M, N]
// = a [b0, b1, M, K] x w [N, K]^T, w in blocks.
Status qmatmul_emit(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  if (c.kernel.family == Family::qgemm_tiled) return qmatmul_tiled_emit(c, a, w, y);
  if (c.kernel.family == Family::matvec || c.kernel.family == Family::gemm_coopmat)
    return qmatmul_gpu_emit(c, a, w, y);
  const bool int_dot = c.kernel.family == Family::qgemm_dot;
  const int tm = c.kernel.tm, tn = c.kernel.tn;
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3), K = a.desc.dim(3);
  Dispatch d;
  d.shader =
      std::string(int_dot ? "matmul_qdot_" : "matmul_q_") + T(y.desc.dtype) + "_" + T(w.desc.dtype);
  d.spec = {static_cast<uint32_t>(c.block()), static_cast<uint32_t>(tm), static_cast<uint32_t>(tn)};
  // The q8 activations the int_dot matmul recorded just before this one made, when they are
  // this one's (DeviceOptions::share_q8): nothing was recorded or written since.
  std::optional<VulkanDevice::SharedQ8>& shared = c.dev.q8;
  const bool share = int_dot && c.dev.options().share_q8;
  if (int_dot) {
    // Byte pairs multiplied in 32-bit words (matmul_qdot.comp's SWAR) instead of OpSDot.
    const bool swar = c.kernel.swar;
    d.spec.push_back(swar ? 1u : 0u);
    if (share && shared && shared->at == c.dev.record_marks() && shared->buffer == a.buf->vk() &&
        shared->base == a.buf->base() && shared->a == a.desc && shared->pairs == swar) {
      d.texel[0] = shared->q8;
      ++c.dev.shared_q8;
    } else {
      shared.reset();
      DUET_ASSIGN_OR_RETURN(d.texel[0], quantize_q8(c, a, swar));
    }
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
  DUET_TRY(record_qmatmul(c, d, y, static_cast<int64_t>(c.block()) * tn, tm));
  if (share) {
    // Kept unless this matmul's output overlaps its activations.
    const auto [alo, ahi] = byte_range(a);
    const auto [ylo, yhi] = byte_range(y);
    if (a.buf->vk() != y.buf->vk() || yhi <= alo || ahi <= ylo)
      shared = VulkanDevice::SharedQ8{a.buf->vk(),   a.buf->base(), a.desc,
                                      c.kernel.swar, d.texel[0],    c.dev.record_marks()};
    else
      shared.reset();
  }
  return {};
}

// Splits until the weight's view, the activations' view and the output's window fit: weight rows
// (N) first, then batch entries, then activation rows (M). The reduction is never split. The
// texel-buffer kernels' views are bounded by maxTexelBufferElements, the shared-memory kernel's
// windows by maxStorageBufferRange; weight windows hold whole rows, so whole blocks.
Status qmatmul_split(const Ctx& c, const Arg& a, const Arg& w, const Arg& y) {
  const bool storage = c.kernel.family == Family::qgemm_tiled ||
                       c.kernel.family == Family::matvec || c.kernel.family == Family::gemm_coopmat;
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

// qmatmul's operands as [b0, b1, M, K] activations and [b0, b1, M, N] output.
Result<std::pair<Arg, Arg>> qmatmul_shapes(const Ctx& c, const Arg& out, const Arg& a_in) {
  TensorDesc a = a_in.desc;
  if (c.op.attrs.transpose_a) a = *transpose(a, -1, -2);
  const TensorDesc& y = out.desc;
  std::vector<int64_t> yy(4, 1);
  for (int i = 0; i < y.rank; ++i)
    yy[static_cast<size_t>(4 - y.rank + i)] = y.shape[static_cast<size_t>(i)];
  DUET_ASSIGN_OR_RETURN(TensorDesc a4,
                        broadcast_to(a, std::vector<int64_t>{yy[0], yy[1], a.dim(-2), a.dim(-1)}));
  DUET_ASSIGN_OR_RETURN(TensorDesc y4, reshape(y, yy));
  return std::pair<Arg, Arg>{Arg{a4, a_in.buf}, Arg{y4, out.buf}};
}

}  // namespace

Status qmatvec_group(VulkanDevice& dev, std::span<const HeldOp> held) {
  struct Member {
    Kernel kernel;
    Arg a, w, y;
  };
  std::vector<Member> m;
  bool fit = held.size() <= kMaxGroup;
  for (const HeldOp& h : held) {
    const Kernel* k = kernel_of(h.op.choice.launch);
    if (!k) return Err(Code::internal).device(dev.id()).note("a grouped mat-vec without a kernel");
    const Ctx c{dev, h.op.op, h.op.choice, *k};
    const Arg a_in{h.inputs[0].desc, static_cast<VkBuf*>(h.inputs[0].buffer)};
    const Arg w{h.inputs[1].desc, static_cast<VkBuf*>(h.inputs[1].buffer)};
    const Arg out{h.output.desc, static_cast<VkBuf*>(h.output.buffer)};
    DUET_ASSIGN_OR_RETURN(auto ay, qmatmul_shapes(c, out, a_in));
    fit = fit && quant_fits(dev, w, true) && fits(dev, ay.first) && fits(dev, ay.second);
    m.push_back({*k, ay.first, w, ay.second});
  }
  // A tensor past one window: each mat-vec alone, split as it needs.
  auto apart = [&]() -> Status {
    for (const HeldOp& h : held) DUET_TRY(record_op(dev, h.op, h.inputs, h.output));
    return {};
  };
  const int64_t M = m[0].y.desc.dim(2), K = m[0].a.desc.dim(3);
  const int64_t rows = m[0].kernel.bm, cols = m[0].kernel.bn;
  const uint64_t batches = static_cast<uint64_t>(m[0].y.desc.dim(0) * m[0].y.desc.dim(1));
  std::array<uint32_t, kMaxGroup + 1> starts{};  // each member's first workgroup along x
  for (size_t i = 0; i < m.size(); ++i)
    starts[i + 1] = starts[i] + static_cast<uint32_t>((m[i].y.desc.dim(3) + cols - 1) / cols);
  for (size_t i = m.size() + 1; i <= kMaxGroup; ++i) starts[i] = starts[m.size()];
  if (!fit || starts[m.size()] > 65535 || (M + rows - 1) / rows > 65535 || batches > 65535)
    return apart();

  const HeldOp& h0 = held[0];
  const Ctx c{dev, h0.op.op, h0.op.choice, m[0].kernel};
  Dispatch d = gpu_matmul_dispatch(c, m[0].w.desc.dtype);
  d.shader.insert(std::string("matvec_").size(), "group_");
  DUET_TRY(c.bind_into(d, 1, 0, m[0].y, true, "output"));
  DUET_TRY(bind_vec_a(c, d, m[0].a, 2));
  std::array<uint32_t, 2 * kMaxGroup> wrow{};
  for (size_t i = 0; i < m.size(); ++i) {
    const HeldOp& h = held[i];
    const Ctx ci{dev, h.op.op, h.op.choice, m[i].kernel};
    DUET_ASSIGN_OR_RETURN(QuantView v, bind_quant(ci, m[i].w, h.op.op.input_name(1), true));
    d.bind[3 + i] = {v.win.buffer, v.win.offset, v.win.range, false};
    wrow[2 * i] = v.row0;
    wrow[2 * i + 1] = v.row_bytes;
    if (i == 1) DUET_TRY(ci.bind_into(d, 6, 2, m[i].y, true, "output"));
    if (i == 2) {
      // The third output at the run-time scalar's binding (a mat-vec has no scalar).
      DUET_ASSIGN_OR_RETURN(auto wt, bind(dev, m[i].y, true, "output"));
      d.scalar = wt.first;
      d.params.td[3] = wt.second;
    }
  }
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(m[0].y.desc.dim(3)),
                static_cast<uint32_t>(K), 0u};
  d.params.u2 = {wrow[0], wrow[1], wrow[2], wrow[3]};
  d.params.u3 = {wrow[4], wrow[5], starts[1], starts[2]};
  d.groups = {starts[m.size()], static_cast<uint32_t>((M + rows - 1) / rows),
              static_cast<uint32_t>(batches)};
  DUET_TRY(dev.recorder().record(d));
  ++dev.groups;
  dev.grouped += m.size();
  return {};
}

Status qmatmul(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  if (c.kernel.family != Family::qgemm_tiled && c.kernel.family != Family::qgemm_blocked &&
      c.kernel.family != Family::qgemm_dot && c.kernel.family != Family::matvec &&
      c.kernel.family != Family::gemm_coopmat)
    return Err(Code::internal).device(c.dev.id()).note("matmul launched as " + c.kernel.name());
  DUET_ASSIGN_OR_RETURN(auto ay, qmatmul_shapes(c, out, in[0]));
  return qmatmul_split(c, ay.first, in[1], ay.second);
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

}  // namespace duet::vulkan::ops
