#include "host/launch_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "duet/kernels/arch.h"
#include "duet/kernels/kernel.h"
#include "duet/kernels/select.h"
#include "host/shapes.h"

namespace duet::kernels {

namespace detail {

namespace {

static_assert(static_cast<int>(dev::Elt::f32) == static_cast<int>(DType::f32) &&
              static_cast<int>(dev::Elt::f16) == static_cast<int>(DType::f16) &&
              static_cast<int>(dev::Elt::bf16) == static_cast<int>(DType::bf16) &&
              static_cast<int>(dev::Elt::i8) == static_cast<int>(DType::i8) &&
              static_cast<int>(dev::Elt::i32) == static_cast<int>(DType::i32));
static_assert(static_cast<int>(dev::QFmt::q8_0) == static_cast<int>(DType::q8_0) &&
              static_cast<int>(dev::QFmt::q6_k) == static_cast<int>(DType::q6_k) &&
              static_cast<int>(dev::QFmt::q4_z) == static_cast<int>(DType::q4_z));

constexpr float kLog2e = 1.4426950408889634f;
constexpr uint64_t kAlign = 256;  // workspace sub-buffers start on this boundary

dev::Elt elt(DType t) {
  return static_cast<dev::Elt>(t);
}

uint64_t round_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// A view right-aligned against a rank-4 `target` shape; dims of size 1 that the target
// stretches get stride 0 (numpy broadcasting).
dev::Strided strided(const View& v, const int64_t (&target)[4]) {
  dev::Strided s;
  s.data = v.data;
  s.dtype = elt(v.dtype);
  const int lead = 4 - v.rank;
  for (int d = 0; d < 4; ++d) {
    s.shape[d] = target[d];
    const int vd = d - lead;
    if (vd < 0) continue;
    s.stride[d] = v.shape[vd] == 1 && target[d] != 1 ? 0 : v.strides[vd];
  }
  return s;
}

// A view padded to rank 4 over its own shape.
dev::Strided strided(const View& v) {
  int64_t shape[4] = {1, 1, 1, 1};
  for (int d = 0; d < v.rank; ++d) shape[4 - v.rank + d] = v.shape[d];
  return strided(v, shape);
}

void padded_shape(const TensorDesc& t, int64_t (&shape)[4]) {
  for (int d = 0; d < 4; ++d) shape[d] = 1;
  for (int d = 0; d < t.rank; ++d) shape[4 - t.rank + d] = t.shape[static_cast<size_t>(d)];
}

class Planner {
 public:
  Planner(Tier tier, const OpDesc& op, std::span<const View> in, const View& out,
          const Launch& launch, std::string_view device)
      : tier_(tier), op_(op), in_(in), out_(out), launch_(launch), device_(device) {}

  Result<std::vector<Call>> run() {
    DUET_TRY(check_views());
    if (op_.kind == OpKind::attention) {
      if (tier_ == Tier::generic) return gen_attention();
      if (tier_ == Tier::tiled || tier_ == Tier::flash) return attention_tc();
      if (tier_ == Tier::wgmma) return attention_wgmma();
      return no_kernel("generic, tiled, flash or wgmma");
    }
    if (op_.kind == OpKind::matmul) {
      if (is_quantized(op_.inputs[1].dtype)) {
        if (tier_ == Tier::generic) return gen_qmatmul();
        if (tier_ == Tier::int_dot || tier_ == Tier::int8_mma) return int_qmatmul();
        return no_kernel("generic, int_dot or int8_mma for block formats");
      }
      if (tier_ == Tier::generic) return gen_matmul();
      if (tier_ == Tier::tiled || tier_ == Tier::pipelined) return matmul_tc();
      return no_kernel("generic, tiled or pipelined");
    }
    if (tier_ != Tier::generic) return no_kernel("generic only");
    if ((op_.kind == OpKind::embedding || op_.kind == OpKind::cast) &&
        is_quantized(op_.inputs[0].dtype))
      return qrows();
    switch (op_.kind) {
      case OpKind::softmax:
      case OpKind::rmsnorm:
      case OpKind::layernorm:
        return rows();
      case OpKind::rope:
        return rope();
      case OpKind::reduce_sum:
      case OpKind::reduce_mean:
      case OpKind::reduce_max:
      case OpKind::reduce_min:
      case OpKind::reduce_prod:
        return reduce();
      case OpKind::cast:
      case OpKind::copy:
        return copy();
      case OpKind::concat:
        return concat();
      case OpKind::embedding:
        return embedding();
      case OpKind::write_slice:
        return write_slice();
      default:
        if (is_unary_elementwise(op_.kind) || is_binary_elementwise(op_.kind)) return eltwise();
        return fail(Code::unsupported, "views are resolved by the executor, not run as kernels");
    }
  }

 private:
  Err err(Code code) const {
    Err e(code);
    e.op(op_name(op_.kind), op_.name).device(device_);
    return e;
  }
  Status fail(Code code, const std::string& why) const { return err(code).note(why); }
  Status no_kernel(const std::string& tiers) const {
    return fail(Code::unsupported, "the " + std::string(tier_name(tier_)) + " tier has no " +
                                       std::string(op_name(op_.kind)) + " kernel (" + tiers + ")");
  }
  // The sm_80 tensor-core tiers (cp.async, m16n8k16, bf16); the other tensor-core tier is sm_75.
  bool sm80() const { return tier_ == Tier::flash || tier_ == Tier::pipelined; }

  Status check_views() const {
    if (in_.size() != op_.inputs.size())
      return err(Code::invalid_argument)
          .expected(std::to_string(op_.inputs.size()) + " inputs")
          .got(std::to_string(in_.size()));
    for (size_t i = 0; i < in_.size(); ++i) {
      const View& v = in_[i];
      const TensorDesc& d = op_.inputs[i];
      bool same = v.rank == d.rank && v.dtype == d.dtype && v.data;
      for (int k = 0; same && k < d.rank; ++k) same = v.shape[k] == d.shape[static_cast<size_t>(k)];
      if (!same)
        return err(Code::invalid_argument)
            .tensor(op_.input_name(i))
            .expected(d.str())
            .got(v.data
                     ? std::string(dtype_name(v.dtype)) + " view of rank " + std::to_string(v.rank)
                     : "no data");
    }
    bool dense = out_.data && out_.rank == op_.output.rank && out_.dtype == op_.output.dtype;
    int64_t stride = 1;
    for (int k = out_.rank - 1; dense && k >= 0; --k) {
      dense = out_.shape[k] == op_.output.shape[static_cast<size_t>(k)] &&
              (out_.strides[k] == stride || out_.shape[k] == 1);
      stride *= out_.shape[k];
    }
    if (!dense)
      return err(Code::invalid_argument)
          .tensor("output")
          .expected("a dense " + op_.output.str())
          .got(out_.data ? "another layout" : "no data");
    return {};
  }

  Call call(Kernel k, Dim3 grid, int threads, uint64_t smem, Params p) const {
    Call c;
    c.kernel = k;
    c.tier = tier_;
    c.grid = grid;
    c.threads = threads;
    c.smem = smem;
    c.params = std::move(p);
    return c;
  }

  // Blocks for a grid-stride loop over n elements.
  static unsigned blocks_for(int64_t n, int threads) {
    return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 4096));
  }

  // The device's architecture (Launch::sm; 0 skips the check) has what the tier's kernels use.
  Status need_arch() const {
    if (launch_.sm != 0 && !tier_fits(arch_features_of_sm(launch_.sm), tier_))
      return fail(Code::unsupported, std::string(tier_name(tier_)) + " kernels need " +
                                         sm_name(tier_min_sm(tier_)) + ", the device is " +
                                         sm_name(launch_.sm));
    return {};
  }

  // The 16-bit type a tensor-core kernel runs in, from the inputs it was given.
  Result<bool> tc_bf16(DType t) const {
    if (t == DType::f16) return false;
    if (t == DType::bf16 && sm80()) return true;
    return err(Code::invalid_argument)
        .tensor(op_.input_name(0))
        .expected(sm80() ? "f16 or bf16 for the " + std::string(tier_name(tier_)) + " tier"
                         : std::string("f16 for the tiled tier (sm_75 has no bf16)"))
        .got(std::string(dtype_name(t)));
  }

