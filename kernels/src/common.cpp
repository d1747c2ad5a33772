#include "duet/kernels/launch.h"

namespace duet::kernels {

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::generic:
      return "generic";
    case Tier::tiled:
      return "tiled";
    case Tier::flash:
      return "flash";
  }
  return "?";
}

bool parse_tier(std::string_view name, Tier* out) {
  for (Tier t : {Tier::generic, Tier::tiled, Tier::flash}) {
    if (tier_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

View make_view(const TensorDesc& desc, void* storage_base) {
  View v;
  v.data = static_cast<std::byte*>(storage_base) +
           desc.offset * static_cast<int64_t>(dtype_size(desc.dtype));
  v.dtype = desc.dtype;
  v.rank = desc.rank;
  for (int i = 0; i < desc.rank; ++i) {
    v.shape[i] = desc.shape[static_cast<size_t>(i)];
    v.strides[i] = desc.strides[static_cast<size_t>(i)];
  }
  return v;
}

}  // namespace duet::kernels
