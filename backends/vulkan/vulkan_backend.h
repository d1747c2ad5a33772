// The Vulkan backend's entry points: a factory that opens its devices (or says why it cannot), and
// its selection rules, which work on capability records alone (real devices or profiles).
#pragma once

#include <string_view>

#include "duet/registry.h"

namespace duet::vulkan {

// MatrixUnit::api of a Vulkan device's matrix units: VK_KHR_cooperative_matrix's, and those of
// NVIDIA's older VK_NV_cooperative_matrix (reported, used by no Vulkan kernel).
inline constexpr std::string_view kCoopMatApi = "coopmat";
inline constexpr std::string_view kCoopMatNvApi = "coopmat_nv";

BackendFactory factory();
const BackendRules& rules();

}  // namespace duet::vulkan
