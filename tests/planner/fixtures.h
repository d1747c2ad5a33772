// Shared by the planner tests: graphs, profiles, and a test backend whose rules have the tier
// structure of a GPU backend (flash on sm_80+, tiled on sm_70/75 tensor cores, generic
// everywhere), so the planner's logic is tested independently of the real backends' progress.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/rules.h"
#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/graph.h"
#include "duet/planner.h"
#include "duet/profiles.h"

namespace duet::testing_planner {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)
#define EXPECT_LACKS(text, part) EXPECT_EQ((text).find(part), std::string::npos) << (text)

inline DeviceCaps profile(const std::string& name) {
  auto c = load_profile(name);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : DeviceCaps{};
}

// Test rules with a GPU backend's tier structure. Not the product's rules: the real ones are
// exercised by the failure tests (failures_test.cpp).
class TieredRules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::cuda; }
  std::vector<KernelChoice> choices(const DeviceCaps& c, const OpDesc& op) const override {
    const int sm = c.cc_major * 10 + c.cc_minor;
    const std::string arch = "sm_" + std::to_string(sm);
    auto make = [&](Tier tier, Precision p) {
      KernelChoice k;
      k.tier = tier;
      k.precision = p;
      for (const TensorDesc& t : op.inputs)
        k.input_dtypes.push_back(is_float(t.dtype) && p != Precision::f32 ? precision_storage(p)
                                                                          : t.dtype);
      if (op.kind == OpKind::attention && op.inputs.size() > 3 && op.inputs[3].dtype == DType::f32)
        k.input_dtypes[3] = DType::f32;
      k.output_dtype =
          is_float(op.output.dtype) && p != Precision::f32 ? precision_storage(p) : op.output.dtype;
      k.launch.block_threads = 128;
      // The efficiency classes of the CUDA families of these tiers (kernels/src/select/kernel.cpp).
      k.efficiency = tier == Tier::flash ? 0.6 : tier == Tier::tiled ? 0.4 : 0.15;
      return k;
    };
    std::vector<KernelChoice> out;
    if (op.kind == OpKind::attention) {
      for (Precision p : {Precision::bf16, Precision::f16}) {
        KernelChoice k = make(Tier::flash, p);
        k.launch.tile_m = 64;
        k.launch.tile_n = 64;
        k.launch.shared_bytes = 48 * 1024;
        if (sm < 80)
          k.reason = "requires sm_80, device is " + arch;
        else if (p == Precision::bf16 && !c.bf16_arith)
          k.reason = "no bf16 arithmetic";
        else
          k.ok = true,
          k.reason = arch + " >= sm_80, head dim " + std::to_string(op.inputs[0].dim(3));
        out.push_back(k);
      }
      for (Precision p : {Precision::bf16, Precision::f16}) {
        KernelChoice k = make(Tier::tiled, p);
        k.launch.tile_m = 32;
        k.launch.tile_n = 32;
        if (p == Precision::bf16)
          k.reason = "bf16 needs sm_80, device is " + arch;
        else if (sm < 70 || !c.tensor_cores)
          k.reason = "requires sm_70+ tensor cores, device is " + arch;
        else
          k.ok = true, k.reason = "tensor-core SDPA for " + arch;
        out.push_back(k);
      }
    }
    for (Precision p : {Precision::bf16, Precision::f16, Precision::f32}) {
      KernelChoice k = make(Tier::generic, p);
      if (p == Precision::bf16 && !c.bf16_arith)
        k.reason = "no bf16 arithmetic on " + arch;
      else if (p == Precision::f16 && !c.fp16_arith)
        k.reason = "no f16 arithmetic on " + arch;
      else
        k.ok = true, k.reason = "portable kernel";
      // A block-quantized weight is read as it is stored (the kernels of issue 11 do the same).
      if (auto q = quantized_input(op))
        k.reason +=
            ", reading " + std::string(dtype_name(op.inputs[*q].dtype)) + " blocks in registers";
      out.push_back(k);
    }
    return out;
  }
};

inline const TieredRules& tiered_rules() {
  static const TieredRules r;
  return r;
}

// Profiles as planner devices on the test rules (CUDA profiles) or the built-in rules (others).
inline std::vector<PlanDevice> test_devices(std::vector<std::string> names) {
  std::vector<DeviceCaps> caps;
  for (const std::string& n : names) caps.push_back(profile(n));
  std::vector<PlanDevice> d = profile_devices(caps, names);
  for (PlanDevice& p : d)
    if (p.caps.backend == BackendKind::cuda) p.rules = &tiered_rules();
  return d;
}

// Profiles as planner devices on the built-in rules.
inline std::vector<PlanDevice> real_devices(std::vector<std::string> names) {
  auto d = profile_devices(names);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : std::vector<PlanDevice>{};
}

// q, k, v [1, H, L, 64] in `t`, attention, then an output projection.
// Profiles of `names` whose CUDA devices are planned with `rules` and a build of `archs`.
inline std::vector<PlanDevice> with_build(std::vector<std::string> names,
                                          const cuda::BuildArchs& archs,
                                          const BackendRules& rules) {
  std::vector<PlanDevice> d = real_devices(std::move(names));
  for (PlanDevice& x : d)
    if (x.caps.backend == BackendKind::cuda) {
      x.rules = &rules;
      x.caps.extra[std::string(cuda::kKernelImageKey)] =
          cuda::check_image(archs, x.caps.cc_major, x.caps.cc_minor).text;
    }
  return d;
}

inline Graph attention_graph(DType t, int64_t heads = 8, int64_t len = 128) {
  GraphBuilder b("attn");
  ValueId q = b.input("q", t, {1, heads, len, 64});
  ValueId k = b.input("k", t, {1, heads, len, 64});
  ValueId v = b.input("v", t, {1, heads, len, 64});
  ValueId a = b.attention(q, k, v, true, "attn");
  b.output(b.scale(a, 0.5f, "out"));
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

// `layers` blocks of x = x + silu(x @ w_i), each weight [dim, dim] in `t` (declared, no data).
inline Graph mlp_stack(DType t, int layers, int64_t dim, int64_t rows = 16) {
  GraphBuilder b("stack");
  ValueId x = b.input("x", t, {rows, dim});
  for (int i = 0; i < layers; ++i) {
    const std::string n = std::to_string(i);
    ValueId w = b.constant("w" + n, t, {dim, dim});
    x = b.add(x, b.silu(b.matmul(x, w, false, "mm" + n), "act" + n), "res" + n);
  }
  b.output(x);
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

inline Plan plan_ok(const Graph& g, std::vector<PlanDevice> d, const Policy& p = {}) {
  auto plan = make_plan(g, std::move(d), p);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  if (plan.ok()) {
    for (const std::string& note : plan->notes) {
      EXPECT_LACKS(note, "for the op as executed");  // the rules agree with what runs
    }
  }
  return plan.ok() ? std::move(*plan) : Plan{};
}

inline Policy policy(const std::string& text) {
  auto p = parse_policy(text);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Policy{};
}

}  // namespace duet::testing_planner
