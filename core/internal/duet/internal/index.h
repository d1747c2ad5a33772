// A signed index or count as the size_t a container takes: duet counts in int and int64_t
// (graph ids, shapes), the standard library in size_t. The one definition of the cast the code
// writes as u(i).
#pragma once

#include <cstddef>
#include <cstdint>

namespace duet {

inline constexpr size_t u(int64_t i) {
  return static_cast<size_t>(i);
}

}  // namespace duet
