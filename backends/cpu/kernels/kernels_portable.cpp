// Portable kernels for any CPU (compiled with the baseline flags): 4-lane vectors through the
// GCC/Clang vector extension, which maps to SSE2 on x86-64 and NEON on aarch64. Register tile
// 4 x 8: eight 4-lane accumulators.
#include "kernels/kernels.h"

namespace duet::cpu::kernels::portable {
namespace {

constexpr int W = 4;
typedef float V __attribute__((vector_size(16)));
typedef int32_t VI __attribute__((vector_size(16)));
constexpr Isa kIsa = Isa::generic;
constexpr int kMR = 4, kNV = 2;
constexpr int kKC = 256, kMC = 64, kNC = 512;
constexpr int kGemvAcc = 8;  // accumulators of the decode kernels

inline V vzero() {
  return V{0.0f, 0.0f, 0.0f, 0.0f};
}
inline V vset1(float x) {
  return V{x, x, x, x};
}
inline V vload(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}
inline V vload_n(const float* p, int n) {
  V v = vzero();
  for (int i = 0; i < n; ++i) v[i] = p[i];
  return v;
}
inline void vstore_n(float* p, V v, int n) {
  for (int i = 0; i < n; ++i) p[i] = v[i];
}
inline V vadd(V a, V b) {
  return a + b;
}
inline V vsub(V a, V b) {
  return a - b;
}
inline V vdiv(V a, V b) {
  return a / b;
}
inline V vmul(V a, V b) {
  return a * b;
}
inline V vmax(V a, V b) {
  return a > b ? a : b;
}
inline V vsqrt(V a) {
  V r;
  for (int i = 0; i < W; ++i) r[i] = __builtin_sqrtf(a[i]);
  return r;
}
inline V vmin(V a, V b) {
  return a < b ? a : b;
}
inline V vfma(V a, V b, V c) {
  return a * b + c;
}
inline float vhsum(V v) {
  return (v[0] + v[1]) + (v[2] + v[3]);
}
inline void vhsum4(V a, V b, V c, V d, float* out) {
  out[0] = vhsum(a);
  out[1] = vhsum(b);
  out[2] = vhsum(c);
  out[3] = vhsum(d);
}
inline float vhmax(V v) {
  const float a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
  return a > b ? a : b;
}
inline V vround(V x) {
  V r;
  for (int i = 0; i < W; ++i)
    r[i] = static_cast<float>(static_cast<int32_t>(x[i] + (x[i] < 0.0f ? -0.5f : 0.5f)));
  return r;
}
inline V vpow2i(V n) {
  V r;
  for (int i = 0; i < W; ++i) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n[i]) + 127) << 23;
    float f;  // (clang refuses the address of a vector element)
    __builtin_memcpy(&f, &bits, sizeof bits);
    r[i] = f;
  }
  return r;
}
inline V vldexp(V p, V n) {
  return vmul(p, vpow2i(vmin(n, vset1(127.0f))));
}
inline V vzero_below(V x, float t, V r) {
  return x < vset1(t) ? vzero() : r;
}
inline V vblend_eq(V x, V t, V a, V b) {
  return x == t ? a : b;
}

#include "kernels/half_scalar.inc"

inline V vload_h(const uint16_t* p) {
  return V{h2f(p[0]), h2f(p[1]), h2f(p[2]), h2f(p[3])};
}
inline V vload_b(const uint16_t* p) {
  return V{b2f(p[0]), b2f(p[1]), b2f(p[2]), b2f(p[3])};
}

void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = h2f(src[i]);
}
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = b2f(src[i]);
}
void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f2h(src[i]);
}
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f2b(src[i]);
}

}  // namespace

#include "kernels/impl.inc"

}  // namespace duet::cpu::kernels::portable

namespace duet::cpu::kernels {
const Kernels& portable_kernels() {
  return portable::kTable;
}
}  // namespace duet::cpu::kernels
