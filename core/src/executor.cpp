#include "duet/executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "duet/internal/log.h"

namespace duet {

namespace {

size_t u(int i) {
  return static_cast<size_t>(i);
}

// One lock per Device in the process: every call into a device holds it.
std::mutex& device_lock(const Device* d) {
  static std::mutex table_mutex;
  static std::map<const Device*, std::unique_ptr<std::mutex>> table;
  std::lock_guard<std::mutex> g(table_mutex);
  auto& m = table[d];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

class PlanExecutor final : public Executor {
 public:
  explicit PlanExecutor(Plan plan) : plan_(std::move(plan)) {}

  const Plan& plan() const override { return plan_; }

  Status bind(std::span<Device* const> devices, const Graph& graph) {
    for (size_t i = 0; i < plan_.devices.size(); ++i) {
      const PlanDevice& pd = plan_.devices[i];
      Device* found = nullptr;
      for (Device* d : devices)
        if (d && d->id() == pd.id) found = d;
      bool used = false;
      for (const PlanStep& s : plan_.steps)
        used = used || s.device == static_cast<int>(i) || s.src_device == static_cast<int>(i);
      if (!found && used)
        return Err(Code::not_found)
            .device(pd.id)
            .expected("the device the plan was made for")
            .got("not among the devices given");
      devs_.push_back(found);
      locks_.push_back(found ? &device_lock(found) : nullptr);
    }
    buffers_.assign(plan_.values.size(), nullptr);
    // Slots of the memory plan.
    slots_.resize(plan_.devices.size());
    for (size_t d = 0; d < plan_.devices.size(); ++d) {
      for (uint64_t bytes : plan_.memory[d].slots) {
        auto b = call(static_cast<int>(d),
                      [&] { return devs_[d]->allocate(std::max<uint64_t>(bytes, 1)); });
        if (!b.ok())
          return b.status().with_context("allocating the memory plan of " +
                                         plan_.device_name(static_cast<int>(d)));
        slots_[d].push_back(std::move(*b));
      }
    }
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device != kHost && !v.constant && v.root == static_cast<int>(i))
        buffers_[i] = slots_[u(v.device)][u(v.slot)].get();
    }
    return load_constants(graph);
  }

  Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) override {
    return run_steps(inputs, nullptr);
  }

  Result<std::map<std::string, HostTensor>> run_timed(
      const std::map<std::string, HostTensor>& inputs, std::vector<StepTime>& times) override {
    std::vector<double> seconds(plan_.steps.size(), -1.0);
    auto out = run_steps(inputs, &seconds);
    times.clear();
    for (size_t i = 0; i < seconds.size(); ++i)
      if (seconds[i] >= 0) times.push_back({static_cast<int>(i), seconds[i]});
    return out;
  }

 private:
  Result<std::map<std::string, HostTensor>> run_steps(
      const std::map<std::string, HostTensor>& inputs, std::vector<double>* seconds) {
    std::lock_guard<std::mutex> g(run_mutex_);
    // Inputs: every one given, as planned; nothing else.
    std::vector<HostTensor> host(plan_.values.size());
    for (const auto& [name, t] : inputs)
      if (!plan_.inputs.count(name))
        return Err(Code::invalid_argument)
            .tensor(name)
            .expected("an input of graph '" + plan_.graph + "'")
            .got("an unknown name");
    for (const auto& [name, id] : plan_.inputs) {
      auto it = inputs.find(name);
      const TensorDesc& want = plan_.values[u(id)].desc;
      if (it == inputs.end())
        return Err(Code::invalid_argument).tensor(name).expected("input " + want.str()).got("none");
      const HostTensor& t = it->second;
      if (!t.defined() || t.dtype() != want.dtype || !t.desc().same_shape(want))
        return Err(Code::invalid_argument)
            .tensor(name)
            .expected(want.str())
            .got(t.defined() ? t.desc().str() : "no data");
      host[u(id)] = t.desc().is_contiguous() && t.desc().offset == 0 ? t : t.contiguous();
    }
    for (const auto& [name, id] : plan_.outputs) {
      const PlanValue& v = plan_.values[u(id)];
      const PlanStep& st = plan_.steps[u(v.producer)];
      auto t = HostTensor::with_storage(v.desc, st.bytes);
      if (!t.ok()) return t.status().with_context("output '" + name + "'");
      t->fill_bytes(0xFF);  // NaN in every float dtype: an output left unwritten shows
      host[u(id)] = std::move(*t);
    }

    RunState rs;
    rs.host = &host;
    rs.staged.assign(plan_.steps.size(), {});
    rs.ready.assign(plan_.steps.size(), 0);
    rs.seconds = seconds;
    // Which devices have per-run work.
    std::vector<int> active;
    for (size_t d = 0; d < plan_.devices.size(); ++d) {
      bool any = false;
      for (const PlanStep& s : plan_.steps)
        any = any ||
              (!s.once && (s.device == static_cast<int>(d) || s.src_device == static_cast<int>(d)));
      if (any) active.push_back(static_cast<int>(d));
    }
    if (active.size() == 1) {
      device_thread(active[0], rs);
    } else {
      std::vector<std::thread> threads;
      for (int d : active) threads.emplace_back([this, d, &rs] { device_thread(d, rs); });
      for (std::thread& t : threads) t.join();
    }
    if (!rs.error.ok()) return rs.error.with_context("graph '" + plan_.graph + "'");

    std::map<std::string, HostTensor> out;
    for (const auto& [name, id] : plan_.outputs) {
      HostTensor& t = host[u(id)];
      out.emplace(name, t.desc().is_contiguous() && t.desc().offset == 0 &&
                                t.storage_bytes() == static_cast<uint64_t>(t.desc().nbytes())
                            ? t
                            : t.contiguous());
    }
    return out;
  }

