// Block-quantized weights: decoding by the book (the formats of duet/block_layout.h), exact
// float64 dequantization for the reference, and a quantizer for tests and for users converting
// their own weights.
//
// A quantized tensor is a logical [..., K] of weights whose rows are stored as K / block_elems
// consecutive blocks; K must be a multiple of the block size (dtype_block_elems).
#pragma once

#include <cstdint>

#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet {

// The largest block and the most scales per block of any format.
inline constexpr int kMaxBlockElems = 256;
inline constexpr int kMaxSubBlocks = 16;

// One block in integer form: element e of sub-block s = e / sub_elems is
//   scale[s] * (q[e] - zero[s]) + offset[s]
// with q unsigned, the formats' zero points as integers and their mins as offsets. In float64
// this is exactly the book's formula for every bit pattern (NaN and infinite scales included).
// Every format decodes through it, so a kernel computing per sub-block
// scale * (dot(q, x) - zero * sum(x)) + offset * sum(x) computes what dequantize() defines.
struct DUET_API UnpackedBlock {
  uint8_t q[kMaxBlockElems];
  int zero[kMaxSubBlocks];
  double scale[kMaxSubBlocks];
  double offset[kMaxSubBlocks];
};
// `block` holds dtype_block_bytes(format) bytes of a quantized format.
DUET_API void unpack_block(DType format, const void* block, UnpackedBlock* out);

// Dequantizes n elements (a whole number of blocks) starting at `src`: exactly in float64, or
// rounded once to float.
DUET_API void dequantize(DType format, const void* src, double* dst, int64_t n);
DUET_API void dequantize(DType format, const void* src, float* dst, int64_t n);

// Quantizes n floats (a whole number of blocks) into `dst` (dtype_bytes(format, n) bytes), each
// block with scales fitted to its values (round to nearest). An error names the first
// non-finite value; `dst` is then unspecified.
DUET_API Status quantize(DType format, const float* src, void* dst, int64_t n);

// A float tensor (f32, f16 or bf16; any strides) quantized row by row along its last dim, which
// must be a multiple of the format's block size. The error names the tensor as `name`.
DUET_API Result<HostTensor> quantize(const HostTensor& src, DType format,
                                     std::string_view name = "tensor");
// A quantized tensor dequantized to a float dtype (f32 computes exactly and rounds once).
DUET_API Result<HostTensor> dequantize(const HostTensor& src, DType to = DType::f32);

// Byte offset of element `elem` (a multiple of the block size) of a quantized tensor's storage.
inline int64_t quantized_byte_offset(DType format, int64_t elem) {
  return elem / dtype_block_elems(format) * dtype_block_bytes(format);
}

}  // namespace duet
