// Data movement: cast, copy, concat and embedding move or convert what is stored, at its own
// dtype; write_slice copies elements into a slice at a run-time offset.
#include "rules/rules.h"

namespace duet::vulkan::rules_detail {

KernelChoice data_choice(const DeviceCaps& c, const OpDesc& op) {
  const Family f = op.kind == OpKind::embedding ? Family::embedding : Family::convert;
  KernelChoice k;
  k.tier = Tier::generic;
  const DType src = op.inputs[0].dtype;
  k.precision = is_float(src) ? precision_of(src) : Precision::f32;
  for (const auto& t : op.inputs) k.input_dtypes.push_back(t.dtype);
  k.output_dtype = op.output.dtype;
  k.efficiency = efficiency(c, f);
  k.launch.block_threads = flat_block(c);
  k.launch.set_variant(Kernel{.family = f});
  std::string why;
  for (DType t : k.input_dtypes)
    if (!storage_ok(c, t, &why)) return k.reason = why, k;
  if (!storage_ok(c, op.output.dtype, &why)) return k.reason = why, k;
  k.ok = true;
  k.reason = op.kind == OpKind::embedding
                 ? "row gather at the table's dtype; ids checked on the device"
                 : "strided element copy with exact conversion (round to nearest even)";
  return k;
}

// Elements copied as stored, so x comes in the state's dtype (the planner casts it).
KernelChoice write_slice_choice(const DeviceCaps& c, const OpDesc& op) {
  KernelChoice k;
  k.tier = Tier::generic;
  const DType t = op.inputs[0].dtype;
  k.precision = is_float(t) ? precision_of(t) : Precision::f32;
  k.input_dtypes = {t, t};
  if (op.inputs.size() > 2) k.input_dtypes.push_back(DType::i32);
  k.output_dtype = t;
  k.efficiency = efficiency(c, Family::write_slice);
  k.launch.block_threads = flat_block(c);
  k.launch.set_variant(Kernel{.family = Family::write_slice});
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  k.ok = true;
  k.reason = "element copy into the slice at the run-time offset (checked on the device)";
  return k;
}

}  // namespace duet::vulkan::rules_detail
