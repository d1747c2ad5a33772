// Grouped mat-vecs (DeviceOptions::group_matvecs): which held ops may run as one dispatch.
#include "ops/ops.h"

namespace duet::vulkan {

bool may_group(const PlannedOp& p, std::span<const TensorRef> inputs) {
  const Kernel* k = kernel_of(p.choice.launch);
  return p.op.kind == OpKind::matmul && inputs.size() == 2 && k && k->family == Family::matvec &&
         p.choice.launch.block_threads > 0 && is_quantized(inputs[1].desc.dtype) &&
         inputs[1].desc.rank == 2 && !p.op.attrs.transpose_a;
}

bool joins_group(std::span<const HeldOp> held, const PlannedOp& op,
                 std::span<const TensorRef> inputs, const TensorRef& output) {
  if (held.empty() || held.size() >= kMaxGroup) return false;
  const HeldOp& f = held[0];
  const auto* fa = static_cast<const VkBuf*>(f.inputs[0].buffer);
  const auto* a = static_cast<const VkBuf*>(inputs[0].buffer);
  if (!(f.op.choice.launch == op.choice.launch) || f.op.choice.precision != op.choice.precision ||
      f.inputs[1].desc.dtype != inputs[1].desc.dtype || f.output.desc.dtype != output.desc.dtype ||
      fa->vk() != a->vk() || fa->base() != a->base() || !(f.inputs[0].desc == inputs[0].desc) ||
      f.output.desc.rank != output.desc.rank)
    return false;
  for (int i = 0; i + 1 < output.desc.rank; ++i)
    if (f.output.desc.dim(i) != output.desc.dim(i)) return false;
  // Members run at once: the output may overlap neither the activations nor another output.
  auto range = [](const TensorRef& r) {
    return ops::byte_range(ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)});
  };
  const auto* y = static_cast<const VkBuf*>(output.buffer);
  // Not a structured binding: clang before 16 (the sanitizer builds) cannot capture one.
  const auto yr = range(output);
  const auto ylo = yr.first, yhi = yr.second;
  auto apart = [&](const TensorRef& r) {
    const auto [lo, hi] = range(r);
    return static_cast<const VkBuf*>(r.buffer)->vk() != y->vk() || yhi <= lo || hi <= ylo;
  };
  if (!apart(inputs[0])) return false;
  for (const HeldOp& h : held)
    if (!apart(h.output)) return false;
  return true;
}

Status record_group(VulkanDevice& dev, std::span<const HeldOp> held) {
  if (held.size() == 1) return record_op(dev, held[0].op, held[0].inputs, held[0].output);
  return ops::qmatvec_group(dev, held);
}

namespace {
bool apart(const TensorRef& x, const TensorRef& y) {
  const auto* bx = static_cast<const VkBuf*>(x.buffer);
  const auto* by = static_cast<const VkBuf*>(y.buffer);
  if (bx->vk() != by->vk()) return true;
  const auto [xlo, xhi] = ops::byte_range(ops::Arg{x.desc, const_cast<VkBuf*>(bx)});
  const auto [ylo, yhi] = ops::byte_range(ops::Arg{y.desc, const_cast<VkBuf*>(by)});
  return xhi <= ylo || yhi <= xlo;
}
bool same_view(const TensorRef& x, const TensorRef& y) {
  const auto* bx = static_cast<const VkBuf*>(x.buffer);
  const auto* by = static_cast<const VkBuf*>(y.buffer);
  return bx->vk() == by->vk() && bx->base() == by->base() && x.desc == y.desc;
}
}  // namespace

bool may_fold_add(const PlannedOp& p, std::span<const TensorRef> inputs, const TensorRef& output) {
  if (p.op.kind != OpKind::add || inputs.size() != 2 || !is_float(output.desc.dtype) ||
      !output.desc.is_contiguous())
    return false;
  for (const TensorRef& r : inputs)
    if (r.desc.dtype != output.desc.dtype || !r.desc.same_shape(output.desc)) return false;
  return true;
}

