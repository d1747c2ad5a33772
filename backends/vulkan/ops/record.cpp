// One planned op into dispatches: the op family's recorder (ops/) for the rules' kernel.
#include "ops/ops.h"
#include "vulkan_backend.h"

namespace duet::vulkan {

using namespace ops;

Status record_op(VulkanDevice& dev, const PlannedOp& p, std::span<const TensorRef> inputs,
                 const TensorRef& output) {
  // Arguments checked by Device::execute (core/src/device.cpp).
  const OpDesc& op = p.op;
  KernelChoice choice = p.choice;
  if (choice.launch.block_threads == 0 || !kernel_of(choice.launch)) {
    // A choice made without a launch shape or kernel (e.g. by hand): take the rules' for this
    // device.
    for (const KernelChoice& k : dev.choices(op))
      if (k.ok && k.tier == choice.tier && k.precision == choice.precision) choice = k;
  }
  std::vector<Arg> in;
  for (const TensorRef& r : inputs) in.push_back({r.desc, static_cast<VkBuf*>(r.buffer)});
  Arg out{output.desc, static_cast<VkBuf*>(output.buffer)};
  // Where the rules have no usable choice either, the families that read the kernel (matmul,
  // attention) say so.
  static const Kernel kNone{};
  const Kernel* kernel = kernel_of(choice.launch);
  Ctx c{dev, op, choice, kernel ? *kernel : kNone};
  switch (op.kind) {
    case OpKind::matmul:
      return is_quantized(in[1].desc.dtype) ? qmatmul(c, out, in) : matmul(c, out, in);
    case OpKind::attention:
      return attention(c, out, in);
    case OpKind::softmax:
      return softmax(c, out, in);
    case OpKind::rmsnorm:
    case OpKind::layernorm:
      return norm(c, out, in);
    case OpKind::rope:
      return rope(c, out, in);
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
    case OpKind::reduce_max:
    case OpKind::reduce_min:
    case OpKind::reduce_prod:
      return reduce(c, out, in);
    case OpKind::cast:
    case OpKind::copy:
      if (is_quantized(in[0].desc.dtype)) return qrows(c, out, in[0], nullptr);
      return convert(c, out, in[0], op.input_name(0));
    case OpKind::concat:
      return concat(c, out, in);
    case OpKind::embedding:
      return is_quantized(in[0].desc.dtype) ? qrows(c, out, in[0], &in[1]) : embedding(c, out, in);
    case OpKind::write_slice:
      return write_slice(c, out, in);
    default:
      if (op_class(op.kind) == OpClass::elementwise) return eltwise(c, out, in);
      return unsupported(dev, op, "no Vulkan kernel for this op");
  }
}

}  // namespace duet::vulkan
