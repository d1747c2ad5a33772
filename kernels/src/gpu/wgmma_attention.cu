// The wgmma tier's attention, f16 and bf16, head dims 64 and 128 (built for sm_90a images only).
// The K and V tensor maps are encoded here, per launch, by the driver's cuTensorMapEncodeTiled
// (fetched through the runtime, so nothing links libcuda).
#include <cuda.h>

#include <mutex>

#include "device/instances_sm90.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

namespace {

static_assert(sizeof(CUtensorMap) == sizeof(dev::TensorMap) &&
              alignof(CUtensorMap) <= alignof(dev::TensorMap));

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder(std::string* why) {
  static EncodeTiled fn = nullptr;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                           cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
      error =
          std::string("the driver has no cuTensorMapEncodeTiled (") + cudaGetErrorString(e) + ")";
    else
      fn = reinterpret_cast<EncodeTiled>(p);
  });
  *why = error;
  return fn;
}

Status encode(const detail::Call& c, const dev::TmaDesc& d, bool bf16, const char* what,
              dev::TensorMap* out) {
  std::string why;
  EncodeTiled fn = encoder(&why);
  if (!fn) return Status(Code::unsupported, "CUDA kernel '" + c.name() + "': " + why);
  cuuint64_t dims[5] = {}, strides[4] = {};
  cuuint32_t box[5] = {}, estride[5] = {};
  for (int k = 0; k < d.rank; ++k) {
    dims[k] = static_cast<cuuint64_t>(d.dim[k]);
    box[k] = static_cast<cuuint32_t>(d.box[k]);
    estride[k] = 1;
    if (k > 0) strides[k - 1] = static_cast<cuuint64_t>(d.stride[k]);
  }
  const CUresult r = fn(reinterpret_cast<CUtensorMap*>(out),
                        bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                        static_cast<cuuint32_t>(d.rank), const_cast<void*>(d.base), dims, strides,
                        box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status(Code::internal, "CUDA kernel '" + c.name() + "': cuTensorMapEncodeTiled for " +
                                      what + " failed (CUresult " + std::to_string(int(r)) + ")");
  return {};
}

}  // namespace

Status wgmma_attention(const detail::Call& c, void* stream) {
  dev::WgAttnParams p = std::get<dev::WgAttnParams>(c.params);
  DUET_TRY(encode(c, p.k_desc, c.bf16, "k", &p.k_map));
  DUET_TRY(encode(c, p.v_desc, c.bf16, "v", &p.v_map));
  auto go = [&](auto kernel) { return launch_on_gpu(c, kernel, stream, p); };
  if (c.bf16) return dev::attention_wgmma_instance<dev::Bf16>(c.head_dim, go);
  return dev::attention_wgmma_instance<dev::F16>(c.head_dim, go);
}

}  // namespace duet::kernels::gpu_impl
