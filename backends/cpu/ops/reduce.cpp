// The reductions over any dims (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod): each
// output element accumulates its slab of x in double, then rounds once to the output dtype.
#include <algorithm>
#include <cmath>

#include "duet/eltwise.h"
#include "ops/ops.h"

namespace duet::cpu {

Status reduce(const OpArgs& a) {
  const std::optional<uint32_t> code = reduce_code(a.op);
  if (!code || *code >= DUET_RED_COUNT)
    return Err(Code::unsupported)
        .op(op_name(a.op.kind), a.op.name)
        .device(a.device)
        .note("not a reduction of duet/eltwise.h");
  F32In x(a.in[0], a.pool, a.scratch);
  F32Out y(a.out, a.scratch);
  if (a.scratch.failed()) return {};
  const TensorDesc& xd = x.desc();
  const uint32_t mask = reduce_dims_mask(a.op);
  // The kept dims and the reduced ones, each as (extent, stride in x), outermost first.
  std::vector<std::pair<int64_t, int64_t>> kept, red;
  int64_t count = 1;
  for (int d = 0; d < xd.rank; ++d) {
    const std::pair<int64_t, int64_t> e{xd.shape[static_cast<size_t>(d)],
                                        xd.strides[static_cast<size_t>(d)]};
    if (mask >> d & 1u) {
      red.push_back(e);
      count *= e.first;
    } else {
      kept.push_back(e);
    }
  }
  const int64_t n_out = a.op.output.numel();
  const uint32_t op = *code;
  const float* px = x.data();
  a.pool.parallel_for(n_out, std::max<int64_t>(1, 16384 / count), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t base = 0, rem = o;
      for (size_t k = kept.size(); k-- > 0;) {
        base += (rem % kept[k].first) * kept[k].second;
        rem /= kept[k].first;
      }
      double acc = op == DUET_RED_MAX    ? -INFINITY
                   : op == DUET_RED_MIN  ? INFINITY
                   : op == DUET_RED_PROD ? 1.0
                                         : 0.0;
      for (int64_t j = 0; j < count; ++j) {
        int64_t off = base, r = j;
        for (size_t k = red.size(); k-- > 0;) {
          off += (r % red[k].first) * red[k].second;
          r /= red[k].first;
        }
        const double v = px[off];
        if (op == DUET_RED_MAX)
          acc = v > acc || std::isnan(v) ? v : acc;
        else if (op == DUET_RED_MIN)
          acc = v < acc || std::isnan(v) ? v : acc;
        else if (op == DUET_RED_PROD)
          acc *= v;
        else
          acc += v;
      }
      if (op == DUET_RED_MEAN) acc /= static_cast<double>(count);
      y.data()[o] = static_cast<float>(acc);
    }
  });
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
