#include "fake_driver.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "duet/half.h"

namespace duet::cuda::testing {

namespace {

DeviceProps card(const char* name, int major, int minor, int sms, int clock_mhz, int mem_mhz,
                 int bus, uint64_t total, uint64_t optin, uint64_t per_sm, int threads_per_sm,
                 int l2, uint16_t pci_id) {
  DeviceProps p;
  p.name = name;
  p.major = major;
  p.minor = minor;
  p.sm_count = sms;
  p.clock_khz = clock_mhz * 1000;
  p.memory_clock_khz = mem_mhz * 1000;
  p.memory_bus_bits = bus;
  p.total_memory = total;
  p.shared_per_block = 48 * 1024;
  p.shared_per_block_optin = optin;
  p.shared_per_sm = per_sm;
  p.regs_per_block = 65536;
  p.regs_per_sm = 65536;
  p.warp_size = 32;
  p.max_threads_per_block = 1024;
  p.max_threads_per_sm = threads_per_sm;
  p.max_block = {1024, 1024, 64};
  p.max_grid = {2147483647, 65535, 65535};
  p.l2_bytes = l2;
  p.pci_vendor_id = 0x10de;
  p.pci_device_id = pci_id;
  p.pci_bus = 0x65;
  std::array<uint8_t, 16> uuid{};
  for (size_t i = 0; i < uuid.size(); ++i) uuid[i] = static_cast<uint8_t>(pci_id + i);
  p.uuid = uuid;
  p.driver_version = p.runtime_version = 13000;
  return p;
}

}  // namespace

DeviceProps v100() {
  DeviceProps p = card("Tesla V100-SXM2-16GB", 7, 0, 80, 1530, 877, 4096, 16945512448ull, 98304,
                       98304, 2048, 6291456, 0x1db1);
  p.ecc = true;
  return p;
}
DeviceProps t4() {
  DeviceProps p = card("Tesla T4", 7, 5, 40, 1590, 5001, 256, 15835660288ull, 65536, 65536, 1024,
                       4194304, 0x1eb8);
  p.ecc = true;
  return p;
}
DeviceProps rtx2080ti() {
  return card("NVIDIA GeForce RTX 2080 Ti", 7, 5, 68, 1545, 7000, 352, 11546394624ull, 65536, 65536,
              1024, 5767168, 0x1e04);
}
DeviceProps gtx1660() {
  return card("NVIDIA GeForce GTX 1660", 7, 5, 22, 1785, 4001, 192, 6222839808ull, 65536, 65536,
              1024, 1572864, 0x2184);
}
DeviceProps mx450() {
  return card("NVIDIA GeForce MX450", 7, 5, 14, 1575, 5001, 64, 2147483648ull, 65536, 65536, 1024,
              1048576, 0x1f97);
}
DeviceProps a100() {
  DeviceProps p = card("NVIDIA A100-SXM4-40GB", 8, 0, 108, 1410, 1215, 5120, 42505273344ull, 166912,
                       167936, 2048, 41943040, 0x20b0);
  p.ecc = true;
  return p;
}
DeviceProps rtx3090() {
  return card("NVIDIA GeForce RTX 3090", 8, 6, 82, 1695, 9751, 384, 25438126080ull, 101376, 102400,
              1536, 6291456, 0x2204);
}
DeviceProps rtx4090() {
  return card("NVIDIA GeForce RTX 4090", 8, 9, 128, 2520, 10501, 384, 25393692672ull, 101376,
              102400, 1536, 75497472, 0x2684);
}
DeviceProps h100() {
  DeviceProps p = card("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, 2619, 5120, 85029158912ull, 232448,
                       233472, 2048, 52428800, 0x2330);
  p.ecc = true;
  return p;
}
DeviceProps h100_4sm() {
  DeviceProps p = h100();
  p.sm_count = 4;
  return p;
}
DeviceProps gtx1060() {
  return card("NVIDIA GeForce GTX 1060 6GB", 6, 1, 10, 1708, 4004, 192, 6371475456ull, 49152, 98304,
              2048, 1572864, 0x1c03);
}
DeviceProps jetson_orin_nano() {
  DeviceProps p = card("NVIDIA Jetson Orin Nano 8GB", 8, 7, 8, 625, 2125, 128, 8000000000ull,
                       166912, 167936, 1536, 2097152, 0);
  p.integrated = true;
  p.pci_bus = 0;
  return p;
}
DeviceProps rtx5090() {
  return card("NVIDIA GeForce RTX 5090", 12, 0, 170, 2407, 14001, 512, 33662697472ull, 101376,
              102400, 1536, 100663296, 0x2b85);
}

void host_gemm(const GemmCall& g, const void* a, const void* b, void* d) {
  // Column-major: X(r, c) of a stored rows x cols matrix is at r + c * ld.
  auto at = [](bool trans, int64_t ld, int64_t r, int64_t c) {
    return trans ? c + r * ld : r + c * ld;  // element (r, c) of op(X)
  };
  for (int64_t p = 0; p < g.batch; ++p)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double s = g.accumulate ? load_as_double(d, g.d_type, p * g.stride_d + i + j * g.ldd) : 0;
        for (int64_t l = 0; l < g.k; ++l)
          s += load_as_double(a, g.a_type, p * g.stride_a + at(g.trans_a, g.lda, i, l)) *
               load_as_double(b, g.b_type, p * g.stride_b + at(g.trans_b, g.ldb, l, j));
        store_from_double(d, g.d_type, p * g.stride_d + i + j * g.ldd, s);
      }
}

