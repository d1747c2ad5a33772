#include "emu_device.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "duet/kernels/launch.h"
#include "duet/profiles.h"

namespace duet::kernels::testing {

namespace {

class Rules final : public BackendRules {
 public:
  explicit Rules(BuildArchs b) : build_(std::move(b)) {}
  BackendKind backend() const override { return BackendKind::cuda; }
  std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) const override {
    return kernels::choices(caps, op, build_);
  }

 private:
  BuildArchs build_;
};

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(uint64_t n) : n_(n), blocks_((std::max<uint64_t>(n, 1) + 255) / 256) {}
  uint64_t size() const override { return n_; }
  void* host_ptr() override { return blocks_.data(); }

 private:
  // 256-byte aligned like device allocations: the 16-byte row alignment checks are real.
  struct alignas(256) Block {
    unsigned char b[256];
  };
  uint64_t n_;
  std::vector<Block> blocks_;
};

class EmuDevice final : public Device {
 public:
  EmuDevice(std::string id, DeviceCaps caps, BuildArchs build)
      : id_(std::move(id)), caps_(std::move(caps)), rules_(std::move(build)) {}
  const std::string& id() const override { return id_; }
  const DeviceCaps& caps() const override { return caps_; }
  const BackendRules& rules() const override { return rules_; }

  Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) override {
    return std::shared_ptr<Buffer>(std::make_shared<HostBuffer>(bytes));
  }
  bool owns(const Buffer& b) const override { return dynamic_cast<const HostBuffer*>(&b); }
  Status synchronize() override { return {}; }

 protected:
  // Arguments checked by Device::write, read and execute (core/src/device.cpp).
  Status write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    std::memcpy(static_cast<unsigned char*>(dst.host_ptr()) + offset, src, bytes);
    return {};
  }
  Status read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) override {
    std::memcpy(dst, static_cast<unsigned char*>(src.host_ptr()) + offset, bytes);
    return {};
  }
  Status execute_checked(const PlannedOp& p, std::span<const TensorRef> inputs,
                         const TensorRef& output) override {
    const Tier tier = p.choice.tier;
    std::vector<View> in;
    for (const TensorRef& r : inputs) in.push_back(make_view(r.desc, r.buffer->host_ptr()));
    const View out = make_view(output.desc, output.buffer->host_ptr());
    HostBuffer ws(workspace_bytes(tier, p.op, p.choice.launch));
    Launch l;
    l.config = p.choice.launch;
    l.workspace = ws.host_ptr();
    l.sm = caps_.cc_major * 10 + caps_.cc_minor;
    return kernels::emu::launch(tier, p.op, in, out, l);
  }

 private:
  std::string id_;
  DeviceCaps caps_;
  Rules rules_;
};

}  // namespace

DeviceCaps profile(const std::string& name) {
  auto caps = load_profile(name);
  if (!caps.ok()) ADD_FAILURE() << caps.status().message();
  return caps.ok() ? *caps : DeviceCaps{};
}

BuildArchs full_build() {
  return BuildArchs{{75, 80, 86, 87, 88, 89, 90, 120}, 120};
}

std::unique_ptr<Device> make_emu_device(std::string id, DeviceCaps caps, BuildArchs build) {
  return std::make_unique<EmuDevice>(std::move(id), std::move(caps), std::move(build));
}

}  // namespace duet::kernels::testing