  // The error word of an op that reports bad run-time values (the first bytes of the workspace),
  // and the call that resets it before the op's kernel; null when the op has none. A word the
  // caller preset (Launch::error) needs neither.
  Result<unsigned long long*> error_word(std::vector<Call>& calls) const {
    if (error_bytes(op_) == 0) return nullptr;
    if (launch_.error) return launch_.error;
    if (!launch_.workspace)
      return fail(Code::invalid_argument,
                  std::string(op_name(op_.kind)) + " needs a workspace of " +
                      std::to_string(workspace_bytes(tier_, op_, launch_.config)) +
                      " bytes for its checks");
    auto* e = static_cast<unsigned long long*>(launch_.workspace);
    calls.push_back(call(Kernel::fill_u64, {1, 1, 1}, 32, 0,
                         dev::FillParams{e, std::numeric_limits<unsigned long long>::max()}));
    return e;
  }

  // The run-time scalar input's address, or null.
  const int* scalar_ptr() const {
    const int si = scalar_input(op_);
    return si < 0 ? nullptr : static_cast<const int*>(in_[static_cast<size_t>(si)].data);
  }

  // ---- attention

  // The inputs of the tensor-core attention: a dense last dim and 16-byte aligned rows.
  Status check_attn_rows() const {
    for (size_t i = 0; i < 3; ++i) {
      const View& t = in_[i];
      bool ok = t.strides[3] == 1 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
      for (int d = 0; d < 3; ++d) ok = ok && (t.strides[d] % 8 == 0 || t.shape[d] == 1);
      if (!ok)
        return err(Code::invalid_argument)
            .tensor(op_.input_name(i))
            .expected("a dense last dim and 16-byte aligned rows")
            .got(op_.inputs[i].str());
    }
    return {};
  }

  // The arguments every tensor-core attention kernel reads (not yet the splits).
  dev::AttnParams attn_params() const {
    const View &q = in_[0], &k = in_[1], &v = in_[2];
    dev::AttnParams p;
    p.q = q.data;
    p.k = k.data;
    p.v = v.data;
    p.out = out_.data;
    for (int d = 0; d < 3; ++d) {
      p.qs[d] = q.shape[d] == 1 ? 0 : q.strides[d];
      p.ks[d] = k.shape[d] == 1 ? 0 : k.strides[d];
      p.vs[d] = v.shape[d] == 1 ? 0 : v.strides[d];
    }
    p.B = static_cast<int>(q.shape[0]);
    p.Hq = static_cast<int>(q.shape[1]);
    p.Hkv = static_cast<int>(k.shape[1]);
    p.group = p.Hq / p.Hkv;
    p.Lq = static_cast<int>(q.shape[2]);
    p.Lk = static_cast<int>(k.shape[2]);
    p.scale_log2 = attention_scale(op_) * kLog2e;
    p.causal = op_.attrs.causal ? 1 : 0;
    p.stages = launch_.config.stages;
    if (const int mi = attention_mask_input(op_); mi >= 0) {
      const int64_t full[4] = {q.shape[0], q.shape[1], q.shape[2], k.shape[2]};
      const dev::Strided m = strided(in_[static_cast<size_t>(mi)], full);
      p.mask = m.data;
      p.mask_dtype = m.dtype;
      for (int d = 0; d < 4; ++d) p.ms[d] = m.stride[d];
    }
    return p;
  }

  // Key tiles of `bc` keys split `cfg.splits` ways (at most one split per tile), the run-time key
  // count and its error word, and the split partials in the workspace.
  Status attn_splits(dev::AttnParams& p, int bc, std::vector<Call>& calls) const {
    const int D = static_cast<int>(in_[0].shape[3]);
    const int tiles = (p.Lk + bc - 1) / bc;
    const int splits = std::clamp(launch_.config.splits, 1, std::max(tiles, 1));
    p.tiles_per_split = std::max(1, (tiles + splits - 1) / splits);
    p.splits = std::max(1, (tiles + p.tiles_per_split - 1) / p.tiles_per_split);
    p.kv_len = scalar_ptr();
    DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    if (p.splits > 1) {
      const uint64_t need = workspace_bytes(tier_, op_, launch_.config);
      if (!launch_.workspace)
        return fail(Code::invalid_argument,
                    "split-KV needs a workspace of " + std::to_string(need) + " bytes");
      const int64_t out_rows = int64_t(p.B) * p.Hq * p.Lq;
      // After the error word, when there is one.
      auto* base = static_cast<unsigned char*>(launch_.workspace) + round_up(error_bytes(op_));
      p.part_o = reinterpret_cast<float*>(base);
      p.part_lse = reinterpret_cast<float*>(
          base + round_up(static_cast<uint64_t>(p.splits) * out_rows * D * 4));
    }
    return {};
  }

  // The split-KV merge of partials of B * Hq * Lq rows, after the kernel.
  Call combine_call(float* part_o, float* part_lse, int64_t rows, int D, int splits) const {
    dev::CombineParams cp;
    cp.part_o = part_o;
    cp.part_lse = part_lse;
    cp.out = out_.data;
    cp.out_dtype = elt(out_.dtype);
    cp.rows = rows;
    cp.D = D;
    cp.splits = splits;
    return call(Kernel::attention_combine, {static_cast<unsigned>(rows), 1, 1},
                shapes::kCombineThreads, shapes::combine_smem(splits), cp);
  }

  // The split-KV merge, after the kernel, when there are splits.
  void attn_combine(const dev::AttnParams& p, std::vector<Call>& calls) const {
    if (p.splits <= 1) return;
    calls.push_back(combine_call(p.part_o, p.part_lse, int64_t(p.B) * p.Hq * p.Lq,
                                 static_cast<int>(in_[0].shape[3]), p.splits));
  }

  Result<std::vector<Call>> attention_tc() {
    DUET_TRY(need_arch());
    const View& q = in_[0];
    DUET_ASSIGN_OR_RETURN(const bool bf16, tc_bf16(q.dtype));
    const int D = static_cast<int>(q.shape[3]);
    if (std::find(std::begin(kAttentionHeadDims), std::end(kAttentionHeadDims), D) ==
        std::end(kAttentionHeadDims))
      return fail(Code::unsupported, "head dim " + std::to_string(D) +
                                         " has no tensor-core kernel (64, 80, 96, 128, 256)");
    DUET_TRY(check_attn_rows());
    const LaunchConfig& cfg = launch_.config;
    const int warps = cfg.block_threads / 32;
    if (cfg.block_threads % 32 || warps < 1 ||
        warps > (tier_ == Tier::flash ? shapes::attn_max_warps(D) : 4) || cfg.stages < 1 ||
        cfg.stages > (tier_ == Tier::flash ? 2 : 1))
      return fail(Code::invalid_argument,
                  "launch configuration '" + cfg.str() + "' is not one this kernel supports");

    dev::AttnParams p = attn_params();
    const bool flash = tier_ == Tier::flash;
    std::vector<Call> calls;
    DUET_TRY(attn_splits(p, shapes::attn_key_tile(D, flash), calls));
    const int64_t rows = int64_t(p.group) * p.Lq;
    const int br = warps * 16;
    const uint64_t smem = shapes::attn_smem_bytes(D, warps, p.stages, flash);
    Call c = call(Kernel::attention_tc,
                  {static_cast<unsigned>((rows + br - 1) / br),
                   static_cast<unsigned>(p.Hkv * p.splits), static_cast<unsigned>(p.B)},
                  cfg.block_threads, smem, p);
    c.bf16 = bf16;
    c.head_dim = D;
    calls.push_back(c);
    attn_combine(p, calls);
    return calls;
  }

  // A K or V view as the TMA reads it: [B, H, L, D] as dims D, L, H, B (innermost first), a box
  // of 64 columns (one 128-byte swizzled row) by the kernel's key tile.
  dev::TmaDesc tma_desc(const View& t, int box_rows) const {
    dev::TmaDesc d;
    d.base = t.data;
    d.rank = 4;
    d.elem_bytes = 2;
    d.swizzle = 128;
    int64_t prev = 2 * t.shape[3];
    for (int k = 0; k < 4; ++k) {
      const int dim = 3 - k;
      d.dim[k] = t.shape[dim];
      // A dim of size 1 has no meaningful stride; the TMA still wants a multiple of 16 bytes.
      d.stride[k] = k == 0                                     ? 2
                    : t.strides[dim] != 0 && t.shape[dim] != 1 ? 2 * t.strides[dim]
                                                               : prev;
      if (k > 0) prev = d.stride[k] * d.dim[k];
    }
    d.box[0] = 64;
    d.box[1] = box_rows;
    d.box[2] = d.box[3] = 1;
    return d;
  }