FakeDriver::FakeDriver(std::vector<DeviceProps> devices) : devices_(std::move(devices)) {
  driver_status.library_found = true;
  driver_status.driver_version = 13000;
  driver_status.runtime_version = 13000;
  driver_status.device_count = static_cast<int>(devices_.size());
}

FakeDriver::~FakeDriver() {
  for (auto& [p, info] : blocks_) std::free(p);
}

size_t FakeDriver::pending() const {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  size_t n = 0;
  for (const auto& [s, q] : queues_) n += q.work.size() - q.done;
  return n;
}

Status FakeDriver::sticky() const {
  auto it = lost_.find(current_);
  if (it == lost_.end()) return {};
  return Status(Code::device_lost, it->second);
}

Result<DeviceProps> FakeDriver::properties(int ordinal) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  if (ordinal < 0 || ordinal >= static_cast<int>(devices_.size()))
    return Status(Code::invalid_argument, "invalid device ordinal");
  return devices_[static_cast<size_t>(ordinal)];
}

Status FakeDriver::use(int ordinal) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  current_ = ordinal;
  return sticky();
}

int FakeDriver::current_device() {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  return current_;
}

Result<MemoryInfo> FakeDriver::memory_info() {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  return MemoryInfo{capacity - used_[current_], capacity};
}

Result<void*> FakeDriver::device_alloc(uint64_t bytes) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  if (used_[current_] + bytes > capacity)
    return Status(Code::out_of_memory, "cudaMalloc of " + std::to_string(bytes) +
                                           " bytes: out of memory (cudaErrorMemoryAllocation)");
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) return Status(Code::out_of_memory, "host out of memory");
  blocks_[p] = {current_, bytes};
  used_[current_] += bytes;
  ++device_allocs;
  return p;
}

void FakeDriver::device_free(void* p) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  auto it = blocks_.find(p);
  if (it == blocks_.end()) std::abort();  // freeing what was never allocated is a test bug
  used_[it->second.first] -= it->second.second;
  blocks_.erase(it);
  std::free(p);
  ++device_frees;
}

Result<void*> FakeDriver::pinned_alloc(uint64_t bytes) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  if (!pinned_works)
    return Status(Code::unsupported, "cudaHostAlloc: operation not permitted (fake)");
  ++pinned_allocs;
  void* p = std::malloc(static_cast<size_t>(bytes));
  if (!p) return Status(Code::out_of_memory, "host out of memory");
  return p;
}

void FakeDriver::pinned_free(void* p) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  std::free(p);
}

Result<Stream> FakeDriver::stream_create() {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  auto* s = reinterpret_cast<Stream>(static_cast<uintptr_t>(0x1000 + next_handle_++));
  queues_[s].device = current_;
  return s;
}

void FakeDriver::stream_destroy(Stream s) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  queues_.erase(s);
}

Status FakeDriver::run_until(Queue& q, size_t end) {
  while (q.done < end) {
    Status s = q.work[q.done++]();
    if (!s.ok()) {
      if (s.code() == Code::device_lost) lost_[q.device] = s.message();
      return s;
    }
  }
  return sticky();
}

Status FakeDriver::stream_sync(Stream s) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  Queue* qp = queue(s);
  if (!qp) return Status(Code::invalid_argument, "cudaStreamSynchronize: invalid stream (fake)");
  Queue& q = *qp;
  Status st = run_until(q, q.work.size());
  if (st.ok() && fail_next_sync) {
    st = *fail_next_sync;
    fail_next_sync.reset();
    if (st.code() == Code::device_lost) lost_[q.device] = st.message();
  }
  return st;
}

Result<Event> FakeDriver::event_create() {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  auto* e = reinterpret_cast<Event>(static_cast<uintptr_t>(0x100000 + next_handle_++));
  events_[e] = {nullptr, 0};
  return e;
}

void FakeDriver::event_destroy(Event e) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  events_.erase(e);
  stamps_.erase(e);
}

