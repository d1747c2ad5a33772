// The CUDA backend's rules: kernel image first, then the kernels' own choices, with cuBLASLt
// in front for matmul. Pure functions of the capability record and the build's architectures.
#include <utility>

#include "cuda_backend.h"
#include "duet/kernels/arch.h"
#include "duet/kernels/select.h"
#include "gemm.h"
#include "qgemm.h"
#include "rules.h"

namespace duet::cuda {

namespace {

// Keeps what the kernels' selection promises, whatever it returns: no bf16 kernel on a device
// whose record has no bf16 arithmetic, no f16 kernel without f16 arithmetic (the record's fields
// come from the architecture's, duet/kernels/arch.h, or from a profile).
void enforce_arithmetic(const DeviceCaps& caps, KernelChoice& c) {
  if (!c.ok) return;
  if (c.precision == Precision::bf16 && !caps.bf16_arith) {
    c.ok = false;
    c.reason = "bf16 arithmetic needs " + kernels::sm_name(DUET_SM_BF16) + " or newer; " +
               caps.name + " is " + caps.arch;
  } else if (c.precision == Precision::f16 && !caps.fp16_arith) {
    c.ok = false;
    c.reason = "f16 arithmetic needs " + kernels::sm_name(DUET_SM_FP16_ARITH) + " or newer; " +
               caps.name + " is " + caps.arch;
  }
}

class CudaRules final : public BackendRules {
 public:
  explicit CudaRules(BuildArchs archs) : archs_(std::move(archs)) {}
  BackendKind backend() const override { return BackendKind::cuda; }

  std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) const override {
    std::vector<KernelChoice> out;
    if (op.kind == OpKind::matmul && !quantized_input(op)) out = cublas_choices(caps, op);
    for (KernelChoice& c : kernels::choices(caps, op, archs_)) out.push_back(std::move(c));
    // cuBLAS reads no block format: it gets the weight in dequantized chunks, after the kernels
    // that read the blocks themselves (the planner weighs both by their estimates).
    if (op.kind == OpKind::matmul && quantized_input(op))
      out.push_back(dequant_cublas_choice(caps, op));
    const ImageCheck image = check_image(archs_, caps.cc_major, caps.cc_minor);
    for (KernelChoice& c : out) {
      if (!image.ok()) {
        c.ok = false;
        c.reason = image.refusal();
      }
      enforce_arithmetic(caps, c);
    }
    return out;
  }

  // A profile's record says which kernel image the device would load from this build, as a
  // probed device's does.
  void annotate_profile(DeviceCaps& caps) const override {
    caps.extra.try_emplace(std::string(kKernelImageKey),
                           check_image(archs_, caps.cc_major, caps.cc_minor).text);
  }

 private:
  BuildArchs archs_;
};

}  // namespace

std::vector<KernelChoice> cublas_choices(const DeviceCaps& caps, const OpDesc& op) {
  std::vector<KernelChoice> out;
  if (op.kind != OpKind::matmul) return out;
  const std::string& lib = caps.gemm_library;
  const bool loaded = caps.gemm_library_loaded;
  Result<GemmCall> gemm = plan_gemm(op);
  for (Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
    const DType t = precision_storage(p);
    KernelChoice c;
    c.tier = Tier::cublas;
    c.precision = p;
    c.input_dtypes = {t, t};
    c.output_dtype = t;
    c.launch.set_variant(CublasLt{});
    c.efficiency = CublasLt::kEfficiency;
    if (!loaded) {
      c.reason = lib.empty() ? "cuBLASLt: the device record does not say the library loaded"
                             : "cuBLASLt " + lib;
    } else if (!gemm.ok()) {
      c.reason = "cuBLASLt cannot express this layout: " + gemm.status().message();
    } else {
      c.ok = true;
      c.reason = "cuBLASLt (" + lib + "), tuned by NVIDIA for " + caps.arch + ", " +
                 std::string(precision_name(p)) + " with f32 accumulation" +
                 (p == Precision::f32 ? " (no TF32)" : "");
    }
    out.push_back(std::move(c));
  }
  return out;
}

KernelChoice dequant_cublas_choice(const DeviceCaps& caps, const OpDesc& op) {
  KernelChoice c;
  c.tier = Tier::cublas;
  const DType x = op.inputs[0].dtype;
  // The activations' own precision, as the integer tiers keep it (their activations carry 8
  // bits per 32; here f16's 11): the block-quantized weight bounds the result's error, and the
  // choice is judged by the quantized-weight tolerance (docs/quantization.md). f64 activations
  // (the checking precision) keep f16, below their floor.
  c.precision = x == DType::bf16  ? Precision::bf16
                : x == DType::f32 ? Precision::f32
                                  : Precision::f16;
  c.arithmetic = x == DType::bf16 ? Precision::bf16 : Precision::f16;  // the tiles' GEMM
  c.input_dtypes = {x, op.inputs.size() > 1 ? op.inputs[1].dtype : x};
  c.output_dtype = op.output.dtype;
  c.launch.set_variant(CublasLt{.dequant = true});
  c.efficiency = CublasLt::kEfficiency;
  const std::string& lib = caps.gemm_library;
  const bool loaded = caps.gemm_library_loaded;
  Result<DequantGemm> d = plan_dequant_gemm(op, kDequantTileBytes, 0);
  if (!loaded) {
    c.reason = lib.empty() ? "cuBLASLt: the device record does not say the library loaded"
                           : "cuBLASLt " + lib;
  } else if (!caps.tensor_cores) {
    c.reason = "cuBLASLt on dequantized weight tiles: the device has no tensor cores";
  } else if (!d.ok()) {
    c.reason = "cuBLASLt on dequantized weight tiles: " + d.status().message();
  } else {
    c.ok = true;
    c.launch.tile_k = static_cast<int>(d->kc);
    c.launch.splits = static_cast<int>(d->chunks);
    const std::string t(dtype_name(d->compute)), w(dtype_name(op.inputs[1].dtype));
    c.reason = "cuBLASLt (" + lib + ") on " + t + " tiles of the " + w +
               " weight: " + std::to_string(d->chunks) + " chunk(s) of " + std::to_string(d->kc) +
               " K, each dequantized into a " + std::to_string(d->tile_bytes() >> 20) +
               " MiB workspace tile and multiplied in with f32 accumulation; the weight stays " +
               w + " in memory (" +
               std::to_string(dtype_bytes(op.inputs[1].dtype, op.inputs[1].numel()) >> 20) +
               " MiB), the activations are rounded to " + t;
  }
  return c;
}

std::unique_ptr<BackendRules> make_rules(BuildArchs archs) {
  return std::make_unique<CudaRules>(std::move(archs));
}

const BackendRules& rules() {
  static const std::unique_ptr<BackendRules> r = make_rules(this_build());
  return *r;
}

const BackendRules& default_build_rules() {
  static const std::unique_ptr<BackendRules> r = make_rules(kernels::default_build());
  return *r;
}

}  // namespace duet::cuda
