#include "duet/device.h"

#include <string>

#include "duet/host_tensor.h"

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
  if (variant) add(variant->name());
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

bool LaunchConfig::operator==(const LaunchConfig& o) const {
  const bool same_variant =
      variant && o.variant ? variant->same(*o.variant) : !variant && !o.variant;
  return block_threads == o.block_threads && tile_m == o.tile_m && tile_n == o.tile_n &&
         tile_k == o.tile_k && stages == o.stages && splits == o.splits && subgroup == o.subgroup &&
         shared_bytes == o.shared_bytes && same_variant;
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

Status Device::check_copy(const Buffer& b, uint64_t offset, uint64_t bytes,
                          std::string_view what) const {
  if (!owns(b))
    return Err(Code::invalid_argument)
        .device(id())
        .expected("a " + std::string(what) + " into a buffer of " + id())
        .got("a buffer of another device");
  if (offset > b.size() || bytes > b.size() - offset)
    return Err(Code::invalid_argument)
        .device(id())
        .expected("a " + std::string(what) + " inside its buffer of " + std::to_string(b.size()) +
                  " bytes")
        .got("offset " + std::to_string(offset) + " + " + std::to_string(bytes) + " bytes");
  return {};
}

Status Device::write(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  DUET_TRY(check_copy(dst, offset, bytes, "write"));
  if (dst.read_only())
    return Err(Code::invalid_argument)
        .device(id())
        .expected("a write into a buffer the device owns")
        .got("a buffer borrowed from host memory (read-only)");
  return write_checked(dst, offset, src, bytes);
}

Result<std::shared_ptr<Buffer>> Device::borrow(const HostTensor& host) {
  if (!host.defined() || host.desc().offset != 0 || !host.desc().is_contiguous())
    return Err(Code::invalid_argument)
        .device(id())
        .expected("a dense host tensor with its storage to borrow")
        .got(host.defined() ? host.desc().str() : "no data");
  if (!caps().reads_host_memory)
    return Err(Code::unsupported)
        .device(id())
        .expected("a device whose kernels read host memory")
        .got(std::string(backend_name(caps().backend)) + " device memory");
  return borrow_checked(host);
}

Result<std::shared_ptr<Buffer>> Device::borrow_checked(const HostTensor& host) {
  (void)host;
  return Err(Code::unsupported)
      .device(id())
      .expected("a device that borrows host memory")
      .got("a backend without borrowed buffers");
}

Result<std::shared_ptr<Buffer>> Device::adopt(uint64_t address, uint64_t bytes,
                                              std::shared_ptr<const void> keep) {
  (void)address;
  (void)bytes;
  (void)keep;
  return Err(Code::unsupported)
      .device(id())
      .expected("a device that uses another library's memory in place")
      .got("the " + std::string(backend_name(caps().backend)) + " backend, which cannot");
}

Status Device::lend(Buffer& b, uint64_t queue) {
  (void)b;
  (void)queue;
  return Err(Code::unsupported)
      .device(id())
      .expected("a device with queues another library can use")
      .got("the " + std::string(backend_name(caps().backend)) + " backend, which has none");
}

Status Device::read(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  DUET_TRY(check_copy(src, offset, bytes, "read"));
  return read_checked(src, offset, dst, bytes);
}

Status Device::check_tensor(const OpDesc& op, const TensorRef& ref, const TensorDesc& planned,
                            DType storage, const std::string& name) const {
  auto e = [&] {
    return Err(Code::invalid_argument).op(op_name(op.kind), op.name).tensor(name).device(id());
  };
  if (!ref.buffer) return e().expected("a buffer of " + id()).got("none");
  if (!owns(*ref.buffer))
    return e().expected("a buffer of " + id()).got("a buffer of another device");
  if (ref.desc.dtype != planned.dtype || !ref.desc.same_shape(planned))
    return e().expected(planned.str()).got(ref.desc.str());
  if (Status s = validate(ref.desc); !s.ok()) return e().expected("a valid view").got(s.message());
  if (static_cast<uint64_t>(dtype_bytes(ref.desc.dtype, ref.desc.storage_extent())) >
      ref.buffer->size())
    return e()
        .expected("a view inside its buffer of " + std::to_string(ref.buffer->size()) + " bytes")
        .got(ref.desc.str());
  if (ref.desc.dtype != storage)
    return e()
        .expected(std::string(dtype_name(storage)) +
                  " (what the kernel reads or writes; the planner inserts casts)")
        .got(ref.desc.str());
  return {};
}

Status Device::execute(const PlannedOp& p, std::span<const TensorRef> inputs,
                       const TensorRef& output) {
  const OpDesc& op = p.op;
  const KernelChoice& choice = p.choice;
  if (!choice.ok)
    return unsupported(*this, op,
                       "the plan chose a refused kernel (" + std::string(tier_name(choice.tier)) +
                           ": " + choice.reason + ")");
  if (is_view(op.kind))
    return unsupported(*this, op, "views are resolved by the executor, not run as kernels");
  if (inputs.size() != op.inputs.size())
    return Err(Code::invalid_argument)
        .op(op_name(op.kind), op.name)
        .device(id())
        .expected(std::to_string(op.inputs.size()) + " inputs")
        .got(std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DType storage =
        i < choice.input_dtypes.size() ? choice.input_dtypes[i] : op.inputs[i].dtype;
    DUET_TRY(check_tensor(op, inputs[i], op.inputs[i], storage, op.input_name(i)));
  }
  DUET_TRY(check_tensor(op, output, op.output, choice.output_dtype, "output"));
  if (!output.desc.is_contiguous())
    return Err(Code::invalid_argument)
        .op(op_name(op.kind), op.name)
        .tensor("output")
        .device(id())
        .expected("a dense output")
        .got(output.desc.str());
  if (output.buffer->read_only())
    return Err(Code::invalid_argument)
        .op(op_name(op.kind), op.name)
        .tensor("output")
        .device(id())
        .expected("an output in a buffer the device owns")
        .got("a buffer borrowed from host memory (read-only)");
  return execute_checked(p, inputs, output);
}

Status Device::begin_kernel_timing() {
  return Err(Code::unsupported)
      .device(id())
      .note("kernel timing on the device is not supported by the " +
            std::string(backend_name(caps().backend)) + " backend");
}

Result<std::vector<KernelSpan>> Device::end_kernel_timing() {
  return Err(Code::unsupported).device(id()).note("no kernel timing session was begun");
}

Status Device::begin_recording() {
  return Err(Code::unsupported)
      .device(id())
      .note("recording and replaying work is not supported by the " +
            std::string(backend_name(caps().backend)) + " backend");
}

Result<int> Device::end_recording() {
  return Err(Code::unsupported).device(id()).note("no recording was begun");
}

Status Device::replay(int recording) {
  return Err(Code::not_found)
      .device(id())
      .note("no recording " + std::to_string(recording) + " to replay");
}

void Device::release_recording(int) {}

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
