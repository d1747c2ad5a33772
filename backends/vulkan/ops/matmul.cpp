// Float matmul: the shared-memory GEMM (gemm_tiled, matmul.comp), the register-blocked GEMM
// (gemm_blocked, matmul_blocked.comp), the mat-vec (matvec, matvec.comp) and cooperative
// matrices (gemm_coopmat, matmul_coopmat.comp).
#include "ops/ops.h"

namespace duet::vulkan::ops {

namespace {

struct MatmulJob {
  Arg a, b, y;  // a [b0,b1,M,K], b [b0,b1,K,N], y [b0,b1,M,N] (rank 4)
  bool accumulate = false;
};

Status matmul_emit_tiled(const Ctx& c, const MatmulJob& j) {
  const LaunchConfig& l = c.choice.launch;
  const int tm = c.kernel.tm, tn = c.kernel.tn;
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

// The register-blocked GEMM (gemm_blocked, matmul_blocked.comp): each invocation a TM x TN register
// block, operands through texel views, vector texels where both operands' layouts allow (mode 1: B
// along K, mode 2: B along N), else one element per fetch (mode 0).
Status matmul_emit_blocked(const Ctx& c, const MatmulJob& j) {
  const LaunchConfig& l = c.choice.launch;
  const int tm = c.kernel.tm, tn = c.kernel.tn;
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

// The mat-vec (matvec, matvec.comp): the weight bound as [b0, b1, N, K], rows along K.
Status matmul_emit_matvec(const Ctx& c, const MatmulJob& j) {
  Dispatch d = gpu_matmul_dispatch(c, j.y.desc.dtype);
  DUET_ASSIGN_OR_RETURN(TensorDesc w, transpose(j.b.desc, -1, -2));
  const Arg wa{w, j.b.buf};
  DUET_TRY(c.bind_into(d, 1, 0, j.y, true, "output"));
  DUET_TRY(bind_vec_a(c, d, j.a, 2));
  DUET_TRY(c.bind_into(d, 3, 2, wa, false, c.op.input_name(1)));
  widen16(d.bind[3], wa);
  d.spec[3] = vec_rows(d.params.td[2], texel_vec(w.dtype)) ? 1u : 0u;
  const int64_t M = j.y.desc.dim(2), N = j.y.desc.dim(3), K = j.a.desc.dim(3);
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K),
                j.accumulate ? 1u : 0u};
  return record_gpu_matmul(c, d, j.y);
}

// The cooperative-matrix GEMM (gemm_coopmat, matmul_coopmat.comp); B read along K 16 bytes at a
// time where it is stored [N, K].
Status matmul_emit_coopmat(const Ctx& c, const MatmulJob& j) {
  Dispatch d = gpu_matmul_dispatch(c, j.y.desc.dtype);
  DUET_TRY(c.bind_into(d, 1, 0, j.y, true, "output"));
  DUET_TRY(bind_vec_a(c, d, j.a, 1));
  DUET_TRY(c.bind_into(d, 3, 2, j.b, false, c.op.input_name(1)));
  widen16(d.bind[3], j.b);
  GpuTensor g = d.params.td[2];  // B's transpose: rows along K
  std::swap(g.shape[2], g.shape[3]);
  std::swap(g.stride[2], g.stride[3]);
  d.spec[2] = vec_rows(g, texel_vec(j.b.desc.dtype)) ? 1u : 0u;
  const int64_t M = j.y.desc.dim(2), N = j.y.desc.dim(3), K = j.a.desc.dim(3);
  d.params.u = {static_cast<uint32_t>(M), static_cast<uint32_t>(N), static_cast<uint32_t>(K),
                j.accumulate ? 1u : 0u};
  return record_gpu_matmul(c, d, j.y);
}

Status matmul_emit(const Ctx& c, const MatmulJob& j) {
  switch (c.kernel.family) {
    case Family::gemm_blocked:
      return matmul_emit_blocked(c, j);
    case Family::matvec:
      return matmul_emit_matvec(c, j);
    case Family::gemm_coopmat:
      return matmul_emit_coopmat(c, j);
    default:
      return matmul_emit_tiled(c, j);
  }
}

// Splits until every operand fits what binds it (a storage-buffer window, or a texel view for
// the texel-buffer kernel's A and B): batch first, then the dimension of the operand that is
// outermost in its memory (M or K for A; K or N for B), accumulating over K.
Status matmul_split(const Ctx& c, const MatmulJob& j) {
  const bool blocked = c.kernel.family == Family::gemm_blocked;
  auto fits_in = [&](const Arg& a) { return blocked ? texels_fit(c.dev, a) : fits(c.dev, a); };
  const bool fa = fits_in(j.a), fb = fits_in(j.b), fy = fits(c.dev, j.y);
  if (fa && fb && fy) return matmul_emit(c, j);
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
  if (n <= 1) return matmul_emit(c, j);  // bind() says why
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

}  // namespace

Status matmul(const Ctx& c, const Arg& out, std::span<const Arg> in) {
  if (c.kernel.family != Family::gemm_tiled && c.kernel.family != Family::gemm_blocked &&
      c.kernel.family != Family::matvec && c.kernel.family != Family::gemm_coopmat)
    return Err(Code::internal).device(c.dev.id()).note("matmul launched as " + c.kernel.name());
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

}  // namespace duet::vulkan::ops