  Result<std::vector<Call>> attention_wgmma() {
    DUET_TRY(need_arch());
    const View& q = in_[0];
    if (q.dtype != DType::f16 && q.dtype != DType::bf16)
      return err(Code::invalid_argument)
          .tensor(op_.input_name(0))
          .expected("f16 or bf16 for the wgmma tier")
          .got(std::string(dtype_name(q.dtype)));
    const int D = static_cast<int>(q.shape[3]);
    if (!shapes::wgmma_head_dim(D))
      return fail(Code::unsupported,
                  "head dim " + std::to_string(D) + " has no wgmma kernel (64, 128)");
    DUET_TRY(check_attn_rows());
    const LaunchConfig& cfg = launch_.config;
    if (cfg.block_threads != shapes::wgmma_threads(D))
      return fail(Code::invalid_argument,
                  "launch configuration '" + cfg.str() + "' is not one this kernel supports");
    dev::WgAttnParams w;
    w.a = attn_params();
    std::vector<Call> calls;
    const int bn = shapes::wgmma_key_tile(D);
    DUET_TRY(attn_splits(w.a, bn, calls));
    w.k_desc = tma_desc(in_[1], bn);
    w.v_desc = tma_desc(in_[2], bn);
    const int64_t rows = int64_t(w.a.group) * w.a.Lq;
    const int bm = shapes::wgmma_rows(D);
    Call c = call(Kernel::attention_wgmma,
                  {static_cast<unsigned>((rows + bm - 1) / bm),
                   static_cast<unsigned>(w.a.Hkv * w.a.splits), static_cast<unsigned>(w.a.B)},
                  cfg.block_threads, shapes::wgmma_smem_bytes(D), w);
    c.bf16 = q.dtype == DType::bf16;
    c.head_dim = D;
    calls.push_back(c);
    attn_combine(w.a, calls);
    return calls;
  }

  Result<std::vector<Call>> gen_attention() {
    const View &q = in_[0], &k = in_[1], &v = in_[2];
    dev::GenAttnParams p;
    p.q = strided(q);
    p.k = strided(k);
    p.v = strided(v);
    p.B = static_cast<int>(q.shape[0]);
    p.Hq = static_cast<int>(q.shape[1]);
    p.Hkv = static_cast<int>(k.shape[1]);
    p.Lq = static_cast<int>(q.shape[2]);
    p.Lk = static_cast<int>(k.shape[2]);
    p.D = static_cast<int>(q.shape[3]);
    p.scale = attention_scale(op_);
    p.causal = op_.attrs.causal ? 1 : 0;
    if (const int mi = attention_mask_input(op_); mi >= 0) {
      const int64_t full[4] = {q.shape[0], q.shape[1], q.shape[2], k.shape[2]};
      p.mask = strided(in_[static_cast<size_t>(mi)], full);
    }
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    if (p.Hq > 65535 || p.B > 65535)
      return fail(Code::unsupported, "grid too large (Hq and B at most 65535)");
    std::vector<Call> calls;
    p.kv_len = scalar_ptr();
    DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    const int64_t rows = int64_t(p.Hq / p.Hkv) * p.Lq;
    const LaunchConfig& cfg = launch_.config;
    // The kernel the selection sized the launch for (its shared memory says which).
    switch (shapes::gen_attn_kind(p.D, rows, cfg.shared_bytes)) {
      case shapes::GenAttn::flash: {
        const int dm = shapes::gen_flash_dm(p.D), bm = shapes::gen_flash_bm(dm);
        Call c = call(Kernel::gen_flash,
                      {static_cast<unsigned>((rows + bm - 1) / bm), static_cast<unsigned>(p.Hkv),
                       static_cast<unsigned>(p.B)},
                      128, shapes::gen_flash_smem(dm), p);
        c.head_dim = dm;
        calls.push_back(c);
        return calls;
      }
      case shapes::GenAttn::decode: {
        const int dm = shapes::gen_decode_dm(p.D), chunk = shapes::kGenDecChunk;
        const int g = shapes::gen_decode_rows(rows, dm);
        const int chunks = std::max(1, (p.Lk + chunk - 1) / chunk);
        const int splits = std::clamp(cfg.splits, 1, chunks);
        p.keys_per_split = (chunks + splits - 1) / splits * chunk;
        p.splits = std::max(1, (p.Lk + p.keys_per_split - 1) / p.keys_per_split);
        if (p.splits > 1) {
          if (!launch_.workspace)
            return fail(Code::invalid_argument,
                        "split-KV needs a workspace of " +
                            std::to_string(workspace_bytes(tier_, op_, cfg)) + " bytes");
          const int64_t out_rows = int64_t(p.B) * p.Hq * p.Lq;
          auto* base = static_cast<unsigned char*>(launch_.workspace) + round_up(error_bytes(op_));
          p.part_o = reinterpret_cast<float*>(base);
          p.part_lse = reinterpret_cast<float*>(
              base + round_up(static_cast<uint64_t>(p.splits) * out_rows * p.D * 4));
        }
        Call c = call(Kernel::gen_decode,
                      {static_cast<unsigned>((rows + g - 1) / g),
                       static_cast<unsigned>(p.Hkv * p.splits), static_cast<unsigned>(p.B)},
                      128, shapes::gen_decode_smem(dm, g), p);
        c.head_dim = dm;
        c.block_rows = g;
        calls.push_back(c);
        if (p.splits > 1)
          calls.push_back(
              combine_call(p.part_o, p.part_lse, int64_t(p.B) * p.Hq * p.Lq, p.D, p.splits));
        return calls;
      }
      case shapes::GenAttn::rowwise:
        break;
    }
    calls.push_back(
        call(Kernel::gen_attention,
             {static_cast<unsigned>(p.Lq), static_cast<unsigned>(p.Hq), static_cast<unsigned>(p.B)},
             shapes::kGenAttnThreads, shapes::gen_attn_smem_bytes(p.D), p));
    return calls;
  }

  // ---- matmul

  // Logical strides and batch strides of both operands.
  dev::MatmulParams matmul_params() const {
    const View &a = in_[0], &b = in_[1];
    const bool ta = op_.attrs.transpose_a, tb = op_.attrs.transpose_b;
    dev::MatmulParams p;
    p.a = a.data;
    p.b = b.data;
    p.c = out_.data;
    p.dtype = elt(a.dtype);
    p.M = static_cast<int>(op_.output.dim(-2));
    p.N = static_cast<int>(op_.output.dim(-1));
    p.K = static_cast<int>(ta ? a.shape[a.rank - 2] : a.shape[a.rank - 1]);
    p.a_m = ta ? a.strides[a.rank - 1] : a.strides[a.rank - 2];
    p.a_k = ta ? a.strides[a.rank - 2] : a.strides[a.rank - 1];
    p.b_k = tb ? b.strides[b.rank - 1] : b.strides[b.rank - 2];
    p.b_n = tb ? b.strides[b.rank - 2] : b.strides[b.rank - 1];
    // Output batch dims, padded to two (outer, inner).
    const int ob = op_.output.rank - 2;
    int64_t oshape[2] = {1, 1};
    for (int i = 0; i < ob; ++i) oshape[2 - ob + i] = op_.output.shape[static_cast<size_t>(i)];
    p.batch_inner = static_cast<int>(oshape[1]);
    auto batch = [&](const View& t, int64_t(&out)[2]) {
      const int tb_rank = t.rank - 2;
      for (int i = 0; i < 2; ++i) {
        const int ti = i - (2 - tb_rank);
        out[i] = ti >= 0 && t.shape[ti] != 1 ? t.strides[ti] : 0;
      }
    };
    batch(a, p.a_batch);
    batch(b, p.b_batch);
    return p;
  }

  int64_t batch_count() const {
    int64_t n = 1;
    for (int i = 0; i < op_.output.rank - 2; ++i) n *= op_.output.shape[static_cast<size_t>(i)];
    return n;
  }

