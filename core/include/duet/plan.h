// A plan: for every op of a graph, the device, precision, kernel tier and launch shape chosen,
// with the reason and the alternatives that lost; the casts and copies inserted; and a memory
// plan per device. Made by make_plan (duet/planner.h), run by an Executor (duet/executor.h),
// printed by explain().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "duet/calibration.h"
#include "duet/device.h"
#include "duet/export.h"
#include "duet/policy.h"

namespace duet {

// A device the planner may use: a real one (plan_devices) or a capability profile. The rules
// must outlive the planning (the plan keeps the pointer but the executor does not use it).
struct DUET_API PlanDevice {
  std::string id;  // "cuda:0"; unique in a plan
  DeviceCaps caps;
  const BackendRules* rules = nullptr;
  std::string label;     // shown beside the id (a profile's name); empty for real devices
  Calibration measured;  // measured rates (real devices); empty: the cost model uses peaks
};

// Where host values live (graph inputs before upload, constants before upload, outputs after
// download).
inline constexpr int kHost = -1;

// A tensor as the plan holds it: one graph value on one device in one dtype (a graph value may
// have several: on two devices, or cast for a kernel).
struct DUET_API PlanValue {
  std::string name;      // "attn", or derived: "q.f16", "h@cuda:1"
  TensorDesc desc;       // as stored (views keep their strides and offset)
  int device = kHost;    // index into Plan::devices, or kHost
  int graph_value = -1;  // the graph value it holds
  int root = -1;         // the value whose storage it uses (itself unless a view)
  int producer = -1;     // the step producing it (-1: a host input or constant)
  // Computed once when the plan is loaded (constants and what is derived only from them).
  bool constant = false;
  bool resident = false;  // a load-time value kept for every run (else freed after loading)
  // A constant its device reads where the host holds it (a memory-mapped file): its upload is a
  // borrow, no copy (DeviceCaps::reads_host_memory; the executor copies where the host's
  // storage is misaligned for the kernels, and logs it).
  bool borrowed = false;
  // A graph state: allocated once on its device, kept across runs (and across the plans an
  // engine makes); a write_slice into it is its only writer and aliases it (root = the state).
  bool state = false;
  int slot = -1;  // memory slot on its device (non-constant, non-state roots on devices)
  uint64_t storage_bytes() const;
};

enum class StepKind : uint8_t { kernel, view, transfer };
DUET_API std::string_view step_kind_name(StepKind k);

// A kernel choice that was not taken, and why.
struct DUET_API Alternative {
  std::string device;
  std::optional<Tier> tier;  // empty: the device itself was not used
  Precision precision = Precision::f32;
  bool usable = false;  // the backend could have run it
  bool by_policy = false;
  std::string term;  // the policy term that removed it ("deny=cuda.flash")
  std::string reason;
};

struct DUET_API PlanStep {
  StepKind kind = StepKind::kernel;
  std::string name;         // the node's name, or the inserted step's ("q.f16", "h->cuda:1")
  int node = -1;            // the graph node (-1 for inserted casts and copies)
  int device = kHost;       // kernel and view: where it runs; transfer: destination
  int src_device = kHost;   // transfer: source
  PlannedOp op;             // kernel: the op as executed and the chosen kernel; view: the view
  std::vector<int> inputs;  // plan values
  int output = -1;          // plan value
  uint64_t bytes = 0;       // transfer: bytes moved
  bool once = false;        // runs when the plan is loaded, not on every run (constants)

  // Kernel steps: what was asked and why this was chosen.
  Precision requested = Precision::f32;
  std::string device_reason;
  std::string precision_reason;
  std::string tier_reason;
  std::vector<std::string> skipped;   // better tiers on the chosen device, and why not
  std::vector<std::string> policy;    // overrides that decided ("deny=cuda.flash: ...")
  std::vector<Alternative> rejected;  // every other choice on every device
  double est_us = 0;                  // cost-model estimate
  std::string est_basis;              // what the kernel's estimate rests on (estimate_basis)
};

struct DUET_API DeviceMemoryPlan {
  uint64_t peak_bytes = 0;      // slots + resident constants + states
  uint64_t constant_bytes = 0;  // resident constants
  uint64_t borrowed_bytes = 0;  // of which borrowed from the host (in the file's mapping)
  uint64_t state_bytes = 0;     // states (persistent across runs)
  uint64_t max_live_bytes = 0;  // live bytes at the busiest step (a lower bound on the slots)
  uint64_t budget_bytes = 0;    // 0: no limit known
  std::string budget_source;    // "device memory", or the policy term
  std::vector<uint64_t> slots;  // buffer sizes; values with disjoint lifetimes share a slot
};

struct DUET_API Plan {
  std::string graph;
  std::vector<PlanDevice> devices;
  Policy policy;
  std::vector<PlanValue> values;
  std::vector<PlanStep> steps;           // in execution order
  std::vector<DeviceMemoryPlan> memory;  // per device
  std::map<std::string, int> inputs;     // graph input -> host value
  std::map<std::string, int> outputs;    // graph output -> host value
  std::map<std::string, int> states;     // graph state -> its value on its device
  std::vector<std::string> notes;        // plan-wide remarks (memory moves, unused policy terms)
  double est_us = 0;                     // sum of per-run step estimates

  // The kernel step of a graph node (nullptr for views or unknown names).
  const PlanStep* step(std::string_view node) const;
  // Transfer steps between two devices (not uploads or downloads).
  std::vector<const PlanStep*> copies() const;
  uint64_t copy_bytes() const;
  // The devices that run at least one kernel.
  std::vector<int> devices_used() const;
  std::string device_name(int device) const;  // "cuda:0 (rtx2080ti)" or "host"
};

// The plan in words: per op the device, precision, tier, launch shape, why, and why each
// alternative was rejected; then copies, memory and estimated time.
DUET_API std::string explain(const Plan& plan);
// The plan as JSON (for `duet plan --json` and tools): devices, steps with their decisions and
// reasons, copies, memory and notes.
DUET_API std::string plan_json(const Plan& plan);

}  // namespace duet
