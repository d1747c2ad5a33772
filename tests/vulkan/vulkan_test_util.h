// Helpers for the Vulkan tests: opening the backend with options, temporary directories, and
// running a check case on a device against the float64 reference.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "check/check.h"
#include "kernel.h"
#include "reference/reference.h"
#include "vk_internal.h"
#include "vulkan_backend.h"

namespace duet::vulkan::testing {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/duet-vulkan-test-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Opens the Vulkan backend with `options` (a temporary pipeline cache unless one is given) and
// returns its devices, or the reason it has none.
inline Result<BackendOpenResult> open_vulkan(BackendOptions options, const TempDir& cache) {
  if (!options.values.count("vulkan.cache_dir")) options.values["vulkan.cache_dir"] = cache.path;
  auto r = factory().open(options);
  if (r.ok() && r->devices.empty()) return Status(Code::unsupported, "no Vulkan device");
  return r;
}

inline VulkanDevice& vk(Device& d) {
  return dynamic_cast<VulkanDevice&>(d);
}

// A check case from descriptors (inputs drawn from the case name, never zeros).
inline check::Case make_case(std::string name, OpKind kind, std::vector<TensorDesc> in,
                             OpAttrs attrs = {}, std::vector<check::Fill> fills = {}) {
  check::Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.attrs = std::move(attrs);
  c.inputs = std::move(in);
  c.fills = std::move(fills);
  return c;
}

// Runs `c` with kernel choice `k` against the float64 reference.
inline check::Outcome run_with(Device& d, const check::Case& c, const KernelChoice& k) {
  check::Outcome o;
  auto op = check::case_op(c);
  if (!op.ok()) {
    o.message = op.status().message();
    return o;
  }
  std::vector<HostTensor> inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  if (!ref.ok()) {
    o.message = ref.status().message();
    return o;
  }
  return check::run_case(d, k, *op, inputs, *ref);
}

// The choice of tier `tier` whose storage dtypes are the case's; refused (with "no such choice")
// when there is none.
inline KernelChoice choice_of(Device& d, const check::Case& c, Tier tier) {
  auto op = check::case_op(c);
  if (op.ok())
    for (const KernelChoice& k : d.choices(*op))
      if (k.tier == tier && k.reads_as_given(*op)) return k;
  KernelChoice none;
  none.reason = "no " + std::string(tier_name(tier)) + " choice for " + c.name;
  return none;
}

// Runs `c` with the first usable choice whose storage dtypes match the case, against the
// float64 reference. `chosen` receives the kernel choice used.
inline check::Outcome run_on(Device& d, const check::Case& c, KernelChoice* chosen = nullptr) {
  auto op = check::case_op(c);
  if (op.ok())
    for (const KernelChoice& k : d.choices(*op))
      if (k.ok && k.reads_as_given(*op)) {
        if (chosen) *chosen = k;
        return run_with(d, c, k);
      }
  check::Outcome o;
  o.message = op.ok() ? "no usable kernel choice for " + c.name : op.status().message();
  return o;
}

inline TensorDesc dense(DType t, std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}

}  // namespace duet::vulkan::testing