  Result<std::vector<Call>> matmul_tc() {
    DUET_TRY(need_arch());
    DUET_ASSIGN_OR_RETURN(const bool bf16, tc_bf16(in_[0].dtype));
    dev::MatmulParams p = matmul_params();
    const LaunchConfig& cfg = launch_.config;
    const int warps = cfg.block_threads / 32;
    p.warps_m = cfg.tile_m / shapes::kMmWM;
    const int warps_n = cfg.tile_n / shapes::kMmWN;
    if (cfg.block_threads % 32 || p.warps_m < 1 || warps_n < 1 || p.warps_m * warps_n != warps ||
        warps > 8 || cfg.tile_k != shapes::kMmBK || cfg.stages < 1 || cfg.stages > (sm80() ? 4 : 1))
      return fail(Code::invalid_argument,
                  "launch configuration '" + cfg.str() + "' is not one this kernel supports");
    p.stages = cfg.stages;
    // B goes n-major into shared memory when its k stride is 1.
    const bool b_nmajor = p.b_k == 1 && p.K > 1;
    auto aligned = [](const void* ptr, std::initializer_list<int64_t> strides) {
      bool ok = reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
      for (int64_t s : strides) ok = ok && s % 8 == 0;
      return ok;
    };
    p.a_vec = p.a_k == 1 && aligned(p.a, {p.M > 1 ? p.a_m : 0, p.a_batch[0], p.a_batch[1]});
    p.b_vec = b_nmajor
                  ? aligned(p.b, {p.N > 1 ? p.b_n : 0, p.b_batch[0], p.b_batch[1]})
                  : p.b_n == 1 && aligned(p.b, {p.K > 1 ? p.b_k : 0, p.b_batch[0], p.b_batch[1]});
    const int bm = p.warps_m * shapes::kMmWM, bn = warps_n * shapes::kMmWN;
    const int64_t batch = batch_count();
    if (batch > 65535 || (p.M + bm - 1) / bm > 65535)
      return fail(Code::unsupported, "grid too large (batch at most 65535)");
    Call c = call(Kernel::matmul_tc,
                  {static_cast<unsigned>((p.N + bn - 1) / bn),
                   static_cast<unsigned>((p.M + bm - 1) / bm), static_cast<unsigned>(batch)},
                  cfg.block_threads,
                  p.stages * shapes::matmul_tc_stage_bytes(p.warps_m, warps_n, b_nmajor), p);
    c.bf16 = bf16;
    c.b_nmajor = b_nmajor;
    return std::vector<Call>{c};
  }

  Result<std::vector<Call>> gen_matmul() {
    dev::MatmulParams p = matmul_params();
    const int64_t batch = batch_count();
    if (shapes::matvec_applies(op_)) return matvec(p, batch);
    if (batch > 65535 || (p.M + 63) / 64 > 65535)
      return fail(Code::unsupported, "grid too large (batch at most 65535)");
    return std::vector<Call>{
        call(Kernel::gen_matmul,
             {static_cast<unsigned>((p.N + 63) / 64), static_cast<unsigned>((p.M + 63) / 64),
              static_cast<unsigned>(batch)},
             shapes::kGenMatmulThreads, shapes::kGenMatmulSmem, p)};
  }

  // The generic mat-vec: decode shapes with B's k stride 1 (matvec.h).
  Result<std::vector<Call>> matvec(dev::MatmulParams p, int64_t batch) {
    const LaunchConfig& cfg = launch_.config;
    const int ma = std::min(p.M, dev::kMvRows);
    p.rpw = cfg.tile_n / 8;
    p.kc = cfg.tile_k;
    if (cfg.block_threads != 256 || cfg.tile_m != dev::kMvRows || p.rpw < 1 ||
        p.rpw > dev::kMvMaxRows || cfg.tile_n != 8 * p.rpw || p.kc < 8 || p.kc % 8 ||
        cfg.shared_bytes != shapes::matvec_smem_bytes(ma, p.kc))
      return fail(Code::invalid_argument,
                  "launch configuration '" + cfg.str() + "' is not one this kernel supports");
    const int esize = p.dtype == dev::Elt::f32 ? 4 : 2;
    p.b_vec = reinterpret_cast<uintptr_t>(p.b) % 16 == 0 && (p.b_n * esize) % 16 == 0 &&
              (p.b_batch[0] * esize) % 16 == 0 && (p.b_batch[1] * esize) % 16 == 0;
    const int64_t gy = (p.M + dev::kMvRows - 1) / dev::kMvRows;
    if (batch > 65535 || gy > 65535)
      return fail(Code::unsupported, "grid too large (batch at most 65535)");
    return std::vector<Call>{call(Kernel::matvec,
                                  {static_cast<unsigned>((p.N + cfg.tile_n - 1) / cfg.tile_n),
                                   static_cast<unsigned>(gy), static_cast<unsigned>(batch)},
                                  256, cfg.shared_bytes, p)};
  }

  // ---- block-quantized weights (device/quant.h)

  // The byte address of a block-quantized view's first block and the bytes between its rows;
  // rows must be whole blocks of a dense last dim.
  Status quant_rows(const View& v, const std::string& name, const uint8_t** base,
                    int64_t* row_bytes, int64_t* rows) const {
    const int64_t be = dtype_block_elems(v.dtype), bb = dtype_block_bytes(v.dtype);
    const int64_t D = v.shape[v.rank - 1];
    bool ok = v.strides[v.rank - 1] == 1 || D == 1;
    int64_t n = 1, rs = D;
    for (int d = v.rank - 2; d >= 0; --d) {
      if (v.shape[d] == 1) continue;
      if (n == 1) rs = v.strides[d];  // the stride of the innermost dim of rows
      ok = ok && v.strides[d] == rs * n;
      n *= v.shape[d];
    }
    ok = ok && D % be == 0 && rs % be == 0;
    if (!ok)
      return err(Code::unsupported)
          .tensor(name)
          .expected("rows of whole " + std::string(dtype_name(v.dtype)) + " blocks")
          .got(std::string(dtype_name(v.dtype)) + " view of rank " + std::to_string(v.rank));
    *base = static_cast<const uint8_t*>(v.data);
    *row_bytes = rs / be * bb;
    *rows = n;
    return {};
  }

  // A's strides and the batch layout, and the weight's blocks.
  Result<dev::QMatmulParams> qmatmul_params() const {
    const dev::MatmulParams m = matmul_params();
    dev::QMatmulParams p;
    p.a = m.a;
    p.c = m.c;
    p.a_dtype = elt(in_[0].dtype);
    p.c_dtype = elt(out_.dtype);
    p.fmt = static_cast<dev::QFmt>(in_[1].dtype);
    p.M = m.M;
    p.N = m.N;
    p.K = m.K;
    p.a_m = m.a_m;
    p.a_k = m.a_k;
    p.a_batch[0] = m.a_batch[0];
    p.a_batch[1] = m.a_batch[1];
    p.batch_inner = m.batch_inner;
    int64_t rows = 0;
    DUET_TRY(quant_rows(in_[1], op_.input_name(1), &p.w, &p.w_row_bytes, &rows));
    return p;
  }

  Result<std::vector<Call>> gen_qmatmul() {
    DUET_ASSIGN_OR_RETURN(const dev::QMatmulParams p, qmatmul_params());
    const int64_t batch = batch_count();
    const int64_t gy = (p.M + dev::kQRows - 1) / dev::kQRows;
    if (batch > 65535 || gy > 65535)
      return fail(Code::unsupported, "grid too large (batch at most 65535)");
    return std::vector<Call>{call(Kernel::gen_qmatmul,
                                  {static_cast<unsigned>((p.N + dev::kQWarps - 1) / dev::kQWarps),
                                   static_cast<unsigned>(gy), static_cast<unsigned>(batch)},
                                  dev::kQWarps * 32, 0, p)};
  }

