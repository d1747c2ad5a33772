// Shared by every compute shader: the parameter block, tensor descriptors, and exact
// conversions between the storage dtypes and f32.
//
// Binding 0 holds the parameters of one dispatch (written by the host per dispatch), as a uniform
// buffer: on CPU devices (lavapipe) its loads are plain scalar loads that LLVM hoists out of
// loops, where a storage-buffer load is a bounds-checked loop over the lanes. Bindings
// 1..5 are tensors: 1 the output, 2.. the inputs in op order. Each tensor is bound as a window of
// its buffer; TDesc.offset counts elements from the window's start. Shapes are right-aligned to
// rank 4 (leading dims 1, stride 0).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : enable
#extension GL_EXT_control_flow_attributes : enable

struct TDesc {
  uvec4 shape;
  uvec4 stride;
  uint offset;
  uint numel;
  uint dense;  // 1: row-major without gaps (element i at offset + i)
  uint pad;
};

layout(std140, set = 0, binding = 0) uniform Params {  // std140 = std430 for these members
  TDesc td[5];  // 0: output, 1..4: inputs
  uvec4 u;      // integer arguments, per shader
  uvec4 u2;
  uvec4 u3;
  vec4 f;       // float arguments, per shader
  uvec4 rt;     // the run-time scalar (scalar.glsl): x = 1 + its offset (0: none), y = error slot
} P;

// Bit k: tensor k is dense (TDesc.dense), specialized by the host (kDenseConstantId) for shaders
// that index through toff(). A branch on TDesc.dense at run time does not help CPU devices
// (lavapipe), which run both sides of it; the constant folds the division chain away.
layout(constant_id = 31) const uint DENSE = 0u;

// The storage offset of row-major linear index i of tensor k.
uint toff(uint k, uint i) {
  if ((DENSE & (1u << k)) != 0u) return P.td[k].offset + i;
  uvec4 s = P.td[k].shape;
  uvec4 st = P.td[k].stride;
  uint c3 = i % s.w;
  i /= s.w;
  uint c2 = i % s.z;
  i /= s.z;
  uint c1 = i % s.y;
  uint c0 = i / s.y;
  return P.td[k].offset + c0 * st.x + c1 * st.y + c2 * st.z + c3 * st.w;
}

// Exact conversions (round to nearest even), independent of the driver's rounding mode.
float f16_to_f32(uint h) {
  uint s = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  if (e == 0u) return (s != 0u ? -1.0 : 1.0) * float(m) * exp2(-24.0);
  if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
  return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint f32_to_f16(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint e = (x >> 23) & 0xffu;
  uint m = x & 0x7fffffu;
  if (e == 255u) return sign | 0x7c00u | (m != 0u ? 0x200u : 0u);
  int ex = int(e) - 112;
  if (ex >= 31) return sign | 0x7c00u;
  if (ex <= 0) {
    if (ex < -10) return sign;
    m |= 0x800000u;
    uint shift = uint(14 - ex);
    uint hm = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (hm & 1u) != 0u)) hm++;
    return sign | hm;
  }
  uint h = sign | (uint(ex) << 10) | (m >> 13);
  uint rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
  return h;
}

float bf16_to_f32(uint b) {
  return uintBitsToFloat(b << 16);
}

uint f32_to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if (isnan(f)) return ((x >> 16) & 0x8000u) | 0x7fc0u;
  x += 0x7fffu + ((x >> 16) & 1u);
  return x >> 16;
}

// The element type of float tensors in this variant: T_f32, T_f16 or T_bf16. STYPE is the
// storage type; LOADF/STOREF convert to and from f32.
#if defined(T_f32)
#define STYPE float
#define LOADF(x) (x)
#define STOREF(v) (v)
#elif defined(T_f16)
#define STYPE uint16_t
#define LOADF(x) f16_to_f32(uint(x))
#define STOREF(v) uint16_t(f32_to_f16(v))
#elif defined(T_bf16)
#define STYPE uint16_t
#define LOADF(x) bf16_to_f32(uint(x))
#define STOREF(v) uint16_t(f32_to_bf16(v))
#endif

// Declares binding b as an array `name` of the variant's float storage type.
#define TENSOR(b, qual, name) \
  layout(std430, set = 0, binding = b) qual buffer Buf##b { STYPE name[]; };
// An f32 view of binding b (masks may be f32 whatever the op's dtype).
#define TENSOR_F32(b, qual, name) \
  layout(std430, set = 0, binding = b) qual buffer BufF##b { float name[]; };

#define NEG_INF uintBitsToFloat(0xff800000u)

// Linear workgroup index over a 2D grid (x up to 65535 wide).
#define GROUP_INDEX (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x)
