// The planner's working state, shared by its parts: placement (placement.cpp: which device,
// precision and tier for each op), its explanation (explain.cpp: why, in the step's reasons),
// graph rewriting (rewrite.cpp: the casts, copies and views that bring each input to where and
// how the chosen kernel reads it) and the plan's assembly (planner.cpp: inputs, outputs, memory,
// budgets). The cost model is cost_model.h. Internal.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "duet/graph.h"
#include "duet/internal/index.h"
#include "duet/plan.h"
#include "duet/policy.h"
#include "precision.h"

namespace duet::planning {

inline bool data_movement(OpKind k) {
  return op_class(k) == OpClass::data_movement;
}

inline std::string pname(Precision p) {
  return std::string(precision_name(p));
}

inline std::string tname(Tier t) {
  return std::string(tier_name(t));
}

inline std::string choice_name(const KernelChoice& c) {
  return tname(c.tier) + " " + pname(c.precision);
}

// What the planner thinks of one device for one op.
struct DeviceEval {
  int device = -1;
  bool denied = false;  // the policy keeps the device out
  bool ok = false;      // an acceptable choice exists
  KernelChoice pick;
  Standing standing;     // the pick against the op's precision floor
  double kernel_us = 0;  // the pick's kernel with its casts
  std::vector<KernelChoice> all;
  std::vector<Alternative> alternatives;  // every choice other than the pick
  std::vector<std::string> skipped;       // better tiers than the pick on this device
  std::vector<std::string> policy;        // policy terms that removed choices
  std::string why_not;                    // when !ok: why, in one line
  // Filled when the op is placed:
  double est_us = 0;
  uint64_t new_bytes = 0;
  bool fits = true;
  std::string fit_reason;
  std::vector<int> output_moves;  // devices its output is moved to for the ops reading it
  double moves_us = 0;            // what moving it there costs (in est_us, not in the step's)
};

// One device's choices for an op ranked: each choice's standing against the op's precision floor,
// its kernel's estimate and the casts its input dtypes need (0 where it is not usable), and the
// best (-1: none usable).
struct Ranking {
  std::vector<Standing> standing;
  std::vector<double> us, cast;
  int best = -1;
};

// The decision for one op: every device's evaluation, the fastest device that fits (chosen) and
// the fastest of all (cheapest, which may not fit).
struct Placement {
  std::vector<DeviceEval> evals;
  int chosen = -1, cheapest = -1;
  const DeviceEval& pick() const { return evals[u(chosen)]; }
};

// The memory a plan keeps free on a device for the driver's context, library workspaces and other
// processes: 5% of a GPU's memory and at least 512 MiB (a CUDA context with cuBLAS workspaces
// takes 300 to 600 MiB), 10% of host memory and at least 1 GiB for a CPU device; never more
// than half. `why` says which.
uint64_t memory_reserve(const DeviceCaps& caps, std::string* why = nullptr);

// The routes to the same GPU as device d besides d itself: devices whose capability records carry
// d's UUID (one GPU seen through CUDA and through Vulkan). They share one memory.
std::vector<int> other_routes(const std::vector<PlanDevice>& devices, int d);

class Planner {
 public:
  // `readers`: per graph node, the devices the ops reading its output ran on in a previous plan
  // (empty: placement in graph order only).
  Planner(const Graph& g, std::vector<PlanDevice> devices, const Policy& policy,
          std::vector<uint64_t> cut, std::vector<std::vector<int>> readers = {}, int whole_on = -1)
      : g_(g), policy_(policy), cut_(std::move(cut)), readers_(std::move(readers)) {
    single_ = whole_on;
    plan_.graph = g.name();
    plan_.devices = std::move(devices);
    plan_.policy = policy;
  }

  Result<Plan> run();

 private:
  const PlanDevice& dev(int d) const { return plan_.devices[u(d)]; }
  const DeviceCaps* caps_of(int d) const { return d == kHost ? nullptr : &dev(d).caps; }
  const Calibration* measured(int d) const { return &dev(d).measured; }
  std::string dname(int d) const { return plan_.device_name(d); }

  uint64_t budget(int d) const;
  int storage_value(int gv) const;
  std::string rep_name(int gv, int d, DType t) const;
  std::optional<int> find_rep(int gv, int d, DType t) const;

  int add_value(PlanValue v);
  // The state a node writes in place (its graph value), or -1.
  int written_state(const GraphNode& n) const;
  // The plan value of state `gv` (its storage on its device), or -1 while it has no device.
  int state_value(int gv) const;
  // Gives state `gv` its device (the first op reading or writing it chooses it).
  int home_state(int gv, int d);
  // Whether plan value r holds storage a copy can read (a root, or a value aliasing a state).
  bool owns_storage(int r) const;
  int add_step(PlanStep s);

  // One device for one op: excluded, or its choices ranked (placement.cpp) and each explained
  // (explain.cpp).
  DeviceEval evaluate(const GraphNode& n, int d, const PrecisionFloor& floor) const;
  bool excluded(const GraphNode& n, int d, DeviceEval& e) const;
  std::vector<KernelChoice> choices(const GraphNode& n, int d) const;
  Ranking rank(const GraphNode& n, int d, const PrecisionFloor& floor,
               const std::vector<KernelChoice>& all) const;
  void explain_choices(int d, const PrecisionFloor& floor, const Ranking& r, DeviceEval& e) const;
  void cost(const GraphNode& n, int node_index, DeviceEval& e) const;
  uint64_t live_bytes(int d, int node_index) const;
  uint64_t count_live_bytes(int d, int node_index) const;
  // live_bytes kept as running sums so that placing a node costs no scan of every value:
  // a new plan value is counted when added, and the values whose last use is a node stop
  // counting when placement moves past it.
  void count_live(int id);
  void advance_live(int node_index);

  bool is_view_value(int gv) const;
  int pick_source(int gv, int d, DType preferred) const;
  DType available_dtype(int gv, int d, DType preferred) const;
  Result<int> on_device(int gv, int d, DType preferred, const std::string& why);
  Result<int> need(int gv, int d, DType t, const std::string& why);
  Result<int> cast_to(int gv, DType t, int d, const std::string& why);
  std::optional<KernelChoice> cast_choice(int d, const OpDesc& op) const;
  Result<int> add_view(int gv, const GraphNode& n, int base);
  int add_transfer(int src, int d, int gv);

  Status choose_single_device();
  // One op: decide, then explain, then rewrite the graph around it (placement.cpp).
  Status place(int node_index);
  Result<Placement> decide(const GraphNode& n, int node_index, const PrecisionFloor& floor) const;
  PlanStep explain(const GraphNode& n, int node_index, const PrecisionFloor& floor,
                   const Placement& p);
  Status rewrite(const GraphNode& n, const DeviceEval& e, PlanStep st);
  Status finish_outputs();

  const Graph& g_;
  const Policy& policy_;
  std::vector<uint64_t> cut_;              // bytes taken off each device's budget to move work away
  std::vector<std::vector<int>> readers_;  // per node: where its output was read last round
  Plan plan_;
  std::vector<std::vector<int>> reps_;  // graph value -> plan values holding it
  std::vector<int> last_use_;
  std::vector<bool> is_output_;
  std::vector<int> home_;       // graph value -> device of the kernel that computed it
  std::vector<uint64_t> live_;  // per device: live_bytes at node live_node_
  // Per node: (device, bytes) of the values last used there, which stop counting after it.
  std::vector<std::vector<std::pair<int, uint64_t>>> expiring_;
  int live_node_ = 0;
  int single_ = -1;  // split=off, or the whole graph as a candidate (make_plan): the one device
};

}  // namespace duet::planning