  struct RunState {
    std::vector<HostTensor>* host = nullptr;
    std::vector<std::vector<std::byte>> staged;  // device-to-device copies, by step
    std::vector<char> ready;                     // staged[step] holds the data
    std::mutex m;
    std::condition_variable cv;
    Status error;
    bool failed = false;
    std::vector<double>* seconds = nullptr;  // per step, when timing (run_timed)
  };

  template <class F>
  auto call(int d, F&& f) -> decltype(f()) {
    std::lock_guard<std::mutex> g(*locks_[u(d)]);
    return f();
  }

  TensorRef ref(int value) const {
    const PlanValue& v = plan_.values[u(value)];
    return TensorRef{v.desc, buffers_[u(v.root)]};
  }

  Status fail_step(const PlanStep& s, const Status& st) const {
    return st.with_context("step '" + s.name + "' on " +
                           plan_.device_name(s.kind == StepKind::transfer && s.device == kHost
                                                 ? s.src_device
                                                 : s.device));
  }

  Status kernel(const PlanStep& s) {
    std::vector<TensorRef> ins;
    for (int in : s.inputs) ins.push_back(ref(in));
    const TensorRef out = ref(s.output);
    for (const TensorRef& r : ins)
      if (!r.buffer) return Status(Code::internal, "executor: an input has no buffer");
    if (!out.buffer) return Status(Code::internal, "executor: the output has no buffer");
    return call(s.device, [&] { return devs_[u(s.device)]->execute(s.op, ins, out); });
  }

