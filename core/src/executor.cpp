#include "duet/executor.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "duet/internal/fault.h"
#include "duet/internal/index.h"
#include "duet/internal/log.h"

namespace duet {

namespace {

std::mutex& device_lock(const Device* d) {
  return device_mutex(*d);
}

// Host memory that a copy between two devices (or a state's zeros) passes through. An allocation
// point of the fault sweep; a failure is an out_of_memory error naming the bytes and `what`.
using Staging = std::unique_ptr<std::byte[]>;
Result<Staging> staging(uint64_t bytes, std::string_view what) {
  std::byte* p = fault::allocation_fails() || bytes > SIZE_MAX / 2
                     ? nullptr
                     : new (std::nothrow) std::byte[std::max<uint64_t>(bytes, 1)];
  if (!p)
    return Err(Code::out_of_memory)
        .note("out of host memory: allocating " + std::to_string(bytes) + " bytes to stage " +
              std::string(what) + " failed");
  return Staging(p);
}

class PlanExecutor final : public Executor {
 public:
  explicit PlanExecutor(Plan plan) : plan_(std::move(plan)) {}
  ~PlanExecutor() override {
    for (const Segment& g : segments_)
      if (g.recording >= 0)
        call(g.device, [&] { devs_[u(g.device)]->release_recording(g.recording); });
  }

  const Plan& plan() const override { return plan_; }