Status FakeDriver::event_record(Event e, Stream s) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  if (auto t = stamps_.find(e); t != stamps_.end()) {
    t->second = -1;
    DUET_TRY(enqueue(s, [this, e] {
      stamps_[e] =
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
              .count();
      return Status{};
    }));
  }
  Queue* q = queue(s);
  if (!q) return Status(Code::invalid_argument, "cudaEventRecord: invalid resource handle (fake)");
  events_.at(e) = {s, q->work.size()};
  return {};
}

Result<Event> FakeDriver::timing_event_create() {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_ASSIGN_OR_RETURN(Event e, event_create());
  stamps_[e] = -1;
  return e;
}

Result<float> FakeDriver::event_elapsed_ms(Event start, Event end) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  auto a = stamps_.find(start), b = stamps_.find(end);
  if (a == stamps_.end() || b == stamps_.end())
    return Status(Code::invalid_argument, "cudaEventElapsedTime: an event without timing");
  if (a->second < 0 || b->second < 0)
    return Status(Code::internal, "cudaEventElapsedTime: cudaErrorNotReady");
  return static_cast<float>((b->second - a->second) * 1e3);
}

Status FakeDriver::event_sync(Event e) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  auto [s, pos] = events_.at(e);
  if (!s) return {};
  return run_until(queues_.at(s), pos);
}

Result<bool> FakeDriver::event_done(Event e) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  auto it = events_.find(e);
  if (it == events_.end()) return Status(Code::invalid_argument, "cudaEventQuery: no such event");
  auto [s, pos] = it->second;
  return !s || queues_.at(s).done >= pos;
}

FakeDriver::Queue* FakeDriver::queue(Stream s) {
  auto it = queues_.find(s);
  if (it != queues_.end()) return &it->second;
  const auto handle = reinterpret_cast<uintptr_t>(s);
  if (handle != 1 && handle != 2) return nullptr;  // cudaStreamLegacy, cudaStreamPerThread
  Queue& q = queues_[s];
  q.device = current_;
  return &q;
}

Status FakeDriver::enqueue(Stream s, std::function<Status()> f) {
  DUET_TRY(sticky());
  if (auto c = capturing_.find(s); c != capturing_.end()) {
    c->second.push_back(std::move(f));
    return {};
  }
  Queue* q = queue(s);
  if (!q) return Status(Code::invalid_argument, "invalid stream handle (fake)");
  q->work.push_back(std::move(f));
  return {};
}

Status FakeDriver::capture_begin(Stream s) {
  DUET_TRY(sticky());
  if (!graphs_work)
    return Status(Code::unsupported, "cudaStreamBeginCapture: not supported (fake)");
  if (capturing_.count(s))
    return Status(Code::invalid_argument, "cudaStreamBeginCapture: the stream is capturing");
  capturing_[s];
  return {};
}

Result<void*> FakeDriver::capture_end(Stream s) {
  auto c = capturing_.find(s);
  if (c == capturing_.end())
    return Status(Code::invalid_argument, "cudaStreamEndCapture: the stream is not capturing");
  void* g = reinterpret_cast<void*>(static_cast<uintptr_t>(0x200000 + next_handle_++));
  graphs_[g] = std::move(c->second);
  capturing_.erase(c);
  ++graphs_alive;
  return g;
}

Status FakeDriver::graph_launch(void* graph, Stream s) {
  DUET_TRY(sticky());
  auto g = graphs_.find(graph);
  if (g == graphs_.end()) return Status(Code::invalid_argument, "cudaGraphLaunch: no such graph");
  ++graphs_launched;
  for (const auto& f : g->second) DUET_TRY(enqueue(s, f));
  return {};
}

void FakeDriver::graph_destroy(void* graph) {
  if (graphs_.erase(graph)) --graphs_alive;
}

Status FakeDriver::copy_to_device(void* dst, const void* src, uint64_t bytes, Stream s) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  ++copies_to_device;
  bytes_to_device += bytes;
  return enqueue(s, [=] {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return Status{};
  });
}

Status FakeDriver::copy_to_host(void* dst, const void* src, uint64_t bytes, Stream s) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  ++copies_to_host;
  bytes_to_host += bytes;
  return enqueue(s, [=] {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return Status{};
  });
}

Status FakeDriver::launch(Tier tier, const OpDesc& op, std::span<const kernels::View> in,
                          const kernels::View& out, const kernels::Launch& l) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  launches.push_back({tier, op.kind, l.config, l.workspace, l.sm, l.stream, l.programmatic});
  if (fail_next_launch && launches_before_failure > 0) {
    --launches_before_failure;
  } else if (fail_next_launch) {
    Status s = *fail_next_launch;
    fail_next_launch.reset();
    if (s.code() == Code::device_lost) lost_[current_] = s.message();
    return s;
  }
  if (!emulate_kernels) return {};
  std::vector<kernels::View> inputs(in.begin(), in.end());
  return enqueue(static_cast<Stream>(l.stream), [=] {
    Status s = kernels::emu::launch(tier, op, inputs, out, l);
    // A GPU kernel reports data errors (an embedding id out of range) only in its workspace,
    // which the device copies back and judges; the emulator's own verdict on them is dropped.
    if (!s.ok() && kernels::error_bytes(op) > 0 && s.code() == Code::invalid_argument)
      return Status{};
    return s;
  });
}