  // The integer tiers: A quantized into the workspace (q8_act), then the mat-vec (int_dot) or the
  // int8 tensor-core tiles (int8_mma).
  Result<std::vector<Call>> int_qmatmul() {
    const bool mma = tier_ == Tier::int8_mma;
    DUET_TRY(need_arch());
    DUET_ASSIGN_OR_RETURN(dev::QMatmulParams p, qmatmul_params());
    const int64_t batch = batch_count();
    const uint64_t need = workspace_bytes(tier_, op_, launch_.config);
    if (!launch_.workspace)
      return fail(Code::invalid_argument, "the " + std::string(tier_name(tier_)) +
                                              " tier needs a workspace of " + std::to_string(need) +
                                              " bytes for the quantized activations");
    dev::Q8ActParams q;
    q.a = p.a;
    q.a_dtype = p.a_dtype;
    q.M = p.M;
    q.K = p.K;
    q.a_m = p.a_m;
    q.a_k = p.a_k;
    q.a_batch[0] = p.a_batch[0];
    q.a_batch[1] = p.a_batch[1];
    q.batch_inner = p.batch_inner;
    q.rows = batch * p.M;
    q.out = static_cast<dev::Q8Block*>(launch_.workspace);
    p.qa = q.out;
    const DType f = in_[1].dtype;
    const LaunchConfig& cfg = launch_.config;
    auto bad_config = [&] {
      return fail(Code::invalid_argument,
                  "launch configuration '" + cfg.str() + "' is not one this kernel supports");
    };
    // Copies in flight are cp.async groups where the architecture has them (and the int8 mma
    // instance that uses them, m16n8k32 too); before, one synchronous stage.
    const ArchFeatures af = arch_features_of_sm(launch_.sm);
    const bool async = launch_.sm == 0 || (af.cp_async && (!mma || af.mma_s8_m16n8k32));
    std::vector<Call> calls;
    calls.push_back(
        call(Kernel::q8_act, {blocks_for(q.rows * (p.K / 32) * 8, 256), 1, 1}, 256, 0, q));
    if (!mma) {
      // One instance per format and activation rows a block (qmv_act_rows): the configuration
      // is that instance's.
      const int ma = dev::qmv_act_rows(p.M);
      if (cfg.block_threads != dev::kQMvThreads || cfg.tile_n != dev::qmv_rows(ma) ||
          cfg.tile_m != dev::kQIntRows || cfg.shared_bytes != shapes::qmv_smem_bytes(ma))
        return bad_config();
      const int64_t gx = (p.N + cfg.tile_n - 1) / cfg.tile_n;
      const int64_t gy = (p.M + dev::kQIntRows - 1) / dev::kQIntRows;
      if (batch > 65535 || gy > 65535)
        return fail(Code::unsupported, "grid too large (batch at most 65535)");
      if (gx > std::numeric_limits<int>::max())
        return fail(Code::unsupported, "grid too large (N at most 2^31 rows)");
      // A block's rows are addressed by 32-bit offsets from its first (quant_mv.h).
      if (p.w_row_bytes * (cfg.tile_n - 1) > std::numeric_limits<int>::max())
        return fail(Code::unsupported,
                    "weight rows of more than 2^31 / " + std::to_string(cfg.tile_n - 1) + " bytes");
      dev::QMvParams v;
      v.qa = p.qa;
      v.fmt = p.fmt;
      v.M = p.M;
      v.K = p.K;
      v.count = 1;
      v.out[0].w = p.w;
      v.out[0].c = p.c;
      v.out[0].w_row_bytes = p.w_row_bytes;
      v.out[0].N = p.N;
      v.out[0].c_dtype = p.c_dtype;
      calls.push_back(
          call(Kernel::qmv,
               {static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch)},
               cfg.block_threads, cfg.shared_bytes, v));
      return calls;
    }
    p.warps_m = cfg.tile_m / 32;
    const int warps_n = cfg.tile_n / 64;
    p.stages = cfg.stages;
    p.w_pitch = static_cast<int>(shapes::mmq_pitch(f));
    if (p.warps_m < 1 || warps_n < 1 || cfg.tile_m % 32 || cfg.tile_n % 64 ||
        cfg.block_threads != p.warps_m * warps_n * 32 || cfg.block_threads > 256 ||
        cfg.tile_k != dev::kQMmqKc * 32 || p.stages < 1 || p.stages > (async ? 2 : 1) ||
        cfg.shared_bytes != shapes::mmq_smem_bytes(f, cfg.tile_m, cfg.tile_n, p.stages))
      return bad_config();
    const int64_t gy = (p.M + cfg.tile_m - 1) / cfg.tile_m;
    if (batch > 65535 || gy > 65535)
      return fail(Code::unsupported, "grid too large (batch at most 65535)");
    Call c = call(Kernel::mmq,
                  {static_cast<unsigned>((p.N + cfg.tile_n - 1) / cfg.tile_n),
                   static_cast<unsigned>(gy), static_cast<unsigned>(batch)},
                  cfg.block_threads, cfg.shared_bytes, p);
    c.sm80 = async;
    calls.push_back(c);
    return calls;
  }

  Result<std::vector<Call>> qrows() {
    dev::QRowsParams p;
    p.fmt = static_cast<dev::QFmt>(in_[0].dtype);
    DUET_TRY(quant_rows(in_[0], op_.input_name(0), &p.table, &p.row_bytes, &p.V));
    p.D = in_[0].shape[in_[0].rank - 1];
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    std::vector<Call> calls;
    if (op_.kind == OpKind::embedding) {
      p.ids = strided(in_[1]);
      p.rows = op_.inputs[1].numel();
      p.negative_ids = op_.attrs.negative_ids ? 1 : 0;
      DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    } else {
      p.rows = p.V;
      // A cast of whole rows into a 16-byte aligned output: a thread per group, at the speed of
      // the bytes.
      if (reinterpret_cast<uintptr_t>(p.out) % 16 == 0) {
        Call c = call(Kernel::qdequant, {blocks_for(p.rows * (p.D / 32), 256), 1, 1}, 256, 0, p);
        c.sm80 = launch_.sm == 0 || arch_features_of_sm(launch_.sm).cp_async;
        calls.push_back(c);
        return calls;
      }
    }
    calls.push_back(
        call(Kernel::gen_qrows, {blocks_for(p.rows * (p.D / 32), 256), 1, 1}, 256, 0, p));
    return calls;
  }

  // ---- the other generic kernels

  Result<std::vector<Call>> eltwise() {
    dev::EltwiseParams p;
    padded_shape(op_.output, p.shape);
    p.a = strided(in_[0], p.shape);
    if (in_.size() > 1) p.b = strided(in_[1], p.shape);
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.n = op_.output.numel();
    p.alpha = eltwise_param(op_);
    const std::optional<uint32_t> code = eltwise_code(op_);
    if (!code || *code >= DUET_EW_COUNT)
      return fail(Code::unsupported, "not an element-wise function of duet/eltwise.h");
    p.op = *code;
    return std::vector<Call>{call(Kernel::eltwise, {blocks_for(p.n, 256), 1, 1}, 256, 0, p)};
  }

  Call copy_call(const View& x, void* out_base, const int64_t (&out_strides)[4]) const {
    dev::CopyParams p;
    int64_t shape[4];
    for (int d = 0; d < 4; ++d) shape[d] = d < 4 - x.rank ? 1 : x.shape[d - (4 - x.rank)];
    std::copy(std::begin(shape), std::end(shape), p.shape);
    p.x = strided(x, shape);
    p.out.data = out_base;
    p.out.dtype = elt(out_.dtype);
    std::copy(std::begin(shape), std::end(shape), p.out.shape);
    std::copy(std::begin(out_strides), std::end(out_strides), p.out.stride);
    p.n = shape[0] * shape[1] * shape[2] * shape[3];
    p.raw = x.dtype == out_.dtype ? 1 : 0;
    return call(Kernel::copy, {blocks_for(p.n, 256), 1, 1}, 256, 0, p);
  }