bool folds_add(VulkanDevice& dev, const HeldOp& add, const PlannedOp& op,
               std::span<const TensorRef> inputs, const TensorRef& output) {
  if (op.op.kind != OpKind::rmsnorm || inputs.empty() || inputs.size() > 2 ||
      !same_view(inputs[0], add.output) || output.desc.dtype != add.output.desc.dtype ||
      !output.desc.same_shape(add.output.desc))
    return false;
  // The sum is written while a and b are read, and the norm's output while all are read: apart,
  // except that the norm's output may be a or b itself (the executor reuses a dead input's
  // memory), each element read by the invocation that writes it, before it writes it.
  const TensorRef &a = add.inputs[0], &b = add.inputs[1], &s = add.output;
  auto free_of = [&](const TensorRef& r) { return apart(output, r) || same_view(output, r); };
  if (!apart(s, a) || !apart(s, b) || !free_of(a) || !free_of(b) || !apart(output, s)) return false;
  if (inputs.size() > 1 && (!apart(output, inputs[1]) || !apart(s, inputs[1]))) return false;
  std::vector<TensorRef> all = {a, b, s, output};
  if (inputs.size() > 1) all.push_back(inputs[1]);
  for (const TensorRef& r : all)
    if (!ops::fits(dev, ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)})) return false;
  return true;
}

bool may_hold_rope(const PlannedOp& p, std::span<const TensorRef> inputs, const TensorRef& output) {
  return p.op.kind == OpKind::rope && inputs.size() == 2 && output.desc.rank == 4 &&
         output.desc.dtype == DType::f32 && inputs[0].desc.dtype == DType::f32 &&
         output.desc.is_contiguous();
}

namespace {
bool fits_all(VulkanDevice& dev, std::initializer_list<TensorRef> refs) {
  for (const TensorRef& r : refs)
    if (!ops::fits(dev, ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)})) return false;
  return true;
}
}  // namespace

bool joins_rope_write(VulkanDevice& dev, std::span<const HeldOp> held, const PlannedOp& op,
                      std::span<const TensorRef> inputs, const TensorRef& output) {
  if (held.empty() || held.size() > 2) return false;
  const HeldOp& rope = held[0];
  if (op.op.kind != OpKind::write_slice || inputs.size() != 3 || !same_view(inputs[0], output) ||
      output.desc.dtype != DType::f32 || inputs[1].desc.dtype != DType::f32 ||
      !output.desc.is_contiguous() || !same_view(inputs[2], rope.inputs[1]))
    return false;
  // K's write: of the rope's output, dense.
  if (held.size() == 1 && !(same_view(inputs[1], rope.output) && rope.output.desc.is_contiguous()))
    return false;
  // Everything the fused dispatch reads and writes: the rope's x and y, the K cache (then V's x
  // and cache). What this write writes overlaps nothing else; what it reads (V), nothing
  // written.
  std::vector<TensorRef> written = {rope.output}, read = {rope.inputs[0]};
  if (held.size() == 2) written.push_back(held[1].output);
  const bool v = held.size() == 2;
  for (const TensorRef& r : written)
    if (!apart(output, r) || (v && !apart(inputs[1], r))) return false;
  for (const TensorRef& r : read)
    if (!apart(output, r)) return false;
  return fits_all(dev, {inputs[1], output, rope.inputs[0], rope.output});
}

Status record_rope_write(VulkanDevice& dev, std::span<const HeldOp> held) {
  if (held.size() == 1) return record_op(dev, held[0].op, held[0].inputs, held[0].output);
  static const Kernel kNone{};
  auto ctx_choice = [&](const HeldOp& h) {
    KernelChoice choice = h.op.choice;
    if (choice.launch.block_threads == 0)
      for (const KernelChoice& k : dev.choices(h.op.op))
        if (k.ok && k.tier == choice.tier && k.precision == choice.precision) choice = k;
    return choice;
  };
  auto arg = [](const TensorRef& r) { return ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)}; };
  const KernelChoice rc = ctx_choice(held[0]), kc = ctx_choice(held[1]);
  const KernelChoice vc = held.size() > 2 ? ctx_choice(held[2]) : kc;
  const Kernel* rk = kernel_of(rc.launch);
  const ops::Ctx r{dev, held[0].op.op, rc, rk ? *rk : kNone};
  const ops::Ctx k{dev, held[1].op.op, kc, kNone};
  const ops::Ctx* vp = nullptr;
  std::optional<ops::Ctx> v;
  if (held.size() > 2) vp = &v.emplace(ops::Ctx{dev, held[2].op.op, vc, kNone});
  const ops::CacheWrite kw{&k, arg(held[1].output), arg(held[1].inputs[1])};
  ops::CacheWrite vw;
  if (vp) vw = {vp, arg(held[2].output), arg(held[2].inputs[1])};
  Status s = ops::rope_write(r, arg(held[0].output), arg(held[0].inputs[0]), arg(held[0].inputs[1]),
                             kw, vp ? &vw : nullptr);
  if (!s.ok())
    return Err(s.code())
        .op(op_name(held[0].op.op.kind), held[0].op.op.name)
        .device(dev.id())
        .note("with the cache write '" + held[1].op.op.name + "'" +
              (vp ? " and '" + held[2].op.op.name + "'" : "") + ": " + s.message());
  ++dev.rope_writes;
  return {};
}