  Status bind(std::span<Device* const> devices, const Graph& graph, PlanExecutor* previous) {
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
          return b.status().with_context("allocating the memory plan" +
                                         (names_device(b.status().message(), plan_.devices[d].id)
                                              ? std::string()
                                              : " of " + plan_.device_name(static_cast<int>(d))));
        slots_[d].push_back(std::move(*b));
      }
    }
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device != kHost && !v.constant && !v.state && v.root == static_cast<int>(i))
        buffers_[i] = slots_[u(v.device)][u(v.slot)].get();
    }
    DUET_TRY(bind_states(previous));
    DUET_TRY(load_constants(graph, previous));
    find_segments();
    return {};
  }

  std::string recording_summary() const override {
    std::lock_guard<std::mutex> g(run_mutex_);
    std::map<int, std::pair<int, int>> per_device;  // recordings, kernels
    for (const Segment& seg : segments_) {
      if (seg.recording < 0) continue;
      per_device[seg.device].first += 1;
      per_device[seg.device].second += seg.kernels;
    }
    std::string out;
    for (const auto& [d, n] : per_device) {
      int kernels = 0;
      for (const PlanStep& st : plan_.steps)
        kernels += !st.once && st.kind == StepKind::kernel && st.device == d ? 1 : 0;
      out += (out.empty() ? "" : "; ") + plan_.devices[u(d)].id + ": " + std::to_string(n.second) +
             " of " + std::to_string(kernels) + " kernels in " + std::to_string(n.first) +
             (n.first == 1 ? " recording" : " recordings");
    }
    return out;
  }

  Result<HostTensor> read_state(std::string_view name) override {
    std::lock_guard<std::mutex> g(run_mutex_);
    DUET_ASSIGN_OR_RETURN(int id, state_id(name));
    const PlanValue& v = plan_.values[u(id)];
    auto allocated = HostTensor::with_storage(TensorDesc::contiguous(v.desc.dtype, v.desc.dims()),
                                              v.storage_bytes());
    if (!allocated.ok())
      return allocated.status().with_context("state '" + std::string(name) + "'");
    HostTensor t = std::move(*allocated);
    DUET_TRY(call(v.device, [&] {
      return devs_[u(v.device)]->read(*buffers_[u(id)], 0, t.storage(), v.storage_bytes());
    }));
    return t;
  }

  Status write_state(std::string_view name, const HostTensor& value) override {
    std::lock_guard<std::mutex> g(run_mutex_);
    DUET_ASSIGN_OR_RETURN(int id, state_id(name));
    const PlanValue& v = plan_.values[u(id)];
    if (!value.defined() || value.dtype() != v.desc.dtype || !value.desc().same_shape(v.desc))
      return Err(Code::invalid_argument)
          .tensor(std::string(name))
          .expected("state " + v.desc.str())
          .got(value.defined() ? value.desc().str() : "no data");
    HostTensor dense =
        value.desc().is_contiguous() && value.desc().offset == 0 ? value : value.contiguous();
    return call(v.device, [&] {
      return devs_[u(v.device)]->write(*buffers_[u(id)], 0, dense.storage(), v.storage_bytes());
    });
  }

  Status reset_states() override {
    std::lock_guard<std::mutex> g(run_mutex_);
    for (const auto& [name, id] : plan_.states) DUET_TRY(zero(id));
    return {};
  }

  // The buffer and device of a state, or of a resident constant (name, device and descriptor as
  // planned), when this executor holds one; for the executor that replaces it.
  std::shared_ptr<Buffer> held(const std::string& name, const TensorDesc& desc, bool state,
                               Device** device) const {
    for (const auto& list : {&state_buffers_, &constant_buffers_})
      for (const auto& [id, buf] : *list) {
        const PlanValue& v = plan_.values[u(id)];
        if (v.state != state || v.name != name || !(v.desc == desc) || !buf) continue;
        *device = devs_[u(v.device)];
        return buf;
      }
    return nullptr;
  }

  Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) override {
    return run_steps(inputs, nullptr, nullptr);
  }

  Result<std::map<std::string, HostTensor>> run(const std::map<std::string, HostTensor>& inputs,
                                                DeviceIo& device) override {
    device.outputs.clear();
    auto out = run_steps(inputs, nullptr, nullptr, &device);
    if (!out.ok()) {
      device.outputs.clear();
      // A failed run may leave work queued that reads the caller's memory: it has run (or the
      // device is lost) when this returns, as after a run that succeeded.
      for (size_t d = 0; d < devs_.size(); ++d)
        if (devs_[d]) (void)call(static_cast<int>(d), [&] { return devs_[d]->synchronize(); });
    }
    return out;
  }

  Result<std::map<std::string, HostTensor>> run_timed(
      const std::map<std::string, HostTensor>& inputs, std::vector<StepTime>& times) override {
    std::vector<double> seconds(plan_.steps.size(), -1.0);
    auto out = run_steps(inputs, &seconds, nullptr);
    times.clear();
    for (size_t i = 0; i < seconds.size(); ++i)
      if (seconds[i] >= 0) times.push_back({static_cast<int>(i), seconds[i]});
    return out;
  }

  Result<std::map<std::string, HostTensor>> run_profiled(
      const std::map<std::string, HostTensor>& inputs, RunProfile& profile) override {
    const auto t0 = std::chrono::steady_clock::now();
    profile = {};
    auto out = run_steps(inputs, nullptr, &profile);
    profile.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!out.ok()) profile = {};
    return out;
  }

 private:
  // Per device, while profiling: the kernel steps executed there, in order, and the host's time
  // in each execute().
  struct Executed {
    std::vector<int> steps;
    std::vector<double> host;
  };

  // Begins kernel timing on every device with kernels to run; on a refusal, ends those begun.
  Status begin_profiling(const std::vector<int>& active, std::vector<int>& begun) {
    for (int d : active) {
      bool kernels = false;
      for (const PlanStep& s : plan_.steps)
        kernels = kernels || (!s.once && s.device == d && s.kind == StepKind::kernel);
      if (!kernels) continue;
      Status st = call(d, [&] { return devs_[u(d)]->begin_kernel_timing(); });
      if (!st.ok()) {
        for (int b : begun) (void)call(b, [&] { return devs_[u(b)]->end_kernel_timing(); });
        begun.clear();
        return st.with_context("profiling graph '" + plan_.graph + "'");
      }
      begun.push_back(d);
    }
    return {};
  }

  // Ends kernel timing on the devices begun and matches their spans to the steps executed.
  Status end_profiling(const std::vector<int>& begun, const std::vector<Executed>& executed,
                       RunProfile& profile) {
    Status first;
    for (int d : begun) {
      auto spans = call(d, [&] { return devs_[u(d)]->end_kernel_timing(); });
      if (!spans.ok()) {
        if (first.ok()) first = spans.status();
        continue;
      }
      const Executed& e = executed[u(d)];
      if (spans->size() != e.steps.size()) {
        if (first.ok())
          first = Err(Code::internal)
                      .device(plan_.device_name(d))
                      .expected(std::to_string(e.steps.size()) + " kernels timed in this run")
                      .got(std::to_string(spans->size()) +
                           " (another executor used the device during the profiled run?)");
        continue;
      }
      for (size_t k = 0; k < e.steps.size(); ++k) {
        const KernelSpan& s = (*spans)[k];
        profile.steps.push_back({e.steps[k], d, s.seconds, s.start, s.end, e.host[k]});
      }
    }
    std::sort(profile.steps.begin(), profile.steps.end(),
              [](const StepProfile& a, const StepProfile& b) { return a.step < b.step; });
    return first;
  }

  // The name a message gives a device of the plan, or the host.
  std::string where(int d) const { return d == kHost ? "the host" : plan_.device_name(d); }

  // A device input (DeviceIo::inputs) checked against the plan: the uploads it replaces are
  // marked in `skip`, and their outputs read its buffer (in `bound`) for this run.
  Status bind_device_input(const std::string& name, int id, const DeviceTensor& t,
                           std::vector<char>& skip, std::vector<std::pair<int, Buffer*>>& bound) {
    const TensorDesc& want = plan_.values[u(id)].desc;
    const std::string on = t.device ? t.device->id() : std::string("no device");
    if (!t.device || !t.buffer || t.desc.dtype != want.dtype || !t.desc.same_shape(want))
      return Err(Code::invalid_argument)
          .tensor(name)
          .expected("input " + want.str() + " in a device's memory")
          .got(t.buffer && t.device ? t.desc.str() + " on " + on : "no buffer");
    if (!t.desc.is_contiguous() || t.desc.offset != 0 || !t.device->owns(*t.buffer) ||
        t.buffer->size() < plan_.values[u(id)].storage_bytes())
      return Err(Code::invalid_argument)
          .tensor(name)
          .device(on)
          .expected("a dense tensor at the start of a buffer of " + on + " that holds " +
                    std::to_string(plan_.values[u(id)].storage_bytes()) + " bytes")
          .got(t.desc.str() +
               (t.device->owns(*t.buffer) ? "" : " in a buffer " + on + " does not own"));
    std::vector<int> readers;  // the devices (or kHost) that read the input
    std::vector<size_t> uploads;
    for (size_t k = 0; k < plan_.steps.size(); ++k) {
      const PlanStep& s = plan_.steps[k];
      if (s.once || std::find(s.inputs.begin(), s.inputs.end(), id) == s.inputs.end()) continue;
      const bool upload = s.kind == StepKind::transfer && s.src_device == kHost;
      const int reader = upload ? s.device : kHost;
      if (std::find(readers.begin(), readers.end(), reader) == readers.end())
        readers.push_back(reader);
      if (upload && devs_[u(s.device)] == t.device) uploads.push_back(k);
    }
    if (readers.size() != 1 || readers[0] == kHost || uploads.empty()) {
      std::string planned;
      for (int r : readers) planned += (planned.empty() ? "" : " and ") + where(r);
      return Err(Code::invalid_argument)
          .tensor(name)
          .expected(readers.size() == 1 && readers[0] != kHost
                        ? "host memory, or " + planned + "'s memory (where the plan reads it)"
                        : "host memory (the plan reads it on " +
                              (planned.empty() ? std::string("no device") : planned) + ")")
          .got("a tensor on " + on);
    }
    for (size_t k : uploads) {
      skip[k] = 1;
      bound.emplace_back(plan_.steps[k].output, t.buffer.get());
    }
    return {};
  }

  // Outputs kept on their device (DeviceIo::keep_outputs_on): the download of each is marked in
  // `skip`, and the root its kernel writes gets a new buffer (in `bound`, kept in `io.outputs`).
  Status keep_device_outputs(DeviceIo& io, std::vector<char>& skip,
                             std::vector<std::pair<int, Buffer*>>& bound,
                             std::map<int, std::shared_ptr<Buffer>>& fresh) {
    for (const auto& [name, id] : plan_.outputs) {
      if (plan_.values[u(id)].producer < 0) continue;
      const PlanStep& st = plan_.steps[u(plan_.values[u(id)].producer)];
      if (st.kind != StepKind::transfer || st.device != kHost || st.once) continue;
      const int d = st.src_device;
      Device* dev = devs_[u(d)];
      if (std::find(io.keep_outputs_on.begin(), io.keep_outputs_on.end(), dev) ==
          io.keep_outputs_on.end())
        continue;
      const PlanValue& in = plan_.values[u(st.inputs[0])];
      const PlanValue& root = plan_.values[u(in.root)];
      if (root.constant || root.state || root.device != d || root.producer < 0) continue;
      const PlanStep& writer = plan_.steps[u(root.producer)];
      if (writer.kind != StepKind::kernel || writer.once) continue;
      std::shared_ptr<Buffer>& buf = fresh[in.root];
      if (!buf) {
        auto b =
            call(d, [&] { return dev->allocate(std::max<uint64_t>(root.storage_bytes(), 1)); });
        if (!b.ok()) return b.status().with_context("output '" + name + "'");
        buf = std::move(*b);
        bound.emplace_back(in.root, buf.get());
      }
      skip[u(plan_.values[u(id)].producer)] = 1;
      io.outputs[name] = DeviceTensor{dev, buf, in.desc};
    }
    return {};
  }

  Result<std::map<std::string, HostTensor>> run_steps(
      const std::map<std::string, HostTensor>& inputs, std::vector<double>* seconds,
      RunProfile* profile, DeviceIo* io = nullptr) {
    std::lock_guard<std::mutex> g(run_mutex_);
    // Buffers bound for this run only (device inputs and kept outputs), restored when it ends.
    std::vector<std::pair<int, Buffer*>> bound;
    std::vector<Buffer*> saved;
    struct Restore {
      PlanExecutor* e;
      std::vector<std::pair<int, Buffer*>>& bound;
      std::vector<Buffer*>& saved;
      ~Restore() {
        for (size_t i = saved.size(); i-- > 0;) e->buffers_[u(bound[i].first)] = saved[i];
      }
    } restore{this, bound, saved};
    std::vector<char> skip(plan_.steps.size(), 0);
    std::map<int, std::shared_ptr<Buffer>> fresh;
    // Inputs: every one given, as planned; nothing else.
    std::vector<HostTensor> host(plan_.values.size());
    for (const auto& [name, t] : inputs)
      if (!plan_.inputs.count(name))
        return Err(Code::invalid_argument)
            .tensor(name)
            .expected("an input of graph '" + plan_.graph + "'")
            .got("an unknown name");
    if (io)
      for (const auto& [name, t] : io->inputs)
        if (!plan_.inputs.count(name) || inputs.count(name))
          return Err(Code::invalid_argument)
              .tensor(name)
              .expected("an input of graph '" + plan_.graph + "', given once")
              .got(inputs.count(name) ? "it in host and in device memory" : "an unknown name");
    for (const auto& [name, id] : plan_.inputs) {
      if (io && io->inputs.count(name)) {
        DUET_TRY(bind_device_input(name, id, io->inputs.at(name), skip, bound));
        continue;
      }
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
    if (io && !io->keep_outputs_on.empty()) DUET_TRY(keep_device_outputs(*io, skip, bound, fresh));
    for (const auto& [id, buf] : bound) {
      saved.push_back(buffers_[u(id)]);
      buffers_[u(id)] = buf;
    }
    for (const auto& [name, id] : plan_.outputs) {
      if (io && io->outputs.count(name)) continue;
      const PlanValue& v = plan_.values[u(id)];
      const PlanStep& st = plan_.steps[u(v.producer)];
      auto t = HostTensor::with_storage(v.desc, st.bytes);
      if (!t.ok()) return t.status().with_context("output '" + name + "'");
      t->fill_bytes(0xFF);  // NaN in every float dtype: an output left unwritten shows
      host[u(id)] = std::move(*t);
    }

    RunState rs;
    rs.host = &host;
    rs.staged.resize(plan_.steps.size());
    rs.ready.assign(plan_.steps.size(), 0);
    rs.seconds = seconds;
    rs.skip = &skip;
    // Plain runs replay what was recorded; the second records (the first warms the devices:
    // workspaces sized, kernels loaded). Timed and profiled runs go step by step, and so do runs
    // with buffers bound for them (recordings name the executor's own).
    rs.replay = !seconds && !profile && bound.empty();
    rs.record = rs.replay && plain_runs_ >= 1;
    // Which devices have per-run work.
    std::vector<int> active;
    for (size_t d = 0; d < plan_.devices.size(); ++d) {
      bool any = false;
      for (const PlanStep& s : plan_.steps)
        any = any ||
              (!s.once && (s.device == static_cast<int>(d) || s.src_device == static_cast<int>(d)));
      if (any) active.push_back(static_cast<int>(d));
    }
    std::vector<int> begun;
    std::vector<Executed> executed;
    if (profile) {
      DUET_TRY(begin_profiling(active, begun));
      executed.resize(plan_.devices.size());
      rs.executed = &executed;
    }
    if (active.size() == 1) {
      device_thread(active[0], rs);
    } else {
      std::vector<std::thread> threads;
      for (int d : active) threads.emplace_back([this, d, &rs] { device_thread(d, rs); });
      for (std::thread& t : threads) t.join();
    }
    const Status profiled = profile ? end_profiling(begun, executed, *profile) : Status{};
    if (!rs.error.ok()) return rs.error.with_context("graph '" + plan_.graph + "'");
    if (rs.replay) ++plain_runs_;
    DUET_TRY(profiled.with_context("profiling graph '" + plan_.graph + "'"));

    std::map<std::string, HostTensor> out;
    for (const auto& [name, id] : plan_.outputs) {
      if (io && io->outputs.count(name)) continue;
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
    std::vector<Staging> staged;  // device-to-device copies, by step
    std::vector<char> ready;      // staged[step] holds the data
    std::mutex m;
    std::condition_variable cv;
    Status error;
    bool failed = false;
    std::vector<double>* seconds = nullptr;     // per step, when timing (run_timed)
    std::vector<Executed>* executed = nullptr;  // per device, when profiling (run_profiled)
    const std::vector<char>* skip = nullptr;    // per step: replaced by a buffer bound (DeviceIo)
    bool replay = false;                        // segments recorded may be replayed
    bool record = false;                        // and those not recorded yet recorded
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

  // What a copy between two devices stages, for messages.
  std::string copy_between(const PlanStep& s) const {
    return "the copy of '" + plan_.values[u(s.inputs[0])].name + "' from " +
           plan_.device_name(s.src_device) + " to " + plan_.device_name(s.device);
  }

  // Whether `message` names device `id` ("cpu:1", and not as the start of "cpu:10").
  static bool names_device(const std::string& message, const std::string& id) {
    for (size_t at = message.find(id); at != std::string::npos; at = message.find(id, at + 1)) {
      const size_t end = at + id.size();
      if (end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end])))
        return true;
    }
    return false;
  }

  // A failed step's error: what the step did and where, each device named once (a device's own
  // errors often name it already: "on vulkan:0: staging copy failed"). `d` is the device whose
  // part failed: for a copy between two devices, the one that ran the half that failed.
  Status fail_step(const PlanStep& s, const Status& st, int d) const {
    auto on = [&](const std::string& word, int device) {
      return names_device(st.message(), plan_.devices[u(device)].id)
                 ? std::string()
                 : word + plan_.device_name(device);
    };
    if (s.kind != StepKind::transfer)
      return st.with_context("step '" + s.name + "'" + on(" on ", d));
    const std::string what = "'" + plan_.values[u(s.inputs[0])].name + "'";
    if (s.src_device == kHost) return st.with_context("uploading " + what + on(" to ", s.device));
    if (s.device == kHost)
      return st.with_context("downloading " + what + on(" from ", s.src_device));
    return st.with_context("copying " + what + on(" from ", s.src_device) + on(" to ", s.device));
  }

  Status kernel(const PlanStep& s) {
    return call(s.device, [&] { return kernel_locked(s); });
  }

  // A kernel step, the device's lock held by the caller.
  Status kernel_locked(const PlanStep& s) {
    std::vector<TensorRef> ins;
    for (int in : s.inputs) ins.push_back(ref(in));
    const TensorRef out = ref(s.output);
    for (const TensorRef& r : ins)
      if (!r.buffer) return Status(Code::internal, "executor: an input has no buffer");
    if (!out.buffer) return Status(Code::internal, "executor: the output has no buffer");
    return devs_[u(s.device)]->execute(s.op, ins, out);
  }

  // Recordings (Device::begin_recording): a device's per-run kernel steps with no transfer of
  // that device between them, recorded as one piece by the second plain run and replayed by
  // every plain run after it. Buffers never move while the executor lives (slots, states and
  // constants are bound once), so a recording stays valid until the executor releases it.
  struct Segment {
    int device = -1;
    size_t first = 0, last = 0;  // plan steps: the first and last kernel of `device`
    int kernels = 0;
    int recording = -1;  // the device's recording, once made
    bool plain = false;  // the device refused, or recording failed: step by step
  };

  void find_segments() {
    segment_at_.assign(plan_.steps.size(), -1);
    for (size_t d = 0; d < plan_.devices.size(); ++d) {
      const int dev = static_cast<int>(d);
      Segment cur;
      auto close = [&] {
        if (cur.kernels >= 2) {
          segment_at_[cur.first] = static_cast<int>(segments_.size());
          segments_.push_back(cur);
        }
        cur = Segment();
      };
      for (size_t i = 0; i < plan_.steps.size(); ++i) {
        const PlanStep& st = plan_.steps[i];
        if (st.once || st.kind == StepKind::view) continue;
        if (st.kind == StepKind::kernel && st.device == dev) {
          if (cur.kernels == 0) {
            cur.device = dev;
            cur.first = i;
          }
          cur.last = i;
          ++cur.kernels;
        } else if (st.kind == StepKind::transfer && (st.device == dev || st.src_device == dev)) {
          close();
        }
      }
      close();
    }
  }

  // The segment starting at step `i` on device `d`, replayed or recorded: true when it ran that
  // way, false when its steps are to run one by one.
  Result<bool> replay_segment(int d, size_t i, bool record) {
    if (segment_at_[i] < 0) return false;
    Segment& g = segments_[u(segment_at_[i])];
    if (g.device != d || g.plain || (g.recording < 0 && !record)) return false;
    Device& dev = *devs_[u(d)];
    std::lock_guard<std::mutex> lock(*locks_[u(d)]);
    const std::string what = "steps '" + plan_.steps[g.first].name + "' to '" +
                             plan_.steps[g.last].name + "' on " + plan_.device_name(d);
    if (g.recording >= 0) {
      DUET_TRY(dev.replay(g.recording).with_context("replaying " + what));
      return true;
    }
    Status begun = dev.begin_recording();
    if (!begun.ok()) {
      if (begun.code() != Code::unsupported) return begun.with_context("recording " + what);
      log().debug("graph '{}': {}: not recorded: {}", plan_.graph, plan_.device_name(d),
                  begun.message());
      for (Segment& other : segments_)
        if (other.device == d) other.plain = true;
      return false;
    }
    Status st;
    for (size_t k = g.first; k <= g.last && st.ok(); ++k) {
      const PlanStep& s = plan_.steps[k];
      if (!s.once && s.kind == StepKind::kernel && s.device == d) st = kernel_locked(s);
    }
    Result<int> id = dev.end_recording();
    if (st.ok() && id.ok()) {
      g.recording = *id;
      log().debug("graph '{}': {} recorded ({} kernels)", plan_.graph, what, g.kernels);
      DUET_TRY(dev.replay(g.recording).with_context("replaying " + what));
      return true;
    }
    if (id.ok()) dev.release_recording(*id);
    log().debug("graph '{}': {} not recorded: {}", plan_.graph, what,
                (st.ok() ? id.status() : st).message());
    g.plain = true;  // nothing of it ran: run it step by step
    return false;
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

  Result<int> state_id(std::string_view name) const {
    auto it = plan_.states.find(std::string(name));
    if (it == plan_.states.end()) {
      std::string names;
      for (const auto& [n, id] : plan_.states) names += (names.empty() ? "" : ", ") + n;
      return Err(Code::not_found)
          .tensor(std::string(name))
          .expected("a state of graph '" + plan_.graph + "'" +
                    (names.empty() ? " (it has none)" : " (" + names + ")"))
          .got("no such state");
    }
    return it->second;
  }

  // Sets a state to zero, a bounded chunk at a time.
  Status zero(int id) {
    const PlanValue& v = plan_.values[u(id)];
    const uint64_t total = v.storage_bytes(), chunk = std::min<uint64_t>(total, 64ull << 20);
    DUET_ASSIGN_OR_RETURN(Staging zeros, staging(chunk, "the zeros a new state starts from"));
    std::memset(zeros.get(), 0, chunk);
    for (uint64_t at = 0; at < total; at += chunk) {
      const uint64_t n = std::min(chunk, total - at);
      DUET_TRY(call(v.device, [&] {
        return devs_[u(v.device)]->write(*buffers_[u(id)], at, zeros.get(), n);
      }));
    }
    return {};
  }

  // States: the previous executor's buffer when it is on the same device, else a new buffer with
  // the previous contents copied in, or zeros.
  Status bind_states(PlanExecutor* previous) {
    for (const auto& [name, id] : plan_.states) {
      const PlanValue& v = plan_.values[u(id)];
      Device* dev = devs_[u(v.device)];
      Device* old_dev = nullptr;
      std::shared_ptr<Buffer> old =
          previous ? previous->held(name, v.desc, true, &old_dev) : nullptr;
      std::shared_ptr<Buffer> buf = old && old_dev == dev ? old : nullptr;
      if (!buf) {
        auto b =
            call(v.device, [&] { return dev->allocate(std::max<uint64_t>(v.storage_bytes(), 1)); });
        if (!b.ok()) return b.status().with_context("state '" + name + "'");
        buf = std::move(*b);
      }
      buffers_[u(id)] = buf.get();
      state_buffers_.emplace_back(id, buf);
      if (buf == old) continue;
      if (!old) {
        DUET_TRY(zero(id).with_context("state '" + name + "'"));
        continue;
      }
      // Moved to another device: through host memory.
      const uint64_t bytes = v.storage_bytes();
      auto tmp = staging(bytes, "the state's move from " + old_dev->id() + " to " + dev->id());
      if (!tmp.ok()) return tmp.status().with_context("state '" + name + "'");
      {
        std::lock_guard<std::mutex> g(device_lock(old_dev));
        DUET_TRY(old_dev->read(*old, 0, tmp->get(), bytes));
      }
      DUET_TRY(call(v.device, [&] { return dev->write(*buf, 0, tmp->get(), bytes); }));
      log().debug("state '{}' moved from {} to {}", name, old_dev->id(), dev->id());
    }
    return {};
  }

  // Constants: upload and run the load-time steps once; keep what later runs read. Resident
  // constants the previous executor holds in the same form on the same device are taken over,
  // and the load-time steps that only they needed are skipped.
  Status load_constants(const Graph& graph, PlanExecutor* previous) {
    const size_t nv = plan_.values.size();
    std::vector<char> adopted(nv, 0), needed(nv, 0), run_step(plan_.steps.size(), 0);
    for (size_t i = 0; i < nv; ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device == kHost || !v.constant || !v.resident || v.root != static_cast<int>(i))
        continue;
      Device* old_dev = nullptr;
      auto old = previous ? previous->held(v.name, v.desc, false, &old_dev) : nullptr;
      if (old && old_dev == devs_[u(v.device)]) {
        adopted[i] = 1;
        buffers_[i] = old.get();
        constant_buffers_.push_back({static_cast<int>(i), std::move(old)});
      } else {
        needed[i] = 1;
      }
    }
    for (size_t k = plan_.steps.size(); k-- > 0;) {
      const PlanStep& s = plan_.steps[k];
      const int root = plan_.values[u(s.output)].root;
      if (!s.once || !needed[u(root)]) continue;
      run_step[k] = 1;
      for (int in : s.inputs) needed[u(plan_.values[u(in)].root)] = 1;
    }
    std::vector<HostTensor> host(nv);
    for (size_t i = 0; i < nv; ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device != kHost || !v.constant || v.graph_value < 0 || !needed[i]) continue;
      const GraphValue& gv = graph.value(v.graph_value);
      if (!gv.data)
        return Err(Code::invalid_argument)
            .tensor(gv.name)
            .expected("constant data (loaded from its file or bound with bind_constant)")
            .got("none");
      host[i] = *gv.data;
    }
    // Constants the plan borrows: the device reads the host's storage (a file's mapping) in
    // place; where it cannot (storage misaligned for its kernels), the constant is copied.
    std::vector<char> borrowed(plan_.steps.size(), 0);
    for (size_t k = 0; k < plan_.steps.size(); ++k) {
      const PlanStep& s = plan_.steps[k];
      if (!run_step[k] || s.kind != StepKind::transfer || s.src_device != kHost) continue;
      const PlanValue& v = plan_.values[u(s.output)];
      if (!v.borrowed || v.root != s.output) continue;
      const HostTensor& t = host[u(s.inputs[0])];
      auto b = call(s.device, [&] { return devs_[u(s.device)]->borrow(t); });
      if (!b.ok() || (*b)->size() < v.storage_bytes()) {
        log().info(
            "constant '{}' is copied to {}, not borrowed: {}", v.name,
            plan_.devices[u(s.device)].id,
            b.ok() ? std::string("its storage is smaller than planned") : b.status().message());
        continue;
      }
      borrowed[k] = 1;
      buffers_[u(s.output)] = b->get();
      constant_buffers_.push_back({s.output, std::move(*b)});
    }
    for (size_t i = 0; i < nv; ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.device == kHost || !v.constant || v.root != static_cast<int>(i) || !needed[i] ||
          buffers_[i])
        continue;
      auto b = call(v.device, [&] {
        return devs_[u(v.device)]->allocate(std::max<uint64_t>(v.storage_bytes(), 1));
      });
      if (!b.ok()) {
        // A copy of a constant is named "w@vulkan:0"; the device's error names the device.
        const std::string at = "@" + plan_.devices[u(v.device)].id;
        const bool copy = v.name.size() > at.size() && v.name.ends_with(at);
        const bool named = names_device(b.status().message(), plan_.devices[u(v.device)].id);
        return b.status().with_context(
            "constant '" + (copy && named ? v.name.substr(0, v.name.size() - at.size()) : v.name) +
            "'" + (named || copy ? "" : " on " + plan_.device_name(v.device)));
      }
      buffers_[i] = b->get();
      constant_buffers_.push_back({static_cast<int>(i), std::move(*b)});
    }
    for (size_t k = 0; k < plan_.steps.size(); ++k) {
      const PlanStep& s = plan_.steps[k];
      if (!run_step[k] || borrowed[k]) continue;
      Status st;
      int failed_on = s.device;
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
          auto tmp = staging(s.bytes, copy_between(s));
          st = tmp.status();
          if (st.ok()) {
            st = call(s.src_device, [&] {
              return devs_[u(s.src_device)]->read(*buffers_[u(in.root)], 0, tmp->get(), s.bytes);
            });
            if (!st.ok()) failed_on = s.src_device;
          }
          if (st.ok())
            st = call(s.device, [&] {
              return devs_[u(s.device)]->write(*buffers_[u(s.output)], 0, tmp->get(), s.bytes);
            });
        }
      }
      if (!st.ok()) return fail_step(s, st, failed_on).with_context("loading constants");
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
      if (s.kind == StepKind::view || (*rs.skip)[i]) continue;
      auto t0 = std::chrono::steady_clock::now();
      if (s.kind == StepKind::kernel && s.device == d && rs.replay) {
        Result<bool> replayed = replay_segment(d, i, rs.record);
        if (!replayed.ok()) {
          st = replayed.status();
          continue;
        }
        if (*replayed) {
          i = segments_[u(segment_at_[i])].last;
          continue;
        }
      }
      if (s.kind == StepKind::kernel) {
        if (s.device == d) st = kernel(s);
        if (s.device == d && rs.executed) {  // this thread alone writes its device's entry
          Executed& e = (*rs.executed)[u(d)];
          e.steps.push_back(static_cast<int>(i));
          e.host.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        if (s.device == d && rs.seconds && st.ok()) st = timed(d, i, t0, rs);
        if (!st.ok()) st = fail_step(s, st, d);
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
        auto tmp = staging(s.bytes, copy_between(s));
        st = tmp.status();
        if (st.ok())
          st = call(
              d, [&] { return devs_[u(d)]->read(*buffers_[u(in.root)], 0, tmp->get(), s.bytes); });
        if (st.ok()) {  // else the failure below wakes the other half
          std::lock_guard<std::mutex> g(rs.m);
          rs.staged[i] = std::move(*tmp);
          rs.ready[i] = 1;
          rs.cv.notify_all();
        }
      } else if (s.device == d) {  // second half: wait for the data, write it
        std::unique_lock<std::mutex> lk(rs.m);
        rs.cv.wait(lk, [&] { return rs.ready[i] || rs.failed; });
        if (rs.failed) return;
        Staging tmp = std::move(rs.staged[i]);
        lk.unlock();
        t0 = std::chrono::steady_clock::now();  // time the write, not the wait
        st = call(
            d, [&] { return devs_[u(d)]->write(*buffers_[u(s.output)], 0, tmp.get(), s.bytes); });
      }
      if (rs.seconds && st.ok() && (s.src_device == d || s.device == d)) st = timed(d, i, t0, rs);
      if (!st.ok()) st = fail_step(s, st, d);
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
  std::vector<std::pair<int, std::shared_ptr<Buffer>>> state_buffers_;
  std::vector<Buffer*> buffers_;  // per plan value (roots): where its storage lives
  std::vector<Segment> segments_;
  std::vector<int> segment_at_;  // per step: the segment that starts there, or -1
  int plain_runs_ = 0;           // runs neither timed nor profiled, done
  mutable std::mutex run_mutex_;
};

}  // namespace

std::mutex& device_mutex(const Device& d) {
  static std::mutex table_mutex;
  static std::map<const Device*, std::unique_ptr<std::mutex>> table;
  std::lock_guard<std::mutex> g(table_mutex);
  auto& m = table[&d];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

double RunProfile::kernel_seconds() const {
  double s = 0;
  for (const StepProfile& p : steps) s += p.device_seconds;
  return s;
}

double RunProfile::host_seconds() const {
  double s = 0;
  for (const StepProfile& p : steps) s += p.host_seconds;
  return s;
}

Result<std::unique_ptr<Executor>> Executor::create(const Graph& graph, Plan plan,
                                                   std::span<Device* const> devices,
                                                   Executor* previous) {
  if (plan.graph != graph.name())
    return Status(Code::invalid_argument, "executor: plan for graph '" + plan.graph +
                                              "' given graph '" + graph.name() + "'");
  auto e = std::make_unique<PlanExecutor>(std::move(plan));
  DUET_TRY(e->bind(devices, graph, dynamic_cast<PlanExecutor*>(previous)));
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace duet