  void dense_strides(int64_t (&s)[4]) const {
    int64_t shape[4];
    padded_shape(op_.output, shape);
    s[3] = 1;
    for (int d = 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  }

  Result<std::vector<Call>> copy() {
    int64_t s[4];
    dense_strides(s);
    return std::vector<Call>{copy_call(in_[0], out_.data, s)};
  }

  Result<std::vector<Call>> concat() {
    int64_t s[4];
    dense_strides(s);
    const int axis = (op_.attrs.axis < 0 ? op_.attrs.axis + op_.output.rank : op_.attrs.axis) +
                     (4 - op_.output.rank);
    std::vector<Call> calls;
    int64_t at = 0;
    for (const View& x : in_) {
      auto* base = static_cast<unsigned char*>(out_.data) +
                   at * s[axis] * static_cast<int64_t>(dtype_size(out_.dtype));
      calls.push_back(copy_call(x, base, s));
      at += x.shape[axis - (4 - x.rank)];
    }
    return calls;
  }

  Result<std::vector<Call>> rows() {
    dev::RowParams p;
    p.x = strided(in_[0]);
    p.n = op_.output.dim(-1);
    p.rows = op_.output.numel() / p.n;
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.eps = op_.attrs.eps;
    if (op_.kind == OpKind::softmax) {
      p.op = dev::RowOp::softmax;
      p.scale = softmax_scale(op_);
      if (in_.size() > 1) p.mask = strided(in_[1], p.x.shape);
    } else {
      p.op = op_.kind == OpKind::rmsnorm ? dev::RowOp::rmsnorm : dev::RowOp::layernorm;
      if (in_.size() > 1) p.w = strided(in_[1]);
      if (in_.size() > 2) p.b = strided(in_[2]);
    }
    const int threads = shapes::rows_threads(p.n);
    return std::vector<Call>{call(Kernel::rows,
                                  {static_cast<unsigned>(std::min<int64_t>(p.rows, 65535)), 1, 1},
                                  threads, static_cast<uint64_t>(threads / 32) * 4, p)};
  }

  Result<std::vector<Call>> reduce() {
    dev::ReduceParams p;
    p.x = strided(in_[0]);
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.n = op_.output.numel();
    p.count = op_.inputs[0].numel() / p.n;
    p.dims = reduce_dims_mask(op_) << (4 - op_.inputs[0].rank);
    const std::optional<uint32_t> code = reduce_code(op_);
    if (!code || *code >= DUET_RED_COUNT)
      return fail(Code::unsupported, "not a reduction of duet/eltwise.h");
    p.op = *code;
    return std::vector<Call>{call(Kernel::reduce, {blocks_for(p.n, 256), 1, 1}, 256, 0, p)};
  }

  Result<std::vector<Call>> rope() {
    dev::RopeParams p;
    p.x = strided(in_[0]);
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.D = static_cast<int>(op_.output.dim(3));
    p.L = static_cast<int>(op_.output.dim(2));
    p.rows = op_.output.numel() / p.D;
    p.rope_dims = rope_dims(op_);
    p.neox = op_.attrs.rope_mode == RopeMode::neox ? 1 : 0;
    p.offset = op_.attrs.rope_offset;
    p.theta = op_.attrs.rope_theta;
    std::vector<Call> calls;
    p.pos = scalar_ptr();
    DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    // A thread per rotated pair and per element past rope_dims.
    const int64_t items = p.rows * (p.rope_dims / 2 + p.D - p.rope_dims);
    calls.push_back(call(Kernel::rope, {blocks_for(items, 256), 1, 1}, 256, 0, p));
    return calls;
  }

  Result<std::vector<Call>> write_slice() {
    std::vector<Call> calls;
    const View& st = in_[0];
    const int axis = op_.attrs.axis;
    // Not in place: the state's contents first.
    if (st.data != out_.data) {
      int64_t s[4];
      dense_strides(s);
      calls.push_back(copy_call(st, out_.data, s));
    }
    dev::WriteParams p;
    p.x = strided(in_[1]);
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.n = op_.inputs[1].numel();
    p.len = op_.inputs[1].dim(axis);
    p.cap = op_.output.dim(axis);
    p.inner = 1;
    for (int d = axis + 1; d < op_.output.rank; ++d)
      p.inner *= op_.output.shape[static_cast<size_t>(d)];
    p.start = op_.attrs.start;
    p.pos = scalar_ptr();
    DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    calls.push_back(call(Kernel::write_slice, {blocks_for(p.n, 256), 1, 1}, 256, 0, p));
    return calls;
  }

  Result<std::vector<Call>> embedding() {
    dev::EmbedParams p;
    p.table = strided(in_[0]);
    p.ids = strided(in_[1]);
    p.out = out_.data;
    p.out_dtype = elt(out_.dtype);
    p.V = in_[0].shape[0];
    p.D = in_[0].shape[1];
    p.n_ids = op_.inputs[1].numel();
    p.negative_ids = op_.attrs.negative_ids ? 1 : 0;
    std::vector<Call> calls;
    DUET_ASSIGN_OR_RETURN(p.error, error_word(calls));
    calls.push_back(call(Kernel::embedding, {blocks_for(p.n_ids * p.D, 256), 1, 1}, 256, 0, p));
    return calls;
  }

  Tier tier_;
  const OpDesc& op_;
  std::span<const View> in_;
  const View& out_;
  const Launch& launch_;
  std::string_view device_;
};

}  // namespace

std::string Call::name() const {
  std::string t = std::string(tier_name(tier));
  switch (kernel) {
    case Kernel::attention_tc:
      return t + " attention_tc<" + (bf16 ? "bf16" : "f16") + ", hd " + std::to_string(head_dim) +
             ">";
    case Kernel::matmul_tc:
      return t + " matmul_tc<" + (bf16 ? "bf16" : "f16") + ", B " + (b_nmajor ? "n" : "k") +
             "-major>";
    case Kernel::attention_wgmma:
      return t + " attention_wgmma<" + (bf16 ? "bf16" : "f16") + ", hd " +
             std::to_string(head_dim) + ">";
    case Kernel::attention_combine:
      return "attention_combine";
    case Kernel::eltwise:
      return "generic eltwise";
    case Kernel::copy:
      return "generic copy";
    case Kernel::rows:
      return "generic rows";
    case Kernel::rope:
      return "generic rope";
    case Kernel::rope_write:
      return std::get<dev::RopeWriteParams>(params).v.n > 0 ? "generic rope with K and V writes"
                                                            : "generic rope with its write";
    case Kernel::gen_attention:
      return "generic attention";
    case Kernel::gen_flash:
      return "generic attention (SIMT flash, head dims <= " + std::to_string(head_dim) + ")";
    case Kernel::gen_decode:
      return "generic attention (SIMT decode, head dims <= " + std::to_string(head_dim) + ", " +
             std::to_string(block_rows) + " rows a block)";
    case Kernel::gen_matmul:
      return "generic matmul";
    case Kernel::embedding:
      return "generic embedding";
    case Kernel::write_slice:
      return "generic write_slice";
    case Kernel::fill_u64:
      return "fill";
    case Kernel::gen_qmatmul:
      return "generic quantized matmul";
    case Kernel::gen_qrows:
      return "generic quantized rows";
    case Kernel::qdequant:
      return std::string("generic quantized cast<") + (sm80 ? "cp.async" : "sync") + ">";
    case Kernel::q8_act:
      return t + " q8 activations";
    case Kernel::qmv: {
      const int n = std::get<dev::QMvParams>(params).count;
      return n > 1 ? "int_dot quantized mat-vec (" + std::to_string(n) + " grouped)"
                   : "int_dot quantized mat-vec";
    }
    case Kernel::mmq:
      return std::string("int8_mma quantized matmul<") + (sm80 ? "m16n8k32" : "m8n8k16") + ">";
    case Kernel::matvec:
      return "generic mat-vec";
    case Kernel::reduce:
      return "generic reduce";
  }
  return "?";
}

Result<std::vector<Call>> plan(Tier tier, const OpDesc& op, std::span<const View> inputs,
                               const View& output, const Launch& launch, std::string_view device) {
  return Planner(tier, op, inputs, output, launch, device).run();
}

namespace {

bool same_q8(const dev::Q8ActParams& a, const dev::Q8ActParams& b) {
  return a.a == b.a && a.a_dtype == b.a_dtype && a.M == b.M && a.K == b.K && a.a_m == b.a_m &&
         a.a_k == b.a_k && a.a_batch[0] == b.a_batch[0] && a.a_batch[1] == b.a_batch[1] &&
         a.batch_inner == b.batch_inner && a.rows == b.rows && a.out == b.out;
}

std::string member_names(std::span<const GroupMember> members) {
  std::string s;
  for (const GroupMember& m : members) s += (s.empty() ? "'" : ", '") + m.op->name + "'";
  return s;
}

}  // namespace

