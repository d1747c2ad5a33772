#include <cmath>
#include <vector>

#include "ops/ops.h"

namespace duet::cpu {

Status rope(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  F32In x(a.in[0], a.pool, a.scratch);
  F32Out y(a.out, a.scratch);
  if (a.scratch.failed()) return {};
  const int64_t L = out.dim(2), D = out.dim(3), rows = out.numel() / D;
  const int64_t rd = rope_dims(a.op), half = rd / 2;
  const bool neox = a.op.attrs.rope_mode == RopeMode::neox;
  int64_t first = a.op.attrs.rope_offset;
  if (const int si = scalar_input(a.op); si >= 0)
    first += *static_cast<const int32_t*>(a.in[static_cast<size_t>(si)].elem0());
  if (first < 0)
    return Err(Code::invalid_argument)
        .op("rope", a.op.name)
        .tensor(a.op.input_name(1))
        .device(a.device)
        .expected("a position >= 0")
        .got(std::to_string(first));
  // Frequencies in double: theta^(-2i/rd) loses digits in f32 for large positions.
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[static_cast<size_t>(i)] =
        std::pow(static_cast<double>(a.op.attrs.rope_theta),
                 -2.0 * static_cast<double>(i) / static_cast<double>(rd));
  a.pool.parallel_for(rows, std::max<int64_t>(1, 1024 / D), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const double pos = static_cast<double>(first + r % L);
      const float* xr = x.data() + r * D;
      float* yr = y.data() + r * D;
      for (int64_t i = rd; i < D; ++i) yr[i] = xr[i];
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * freq[static_cast<size_t>(i)];
        const float c = static_cast<float>(std::cos(angle)),
                    s = static_cast<float>(std::sin(angle));
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const float x0 = xr[i0], x1 = xr[i1];
        yr[i0] = x0 * c - x1 * s;
        yr[i1] = x0 * s + x1 * c;
      }
    }
  });
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
