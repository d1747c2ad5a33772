#include "memory_plan.h"

#include <algorithm>
#include <limits>

#include "duet/internal/index.h"

namespace duet {

uint64_t PlanValue::storage_bytes() const {
  return static_cast<uint64_t>(dtype_bytes(desc.dtype, desc.storage_extent()));
}

void plan_memory(Plan& plan) {
  const size_t nv = plan.values.size();
  // Lifetimes in step indices, per root: first = producing step, last = last step reading it
  // (through any view of it).
  std::vector<int> first(nv, -1), last(nv, -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& st = plan.steps[s];
    for (int in : st.inputs) {
      const int r = plan.values[u(in)].root;
      last[u(r)] = std::max(last[u(r)], static_cast<int>(s));
    }
    const int r = plan.values[u(st.output)].root;
    if (first[u(r)] < 0) first[u(r)] = static_cast<int>(s);
    last[u(r)] = std::max(last[u(r)], static_cast<int>(s));
  }

  // A constant value is resident when a per-run step reads it (through any view).
  for (PlanValue& v : plan.values) v.resident = false;
  for (const PlanStep& st : plan.steps) {
    if (st.once) continue;
    for (int in : st.inputs) {
      PlanValue& root = plan.values[u(plan.values[u(in)].root)];
      if (root.constant) root.resident = true;
    }
  }
  for (PlanValue& v : plan.values)
    if (v.constant) v.resident = plan.values[u(v.root)].resident;

  plan.memory.assign(plan.devices.size(), DeviceMemoryPlan{});
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    DeviceMemoryPlan& mem = plan.memory[d];
    struct Slot {
      uint64_t size = 0;
      int busy_until = -1;  // last step of the value in it
    };
    std::vector<Slot> slots;
    uint64_t live = 0;
    std::vector<std::pair<int, uint64_t>> frees;  // (last step, bytes) of live values
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const int out = plan.steps[s].output;
      PlanValue& v = plan.values[u(out)];
      if (v.device != static_cast<int>(d) || v.root != out) continue;
      const uint64_t bytes = v.storage_bytes();
      if (v.constant) {
        if (v.resident) mem.constant_bytes += bytes;
        if (v.resident && v.borrowed) mem.borrowed_bytes += bytes;
        continue;
      }
      // Values whose last use is before this step have freed their slots.
      const int now = static_cast<int>(s);
      int best = -1, largest = -1;
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i].busy_until >= now) continue;
        if (slots[i].size >= bytes && (best < 0 || slots[i].size < slots[u(best)].size))
          best = static_cast<int>(i);
        if (largest < 0 || slots[i].size > slots[u(largest)].size) largest = static_cast<int>(i);
      }
      if (best < 0 && largest >= 0) {
        best = largest;  // grow the largest free slot rather than open a new one
        slots[u(best)].size = bytes;
      }
      if (best < 0) {
        slots.push_back({bytes, -1});
        best = static_cast<int>(slots.size() - 1);
      }
      slots[u(best)].busy_until = last[u(out)];
      v.slot = best;

      // Live bytes at this step: values alive at `now`.
      frees.erase(std::remove_if(frees.begin(), frees.end(),
                                 [&](const auto& f) {
                                   if (f.first >= now) return false;
                                   live -= f.second;
                                   return true;
                                 }),
                  frees.end());
      live += bytes;
      frees.emplace_back(last[u(out)], bytes);
      mem.max_live_bytes = std::max(mem.max_live_bytes, live);
    }
    for (const Slot& s : slots) mem.slots.push_back(s.size);
    for (const PlanValue& v : plan.values)
      if (v.state && v.device == static_cast<int>(d)) mem.state_bytes += v.storage_bytes();
    uint64_t total = mem.constant_bytes + mem.state_bytes;
    for (uint64_t s : mem.slots) total += s;
    mem.peak_bytes = total;
    mem.max_live_bytes += mem.constant_bytes + mem.state_bytes;
  }
  // Views share their root's slot.
  for (PlanValue& v : plan.values) v.slot = plan.values[u(v.root)].slot;
}

}  // namespace duet