Result<std::vector<Call>> plan_group(Tier tier, std::span<const GroupMember> members,
                                     const Launch& launch, std::string_view device,
                                     const GroupMember* norm, const GroupMember* add) {
  auto bad = [&](const std::string& why) {
    return Err(Code::invalid_argument)
        .op("matmul", members.empty() ? std::string() : members[0].op->name)
        .device(device)
        .note("group of mat-vecs " + member_names(members) + ": " + why);
  };
  if (members.empty()) return bad("no member");
  std::vector<Call> calls, mvs;
  for (size_t i = 0; i < members.size(); ++i) {
    const GroupMember& m = members[i];
    if (i > 0 && !shares_activations(tier, *members[0].op, members[0].inputs, *m.op, m.inputs))
      return bad("'" + m.op->name + "' does not read the same activations as '" +
                 members[0].op->name + "' at the int_dot tier");
    DUET_ASSIGN_OR_RETURN(std::vector<Call> c,
                          plan(tier, *m.op, m.inputs, m.output, launch, device));
    if (c.size() != 2 || c[0].kernel != Kernel::q8_act || c[1].kernel != Kernel::qmv)
      return bad("'" + m.op->name + "' is not an int_dot mat-vec");
    if (i == 0)
      calls.push_back(c[0]);
    else if (!same_q8(std::get<dev::Q8ActParams>(c[0].params),
                      std::get<dev::Q8ActParams>(calls[0].params)))
      return bad("'" + m.op->name + "' quantizes its activations differently");
    mvs.push_back(c[1]);
  }
  // An element-wise op before the group (a silu_mul), quantizing its output likewise.
  if (norm && norm->op->kind != OpKind::rmsnorm) {
    if (add) return bad("an add folded into '" + norm->op->name + "', which is no rmsnorm");
    if (!fuses_eltwise(*norm, *members[0].op, members[0].inputs))
      return bad("'" + norm->op->name + "' cannot quantize the activations it gives them");
    DUET_ASSIGN_OR_RETURN(std::vector<Call> e, plan(Tier::generic, *norm->op, norm->inputs,
                                                    norm->output, launch, device));
    if (e.size() != 1 || e[0].kernel != Kernel::eltwise)
      return bad("'" + norm->op->name + "' is not one eltwise launch");
    std::get<dev::EltwiseParams>(e[0].params).q8 = std::get<dev::Q8ActParams>(calls[0].params).out;
    calls[0] = e[0];
  } else if (norm) {
    // The rmsnorm before the group, quantizing its output into the blocks q8_act would have made.
    if (!fuses_norm(*norm, *members[0].op, members[0].inputs))
      return bad("'" + norm->op->name + "' cannot quantize the activations it gives them");
    DUET_ASSIGN_OR_RETURN(std::vector<Call> n, plan(Tier::generic, *norm->op, norm->inputs,
                                                    norm->output, launch, device));
    if (n.size() != 1 || n[0].kernel != Kernel::rows)
      return bad("'" + norm->op->name + "' is not one rows launch");
    auto& rp = std::get<dev::RowParams>(n[0].params);
    rp.q8 = std::get<dev::Q8ActParams>(calls[0].params).out;
    // The residual add before the norm, folded in: the norm reads its inputs and writes its sum.
    if (add) {
      if (!fuses_add(*add, *norm))
        return bad("'" + add->op->name + "' cannot be added inside '" + norm->op->name + "'");
      int64_t shape[4];
      for (int d = 0; d < 4; ++d) shape[d] = rp.x.shape[d];
      rp.x = strided(add->inputs[0], shape);
      rp.res = strided(add->inputs[1], shape);
      rp.sum = static_cast<float*>(add->output.data);
    }
    calls[0] = n[0];
  } else if (add) {
    return bad("an add folded into no norm");
  }
  // The members of each block format, in order, at most kQMvGroup a launch.
  std::vector<char> taken(mvs.size(), 0);
  for (size_t i = 0; i < mvs.size(); ++i) {
    if (taken[i]) continue;
    Call g = mvs[i];
    auto& gp = std::get<dev::QMvParams>(g.params);
    uint64_t blocks = g.grid.x;
    for (size_t j = i + 1; j < mvs.size() && gp.count < dev::kQMvGroup; ++j) {
      const auto& jp = std::get<dev::QMvParams>(mvs[j].params);
      if (taken[j] || jp.fmt != gp.fmt || mvs[j].grid.y != g.grid.y || mvs[j].grid.z != g.grid.z)
        continue;
      if (blocks + mvs[j].grid.x > static_cast<uint64_t>(std::numeric_limits<int>::max())) break;
      dev::QMvOut o = jp.out[0];
      o.first = static_cast<int>(blocks);
      gp.out[gp.count++] = o;
      blocks += mvs[j].grid.x;
      taken[j] = 1;
    }
    g.grid.x = static_cast<unsigned>(blocks);
    calls.push_back(g);
  }
  return calls;
}

Result<std::vector<Call>> plan_rope_write(std::span<const FusedOp> ops, const Launch& launch,
                                          std::string_view device) {
  auto bad = [&](const std::string& why) {
    return Err(Code::invalid_argument)
        .op("rope", ops.empty() ? std::string() : ops[0].op->name)
        .device(device)
        .note("rope with its cache writes: " + why);
  };
  if (ops.size() < 2 || ops.size() > 3) return bad("2 or 3 ops, got " + std::to_string(ops.size()));
  auto member = [](const FusedOp& o) { return GroupMember{o.op, o.inputs, o.output}; };
  if (!rope_feeds_write(member(ops[0]), member(ops[1])) ||
      (ops.size() == 3 && !joins_rope_write(member(ops[2]))))
    return bad(
        "'" + ops[1].op->name + "' does not store the rope's output in place" +
        (ops.size() == 3 ? " (or '" + ops[2].op->name + "' is no write_slice in place)" : ""));
  dev::RopeWriteParams p;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].error && error_bytes(*ops[i].op) > 0)
      return bad("'" + ops[i].op->name + "' has no preset error word");
    Launch l = launch;
    l.error = ops[i].error;
    DUET_ASSIGN_OR_RETURN(std::vector<Call> c,
                          plan(Tier::generic, *ops[i].op, ops[i].inputs, ops[i].output, l, device));
    const Kernel want = i == 0 ? Kernel::rope : Kernel::write_slice;
    if (c.size() != 1 || c[0].kernel != want)
      return bad("'" + ops[i].op->name + "' is not one launch");
    if (i == 0)
      p.rope = std::get<dev::RopeParams>(c[0].params);
    else
      (i == 1 ? p.k : p.v) = std::get<dev::WriteParams>(c[0].params);
  }
  const int64_t items = p.rope.rows * (p.rope.rope_dims / 2 + p.rope.D - p.rope.rope_dims) + p.v.n;
  Call c;
  c.kernel = Kernel::rope_write;
  c.tier = Tier::generic;
  c.grid = {static_cast<unsigned>(std::clamp<int64_t>((items + 255) / 256, 1, 4096)), 1, 1};
  c.threads = 256;
  c.params = p;
  return std::vector<Call>{c};
}

Status data_error(const OpDesc& op, const void* bytes, std::string_view device) {
  if (!bytes || kernels::error_bytes(op) == 0) return {};
  unsigned long long v;
  std::memcpy(&v, bytes, sizeof v);
  if (v == std::numeric_limits<unsigned long long>::max()) return {};
  if (const int si = scalar_input(op); si >= 0) {
    // A run-time scalar out of range (its value in the low word).
    const int32_t bad = static_cast<int32_t>(static_cast<uint32_t>(v & 0xffffffffu));
    Err e(Code::invalid_argument);
    e.op(op_name(op.kind), op.name).tensor(op.input_name(static_cast<size_t>(si))).device(device);
    if (op.kind == OpKind::attention)
      return e.expected("a key count in [0, " + std::to_string(op.inputs[1].dim(2)) + "]")
          .got(std::to_string(bad));
    if (op.kind == OpKind::write_slice)
      return e
          .expected("a slice inside [0, " + std::to_string(op.output.dim(op.attrs.axis)) +
                    ") along axis " + std::to_string(op.attrs.axis))
          .got("offset " + std::to_string(bad));
    return e.expected("a position >= 0").got(std::to_string(bad));
  }
  const int64_t pos = static_cast<int64_t>(v >> 32);
  const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(v & 0xffffffffu));
  return Err(Code::invalid_argument)
      .op("embedding", op.name)
      .tensor(op.input_name(1))
      .device(device)
      .expected(embedding_id_range(op))
      .got("id " + std::to_string(id) + " at position " + std::to_string(pos));
}

}  // namespace detail

