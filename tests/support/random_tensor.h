// Hand-made test inputs: a tensor of deterministic pseudo-random values in [-1, 1], never within
// 0.05 of zero, from a seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "duet/host_tensor.h"

namespace duet::testing_support {

inline HostTensor random_tensor(DType t, std::initializer_list<int64_t> shape, uint64_t seed) {
  HostTensor h = HostTensor::empty(t, std::vector<int64_t>(shape));
  std::vector<double> v(static_cast<size_t>(h.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5) * 2.0;
    if (std::abs(x) < 0.05) x = 0.05;
  }
  h.from_doubles(v);
  return h;
}

}  // namespace duet::testing_support