  // Timing: waits for device `d` to finish step `i` (started at t0) and adds the time to the
  // step's (a copy between devices adds its two halves).
  Status timed(int d, size_t i, std::chrono::steady_clock::time_point t0, RunState& rs) {
    Status st = call(d, [&] { return devs_[u(d)]->synchronize(); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> g(rs.m);
    double& slot = (*rs.seconds)[i];
    slot = (slot < 0 ? 0 : slot) + s;
    return st;
  }

  // Constants: upload and run the load-time steps once; keep what later runs read.
  Status load_constants(const Graph& graph) {
    std::vector<HostTensor> host(plan_.values.size());
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device != kHost || !v.constant || v.graph_value < 0) continue;
      const GraphValue& gv = graph.value(v.graph_value);
      bool used = false;
      for (const PlanStep& s : plan_.steps)
        for (int in : s.inputs) used = used || in == static_cast<int>(i);
      if (!used) continue;
      if (!gv.data)
        return Err(Code::invalid_argument)
            .tensor(gv.name)
            .expected("constant data (loaded from its file or bound with bind_constant)")
            .got("none");
      host[i] = *gv.data;
    }
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device == kHost || !v.constant || v.root != static_cast<int>(i)) continue;
      auto b = call(v.device, [&] {
        return devs_[u(v.device)]->allocate(std::max<uint64_t>(v.storage_bytes(), 1));
      });
      if (!b.ok()) return b.status().with_context("constant '" + v.name + "'");
      buffers_[i] = b->get();
      constant_buffers_.push_back({static_cast<int>(i), std::move(*b)});
    }
    for (const PlanStep& s : plan_.steps) {
      if (!s.once) continue;
      Status st;
      if (s.kind == StepKind::kernel) {
        st = kernel(s);
      } else if (s.kind == StepKind::transfer) {
        const PlanValue& in = plan_.values[u(s.inputs[0])];
        if (in.device == kHost) {
          const HostTensor& t = host[u(s.inputs[0])];
          st = call(s.device, [&] {
            return devs_[u(s.device)]->write(*buffers_[u(s.output)], 0, t.storage(), s.bytes);
          });
        } else {
          std::vector<std::byte> tmp(s.bytes);
          st = call(s.src_device, [&] {
            return devs_[u(s.src_device)]->read(*buffers_[u(in.root)], 0, tmp.data(), s.bytes);
          });
          if (st.ok())
            st = call(s.device, [&] {
              return devs_[u(s.device)]->write(*buffers_[u(s.output)], 0, tmp.data(), s.bytes);
            });
        }
      }
      if (!st.ok()) return fail_step(s, st).with_context("loading constants");
    }
    for (size_t d = 0; d < devs_.size(); ++d)
      if (devs_[d]) DUET_TRY(call(static_cast<int>(d), [&] { return devs_[d]->synchronize(); }));
    // Free what only the load needed.
    std::vector<std::pair<int, std::shared_ptr<Buffer>>> keep;
    for (auto& [id, buf] : constant_buffers_) {
      if (plan_.values[u(id)].resident)
        keep.emplace_back(id, std::move(buf));
      else
        buffers_[u(id)] = nullptr;
    }
    constant_buffers_ = std::move(keep);
    return {};
  }

  void device_thread(int d, RunState& rs) {
    Status st;
    for (size_t i = 0; i < plan_.steps.size() && st.ok(); ++i) {
      const PlanStep& s = plan_.steps[i];
      if (s.once) continue;
      {
        std::lock_guard<std::mutex> g(rs.m);
        if (rs.failed) return;
      }
      if (s.kind == StepKind::view) continue;
      auto t0 = std::chrono::steady_clock::now();
      if (s.kind == StepKind::kernel) {
        if (s.device == d) st = kernel(s);
        if (s.device == d && rs.seconds && st.ok()) st = timed(d, i, t0, rs);
        if (!st.ok()) st = fail_step(s, st);
        continue;
      }
      // Transfers.
      const PlanValue& in = plan_.values[u(s.inputs[0])];
      if (s.src_device == kHost && s.device == d) {  // upload
        const HostTensor& t = (*rs.host)[u(s.inputs[0])];
        st = call(
            d, [&] { return devs_[u(d)]->write(*buffers_[u(s.output)], 0, t.storage(), s.bytes); });
      } else if (s.src_device == d && s.device == kHost) {  // download
        HostTensor& t = (*rs.host)[u(s.output)];
        st = call(
            d, [&] { return devs_[u(d)]->read(*buffers_[u(in.root)], 0, t.storage(), s.bytes); });
      } else if (s.src_device == d) {  // first half of a copy: read into host memory
        std::vector<std::byte> tmp(s.bytes);
        st = call(d,
                  [&] { return devs_[u(d)]->read(*buffers_[u(in.root)], 0, tmp.data(), s.bytes); });
        std::lock_guard<std::mutex> g(rs.m);
        rs.staged[i] = std::move(tmp);
        rs.ready[i] = 1;
        rs.cv.notify_all();
      } else if (s.device == d) {  // second half: wait for the data, write it
        std::unique_lock<std::mutex> lk(rs.m);
        rs.cv.wait(lk, [&] { return rs.ready[i] || rs.failed; });
        if (rs.failed) return;
        std::vector<std::byte> tmp = std::move(rs.staged[i]);
        lk.unlock();
        t0 = std::chrono::steady_clock::now();  // time the write, not the wait
        st = call(
            d, [&] { return devs_[u(d)]->write(*buffers_[u(s.output)], 0, tmp.data(), s.bytes); });
      }
      if (rs.seconds && st.ok() && (s.src_device == d || s.device == d)) st = timed(d, i, t0, rs);
      if (!st.ok()) st = fail_step(s, st);
    }
    if (st.ok()) st = call(d, [&] { return devs_[u(d)]->synchronize(); });
    if (!st.ok()) {
      std::lock_guard<std::mutex> g(rs.m);
      if (!rs.failed) {
        rs.failed = true;
        rs.error = st;
      }
      rs.cv.notify_all();
    }
  }

  Plan plan_;
  std::vector<Device*> devs_;
  std::vector<std::mutex*> locks_;
  std::vector<std::vector<std::shared_ptr<Buffer>>> slots_;
  std::vector<std::pair<int, std::shared_ptr<Buffer>>> constant_buffers_;
  std::vector<Buffer*> buffers_;  // per plan value (roots): where its storage lives
  std::mutex run_mutex_;
};

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const Graph& graph, Plan plan,
                                                   std::span<Device* const> devices) {
  if (plan.graph != graph.name())
    return Status(Code::invalid_argument, "executor: plan for graph '" + plan.graph +
                                              "' given graph '" + graph.name() + "'");
  auto e = std::make_unique<PlanExecutor>(std::move(plan));
  DUET_TRY(e->bind(devices, graph));
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace duet
