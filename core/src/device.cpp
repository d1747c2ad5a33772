#include "duet/device.h"

#include <string>

namespace duet {

std::string_view backend_name(BackendKind b) {
  switch (b) {
    case BackendKind::cpu:
      return "cpu";
    case BackendKind::vulkan:
      return "vulkan";
    case BackendKind::cuda:
      return "cuda";
  }
  return "?";
}

std::optional<BackendKind> parse_backend(std::string_view name) {
  for (BackendKind b : {BackendKind::cpu, BackendKind::vulkan, BackendKind::cuda})
    if (backend_name(b) == name) return b;
  return std::nullopt;
}

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::integrated_gpu:
      return "integrated_gpu";
    case DeviceType::discrete_gpu:
      return "discrete_gpu";
    case DeviceType::virtual_gpu:
      return "virtual_gpu";
    case DeviceType::other:
      return "other";
  }
  return "?";
}

std::optional<DeviceType> parse_device_type(std::string_view name) {
  for (DeviceType t : {DeviceType::cpu, DeviceType::integrated_gpu, DeviceType::discrete_gpu,
                       DeviceType::virtual_gpu, DeviceType::other})
    if (device_type_name(t) == name) return t;
  return std::nullopt;
}

bool KernelChoice::reads_as_given(const OpDesc& op) const {
  for (size_t i = 0; i < op.inputs.size() && i < input_dtypes.size(); ++i)
    if (input_dtypes[i] != op.inputs[i].dtype) return false;
  return true;
}

std::string LaunchConfig::str() const {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (!variant.empty()) add(variant);
  if (block_threads) add("block " + std::to_string(block_threads));
  if (tile_m || tile_n || tile_k) {
    std::string t = "tile " + std::to_string(tile_m) + "x" + std::to_string(tile_n);
    if (tile_k) t += "x" + std::to_string(tile_k);
    add(t);
  }
  if (stages) add(std::to_string(stages) + " stages");
  if (splits) add(std::to_string(splits) + " splits");
  if (subgroup) add("subgroup " + std::to_string(subgroup));
  if (shared_bytes) {
    add(shared_bytes % 1024 == 0 ? std::to_string(shared_bytes / 1024) + " KiB shared"
                                 : std::to_string(shared_bytes) + " B shared");
  }
  return s;
}

Result<KernelChoice> Device::supports(const OpDesc& op, Precision precision) const {
  std::string why;
  for (KernelChoice& c : choices(op)) {
    if (c.precision != precision) continue;
    if (c.ok) return std::move(c);
    why += (why.empty() ? "" : "; ") + std::string(tier_name(c.tier)) + ": " + c.reason;
  }
  if (why.empty()) why = "no kernel at " + std::string(precision_name(precision));
  return unsupported(*this, op, why);
}

Status unsupported(const Device& device, const OpDesc& op, std::string_view why) {
  return Err(Code::unsupported).op(op_name(op.kind), op.name).device(device.id()).note(why);
}

std::optional<size_t> quantized_input(const OpDesc& op) {
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (is_quantized(op.inputs[i].dtype)) return i;
  return std::nullopt;
}

KernelChoice no_quantized_kernel(const OpDesc& op, std::string_view backend) {
  KernelChoice k;
  k.tier = Tier::generic;
  const size_t i = quantized_input(op).value_or(0);
  k.reason = "no " + std::string(backend) + " kernel reads " +
             std::string(dtype_name(op.inputs.empty() ? DType::f32 : op.inputs[i].dtype)) +
             " weights yet ('" + op.input_name(i) + "'); they stay compressed elsewhere";
  for (const TensorDesc& t : op.inputs) k.input_dtypes.push_back(t.dtype);
  k.output_dtype = op.output.dtype;
  return k;
}

}  // namespace duet