uint64_t workspace_bytes(Tier tier, const OpDesc& op, const LaunchConfig& config) {
  const uint64_t eb = error_bytes(op);
  // The integer tiers' quantized activations: a Q8Block per 32 values of A's rows.
  if (op.kind == OpKind::matmul && (tier == Tier::int_dot || tier == Tier::int8_mma) &&
      op.inputs.size() == 2 && is_quantized(op.inputs[1].dtype)) {
    const uint64_t rows =
        static_cast<uint64_t>(op.output.numel() / std::max<int64_t>(op.output.dim(-1), 1));
    return rows * static_cast<uint64_t>(op.inputs[0].dim(op.attrs.transpose_a ? -2 : -1) / 32) *
           sizeof(dev::Q8Block);
  }
  if (op.kind != OpKind::attention || op.inputs.size() < 3) return eb;
  const TensorDesc &q = op.inputs[0], &k = op.inputs[1];
  const int D = static_cast<int>(q.dim(3));
  if (tier == Tier::generic &&
      shapes::gen_attn_kind(D, q.dim(1) / std::max<int64_t>(k.dim(1), 1) * q.dim(2),
                            config.shared_bytes) != shapes::GenAttn::decode)
    return eb;
  const int64_t bc = tier == Tier::generic ? shapes::kGenDecChunk
                     : tier == Tier::wgmma ? shapes::wgmma_key_tile(D)
                                           : shapes::attn_key_tile(D, tier == Tier::flash);
  const int64_t tiles = (k.dim(2) + bc - 1) / bc;
  const int64_t splits = std::clamp<int64_t>(config.splits, 1, std::max<int64_t>(tiles, 1));
  if (splits <= 1) return eb;
  const uint64_t rows = static_cast<uint64_t>(q.dim(0) * q.dim(1) * q.dim(2));
  const uint64_t s = static_cast<uint64_t>(splits);
  return detail::round_up(eb) + detail::round_up(s * rows * static_cast<uint64_t>(D) * 4) +
         s * rows * 4;
}

static_assert(kGroupRows == dev::kQIntRows, "a group's rows of A are one block's");

bool shares_activations(Tier tier, const OpDesc& a, std::span<const View> a_in, const OpDesc& b,
                        std::span<const View> b_in) {
  auto member = [&](const OpDesc& o, std::span<const View> in) {
    if (o.kind != OpKind::matmul || o.inputs.size() != 2 || in.size() != 2 ||
        !is_quantized(o.inputs[1].dtype) || o.output.rank < 1)
      return false;
    const int64_t n = o.output.dim(-1);
    return n > 0 && o.output.numel() / n <= kGroupRows;
  };
  if (tier != Tier::int_dot || !member(a, a_in) || !member(b, b_in)) return false;
  const View &x = a_in[0], &y = b_in[0];
  bool same = x.data == y.data && x.dtype == y.dtype && x.rank == y.rank &&
              a.attrs.transpose_a == b.attrs.transpose_a && a.inputs[0].same_shape(b.inputs[0]) &&
              a.output.rank == b.output.rank;
  for (int d = 0; same && d < x.rank; ++d)
    same = x.shape[d] == y.shape[d] && x.strides[d] == y.strides[d];
  for (int d = 0; same && d + 1 < a.output.rank; ++d)
    same = a.output.shape[static_cast<size_t>(d)] == b.output.shape[static_cast<size_t>(d)];
  return same;
}

namespace {

bool dense_view(const View& v) {
  int64_t expect = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != expect) return false;
    expect *= v.shape[d];
  }
  return true;
}

int64_t view_numel(const View& v) {
  int64_t n = 1;
  for (int d = 0; d < v.rank; ++d) n *= v.shape[d];
  return n;
}

bool float_storage(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

}  // namespace

bool fuses_norm(const GroupMember& norm, const OpDesc& mv, std::span<const View> mv_in) {
  const OpDesc& op = *norm.op;
  if (op.kind != OpKind::rmsnorm || norm.inputs.empty() || op.output.rank < 1 ||
      norm.output.dtype != DType::f32 || mv.attrs.transpose_a ||
      !shares_activations(Tier::int_dot, mv, mv_in, mv, mv_in))
    return false;
  const View &x = norm.inputs[0], &y = norm.output, &a = mv_in[0];
  const int64_t n = op.output.dim(-1);
  if (n <= 0 || n % 32 != 0 || x.rank < 1 || y.rank < 1 || a.rank < 1) return false;
  // rows_kernel's registers path (generic.h): a dense last dim of float storage, few enough
  // elements for its threads (a multiple of 32, so a warp's values are whole blocks).
  const int threads = shapes::rows_threads(n);
  if ((x.strides[x.rank - 1] != 1 && n != 1) || !float_storage(x.dtype) ||
      n > int64_t(dev::kRowRegs) * threads || threads % 32 != 0 ||
      (norm.inputs.size() > 1 && !float_storage(norm.inputs[1].dtype)))
    return false;
  // The mat-vec's activations are the norm's output, whole and dense: row i of one is row i of
  // the other, and block j of row i is q8_act's block i * n / 32 + j.
  return a.data == y.data && a.dtype == DType::f32 && dense_view(a) && dense_view(y) &&
         a.shape[a.rank - 1] == n && view_numel(a) == view_numel(y);
}

bool fuses_add(const GroupMember& add, const GroupMember& norm) {
  const OpDesc& op = *add.op;
  if (op.kind != OpKind::add || add.inputs.size() != 2 || norm.inputs.empty()) return false;
  const View &y = add.output, &x = norm.inputs[0];
  if (y.dtype != DType::f32 || !dense_view(y) || !dense_view(x) || x.data != y.data ||
      x.dtype != DType::f32 || view_numel(x) != view_numel(y) || y.rank < 1)
    return false;
  // Both operands f32 in the output's shape (no broadcast), rows with unit stride.
  for (const View& v : add.inputs) {
    if (v.dtype != DType::f32 || v.rank != y.rank || v.strides[v.rank - 1] != 1) return false;
    for (int d = 0; d < v.rank; ++d)
      if (v.shape[d] != y.shape[d]) return false;
  }
  return true;
}

bool fuses_eltwise(const GroupMember& op, const OpDesc& mv, std::span<const View> mv_in) {
  const OpDesc& o = *op.op;
  const std::optional<uint32_t> code = eltwise_code(o);
  if (!code || *code >= DUET_EW_COUNT || op.inputs.empty() || o.output.rank < 1 ||
      op.output.dtype != DType::f32 || mv.attrs.transpose_a ||
      !shares_activations(Tier::int_dot, mv, mv_in, mv, mv_in))
    return false;
  // The mat-vec's activations are the op's whole dense output, K a multiple of 32: element i of
  // one is element i of the other, in q8_act's block i / 32 (the warps of eltwise_q8_kernel,
  // 256 threads a block, hold whole blocks).
  const View &y = op.output, &a = mv_in[0];
  const int64_t k = a.rank > 0 ? a.shape[a.rank - 1] : 0;
  return k > 0 && k % 32 == 0 && a.data == y.data && a.dtype == DType::f32 && dense_view(a) &&
         dense_view(y) && view_numel(a) == view_numel(y);
}

bool rope_feeds_write(const GroupMember& rope, const GroupMember& write) {
  const OpDesc &r = *rope.op, &w = *write.op;
  if (r.kind != OpKind::rope || r.output.rank != 4 || rope.output.dtype != DType::f32 ||
      !joins_rope_write(write) || write.inputs.size() < 2)
    return false;
  const View &y = rope.output, &x = write.inputs[1];
  bool same = x.data == y.data && x.dtype == y.dtype && x.rank == y.rank && dense_view(x) &&
              dense_view(y) && w.inputs[1].same_shape(r.output);
  for (int d = 0; same && d < x.rank; ++d) same = x.shape[d] == y.shape[d];
  return same;
}

bool joins_rope_write(const GroupMember& write) {
  const OpDesc& w = *write.op;
  return w.kind == OpKind::write_slice && write.inputs.size() >= 2 &&
         write.inputs[0].data == write.output.data && float_storage(write.output.dtype) &&
         float_storage(write.inputs[1].dtype);
}

uint64_t error_bytes(const OpDesc& op) {
  return op.kind == OpKind::embedding || scalar_input(op) >= 0 ? 8 : 0;
}

Status launch_result(const OpDesc& op, const void* error_bytes_on_host, std::string_view device) {
  return detail::data_error(op, error_bytes_on_host, device);
}

}  // namespace duet::kernels