Status FakeDriver::launch_group(Tier tier, std::span<const kernels::GroupMember> members,
                                const kernels::Launch& l, const kernels::GroupMember* norm,
                                const kernels::GroupMember* add) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  if (members.empty()) return Status(Code::internal, "fake driver: an empty group");
  launches.push_back({tier, members[0].op->kind, l.config, l.workspace, l.sm, l.stream});
  group_launches.push_back(members.size());
  if (norm && norm->op->kind == OpKind::rmsnorm) ++fused_norms;
  if (norm && norm->op->kind != OpKind::rmsnorm) ++fused_silus;
  if (add) ++fused_adds;
  if (fail_next_launch && launches_before_failure > 0) {
    --launches_before_failure;
  } else if (fail_next_launch) {
    Status s = *fail_next_launch;
    fail_next_launch.reset();
    if (s.code() == Code::device_lost) lost_[current_] = s.message();
    return s;
  }
  if (!emulate_kernels) return {};
  // Copies of what the members point at, for the work queued.
  struct Member {
    OpDesc op;
    std::vector<kernels::View> inputs;
    kernels::View output;
  };
  auto held = std::make_shared<std::vector<Member>>();
  for (const kernels::GroupMember& m : members)
    held->push_back(
        {*m.op, std::vector<kernels::View>(m.inputs.begin(), m.inputs.end()), m.output});
  // After the members: the norm, then the add.
  for (const kernels::GroupMember* e : {norm, add})
    if (e)
      held->push_back(
          {*e->op, std::vector<kernels::View>(e->inputs.begin(), e->inputs.end()), e->output});
  const size_t count = members.size();
  const bool has_norm = norm != nullptr, has_add = add != nullptr;
  return enqueue(static_cast<Stream>(l.stream), [=] {
    std::vector<kernels::GroupMember> ms;
    for (size_t i = 0; i < count; ++i)
      ms.push_back({&(*held)[i].op, (*held)[i].inputs, (*held)[i].output});
    auto member = [&](size_t i) {
      return kernels::GroupMember{&(*held)[i].op, (*held)[i].inputs, (*held)[i].output};
    };
    const kernels::GroupMember nm = has_norm ? member(count) : kernels::GroupMember{};
    const kernels::GroupMember am =
        has_add ? member(count + (has_norm ? 1 : 0)) : kernels::GroupMember{};
    return kernels::emu::launch_group(tier, ms, l, has_norm ? &nm : nullptr,
                                      has_add ? &am : nullptr);
  });
}

Status FakeDriver::launch_rope_write(std::span<const kernels::FusedOp> ops,
                                     const kernels::Launch& l) {
  const std::lock_guard<std::recursive_mutex> g(mu_);
  DUET_TRY(sticky());
  if (ops.empty()) return Status(Code::internal, "fake driver: an empty rope_write");
  launches.push_back({Tier::generic, ops[0].op->kind, l.config, l.workspace, l.sm, l.stream});
  rope_writes.push_back(ops.size());
  if (fail_next_launch) {
    Status s = *fail_next_launch;
    fail_next_launch.reset();
    if (s.code() == Code::device_lost) lost_[current_] = s.message();
    return s;
  }
  if (!emulate_kernels) return {};
  struct Op {
    OpDesc op;
    std::vector<kernels::View> inputs;
    kernels::View output;
    unsigned long long* error;
  };
  auto held = std::make_shared<std::vector<Op>>();
  for (const kernels::FusedOp& o : ops)
    held->push_back(
        {*o.op, std::vector<kernels::View>(o.inputs.begin(), o.inputs.end()), o.output, o.error});
  return enqueue(static_cast<Stream>(l.stream), [=] {
    std::vector<kernels::FusedOp> os;
    for (const Op& o : *held) os.push_back({&o.op, o.inputs, o.output, o.error});
    return kernels::emu::launch_rope_write(os, l);
  });
}

Status FakeDriver::gemm(const GemmCall& g, const void* a, const void* b, void* d, Stream s,
                        void* workspace, uint64_t workspace_bytes) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  DUET_TRY(sticky());
  gemms.push_back(g);
  gemm_workspaces.push_back(workspace ? workspace_bytes : 0);
  return enqueue(s, [=] {
    host_gemm(g, a, b, d);
    return Status{};
  });
}

}  // namespace duet::cuda::testing