bool may_hold_cast(const PlannedOp& p, std::span<const TensorRef> inputs, const TensorRef& output) {
  return p.op.kind == OpKind::cast && inputs.size() == 1 && inputs[0].desc.dtype == DType::f32 &&
         (output.desc.dtype == DType::f16 || output.desc.dtype == DType::bf16) &&
         output.desc.is_contiguous();
}

bool joins_cast_write(VulkanDevice& dev, const HeldOp& cast, const PlannedOp& op,
                      std::span<const TensorRef> inputs, const TensorRef& output) {
  return op.op.kind == OpKind::write_slice && inputs.size() == 3 && same_view(inputs[0], output) &&
         same_view(inputs[1], cast.output) && output.desc.dtype == cast.output.desc.dtype &&
         output.desc.is_contiguous() && apart(output, cast.inputs[0]) &&
         apart(output, cast.output) && apart(inputs[2], cast.output) &&
         fits_all(dev, {output, inputs[2], cast.inputs[0], cast.output});
}

Status record_cast_write(VulkanDevice& dev, const HeldOp& cast, const PlannedOp& op,
                         std::span<const TensorRef> inputs, const TensorRef& output) {
  static const Kernel kNone{};
  auto choice_of = [&](const PlannedOp& p) {
    KernelChoice choice = p.choice;
    if (choice.launch.block_threads == 0)
      for (const KernelChoice& k : dev.choices(p.op))
        if (k.ok && k.tier == choice.tier && k.precision == choice.precision) choice = k;
    return choice;
  };
  auto arg = [](const TensorRef& r) { return ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)}; };
  const KernelChoice cc = choice_of(cast.op), wc = choice_of(op);
  const ops::Ctx c{dev, cast.op.op, cc, kNone};
  const ops::Ctx w{dev, op.op, wc, kNone};
  Status s =
      ops::cast_write(c, arg(cast.output), arg(cast.inputs[0]), w, arg(output), arg(inputs[2]));
  if (!s.ok())
    return Err(s.code())
        .op(op_name(op.op.kind), op.op.name)
        .device(dev.id())
        .note("with the cast '" + cast.op.op.name + "' before it: " + s.message());
  ++dev.cast_writes;
  return {};
}

Status record_add_norm(VulkanDevice& dev, const HeldOp& add, const PlannedOp& op,
                       std::span<const TensorRef> inputs, const TensorRef& output) {
  KernelChoice choice = op.choice;
  if (choice.launch.block_threads == 0)
    for (const KernelChoice& k : dev.choices(op.op))
      if (k.ok && k.tier == choice.tier && k.precision == choice.precision) choice = k;
  static const Kernel kNone{};
  const Kernel* kernel = kernel_of(choice.launch);
  const ops::Ctx c{dev, op.op, choice, kernel ? *kernel : kNone};
  auto arg = [](const TensorRef& r) { return ops::Arg{r.desc, static_cast<VkBuf*>(r.buffer)}; };
  const ops::Arg w = inputs.size() > 1 ? arg(inputs[1]) : ops::Arg{};
  Status s = ops::norm_add(c, arg(output), arg(add.output), arg(add.inputs[0]), arg(add.inputs[1]),
                           inputs.size() > 1 ? &w : nullptr);
  if (!s.ok())
    return Err(s.code())
        .op(op_name(op.op.kind), op.op.name)
        .device(dev.id())
        .note("with the add '" + add.op.op.name + "' before it: " + s.message());
  ++dev.fused_adds;
  return {};
}

}  // namespace duet::vulkan
