// Cooperative-matrix shaders for glslang 12 and spirv-tools 2023.1 (spirv_coopmat.cpp says how).
#pragma once

#include <cstdint>
#include <vector>

namespace duet::shaders {

// `words`: the module glslang made through GL_EXT_spirv_intrinsics; on success it holds the
// finished SPV_KHR_cooperative_matrix module and `twin` the same in SPV_NV_cooperative_matrix's
// terms, for spirv-val. On failure the reason is printed to standard error.
bool finish_coopmat(std::vector<uint32_t>& words, std::vector<uint32_t>& twin);

}  // namespace duet::shaders
