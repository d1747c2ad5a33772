// Kernel selection: for each op, every tier's choice with the checks it must pass, as data
// (a list of named refusals), so that `duet plan --explain` can say exactly why a tier was not
// used. Launch shapes come from the device's limits.
#include "duet/kernels/select.h"

#include "duet/kernels/kernel.h"

#include <algorithm>
#include <sstream>

#include "device/params.h"
#include "duet/kernels/arch.h"
#include "host/shapes.h"

namespace duet::kernels {

namespace {

using dev::kQIntRows;
using dev::kQMvThreads;

std::string kib(uint64_t bytes) {
  std::ostringstream s;
  if (bytes % 1024 == 0)
    s << bytes / 1024 << " KiB";
  else
    s << static_cast<double>(bytes) / 1024.0 << " KiB";
  return s.str();
}

// The largest dynamic shared memory a block may use (opt-in included).
uint64_t smem_limit(const DeviceCaps& caps) {
  return std::max(caps.shared_mem_per_block_optin, caps.shared_mem_per_block);
}

// A choice under construction: refusals accumulate, the first reason becomes the message and
// all of them are listed.
struct Draft {
  KernelChoice c;
  std::vector<std::string> why_not;
  std::vector<std::string> why;

  Draft(Tier tier, Precision p) {
    c.tier = tier;
    c.precision = p;
  }
  void need(bool ok, std::string reason) {
    if (!ok) why_not.push_back(std::move(reason));
  }
  KernelChoice done(std::string_view what) {
    c.ok = why_not.empty();
    std::string s = std::string(what) + ": ";
    const auto& parts = c.ok ? why : why_not;
    for (size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i];
    c.reason = s;
    return c;
  }
};

// The kernels are written for 32-wide warps (mma fragments, shuffles).
void need_warp32(Draft& d, const DeviceCaps& caps) {
  d.need(
      caps.subgroup_size == 32 || caps.subgroup_size <= 1,
      "the kernels assume 32-wide warps, the device reports " + std::to_string(caps.subgroup_size));
}

// The build holds an image of the tier's kernels (built for tier_min_sm and newer) that the
// device can load; asked only when the architecture fits the tier, whose refusal says more.
void need_image(Draft& d, const DeviceCaps& caps, const ArchFeatures& arch, const BuildArchs& build,
                Tier tier) {
  if (!tier_fits(arch, tier)) return;
  const ImageCheck image = check_image(build, caps.cc_major, caps.cc_minor, tier_min_sm(tier));
  d.need(image.ok(), image.refusal());
}

// "requires sm_80, device is sm_75" when the architecture lacks what the tier's kernels use.
void need_arch(Draft& d, const ArchFeatures& arch, Tier tier, std::string_view what = {}) {
  d.need(tier_fits(arch, tier), "requires " + sm_name(tier_min_sm(tier)) + std::string(what) +
                                    ", device is " + arch.name());
}

// Storage layout the tensor-core attention reads: last dim dense, rows 16-byte aligned.
std::string attn_layout_problem(const OpDesc& op) {
  for (size_t i = 0; i < 3; ++i) {
    const TensorDesc& t = op.inputs[i];
    bool ok = t.stride(3) == 1 || t.dim(3) == 1;
    for (int d = 0; d < 3; ++d) ok = ok && (t.stride(d) % 8 == 0 || t.dim(d) == 1);
    ok = ok && t.offset % 8 == 0;
    if (!ok)
      return "'" + op.input_name(i) + "' " + t.str() +
             " needs a dense last dim and rows starting on 16 bytes (strides and offset " +
             "multiples of 8 elements); copy it first";
  }
  return {};
}

std::vector<DType> op_dtypes(const OpDesc& op) {
  std::vector<DType> v;
  for (const TensorDesc& t : op.inputs) v.push_back(t.dtype);
  return v;
}

// The 16-bit precisions to offer for a tensor-core tier, the op's own first.
std::vector<Precision> half_precisions(DType t) {
  if (t == DType::f16) return {Precision::f16, Precision::bf16};
  return {Precision::bf16, Precision::f16};
}

// ---- attention

struct AttnDims {
  int64_t B, Hq, Hkv, Lq, Lk, D;
};

AttnDims attn_dims(const OpDesc& op) {
  const TensorDesc &q = op.inputs[0], &k = op.inputs[1];
  return {q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3)};
}

// Launch shape of the tensor-core attention: warps from the rows a block can fill, stages from
// shared memory, splits of the keys when the grid would leave SMs idle.
// Warps a block may have when every thread may use 255 registers (the tensor-core kernels' worst
// case), on devices that report their register file.
int register_warps(const DeviceCaps& caps) {
  if (caps.registers_per_block == 0) return 1 << 20;
  return static_cast<int>(caps.registers_per_block / (255u * 32u));
}

LaunchConfig attn_tc_config(const DeviceCaps& caps, const AttnDims& a, bool flash) {
  const int max_warps = std::max(
      1, std::min(flash ? shapes::attn_max_warps(static_cast<int>(a.D)) : 4, register_warps(caps)));
  const int max_stages = flash ? 2 : 1;
  LaunchConfig cfg;
  const int D = static_cast<int>(a.D);
  const int64_t rows = (a.Hq / a.Hkv) * a.Lq;
  const int warps = static_cast<int>(std::clamp<int64_t>((rows + 15) / 16, 1, max_warps));
  int stages = max_stages;
  while (stages > 1 && shapes::attn_smem_bytes(D, warps, stages, flash) > smem_limit(caps))
    --stages;
  const int bc = shapes::attn_key_tile(D, flash);
  const int64_t blocks = (rows + warps * 16 - 1) / (warps * 16) * a.Hkv * a.B;
  const int64_t kv_tiles = (a.Lk + bc - 1) / bc;
  int64_t splits = 1;
  if (caps.compute_units > 0 && blocks < caps.compute_units && kv_tiles >= 2) {
    splits =
        std::clamp<int64_t>(2 * caps.compute_units / blocks, 1, std::min<int64_t>(kv_tiles, 64));
    const int64_t per = (kv_tiles + splits - 1) / splits;
    splits = (kv_tiles + per - 1) / per;
  }
  cfg.block_threads = warps * 32;
  cfg.tile_m = warps * 16;
  cfg.tile_n = bc;
  cfg.tile_k = D;
  cfg.stages = stages;
  cfg.splits = static_cast<int>(splits);
  cfg.subgroup = 32;
  cfg.shared_bytes = shapes::attn_smem_bytes(D, warps, stages, flash);
  return cfg;
}

// The generic tier: the SIMT flash kernel (prefill), the split-KV decode kernel (a few rows per
// kv head: enough splits for about 8 blocks of 128 threads per SM), or one block per query row.
LaunchConfig generic_attention_config(const DeviceCaps& caps, const AttnDims& a) {
  const int D = static_cast<int>(a.D);
  const int64_t rows = (a.Hq / a.Hkv) * a.Lq;
  LaunchConfig cfg;
  cfg.subgroup = 32;
  switch (shapes::gen_attn_kind(D, rows, smem_limit(caps))) {
    case shapes::GenAttn::flash: {
      const int dm = shapes::gen_flash_dm(D);
      cfg.block_threads = 128;
      cfg.tile_m = shapes::gen_flash_bm(dm);
      cfg.tile_n = shapes::kGenFlashBN;
      cfg.tile_k = dm;
      cfg.shared_bytes = shapes::gen_flash_smem(dm);
      cfg.set_variant(Kernel{.family = Family::generic_flash_attention});
      return cfg;
    }
    case shapes::GenAttn::decode: {
      const int dm = shapes::gen_decode_dm(D);
      const int g = shapes::gen_decode_rows(rows, dm);
      const int64_t blocks = (rows + g - 1) / g * a.Hkv * a.B;
      const int64_t chunks = (a.Lk + shapes::kGenDecChunk - 1) / shapes::kGenDecChunk;
      int64_t splits = 1;
      if (caps.compute_units > 0 && blocks < 8 * caps.compute_units)
        splits = std::clamp<int64_t>(8 * caps.compute_units / blocks, 1,
                                     std::min<int64_t>(std::max<int64_t>(chunks, 1), 1024));
      cfg.block_threads = 128;
      cfg.tile_m = g;
      cfg.tile_n = shapes::kGenDecChunk;
      cfg.tile_k = dm;
      cfg.splits = static_cast<int>(splits);
      cfg.shared_bytes = shapes::gen_decode_smem(dm, g);
      cfg.set_variant(Kernel{.family = Family::generic_decode_attention});
      return cfg;
    }
    case shapes::GenAttn::rowwise:
      break;
  }
  cfg.block_threads = shapes::kGenAttnThreads;
  cfg.shared_bytes = shapes::gen_attn_smem_bytes(D);
  cfg.set_variant(Kernel{.family = Family::generic_attention});
  return cfg;
}

// The Hopper kernel: one block per SM (its shared memory and registers), so splits of the keys
// fill the SMs one wave deep.
LaunchConfig wgmma_config(const DeviceCaps& caps, const AttnDims& a) {
  const int D = static_cast<int>(a.D);
  LaunchConfig cfg;
  const int64_t rows = (a.Hq / a.Hkv) * a.Lq;
  const int bm = shapes::wgmma_rows(D), bn = shapes::wgmma_key_tile(D);
  const int64_t blocks = (rows + bm - 1) / bm * a.Hkv * a.B;
  const int64_t kv_tiles = (a.Lk + bn - 1) / bn;
  int64_t splits = 1;
  if (caps.compute_units > 0 && blocks < caps.compute_units && kv_tiles >= 2) {
    splits = std::clamp<int64_t>(caps.compute_units / blocks, 1, std::min<int64_t>(kv_tiles, 64));
    const int64_t per = (kv_tiles + splits - 1) / splits;
    splits = (kv_tiles + per - 1) / per;
  }
  cfg.block_threads = shapes::wgmma_threads(D);
  cfg.tile_m = bm;
  cfg.tile_n = bn;
  cfg.tile_k = D;
  cfg.stages = shapes::wgmma_stages(D);
  cfg.splits = static_cast<int>(splits);
  cfg.subgroup = 32;
  cfg.shared_bytes = shapes::wgmma_smem_bytes(D);
  return cfg;
}

// The wgmma tier: sm_90 exactly (sm_90a cubins run on 9.0 only), from a build with such a cubin.
void wgmma_attention_choices(const DeviceCaps& caps, const OpDesc& op, const BuildArchs& build,
                             const std::string& layout, std::vector<KernelChoice>& out) {
  const ArchFeatures arch = arch_features(caps);
  const bool fits = tier_fits(arch, Tier::wgmma);
  const AttnDims a = attn_dims(op);
  const int D = static_cast<int>(a.D);
  // wgmma exists only in code for the architecture's own 'a' target: a cubin of exactly it.
  const bool image =
      std::count(build.arch_specific.begin(), build.arch_specific.end(), arch.sm) > 0;
  for (Precision p : half_precisions(op.inputs[0].dtype)) {
    Draft d(Tier::wgmma, p);
    need_arch(d, arch, Tier::wgmma, " (Hopper: wgmma, TMA, sm_90a code)");
    d.need(caps.tensor_cores, "requires tensor cores, the device has none");
    d.need(shapes::wgmma_head_dim(D),
           "head dim " + std::to_string(D) + " is not one of 64, 128 (the flash tier takes it)");
    d.need(layout.empty(), layout);
    if (fits)
      d.need(image, "this build has no " + arch.specific_target() + " image (" + build.str() +
                        "); add " + std::to_string(arch.sm) + "a to DUET_CUDA_ARCHS");
    LaunchConfig cfg = shapes::wgmma_head_dim(D) ? wgmma_config(caps, a) : LaunchConfig{};
    if (fits) {
      d.need(cfg.shared_bytes <= smem_limit(caps),
             "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
                 kib(smem_limit(caps)));
      d.need(a.B <= 65535 && a.Hkv * cfg.splits <= 65535,
             "grid too large (B and Hkv at most 65535)");
    }
    need_warp32(d, caps);
    cfg.set_variant(Kernel{.family = Family::wgmma_attention, .precision = p, .head_dim = D});
    d.c.launch = cfg;
    std::vector<DType> in = {precision_storage(p), precision_storage(p), precision_storage(p)};
    for (size_t i = 3; i < op.inputs.size(); ++i) in.push_back(op.inputs[i].dtype);
    d.c.input_dtypes = in;
    d.c.output_dtype = precision_storage(p);
    d.why.push_back(arch.name() + " with an " + arch.specific_target() + " image: wgmma " +
                    std::string(precision_name(p)) + " from shared memory, TMA " +
                    std::to_string(cfg.stages) + "-stage K/V pipeline, producer and " +
                    std::to_string(cfg.tile_m / 64) + " consumer warpgroups" +
                    (cfg.splits > 1 ? ", " + std::to_string(cfg.splits) + " KV splits" : ""));
    out.push_back(d.done("wgmma attention"));
  }
}

void attention_choices(const DeviceCaps& caps, const OpDesc& op, const BuildArchs& build,
                       std::vector<KernelChoice>& out) {
  const ArchFeatures arch = arch_features(caps);
  const AttnDims a = attn_dims(op);
  const int D = static_cast<int>(a.D);
  const bool hd_ok = std::find(std::begin(kAttentionHeadDims), std::end(kAttentionHeadDims), D) !=
                     std::end(kAttentionHeadDims);
  const std::string hd_msg =
      "head dim " + std::to_string(D) + " is not one of 64, 80, 96, 128, 256";
  const std::string layout = attn_layout_problem(op);
  auto inputs_at = [&](DType t) {
    std::vector<DType> v = {t, t, t};
    // The mask is read as it is, and so is the run-time key count.
    for (size_t i = 3; i < op.inputs.size(); ++i) v.push_back(op.inputs[i].dtype);
    return v;
  };

  // Choices come best first, and the planner keeps the earlier of two it rates alike (both are
  // bound by the same bytes). With fewer query rows per KV head than one wgmma tile (decode: 1-8
  // rows under grouped-query attention), the flash tier, whose tile is sized to the rows, comes
  // first: on an H200 (2026-11-28, 8B decode, 4 rows) it took 19-20 us a layer against wgmma's
  // 23-28, the same at 512 and 2,048 cached positions (its producer warpgroup and TMA pipeline's
  // set-up, not the cache). A prefill's long query blocks keep wgmma first.
  const bool few_rows = shapes::wgmma_head_dim(D) &&
                        (a.Hq / std::max<int64_t>(a.Hkv, 1)) * a.Lq < shapes::wgmma_rows(D);
  if (!few_rows) wgmma_attention_choices(caps, op, build, layout, out);
  for (Precision p : half_precisions(op.inputs[0].dtype)) {
    Draft d(Tier::flash, p);
    need_arch(d, arch, Tier::flash);
    d.need(caps.tensor_cores, "requires tensor cores, the device has none");
    if (p == Precision::bf16)
      d.need(caps.bf16_arith || arch.mma_bf16,
             "bf16 needs " + sm_name(DUET_SM_BF16) + " tensor cores");
    d.need(hd_ok, hd_msg);
    d.need(layout.empty(), layout);
    LaunchConfig cfg = attn_tc_config(caps, a, true);
    d.need(cfg.shared_bytes <= smem_limit(caps),
           "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
               kib(smem_limit(caps)));
    need_warp32(d, caps);
    need_image(d, caps, arch, build, Tier::flash);
    cfg.set_variant(Kernel{.family = Family::flash_attention, .precision = p, .head_dim = D});
    d.c.launch = cfg;
    d.c.input_dtypes = inputs_at(precision_storage(p));
    d.c.output_dtype = precision_storage(p);
    d.why.push_back(arch.name() + " >= " + sm_name(tier_min_sm(d.c.tier)) + ", mma.sync m16n8k16 " +
                    std::string(precision_name(p)) + ", cp.async " + std::to_string(cfg.stages) +
                    " stage(s)" +
                    (cfg.splits > 1 ? ", " + std::to_string(cfg.splits) + " KV splits" : ""));
    out.push_back(d.done("flash attention"));
  }
  if (few_rows) wgmma_attention_choices(caps, op, build, layout, out);

  {
    Draft d(Tier::tiled, Precision::f16);
    need_arch(d, arch, Tier::tiled, " (mma.sync m16n8k8 f16)");
    d.need(caps.tensor_cores, "requires tensor cores, the device has none");
    d.need(hd_ok, hd_msg);
    d.need(layout.empty(), layout);
    LaunchConfig cfg = attn_tc_config(caps, a, false);
    d.need(cfg.shared_bytes <= smem_limit(caps),
           "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
               kib(smem_limit(caps)));
    need_warp32(d, caps);
    need_image(d, caps, arch, build, d.c.tier);
    cfg.set_variant(
        Kernel{.family = Family::tiled_attention, .precision = Precision::f16, .head_dim = D});
    d.c.launch = cfg;
    d.c.input_dtypes = inputs_at(DType::f16);
    d.c.output_dtype = DType::f16;
    d.why.push_back(arch.name() + " >= " + sm_name(tier_min_sm(Tier::tiled)) +
                    ", mma.sync m16n8k8 f16, tiles for " + kib(cfg.shared_bytes) +
                    " of shared memory" +
                    (cfg.splits > 1 ? ", " + std::to_string(cfg.splits) + " KV splits" : ""));
    out.push_back(d.done("tiled attention"));
  }

  {
    Draft d(Tier::generic, Precision::f32);
    LaunchConfig cfg = generic_attention_config(caps, a);
    // The row-wise kernel stays within the default 48 KiB; the SIMT tiles may opt in to more.
    const Family family = cfg.variant_as<Kernel>()->family;
    const uint64_t limit =
        family == Family::generic_attention ? caps.shared_mem_per_block : smem_limit(caps);
    d.need(cfg.shared_bytes <= limit, "head dim " + std::to_string(D) + " needs " +
                                          kib(cfg.shared_bytes) +
                                          " of shared memory, the device allows " + kib(limit));
    d.need(a.Lq <= 0x7fffffff && a.Hq <= 65535 && a.B <= 65535,
           "grid too large (Hq and B at most 65535)");
    need_image(d, caps, arch, build, Tier::generic);
    d.c.launch = cfg;
    d.c.input_dtypes = op_dtypes(op);
    d.c.output_dtype = op.output.dtype;
    d.why.push_back(family == Family::generic_flash_attention
                        ? "SIMT flash (tiles of " + std::to_string(cfg.tile_m) + " rows x " +
                              std::to_string(cfg.tile_n) +
                              " keys), fp32 compute, reads every dtype as stored, any architecture"
                    : family == Family::generic_decode_attention
                        ? "SIMT split-KV decode (" + std::to_string(cfg.splits) +
                              " splits), fp32 compute, reads every dtype as stored, any "
                              "architecture"
                        : "SIMT, fp32 compute, any architecture");
    out.push_back(d.done("generic attention"));
  }
}

// ---- matmul

// Rows a warp of a mat-vec owns: as many as keep one and a half blocks per SM or more (a block
// being `warps` warps; two fit an SM), each row adding loads in flight to every warp.
int matvec_rows_per_warp(const DeviceCaps& caps, int64_t n, int64_t other_blocks, int warps) {
  const int64_t want = 3 * std::max(caps.compute_units, 1) / 2;
  for (int rpw = 4; rpw > 1; rpw /= 2)
    if ((n + warps * rpw - 1) / (warps * rpw) * other_blocks >= want) return rpw;
  return 1;
}

int64_t matmul_batch(const OpDesc& op) {
  int64_t n = 1;
  for (int i = 0; i < op.output.rank - 2; ++i) n *= op.output.shape[static_cast<size_t>(i)];
  return n;
}

void matmul_choices(const DeviceCaps& caps, const OpDesc& op, const BuildArchs& build,
                    std::vector<KernelChoice>& out) {
  const ArchFeatures arch = arch_features(caps);
  const int64_t M = op.output.dim(-2), batch = matmul_batch(op);
  const bool b_nmajor = shapes::matmul_b_nmajor(op);
  const int warps_m = M >= 128 && register_warps(caps) >= 8 ? 4 : 2, warps_n = 2;
  auto tc_config = [&](int max_stages) {
    LaunchConfig cfg;
    int stages = max_stages;
    const uint64_t stage = shapes::matmul_tc_stage_bytes(warps_m, warps_n, b_nmajor);
    while (stages > 1 && stages * stage > smem_limit(caps)) --stages;
    cfg.block_threads = warps_m * warps_n * 32;
    cfg.tile_m = warps_m * shapes::kMmWM;
    cfg.tile_n = warps_n * shapes::kMmWN;
    cfg.tile_k = shapes::kMmBK;
    cfg.stages = stages;
    cfg.subgroup = 32;
    cfg.shared_bytes = stages * stage;
    return cfg;
  };
  const bool grid_ok = batch <= 65535 && (M + 127) / 64 <= 65535;
  const std::string grid_msg = "grid too large (batch at most 65535, M at most 4M)";
  // Decode shapes read B once for every row of A: the generic mat-vec streams it at memory
  // speed, where a 64-row tensor-core tile would be mostly padding.
  const bool mv = shapes::matvec_applies(op);
  const std::string mv_msg = "decode shape (" + std::to_string(M) +
                             " rows, at most 8, B's k stride 1): the generic mat-vec reads B " +
                             "once at memory speed, an mma tile would be mostly padding";

  for (Precision p : half_precisions(op.inputs[0].dtype)) {
    Draft d(Tier::pipelined, p);
    need_arch(d, arch, Tier::pipelined);
    d.need(caps.tensor_cores, "requires tensor cores, the device has none");
    d.need(grid_ok, grid_msg);
    d.need(!mv, mv_msg);
    LaunchConfig cfg = tc_config(3);
    d.need(cfg.shared_bytes <= smem_limit(caps),
           "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
               kib(smem_limit(caps)));
    need_warp32(d, caps);
    need_image(d, caps, arch, build, Tier::pipelined);
    cfg.set_variant(
        Kernel{.family = Family::pipelined_matmul, .precision = p, .b_nmajor = b_nmajor});
    d.c.launch = cfg;
    d.c.input_dtypes = {precision_storage(p), precision_storage(p)};
    d.c.output_dtype = precision_storage(p);
    d.why.push_back(arch.name() + " >= " + sm_name(tier_min_sm(d.c.tier)) + ", mma.sync m16n8k16 " +
                    std::string(precision_name(p)) + ", cp.async " + std::to_string(cfg.stages) +
                    "-stage pipeline");
    out.push_back(d.done("pipelined matmul"));
  }
  {
    Draft d(Tier::tiled, Precision::f16);
    need_arch(d, arch, Tier::tiled, " (mma.sync m16n8k8 f16)");
    d.need(caps.tensor_cores, "requires tensor cores, the device has none");
    d.need(grid_ok, grid_msg);
    d.need(!mv, mv_msg);
    LaunchConfig cfg = tc_config(1);
    d.need(cfg.shared_bytes <= smem_limit(caps),
           "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
               kib(smem_limit(caps)));
    need_warp32(d, caps);
    need_image(d, caps, arch, build, d.c.tier);
    cfg.set_variant(
        Kernel{.family = Family::tiled_matmul, .precision = Precision::f16, .b_nmajor = b_nmajor});
    d.c.launch = cfg;
    d.c.input_dtypes = {DType::f16, DType::f16};
    d.c.output_dtype = DType::f16;
    d.why.push_back(arch.name() + " >= " + sm_name(tier_min_sm(Tier::tiled)) +
                    ", mma.sync m16n8k8 f16");
    out.push_back(d.done("tiled matmul"));
  }
  {
    Draft d(Tier::generic, Precision::f32);
    d.need(grid_ok, grid_msg);
    need_image(d, caps, arch, build, Tier::generic);
    LaunchConfig cfg;
    cfg.subgroup = 32;
    if (mv) {
      // A warp's rows of B from the grid; A's rows in f32 chunks of at most 16 KiB a row (a
      // multiple of 8 elements), so that two blocks share an SM on any device.
      const int64_t K = op.inputs[0].dim(op.attrs.transpose_a ? -2 : -1);
      const int ma = static_cast<int>(std::min<int64_t>(M, dev::kMvRows));
      const int rpw = matvec_rows_per_warp(caps, op.output.dim(-1), batch, 8);
      const uint64_t budget = std::min<uint64_t>(
          caps.shared_mem_per_block > 0 ? caps.shared_mem_per_block / 2 : 24 * 1024,
          static_cast<uint64_t>(ma) * 16 * 1024);
      cfg.block_threads = 256;
      cfg.tile_m = dev::kMvRows;
      cfg.tile_n = 8 * rpw;
      cfg.tile_k = static_cast<int>(std::clamp<int64_t>(
          std::min<int64_t>((K + 7) / 8 * 8, budget / (4 * ma) / 512 * 512), 8, 1 << 20));
      cfg.shared_bytes = shapes::matvec_smem_bytes(ma, cfg.tile_k);
      cfg.set_variant(Kernel{.family = Family::generic_matvec});
      d.why.push_back("SIMT mat-vec, fp32 compute, B read once in 16-byte loads, " +
                      std::to_string(rpw) + " row(s) of B a warp, any architecture");
    } else {
      cfg.block_threads = shapes::kGenMatmulThreads;
      cfg.tile_m = cfg.tile_n = 64;
      cfg.tile_k = 16;
      cfg.shared_bytes = shapes::kGenMatmulSmem;
      cfg.set_variant(Kernel{.family = Family::generic_matmul});
      d.why.push_back("SIMT, fp32 compute, any architecture");
    }
    d.c.launch = cfg;
    d.c.input_dtypes = op_dtypes(op);
    d.c.output_dtype = op.output.dtype;
    out.push_back(d.done("generic matmul"));
  }
}

// ---- every other op: the generic tier only

void generic_choice(const DeviceCaps& caps, const OpDesc& op, const BuildArchs& build,
                    std::vector<KernelChoice>& out) {
  const ArchFeatures arch = arch_features(caps);
  Draft d(Tier::generic, Precision::f32);
  need_image(d, caps, arch, build, Tier::generic);
  LaunchConfig cfg;
  cfg.subgroup = 32;
  switch (op.kind) {
    case OpKind::softmax:
    case OpKind::rmsnorm:
    case OpKind::layernorm:
      cfg.block_threads = shapes::rows_threads(op.inputs[0].dim(-1));
      cfg.shared_bytes = static_cast<uint64_t>(cfg.block_threads / 32) * 4;
      cfg.set_variant(Kernel{.family = Family::generic_rows});
      break;
    default:
      cfg.block_threads = 256;
      cfg.set_variant(Kernel{.family = Family::generic_op, .op = op.kind});
      break;
  }
  d.c.launch = cfg;
  d.c.input_dtypes = op_dtypes(op);
  d.c.output_dtype = op.output.dtype;
  d.why.push_back("SIMT, fp32 compute, any architecture");
  // launch.h's fuses_norm, as far as the op says (the views are known at run time).
  const int64_t n = op.output.rank > 0 ? op.output.dim(-1) : 0;
  if (op.kind == OpKind::rmsnorm && op.output.dtype == DType::f32 && n > 0 && n % 32 == 0 &&
      n <= int64_t(dev::kRowRegs) * cfg.block_threads && op.output.numel() / n <= kQIntRows)
    d.why.push_back(
        "before int_dot mat-vecs of its output, it quantizes their activations to int8 per 32 "
        "itself, at run time (no q8_act launch; cuda.fuse_norm_quant)");
  // launch.h's fuses_eltwise, as far as the op says (the CUDA device holds only silu_mul).
  if (op.kind == OpKind::silu_mul && op.output.dtype == DType::f32 && n > 0 && n % 32 == 0 &&
      op.output.numel() / n <= kQIntRows)
    d.why.push_back(
        "before an int_dot mat-vec of its output, it quantizes its activations to int8 per 32 "
        "itself, at run time (no q8_act launch; cuda.fuse_silu_quant)");
  // launch.h's rope_feeds_write, as far as the op says.
  if (op.kind == OpKind::rope && op.output.dtype == DType::f32 && op.output.rank == 4)
    d.why.push_back(
        "before a write_slice of its output into a cache in place, it writes the cache rows "
        "itself, and the next write_slice's (V) too, at run time (one kernel for the three; "
        "cuda.fuse_rope_write)");
  out.push_back(d.done("generic " + std::string(op_name(op.kind))));
}

// ---- block-quantized weights: int8 tensor cores (prefill), dp4a (decode and small batches,
// sm_61+), and the generic tier (SIMT dequantize-and-FMA) everywhere

// The int8_mma tier's tiles and staging: the largest block tile (128 or 64 rows of A by 128 or
// 64 weight rows) and the most steps in flight that fit the device's shared memory per block
// (opt-in included), for this format's raw block bytes: a Turing card with 64 KiB gets a smaller
// tile than an H100 instead of failing to launch.
LaunchConfig mmq_config(const DeviceCaps& caps, DType f, int64_t M, bool async) {
  LaunchConfig cfg;
  cfg.subgroup = 32;
  cfg.tile_k = dev::kQMmqKc * 32;
  const int wm_max = M > 64 ? 4 : 2;
  const int tries[][3] = {{wm_max, 2, 2}, {2, 2, 2}, {wm_max, 2, 1},
                          {2, 2, 1},      {2, 1, 1}, {1, 1, 1}};
  for (const auto& [wm, wn, stages] : tries) {
    if (stages > 1 && !async) continue;
    cfg.block_threads = wm * wn * 32;
    cfg.tile_m = wm * 32;
    cfg.tile_n = wn * 64;
    cfg.stages = stages;
    cfg.shared_bytes = shapes::mmq_smem_bytes(f, cfg.tile_m, cfg.tile_n, stages);
    if (cfg.shared_bytes <= smem_limit(caps)) break;
  }
  return cfg;
}

// The int_dot mat-vec: the instance of the block's activation rows, its weight rows a block,
// and shared memory for the warps' sums.
LaunchConfig qmv_config(int64_t M) {
  LaunchConfig cfg;
  cfg.subgroup = 32;
  cfg.block_threads = kQMvThreads;
  cfg.tile_m = kQIntRows;
  const int ma = dev::qmv_act_rows(M);
  cfg.tile_n = dev::qmv_rows(ma);
  cfg.tile_k = 32;
  cfg.stages = 1;
  cfg.shared_bytes = shapes::qmv_smem_bytes(ma);
  return cfg;
}

void quantized_choices(const DeviceCaps& caps, const OpDesc& op, const BuildArchs& build,
                       std::vector<KernelChoice>& out) {
  const size_t qi = *quantized_input(op);
  const bool mm = op.kind == OpKind::matmul && qi == 1;
  const bool rows = (op.kind == OpKind::embedding || op.kind == OpKind::cast) && qi == 0;
  if (!mm && !rows) {
    out.push_back(no_quantized_kernel(op, "CUDA"));
    return;
  }
  const ArchFeatures arch = arch_features(caps);
  const std::string f(dtype_name(op.inputs[qi].dtype));
  if (mm) {
    const int64_t M = op.output.dim(-2), batch = matmul_batch(op);
    const bool grid_ok = batch <= 65535 && (M + kQIntRows - 1) / kQIntRows <= 65535;
    const std::string grid_msg = "grid too large (batch at most 65535, M at most 512K)";
    const DType wf = op.inputs[qi].dtype;
    // cp.async staging (and, for the int8 tiles, m16n8k32) from sm_80; synchronous before.
    const bool async = arch.cp_async;
    {
      Draft d(Tier::int8_mma, Precision::f32);
      d.need(tier_fits(arch, Tier::int8_mma), "int8 mma.sync needs " +
                                                  sm_name(tier_min_sm(Tier::int8_mma)) +
                                                  " (m8n8k16), device is " + arch.name());
      d.need(caps.tensor_cores, "requires tensor cores, the device has none");
      d.need(M > kQIntRows, "decode shape (" + std::to_string(M) + " rows, at most " +
                                std::to_string(kQIntRows) +
                                "): the int_dot mat-vec reads the weight once for all rows, "
                                "an mma tile would be mostly padding");
      d.need(grid_ok, grid_msg);
      LaunchConfig cfg = mmq_config(caps, wf, M, async && arch.mma_s8_m16n8k32);
      d.need(cfg.shared_bytes <= smem_limit(caps),
             "needs " + kib(cfg.shared_bytes) + " of shared memory per block, the device allows " +
                 kib(smem_limit(caps)));
      need_warp32(d, caps);
      need_image(d, caps, arch, build, d.c.tier);
      const bool k32 = arch.mma_s8_m16n8k32;
      cfg.set_variant(Kernel{.family = Family::int8_mma_qmatmul, .k32 = k32});
      d.c.launch = cfg;
      d.c.input_dtypes = op_dtypes(op);
      d.c.output_dtype = op.output.dtype;
      d.why.push_back(f +
                      " blocks staged raw and decoded once per tile to int8 in shared memory, " +
                      "activations quantized to int8 per 32, " + arch.name() +
                      (k32 ? " >= " + sm_name(DUET_SM_MMA_S8_M16N8K32) + ": mma.sync m16n8k32 s8" +
                                 std::string(dev::q_scales_per16(static_cast<dev::QFmt>(wf))
                                                 ? " (m16n8k16 per half: a scale per 16)"
                                                 : "") +
                                 ", cp.async"
                           : ": mma.sync m8n8k16 s8") +
                      ", " + std::to_string(cfg.tile_m) + "x" + std::to_string(cfg.tile_n) +
                      " tiles, " + std::to_string(cfg.stages) + " step(s) of " +
                      std::to_string(cfg.tile_k) + " K in " + kib(cfg.shared_bytes));
      out.push_back(d.done("int8 tensor-core quantized matmul"));
    }
    {
      Draft d(Tier::int_dot, Precision::f32);
      d.need(tier_fits(arch, Tier::int_dot),
             "dp4a needs " + sm_name(tier_min_sm(Tier::int_dot)) + ", device is " + arch.name());
      d.need(grid_ok, grid_msg);
      need_warp32(d, caps);
      need_image(d, caps, arch, build, Tier::int_dot);
      LaunchConfig cfg = qmv_config(M);
      cfg.set_variant(Kernel{.family = Family::int_dot_qmatvec});
      d.c.launch = cfg;
      d.c.input_dtypes = op_dtypes(op);
      d.c.output_dtype = op.output.dtype;
      d.why.push_back(f + " blocks read straight from memory in aligned words by " +
                      std::to_string(kQMvThreads) + " threads a block sharing K, " +
                      std::to_string(cfg.tile_n) +
                      " weight rows a block, decoded to int8 in registers; activations quantized "
                      "to int8 per 32 by a launch before, dp4a (" +
                      arch.name() + " >= " + sm_name(tier_min_sm(Tier::int_dot)) + ") for up to " +
                      std::to_string(dev::qmv_act_rows(M)) + " activation rows a block" +
                      (M <= dev::kQIntRows ? "; grouped at run time with the mat-vecs next to it "
                                             "that read the same activations (one q8_act, one "
                                             "launch a format; cuda.group_matvecs)"
                                           : ""));
      out.push_back(d.done("int_dot quantized mat-vec"));
    }
  }
  Draft d(Tier::generic, Precision::f32);
  need_image(d, caps, arch, build, Tier::generic);
  LaunchConfig cfg;
  cfg.subgroup = 32;
  cfg.block_threads = mm ? 128 : 256;
  cfg.set_variant(Kernel{.family = mm ? Family::generic_qmatmul : Family::generic_qrows});
  d.c.launch = cfg;
  d.c.input_dtypes = op_dtypes(op);
  d.c.output_dtype = op.output.dtype;
  d.why.push_back(f + " blocks decoded in registers (never expanded in memory), SIMT fp32 " +
                  (mm ? "FMA, a warp per weight row" : "rows") + ", any architecture");
  out.push_back(d.done(mm ? "generic quantized matmul" : "generic quantized rows"));
}

}  // namespace

std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op,
                                  const BuildArchs& build) {
  std::vector<KernelChoice> out;
  if (is_view(op.kind)) {
    KernelChoice c;
    c.tier = Tier::generic;
    c.reason = "views are resolved by the executor, not run as kernels";
    return {c};
  }
  if (caps.cc_major <= 0) {
    KernelChoice c;
    c.tier = Tier::generic;
    c.reason = "the device has no CUDA compute capability (" + caps.arch + ")";
    return {c};
  }
  if (quantized_input(op))
    quantized_choices(caps, op, build, out);
  else if (op.kind == OpKind::attention)
    attention_choices(caps, op, build, out);
  else if (op.kind == OpKind::matmul)
    matmul_choices(caps, op, build, out);
  else
    generic_choice(caps, op, build, out);
  // Each choice's efficiency class is its family's (the cost model's share of the peak).
  for (KernelChoice& c : out)
    if (const Kernel* k = c.launch.variant_as<Kernel>()) c.efficiency = k->efficiency();
  return out;
}

std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) {
  return choices(caps, op, this_build());
}

}  // namespace duet::kernels
