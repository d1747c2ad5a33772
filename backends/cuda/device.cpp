#include "device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "duet/internal/env.h"
#include "duet/internal/log.h"
#include "duet/kernels/select.h"
#include "qgemm.h"

namespace duet::cuda {

namespace {

std::string human_bytes(uint64_t bytes) {
  char b[48];
  if (bytes >= (1ull << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  else
    std::snprintf(b, sizeof b, "%llu bytes", static_cast<unsigned long long>(bytes));
  return b;
}

// What buffers share with their device: the allocator outlives the device while buffers live.
struct Shared {
  std::shared_ptr<Driver> driver;
  int ordinal = 0;
  CachingAllocator allocator;

  Shared(std::shared_ptr<Driver> d, int o, uint64_t cache_limit)
      : driver(std::move(d)),
        ordinal(o),
        allocator(MemorySource{[this](uint64_t n) -> Result<void*> {
                                 DUET_TRY(driver->use(ordinal));
                                 return driver->device_alloc(n);
                               },
                               [this](void* p) {
                                 if (driver->use(ordinal).ok()) driver->device_free(p);
                               }},
                  cache_limit) {}
  ~Shared() { reclaim(true); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;

  // A block released while work another library queued on `queues` may still use it
  // (Device::lend): an event is recorded on each queue now, and the block goes back to the
  // allocator when they have all completed (reclaim). A queue an event cannot be recorded on
  // (a handle the driver refuses) holds the block back until the device closes.
  void hold_back(CachingAllocator::Block block, const std::vector<Stream>& queues) {
    const KeepCurrent keep(*driver);  // the thread may be another library's (a DLPack deleter)
    Held h{block, {}, false};
    if (!driver->use(ordinal).ok()) {  // lost: its memory is gone, nothing runs on it
      allocator.release(block);
      return;
    }
    for (Stream q : queues) {
      Result<Event> e = driver->event_create();
      Status st = e.ok() ? driver->event_record(*e, q) : e.status();
      if (!st.ok()) {
        if (e.ok()) driver->event_destroy(*e);
        log().warn(
            "CUDA device {}: no event on stream {:#x} ({}); the memory lent to it is kept "
            "until the device closes",
            ordinal, reinterpret_cast<uintptr_t>(q), st.message());
        h.until_close = true;
        continue;
      }
      h.events.push_back(*e);
    }
    {
      std::lock_guard<std::mutex> g(held_mu);
      held.push_back(std::move(h));
    }
    reclaim(false);
  }

  // Hands back to the allocator the blocks whose queues are done; `wait` waits for all of them
  // (the device closing, or out of memory). Never waits under the lock.
  void reclaim(bool wait) {
    if (held_count() == 0) return;  // the common case, at every allocation: no driver call
    const KeepCurrent keep(*driver);
    std::vector<Held> ready;
    {
      std::lock_guard<std::mutex> g(held_mu);
      if (held.empty()) return;
      if (wait) {
        ready.swap(held);
      } else {
        std::vector<Held> still;
        for (Held& h : held) (done(h) ? ready : still).push_back(std::move(h));
        held.swap(still);
      }
    }
    const bool current = driver->use(ordinal).ok();
    for (Held& h : ready) {
      for (Event e : h.events) {
        if (wait && current) (void)driver->event_sync(e);
        driver->event_destroy(e);
      }
      allocator.release(h.block);
    }
  }

  size_t held_count() const {
    std::lock_guard<std::mutex> g(held_mu);
    return held.size();
  }

 private:
  // Puts the calling thread's current CUDA device back as it was (PyTorch's current device on
  // PyTorch's thread stays its own).
  struct KeepCurrent {
    explicit KeepCurrent(Driver& d) : driver(d), device(d.current_device()) {}
    ~KeepCurrent() {
      if (device >= 0 && driver.current_device() != device) (void)driver.use(device);
    }
    KeepCurrent(const KeepCurrent&) = delete;
    KeepCurrent& operator=(const KeepCurrent&) = delete;
    Driver& driver;
    int device;
  };
  struct Held {
    CachingAllocator::Block block;
    std::vector<Event> events;
    bool until_close = false;
  };
  // Whether every queue's work recorded before the block's release has completed (a driver error,
  // a lost device, counts as done: nothing more runs there).
  bool done(const Held& h) {
    if (h.until_close) return false;
    if (!driver->use(ordinal).ok()) return true;
    for (Event e : h.events) {
      Result<bool> r = driver->event_done(e);
      if (r.ok() && !*r) return false;
    }
    return true;
  }

  mutable std::mutex held_mu;
  std::vector<Held> held;
};

// A block of the device's allocator, or memory another library allocated on the device
// (Device::adopt), which the buffer only keeps alive through `keep_`.
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(std::shared_ptr<Shared> shared, CachingAllocator::Block block, uint64_t size)
      : shared_(std::move(shared)), block_(block), size_(size) {}
  CudaBuffer(std::shared_ptr<Shared> shared, void* adopted, uint64_t size,
             std::shared_ptr<const void> keep)
      : shared_(std::move(shared)), size_(size), keep_(std::move(keep)) {
    block_.ptr = adopted;
  }
  ~CudaBuffer() override {
    if (keep_) return;  // another library's memory: `keep_` goes, and with it the memory
    if (lent_.empty())
      shared_->allocator.release(block_);
    else
      shared_->hold_back(block_, lent_);
  }
  // Work queued on `queue` by another library may use the memory (Device::lend).
  void lend(Stream queue) {
    if (keep_) return;  // not duet's to reuse
    if (std::find(lent_.begin(), lent_.end(), queue) == lent_.end()) lent_.push_back(queue);
  }
  uint64_t size() const override { return size_; }
  uint64_t device_address() const override { return reinterpret_cast<uintptr_t>(block_.ptr); }
  std::byte* ptr() const { return static_cast<std::byte*>(block_.ptr); }
  const Shared* owner() const { return shared_.get(); }

 private:
  std::shared_ptr<Shared> shared_;
  CachingAllocator::Block block_;
  uint64_t size_;
  std::shared_ptr<const void> keep_;
  std::vector<Stream> lent_;
};

// A workspace block, released when the last holder (the device, or a recording that captured
// its address) lets go.
struct Workspace {
  Workspace(std::shared_ptr<Shared> s, CachingAllocator::Block b)
      : shared(std::move(s)), block(b) {}
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { shared->allocator.release(block); }
  std::shared_ptr<Shared> shared;
  CachingAllocator::Block block;
};

// A recording (CUDA graph) and what it needs while it may be replayed: the workspace it captured,
// the error words of its ops that check run-time values (one device block, so that a replay
// copies them back in one copy at its end and presets them in another, rather than a reset
// kernel and a copy for each op: 160 of each in an 8B decode step), and pinned host memory they
// are copied into on every replay (the first half) and preset from (the second, all "no error").
struct Recording {
  void* graph = nullptr;
  std::shared_ptr<Workspace> workspace;
  void* checks_host = nullptr;                      // pinned, kCheckArenaBytes
  std::vector<std::pair<OpDesc, uint64_t>> checks;  // op, offset into checks_host
  CachingAllocator::Block words;                    // kRecordWords error words on the device
  size_t words_used = 0;
  uint64_t ops = 0, launches_at = 0;  // ops recorded; the device's launches_ at the start
};

constexpr uint64_t kCheckArenaBytes = 64 << 10;
constexpr size_t kRecordWords = kCheckArenaBytes / 2 / sizeof(unsigned long long);

struct Slot {
  void* host = nullptr;
  Event event = nullptr;
  bool pinned = false;
  bool pending = false;  // a copy from/to `host` may still be in flight
};

class Device final : public CudaDevice {
 public:
  Device(std::shared_ptr<Driver> driver, const DeviceProps& props, DeviceCaps caps,
         const BuildArchs& archs, const DeviceOptions& options)
      : id_(options.id_prefix + ":" + std::to_string(props.ordinal)),
        props_(props),
        caps_(std::move(caps)),
        rules_(make_rules(archs)),
        image_(check_image(archs, props.major, props.minor)),
        options_(options),
        shared_(std::make_shared<Shared>(std::move(driver), props.ordinal, options.cache_limit)) {
    options_.staging_slots = std::max(options_.staging_slots, 1);
    options_.staging_slot_bytes = std::max<uint64_t>(options_.staging_slot_bytes, 4096);
  }

  ~Device() override {
    // A lost device's calls fail; releasing is still attempted (host memory at least returns).
    Driver& d = drv();
    for (auto& [id, r] : recordings_) free_recording(r);
    recordings_.clear();
    workspace_.reset();
    if (!started_) return;
    if (d.use(ordinal()).ok() && lost_.empty()) (void)d.stream_sync(stream_);
    shared_->reclaim(true);  // waits for the work other libraries queued on lent memory
    shared_->allocator.release(error_block_);
    if (error_host_) d.pinned_free(error_host_);
    for (Event e : marks_) d.event_destroy(e);
    for (Slot& s : slots_) {
      if (s.event) d.event_destroy(s.event);
      if (s.pinned)
        d.pinned_free(s.host);
      else
        std::free(s.host);
    }
    if (stream_) d.stream_destroy(stream_);
  }

  const std::string& id() const override { return id_; }
  const DeviceCaps& caps() const override { return caps_; }
  const BackendRules& rules() const override { return *rules_; }
  AllocatorStats memory_stats() const override { return shared_->allocator.stats(); }
  void empty_cache() override {
    // Held mat-vecs may read blocks the cache would return to the driver.
    if (!flush().ok()) return;
    shared_->reclaim(false);
    shared_->allocator.empty_cache();
  }
  size_t held_back() const override { return shared_->held_count(); }
  const std::string& lost_reason() const override { return lost_; }

  Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) override {
    DUET_TRY(alive());
    DUET_TRY(flush());  // an allocation may empty the cache of blocks held mat-vecs read
    shared_->reclaim(false);
    Result<CachingAllocator::Block> b = shared_->allocator.allocate(bytes);
    if (!b.ok() && b.status().code() == Code::out_of_memory && shared_->held_count() > 0) {
      shared_->reclaim(true);  // memory other libraries' queues still use: wait for it, once
      b = shared_->allocator.allocate(bytes);
    }
    if (!b.ok()) return memory_error(b.status(), Err(b.status().code()).device(id_), bytes);
    return std::shared_ptr<Buffer>(std::make_shared<CudaBuffer>(shared_, *b, bytes));
  }

  Result<std::shared_ptr<Buffer>> adopt(uint64_t address, uint64_t bytes,
                                        std::shared_ptr<const void> keep) override {
    DUET_TRY(alive());
    if (address == 0 || bytes == 0)
      return Err(Code::invalid_argument)
          .device(id_)
          .expected("device memory to use in place")
          .got(address == 0 ? "a null address" : "0 bytes");
    if (!keep) keep = std::make_shared<int>(0);  // marks the memory as not the allocator's
    return std::shared_ptr<Buffer>(std::make_shared<CudaBuffer>(
        shared_, reinterpret_cast<void*>(static_cast<uintptr_t>(address)), bytes, std::move(keep)));
  }

  Result<uint64_t> native_queue() override {
    DUET_TRY(alive());
    DUET_TRY(start());
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream_));
  }

  Status lend(Buffer& b, uint64_t queue) override {
    DUET_TRY(alive());
    auto* cb = dynamic_cast<CudaBuffer*>(&b);
    if (!cb || cb->owner() != shared_.get())
      return Err(Code::invalid_argument)
          .device(id_)
          .expected("a buffer of this device to lend")
          .got("one it does not own");
    if (queue == 0)
      return Err(Code::invalid_argument)
          .device(id_)
          .expected("the CUDA stream that uses the memory")
          .got("0, which names none");
    DUET_TRY(start());
    const auto q = reinterpret_cast<Stream>(static_cast<uintptr_t>(queue));
    if (q != stream_) cb->lend(q);  // duet's own stream: its work runs in order already
    return {};
  }

  bool owns(const Buffer& b) const override {
    const auto* cb = dynamic_cast<const CudaBuffer*>(&b);
    return cb && cb->owner() == shared_.get();
  }

  // Arguments checked by Device::write, read and execute (core/src/device.cpp).
  Status write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    DUET_TRY(alive());
    auto* b = static_cast<CudaBuffer*>(&dst);
    DUET_TRY(start());
    DUET_TRY(flush());
    const auto* s = static_cast<const std::byte*>(src);
    std::byte* d = b->ptr() + offset;
    while (bytes > 0) {
      const uint64_t n = std::min(bytes, options_.staging_slot_bytes);
      Slot& slot = next_slot();
      DUET_TRY(settle(slot));
      std::memcpy(slot.host, s, static_cast<size_t>(n));
      DUET_TRY(check(drv().copy_to_device(d, slot.host, n, stream_)));
      DUET_TRY(check(drv().event_record(slot.event, stream_)));
      slot.pending = true;
      s += n;
      d += n;
      bytes -= n;
    }
    return {};
  }

  Status read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) override {
    DUET_TRY(alive());
    auto* b = static_cast<CudaBuffer*>(&src);
    DUET_TRY(start());
    DUET_TRY(flush());
    struct Chunk {
      Slot* slot;
      std::byte* dst;
      uint64_t n;
    };
    std::deque<Chunk> in_flight;  // chunks queued on the stream, oldest first
    const std::byte* s = b->ptr() + offset;
    auto* d = static_cast<std::byte*>(dst);
    while (bytes > 0 || !in_flight.empty()) {
      while (bytes > 0 && in_flight.size() < slots_.size()) {
        const uint64_t n = std::min(bytes, options_.staging_slot_bytes);
        Slot& slot = next_slot();
        DUET_TRY(settle(slot));
        DUET_TRY(check(drv().copy_to_host(slot.host, s, n, stream_)));
        DUET_TRY(check(drv().event_record(slot.event, stream_)));
        slot.pending = true;
        in_flight.push_back({&slot, d, n});
        s += n;
        d += n;
        bytes -= n;
      }
      Chunk c = in_flight.front();
      in_flight.pop_front();
      DUET_TRY(settle(*c.slot));
      std::memcpy(c.dst, c.slot->host, static_cast<size_t>(c.n));
    }
    return {};
  }

  Status execute_checked(const PlannedOp& p, std::span<const TensorRef> inputs,
                         const TensorRef& output) override {
    bool held = false;
    if (recording_) ++recording_->ops;
    Status s = run_op(p, inputs, output, held);
    // Timing: an event after every op (failed or not, so that events and ops stay in step); a
    // held mat-vec's comes when its group runs (flush).
    if (timing_ && lost_.empty() && !held) {
      Status e = record_mark();
      if (s.ok()) s = e;
    }
    return s;
  }

  Status synchronize() override {
    DUET_TRY(alive());
    if (!started_) return {};
    DUET_TRY(check(drv().use(ordinal())));
    const Status flushed = flush();
    Status copied;
    if (error_words_used_ > 0)
      copied = check(drv().copy_to_host(error_host_, error_block_.ptr,
                                        error_words_used_ * sizeof(unsigned long long), stream_));
    error_words_used_ = 0;
    const Status synced = check(drv().stream_sync(stream_));
    std::vector<DataCheck> checks = std::move(data_checks_);
    data_checks_.clear();
    std::vector<std::pair<const OpDesc*, const std::byte*>> replayed = std::move(replayed_checks_);
    replayed_checks_.clear();
    DUET_TRY(synced);
    DUET_TRY(flushed);
    DUET_TRY(copied);
    if (groups_ > 0) {
      log().debug(
          "{}: {} mat-vecs ran in {} grouped launches since the last synchronize, {} of them "
          "after an rmsnorm that quantized their activations, {} of those norms adding the "
          "residual themselves, {} after a silu_mul that quantized them",
          id_, grouped_, groups_, fused_norms_, fused_adds_, fused_silus_);
      groups_ = grouped_ = fused_norms_ = fused_adds_ = fused_silus_ = 0;
    }
    if (rope_writes_ > 0) {
      log().debug("{}: {} ropes wrote their KV-cache rows themselves since the last synchronize",
                  id_, rope_writes_);
      rope_writes_ = 0;
    }
    for (Slot& s : slots_) s.pending = false;
    shared_->reclaim(false);
    for (const DataCheck& c : checks) {
      const void* bytes = c.word >= 0 ? static_cast<const void*>(error_host_ + c.word)
                                      : static_cast<const void*>(c.bytes.data());
      DUET_TRY(kernels::launch_result(c.op, bytes, id_));
    }
    for (const auto& [op, bytes] : replayed) DUET_TRY(kernels::launch_result(*op, bytes, id_));
    return {};
  }

  // Recordings: CUDA graphs captured from the device's stream.
  Status begin_recording() override {
    DUET_TRY(alive());
    auto no = [&](const std::string& why) {
      return Err(Code::unsupported).device(id_).note("recording is not supported: " + why);
    };
    if (!options_.graphs) return no("CUDA graphs are off (DUET_CUDA_GRAPHS=0)");
    if (timing_) return no("kernel timing is on");
    if (recording_) return no("a recording is already being made");
    DUET_TRY(start());
    DUET_TRY(flush());
    Recording r;
    Result<void*> host = drv().pinned_alloc(kCheckArenaBytes);
    if (!host.ok()) return no("no pinned host memory for the ops' error bytes");
    r.checks_host = *host;
    r.workspace = workspace_;
    auto* preset = static_cast<unsigned long long*>(r.checks_host) + kRecordWords;
    std::fill_n(preset, kRecordWords, ~0ull);
    Result<CachingAllocator::Block> words =
        shared_->allocator.allocate(kRecordWords * sizeof(unsigned long long));
    if (!words.ok()) {
      drv().pinned_free(r.checks_host);
      return no("no device memory for the recorded ops' error words");
    }
    r.words = *words;
    // "No error" in every word before the first replay; each replay presets the words it used
    // again at its end.
    Status preset_copied = check(drv().copy_to_device(
        r.words.ptr, preset, kRecordWords * sizeof(unsigned long long), stream_));
    Status begun = preset_copied.ok() ? check(drv().capture_begin(stream_)) : preset_copied;
    if (!begun.ok()) {
      shared_->allocator.release(r.words);
      drv().pinned_free(r.checks_host);
      if (begun.code() == Code::unsupported) return no(begun.message());
      return Err(begun.code()).device(id_).note("beginning a CUDA graph: " + begun.message());
    }
    r.launches_at = launches_;
    recording_ = std::make_unique<Recording>(std::move(r));
    return {};
  }

  Result<int> end_recording() override {
    if (!recording_) return duet::Device::end_recording();
    if (!flush().ok()) recording_failed_ = true;
    if (const size_t n = recording_->words_used; n > 0 && !recording_failed_) {
      Recording& r = *recording_;
      const uint64_t bytes = n * sizeof(unsigned long long);
      Status copied = check(drv().copy_to_host(r.checks_host, r.words.ptr, bytes, stream_));
      if (copied.ok())
        copied = check(drv().copy_to_device(
            r.words.ptr, static_cast<unsigned long long*>(r.checks_host) + kRecordWords, bytes,
            stream_));
      if (!copied.ok()) recording_failed_ = true;
    }
    std::unique_ptr<Recording> r = std::move(recording_);
    Result<void*> graph = drv().capture_end(stream_);
    if (!graph.ok()) (void)check(graph.status());
    if (!graph.ok() || recording_failed_) {
      recording_failed_ = false;
      if (graph.ok()) drv().graph_destroy(*graph);
      free_recording(*r);
      if (!graph.ok())
        return Err(graph.status().code())
            .device(id_)
            .note("capturing a CUDA graph: " + graph.status().message());
      return Err(Code::unsupported).device(id_).note("an op could not be recorded");
    }
    r->graph = *graph;
    const int id = next_recording_++;
    // What the graph launches: ops fused by this device (grouped mat-vecs, norms quantizing their
    // activations or adding the residual, ropes writing the cache) take fewer launches than ops
    // (an int_dot mat-vec alone or a split attention is one launch of two kernels).
    log().debug("{}: recording {}: {} ops in {} launches", id_, id, r->ops,
                launches_ - r->launches_at);
    recordings_.emplace(id, std::move(*r));
    return id;
  }

  Status replay(int id) override {
    DUET_TRY(alive());
    auto it = recordings_.find(id);
    if (it == recordings_.end()) return duet::Device::replay(id);
    DUET_TRY(start());
    DUET_TRY(flush());
    const Recording& r = it->second;
    DUET_TRY(check(drv().graph_launch(r.graph, stream_)));
    for (const auto& [op, at] : r.checks)
      replayed_checks_.emplace_back(&op, static_cast<const std::byte*>(r.checks_host) + at);
    return {};
  }

  void release_recording(int id) override {
    auto it = recordings_.find(id);
    if (it == recordings_.end()) return;
    (void)flush();
    // Queued replays read the graph's error bytes: let them finish first.
    if (started_ && lost_.empty() && drv().use(ordinal()).ok()) (void)drv().stream_sync(stream_);
    replayed_checks_.clear();
    free_recording(it->second);
    recordings_.erase(it);
  }

  // Kernel timing with CUDA events on the device's stream: one at the session's start and one
  // after each op; an op's span runs from the event before it to its own (cudaEventElapsedTime).
  Status begin_kernel_timing() override {
    DUET_TRY(alive());
    DUET_TRY(start());
    DUET_TRY(flush());
    marks_used_ = 0;
    timing_ = true;
    Status s = record_mark();
    if (!s.ok()) timing_ = false;
    return s;
  }

  Result<std::vector<KernelSpan>> end_kernel_timing() override {
    if (!timing_) return duet::Device::end_kernel_timing();
    const Status flushed = flush();  // its members' events, while timing is on
    timing_ = false;
    DUET_TRY(flushed);
    DUET_TRY(synchronize());
    std::vector<KernelSpan> spans;
    if (marks_used_ == 0) return spans;
    double previous = 0;
    for (size_t k = 1; k < marks_used_; ++k) {
      Result<float> ms = drv().event_elapsed_ms(marks_[0], marks_[k]);
      if (!ms.ok()) return check(ms.status());
      const double at = std::max(previous, static_cast<double>(*ms) * 1e-3);
      spans.push_back({previous, at, at - previous});
      previous = at;
    }
    return spans;
  }

 private:
  Status run_op(const PlannedOp& p, std::span<const TensorRef> inputs, const TensorRef& output,
                bool& held) {
    const OpDesc& op = p.op;
    const KernelChoice& choice = p.choice;
    auto err = [&](Code c) { return Err(c).op(op_name(op.kind), op.name).device(id_); };
    if (!lost_.empty()) return err(Code::device_lost).note(lost_note());
    auto base = [](const TensorRef& r) { return static_cast<CudaBuffer*>(r.buffer)->ptr(); };
    std::vector<kernels::View> in;
    for (const TensorRef& r : inputs) in.push_back(kernels::make_view(r.desc, base(r)));
    const kernels::View out = kernels::make_view(output.desc, base(output));
    if (!image_.ok()) return unsupported(*this, op, image_.refusal());

    DUET_TRY(start());
    const Tier tier = choice.tier;
    // A rope is held until the next op says whether it writes the rope's output into a cache,
    // and that write until the next says whether it writes V (flush).
    if (options_.fuse_rope_write && tier == Tier::generic) {
      if (op.kind == OpKind::rope && op.output.dtype == DType::f32) {
        DUET_TRY(flush());
        rope_ = Held{p, std::move(in), out};
        held = true;
        return {};
      }
      if (op.kind == OpKind::write_slice && rope_ && writes_.size() < 2) {
        const kernels::GroupMember w{&op, in, out};
        if (writes_.empty() ? kernels::rope_feeds_write({&rope_->op.op, rope_->in, rope_->out}, w)
                            : kernels::joins_rope_write(w)) {
          writes_.push_back(Held{p, std::move(in), out});
          held = true;
          return {};
        }
      }
    }
    // A residual add of decode rows is held until the next op says whether it is an rmsnorm of
    // its sum (which then adds in its own kernel, when it fuses with the mat-vecs after it:
    // flush). Only rows such a norm could fuse with are held: f32, no broadcast, a multiple of
    // 32 wide, at most a mat-vec group's rows.
    if (options_.fuse_add_norm && options_.fuse_norm_quant && tier == Tier::generic &&
        op.kind == OpKind::add && in.size() == 2 && may_fold_add(op)) {
      DUET_TRY(flush());
      add_ = Held{p, std::move(in), out};
      held = true;
      return {};
    }
    // A silu_mul is held as an rmsnorm is: when the next op is an int_dot mat-vec of its output
    // (a decode step's down projection), its kernel quantizes the mat-vec's activations.
    if (options_.fuse_silu_quant && tier == Tier::generic && op.kind == OpKind::silu_mul &&
        op.output.dtype == DType::f32) {
      DUET_TRY(flush());
      norm_ = Held{p, std::move(in), out};
      held = true;
      return {};
    }
    // An rmsnorm is held until the next op says whether it is a mat-vec of its output (flush),
    // with the add before it when that add's sum is its input.
    if (options_.fuse_norm_quant && tier == Tier::generic && op.kind == OpKind::rmsnorm &&
        op.output.dtype == DType::f32) {
      std::optional<Held> add = std::move(add_);
      add_.reset();
      const bool joins =
          add && kernels::fuses_add({&add->op.op, add->in, add->out}, {&op, in, out});
      if (add && !joins) DUET_TRY(launch_held(*add));
      DUET_TRY(flush());
      if (joins) add_ = std::move(add);
      norm_ = Held{p, std::move(in), out};
      held = true;
      return {};
    }
    if (tier == Tier::int_dot && kernels::shares_activations(tier, op, in, op, in)) {
      // The held rmsnorm quantizes this mat-vec's activations, when they are its output.
      // (Or the held silu_mul.)
      const kernels::GroupMember nm =
          norm_ ? kernels::GroupMember{&norm_->op.op, norm_->in, norm_->out}
                : kernels::GroupMember{};
      const bool after_norm =
          norm_ && held_.empty() &&
          (norm_->op.op.kind == OpKind::rmsnorm ? kernels::fuses_norm(nm, op, in)
                                                : kernels::fuses_eltwise(nm, op, in));
      const bool joins = options_.group_matvecs && !held_.empty() && held_.size() < kMaxHeld &&
                         held_[0].op.choice.launch == choice.launch &&
                         kernels::shares_activations(tier, held_[0].op.op, held_[0].in, op, in);
      if (options_.group_matvecs || after_norm) {
        if (!joins && !after_norm) DUET_TRY(flush());
        held_.push_back(Held{p, std::move(in), out});
        held = true;
        return {};
      }
    }
    DUET_TRY(flush());
    if (tier == Tier::cublas)
      return quantized_input(op) ? run_dequant_gemm(op, in, out) : run_gemm(op, in, out);
    if (tier != Tier::generic && tier != Tier::tiled && tier != Tier::flash &&
        tier != Tier::pipelined && tier != Tier::int_dot && tier != Tier::int8_mma &&
        tier != Tier::wgmma)
      return err(Code::invalid_argument)
          .expected(
              "a CUDA kernel tier (cublas, generic, tiled, flash, pipelined, int_dot, "
              "int8_mma, wgmma)")
          .got(std::string(tier_name(tier)));
    return launch_one(op, choice, in, out);
  }

  // A launch of the device's own kernels on its stream (programmatic on sm_90+ when asked).
  kernels::Launch launch_of(const LaunchConfig& config, void* workspace) const {
    kernels::Launch l{config, stream_, workspace, props_.major * 10 + props_.minor};
    l.programmatic = options_.programmatic_launch && l.sm >= 90;
    return l;
  }

  // An op on one of the device's own kernel tiers, its views made.
  Status launch_one(const OpDesc& op, const KernelChoice& choice, std::span<const kernels::View> in,
                    const kernels::View& out) {
    auto err = [&](Code c) { return Err(c).op(op_name(op.kind), op.name).device(id_); };
    const Tier tier = choice.tier;
    const uint64_t ws = kernels::workspace_bytes(tier, op, choice.launch);
    DUET_ASSIGN_OR_RETURN(void* workspace, ensure_workspace(op, ws));
    kernels::Launch l = launch_of(choice.launch, workspace);
    const uint64_t eb = kernels::error_bytes(op);
    int word = -1;
    if (eb == sizeof(unsigned long long) && recording_) {
      Recording& r = *recording_;
      if (r.words_used == kRecordWords) return recording_error(op, "too many ops report errors");
      word = static_cast<int>(r.words_used++);
      l.error = static_cast<unsigned long long*>(r.words.ptr) + word;
    } else if (eb == sizeof(unsigned long long)) {
      DUET_ASSIGN_OR_RETURN(word, next_error_word());
      if (word >= 0) l.error = error_words() + word;
    }
    ++launches_;
    Status s = check(drv().launch(tier, op, in, out, l));
    if (!s.ok())
      return err(s.code()).note(std::string(tier_name(tier)) + " kernel: " + s.message());
    // Data errors (an embedding id out of range): in the batch's error words, copied back at
    // synchronize (while recording: in the recording's words, copied back into its pinned bytes
    // at the end of every replay and read at synchronize; the batch's words are preset by a copy
    // a graph cannot repeat); else at the start of the workspace, copied out on the stream
    // before a later op reuses the workspace. Judged at synchronize.
    if (word >= 0 && recording_) {
      recording_->checks.emplace_back(op, static_cast<uint64_t>(word) * sizeof(unsigned long long));
    } else if (word >= 0) {
      data_checks_.push_back(DataCheck{op, {}, word});
    } else if (eb > 0) {
      DataCheck c{op, std::vector<std::byte>(eb), -1};
      DUET_TRY(check(drv().copy_to_host(c.bytes.data(), workspace, eb, stream_)));
      data_checks_.push_back(std::move(c));
    }
    return {};
  }

  // The held rmsnorm and mat-vecs (DeviceOptions::fuse_norm_quant, group_matvecs), launched:
  // alone, or as one group (with the norm quantizing the group's activations). While timing,
  // each op gets an event after the group (the group's time is its first op's).
  Status flush() {
    if (rope_) return flush_rope();
    if (add_ && !norm_) {
      Held add = std::move(*add_);
      add_.reset();
      DUET_TRY(launch_held(add));
    }
    if (held_.empty() && !norm_) return {};
    std::optional<Held> norm = std::move(norm_);
    norm_.reset();
    std::optional<Held> add = std::move(add_);  // folded into the norm (fuses_add)
    add_.reset();
    std::vector<Held> g = std::move(held_);
    held_.clear();
    Status s;
    if (add && (g.empty() || !norm)) {  // no group for the norm: the add alone first
      s = launch_held(*add);
      add.reset();
    }
    if (s.ok() && g.empty()) {
      s = launch_one(norm->op.op, norm->op.choice, norm->in, norm->out);
    } else if (s.ok() && g.size() == 1 && !norm) {
      s = launch_one(g[0].op.op, g[0].op.choice, g[0].in, g[0].out);
    } else if (s.ok()) {
      const OpDesc& first = g[0].op.op;
      const KernelChoice& choice = g[0].op.choice;
      s = [&]() -> Status {
        const uint64_t ws = kernels::workspace_bytes(choice.tier, first, choice.launch);
        DUET_ASSIGN_OR_RETURN(void* workspace, ensure_workspace(first, ws));
        kernels::Launch l = launch_of(choice.launch, workspace);
        std::vector<kernels::GroupMember> members;
        for (const Held& h : g) members.push_back({&h.op.op, h.in, h.out});
        kernels::GroupMember nm, am;
        if (norm) nm = {&norm->op.op, norm->in, norm->out};
        if (add) am = {&add->op.op, add->in, add->out};
        ++launches_;
        Status st = check(
            drv().launch_group(choice.tier, members, l, norm ? &nm : nullptr, add ? &am : nullptr));
        if (!st.ok()) {
          std::string names = norm ? "'" + norm->op.op.name + "' (its norm)" : "";
          if (add) names += ", '" + add->op.op.name + "' (the add before it)";
          for (size_t i = 1; i < g.size(); ++i)
            names += (names.empty() ? "'" : ", '") + g[i].op.op.name + "'";
          return Err(st.code())
              .op(op_name(first.kind), first.name)
              .device(id_)
              .note(std::string(tier_name(choice.tier)) + " kernel, grouped with " + names + ": " +
                    st.message());
        }
        ++groups_;
        grouped_ += g.size();
        if (norm && norm->op.op.kind == OpKind::rmsnorm) ++fused_norms_;
        if (norm && norm->op.op.kind != OpKind::rmsnorm) ++fused_silus_;
        if (add) ++fused_adds_;
        return {};
      }();
    }
    if (timing_ && lost_.empty())
      for (size_t i = 0; i < g.size() + (norm ? 1 : 0) + (add ? 1 : 0); ++i) {
        Status e = record_mark();
        if (s.ok()) s = e;
      }
    return s;
  }

  // The held rope and the cache writes after it (DeviceOptions::fuse_rope_write): one kernel,
  // each op with its own error word; alone when no write joined it or no word is free. While
  // timing, each op gets an event after the kernel (its time is the rope's).
  Status flush_rope() {
    Held rope = std::move(*rope_);
    rope_.reset();
    std::vector<Held> w = std::move(writes_);
    writes_.clear();
    std::vector<const Held*> ops = {&rope};
    for (const Held& h : w) ops.push_back(&h);
    auto marks = [&](Status s) {
      for (size_t i = 0; timing_ && lost_.empty() && i < ops.size(); ++i) {
        Status e = record_mark();
        if (s.ok()) s = e;
      }
      return s;
    };
    auto apart = [&]() {
      Status s;
      for (const Held* h : ops) {
        Status o = launch_one(h->op.op, h->op.choice, h->in, h->out);
        if (s.ok()) s = o;
        if (timing_ && lost_.empty()) {
          Status e = record_mark();
          if (s.ok()) s = e;
        }
      }
      return s;
    };
    if (w.empty()) return apart();
    std::vector<int> words;  // -1: the op reports no errors
    for (const Held* h : ops) {
      if (kernels::error_bytes(h->op.op) == 0) {
        words.push_back(-1);
        continue;
      }
      Result<int> word = take_error_word(h->op.op);
      if (!word.ok()) return marks(word.status());
      if (*word < 0) return apart();
      words.push_back(*word);
    }
    std::vector<kernels::FusedOp> fused;
    for (size_t i = 0; i < ops.size(); ++i)
      fused.push_back({&ops[i]->op.op, ops[i]->in, ops[i]->out,
                       words[i] >= 0 ? error_word_at(words[i]) : nullptr});
    kernels::Launch l = launch_of(rope.op.choice.launch, nullptr);
    ++launches_;
    Status s = check(drv().launch_rope_write(fused, l));
    if (!s.ok())
      return marks(Err(s.code())
                       .op(op_name(rope.op.op.kind), rope.op.op.name)
                       .device(id_)
                       .note("generic kernel, with the cache write '" + w[0].op.op.name + "'" +
                             (w.size() > 1 ? " and '" + w[1].op.op.name + "'" : "") + ": " +
                             s.message()));
    for (size_t i = 0; i < ops.size(); ++i)
      if (words[i] >= 0) note_error_word(ops[i]->op.op, words[i]);
    ++rope_writes_;
    return marks({});
  }

  // A preset error word for an op that reports bad run-time values: the recording's while
  // recording, else the batch's; -1 when none is free (the op then uses its workspace).
  Result<int> take_error_word(const OpDesc& op) {
    if (recording_) {
      Recording& r = *recording_;
      if (r.words_used == kRecordWords) return recording_error(op, "too many ops report errors");
      return static_cast<int>(r.words_used++);
    }
    return next_error_word();
  }
  unsigned long long* error_word_at(int word) {
    return recording_ ? static_cast<unsigned long long*>(recording_->words.ptr) + word
                      : error_words() + word;
  }
  // After the launch: the word is judged at synchronize (Launch::error, launch_one).
  void note_error_word(const OpDesc& op, int word) {
    if (recording_)
      recording_->checks.emplace_back(op, static_cast<uint64_t>(word) * sizeof(unsigned long long));
    else
      data_checks_.push_back(DataCheck{op, {}, word});
  }

  // An op that cannot be recorded: the recording fails at its end.
  Status recording_error(const OpDesc& op, const std::string& why) {
    recording_failed_ = true;
    return Err(Code::unsupported)
        .op(op_name(op.kind), op.name)
        .device(id_)
        .note("cannot be recorded: " + why);
  }

  void free_recording(Recording& r) {
    if (r.graph) drv().graph_destroy(r.graph);
    if (r.words.ptr) shared_->allocator.release(r.words);
    if (r.checks_host) drv().pinned_free(r.checks_host);
    r = Recording();
  }

  // The next timing event (made once, kept for later sessions), recorded on the stream.
  Status record_mark() {
    if (marks_used_ == marks_.size()) {
      Result<Event> e = drv().timing_event_create();
      if (!e.ok()) return check(e.status());
      marks_.push_back(*e);
    }
    return check(drv().event_record(marks_[marks_used_++], stream_));
  }

  Driver& drv() const { return *shared_->driver; }
  int ordinal() const { return props_.ordinal; }

  std::string lost_note() const {
    return "device lost (" + lost_ +
           "); its memory and queued work are gone and CUDA cannot recover it in this process";
  }

  Status alive() const {
    if (lost_.empty()) return {};
    return Err(Code::device_lost).device(id_).note(lost_note());
  }

  // Marks the device lost on a sticky error; passes every status through.
  Status check(Status s) {
    if (s.code() == Code::device_lost && lost_.empty()) {
      lost_ = s.message();
      log().error("{} lost: {}", id_, lost_);
    }
    return s;
  }

  // Creates the stream and staging slots on first use (this makes the CUDA context).
  Status start() {
    DUET_TRY(check(drv().use(ordinal())));
    if (started_) return {};
    DUET_ASSIGN_OR_RETURN(stream_, drv().stream_create());
    for (int i = 0; i < options_.staging_slots; ++i) {
      Slot s;
      Result<void*> h = drv().pinned_alloc(options_.staging_slot_bytes);
      if (h.ok()) {
        s.host = *h;
        s.pinned = true;
      } else {
        log().warn("{}: pinned staging unavailable ({}); copies use pageable memory", id_,
                   h.status().message());
        s.host = std::malloc(static_cast<size_t>(options_.staging_slot_bytes));
        if (!s.host)
          return Err(Code::out_of_memory)
              .device(id_)
              .note("no host memory for a staging buffer of " +
                    human_bytes(options_.staging_slot_bytes));
      }
      Result<Event> e = drv().event_create();
      if (!e.ok()) {
        if (s.pinned)
          drv().pinned_free(s.host);
        else
          std::free(s.host);
        return check(e.status());
      }
      s.event = *e;
      slots_.push_back(s);
    }
    started_ = true;
    return {};
  }

  Slot& next_slot() {
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    return s;
  }

  // Waits until no copy uses the slot's host memory.
  Status settle(Slot& s) {
    if (!s.pending) return {};
    DUET_TRY(check(drv().event_sync(s.event)));
    s.pending = false;
    return {};
  }

  Status memory_error(const Status& s, Err e, uint64_t bytes) {
    if (s.code() != Code::out_of_memory) return check(s);
    std::string note = "out of memory allocating " + human_bytes(bytes);
    if (Result<MemoryInfo> m = drv().memory_info(); m.ok())
      note += " (device has " + human_bytes(m->free) + " free of " + human_bytes(m->total) + ")";
    note += "; duet: " + shared_->allocator.stats().str();
    return e.note(note);
  }

  // Scratch for the kernel, grown as needed. Work runs in order on one stream, so the previous
  // workspace may go back to the cache while earlier kernels still use it.
  // An op whose kernel reports data errors, and the bytes copied back for it (or its error word).
  struct DataCheck {
    OpDesc op;
    std::vector<std::byte> bytes;
    int word = -1;  // index into the batch's error words; -1: `bytes`
  };
  std::vector<DataCheck> data_checks_;

  // The error words of the checked ops (run-time positions, lengths, ids) queued since the last
  // synchronize: one word each in one device block, preset to "no error" by one copy when the
  // batch's first is taken and copied back by one copy at synchronize. (A word in the workspace
  // takes a reset launch and a copy into pageable memory, which waits for the GPU, per op: five
  // of each per layer of a decode step.) Pinned host memory, or none: then every op does that.
  static constexpr size_t kErrorWords = 1024;
  CachingAllocator::Block error_block_;
  unsigned long long* error_host_ = nullptr;
  bool error_words_unavailable_ = false;
  size_t error_words_used_ = 0;

  unsigned long long* error_words() const {
    return static_cast<unsigned long long*>(error_block_.ptr);
  }

  // The next error word of the batch, preset; -1 when there is none to give (the op then uses
  // its workspace).
  Result<int> next_error_word() {
    if (error_words_used_ == kErrorWords || error_words_unavailable_) return -1;
    if (!error_host_) {
      Result<void*> h = drv().pinned_alloc(kErrorWords * sizeof(unsigned long long));
      if (!h.ok()) {
        error_words_unavailable_ = true;
        return -1;
      }
      Result<CachingAllocator::Block> b =
          shared_->allocator.allocate(kErrorWords * sizeof(unsigned long long));
      if (!b.ok()) {
        drv().pinned_free(*h);
        return -1;  // short of memory now; tried again by the next op
      }
      error_host_ = static_cast<unsigned long long*>(*h);
      error_block_ = *b;
    }
    if (error_words_used_ == 0) {
      std::fill_n(error_host_, kErrorWords, ~0ull);
      DUET_TRY(check(drv().copy_to_device(error_block_.ptr, error_host_,
                                          kErrorWords * sizeof(unsigned long long), stream_)));
    }
    return static_cast<int>(error_words_used_++);
  }

  Result<void*> ensure_workspace(const OpDesc& op, uint64_t bytes) {
    if (bytes == 0) return static_cast<void*>(nullptr);
    if (!workspace_ || workspace_->block.size < bytes) {
      // A recording captures the workspace's address and may not allocate.
      if (recording_) return recording_error(op, "its workspace would have to grow");
      workspace_.reset();  // recordings that captured it keep it
      Result<CachingAllocator::Block> b = shared_->allocator.allocate(bytes);
      if (!b.ok())
        return memory_error(
            b.status(),
            Err(b.status().code()).op(op_name(op.kind), op.name).tensor("workspace").device(id_),
            bytes);
      workspace_ = std::make_shared<Workspace>(shared_, *b);
    }
    if (recording_) recording_->workspace = workspace_;
    return workspace_->block.ptr;
  }

  Status run_gemm(const OpDesc& op, std::span<const kernels::View> in, const kernels::View& out) {
    auto err = [&](Code c) { return Err(c).op(op_name(op.kind), op.name).device(id_); };
    Result<GemmCall> g = plan_gemm(op);
    if (!g.ok()) return g.status();
    const uint64_t ws_bytes = drv().gemm_workspace_bytes(props_);
    DUET_ASSIGN_OR_RETURN(void* ws, ensure_workspace(op, ws_bytes));
    ++launches_;
    Status s = check(drv().gemm(*g, in[static_cast<size_t>(g->a_input)].data,
                                in[static_cast<size_t>(g->b_input)].data, out.data, stream_, ws,
                                ws_bytes));
    if (!s.ok()) return err(s.code()).note("cuBLASLt: " + s.message());
    return {};
  }

  // A block-quantized weight through cuBLASLt (qgemm.h): K in chunks, each chunk of the weight
  // dequantized by the generic tier's cast into the workspace tile and multiplied in by one GEMM.
  Status run_dequant_gemm(const OpDesc& op, std::span<const kernels::View> in,
                          const kernels::View& out) {
    auto err = [&](Code c) { return Err(c).op(op_name(op.kind), op.name).device(id_); };
    Result<DequantGemm> plan =
        plan_dequant_gemm(op, options_.dequant_tile_bytes, drv().gemm_workspace_bytes(props_));
    if (!plan.ok()) return plan.status();
    const DequantGemm& d = *plan;
    DUET_ASSIGN_OR_RETURN(void* base, ensure_workspace(op, d.total));
    auto* ws = static_cast<std::byte*>(base);
    // A cast by the generic tier, with the launch configuration the kernels' selection gives it.
    auto cast = [&](const TensorDesc& from, const kernels::View& src, DType to,
                    void* dst) -> Status {
      OpAttrs a;
      a.to = to;
      DUET_ASSIGN_OR_RETURN(const OpDesc c, make_op(OpKind::cast, a, {from}, {}, op.name));
      for (const KernelChoice& k : kernels::choices(caps_, c))
        if (k.ok && k.tier == Tier::generic) {
          kernels::Launch l = launch_of(k.launch, nullptr);
          ++launches_;
          Status s = check(drv().launch(Tier::generic, c, std::span(&src, 1),
                                        kernels::make_view(c.output, dst), l));
          if (!s.ok()) return err(s.code()).note("dequantizing for cuBLASLt: " + s.message());
          return {};
        }
      return err(Code::unsupported).note("no generic cast kernel for " + from.str());
    };
    const std::byte* a = static_cast<const std::byte*>(in[0].data);
    if (d.cast_a) {
      DUET_TRY(cast(op.inputs[0], in[0], d.compute, ws + d.a_at));
      a = ws + d.a_at;
    }
    const int64_t be = dtype_block_elems(in[1].dtype), bb = dtype_block_bytes(in[1].dtype);
    void* result = d.f32_result ? static_cast<void*>(ws + d.result_at) : out.data;
    for (int64_t c = 0; c < d.chunks; ++c) {
      const GemmCall g = d.gemm(c);
      // Rows of whole blocks [k0, k0 + g.k) of the weight, as a view of its own bytes.
      TensorDesc wd;
      wd.dtype = in[1].dtype;
      wd.rank = 2;
      wd.shape = {d.N, g.k};
      wd.strides = {in[1].strides[0], 1};
      kernels::View wv = in[1];
      wv.data = static_cast<std::byte*>(in[1].data) + c * d.kc / be * bb;
      wv.shape[1] = g.k;
      DUET_TRY(cast(wd, wv, d.compute, ws + d.tile_at));
      ++launches_;
      Status s = check(drv().gemm(g, ws + d.tile_at, a + c * d.kc * dtype_size(d.compute), result,
                                  stream_, ws + d.gemm_at, d.gemm_bytes));
      if (!s.ok()) return err(s.code()).note("cuBLASLt: " + s.message());
    }
    if (d.f32_result) {
      const TensorDesc rd = TensorDesc::contiguous(DType::f32, {d.rows, d.N});
      DUET_TRY(cast(rd, kernels::make_view(rd, result), op.output.dtype, out.data));
    }
    return {};
  }

  std::string id_;
  DeviceProps props_;
  DeviceCaps caps_;
  std::unique_ptr<BackendRules> rules_;
  ImageCheck image_;
  DeviceOptions options_;
  std::shared_ptr<Shared> shared_;

  bool started_ = false;
  bool timing_ = false;
  std::vector<Event> marks_;  // timing events; the first marks_used_ recorded this session
  size_t marks_used_ = 0;
  Stream stream_ = nullptr;
  std::vector<Slot> slots_;
  size_t next_ = 0;
  std::shared_ptr<Workspace> workspace_;
  // Mat-vecs held to run as one group (flush), with the views they were given.
  struct Held {
    PlannedOp op;
    std::vector<kernels::View> in;
    kernels::View out;
  };
  // Whether the add `op` has the shape of a residual add an rmsnorm may fold (kernels::fuses_add).
  static bool may_fold_add(const OpDesc& op) {
    const TensorDesc& y = op.output;
    if (y.dtype != DType::f32 || y.rank < 1 || y.dim(-1) % 32 != 0 || y.dim(-1) <= 0 ||
        y.numel() / y.dim(-1) > kernels::kGroupRows)
      return false;
    for (const TensorDesc& x : op.inputs)
      if (x.dtype != DType::f32 || !x.same_shape(y)) return false;
    return true;
  }

  // A held op launched alone, with its timing event.
  Status launch_held(const Held& h) {
    Status s = launch_one(h.op.op, h.op.choice, h.in, h.out);
    if (timing_ && lost_.empty()) {
      Status e = record_mark();
      if (s.ok()) s = e;
    }
    return s;
  }
  static constexpr size_t kMaxHeld = 8;
  std::vector<Held> held_;
  // An rmsnorm (fuse_norm_quant) or silu_mul (fuse_silu_quant) held for the mat-vecs after it.
  std::optional<Held> norm_;
  std::optional<Held> add_;   // an add held for the rmsnorm after it (fuse_add_norm)
  std::optional<Held> rope_;  // a rope held for the cache writes after it (fuse_rope_write)
  std::vector<Held> writes_;  // and those writes
  uint64_t rope_writes_ = 0;  // since the last synchronize (debug log)
  uint64_t launches_ = 0;     // the driver's launch and gemm calls (a recording's debug log)
  uint64_t groups_ = 0, grouped_ = 0, fused_norms_ = 0, fused_adds_ = 0,
           fused_silus_ = 0;  // since the last synchronize (debug log)
  std::string lost_;
  std::unique_ptr<Recording> recording_;  // the recording being made
  bool recording_failed_ = false;
  std::map<int, Recording> recordings_;
  int next_recording_ = 1;
  // Error bytes of the ops the replays since the last synchronize ran.
  std::vector<std::pair<const OpDesc*, const std::byte*>> replayed_checks_;
};

uint64_t option_mib(const BackendOptions& o, const char* key, const char* env, uint64_t fallback) {
  int v = static_cast<int>(env_int(env, 0, 1 << 20, "the default").value_or(-1));
  v = o.get_int(key, v);
  return v >= 0 ? static_cast<uint64_t>(v) << 20 : fallback;
}

}  // namespace

DeviceOptions DeviceOptions::from(const BackendOptions& o) {
  DeviceOptions d;
  d.staging_slot_bytes = std::max<uint64_t>(
      option_mib(o, "cuda.staging_mib", "DUET_CUDA_STAGING_MIB", d.staging_slot_bytes), 1ull << 20);
  d.staging_slots = std::clamp(o.get_int("cuda.staging_slots", d.staging_slots), 1, 64);
  d.cache_limit = option_mib(o, "cuda.cache_limit_mib", "DUET_CUDA_CACHE_LIMIT_MIB", d.cache_limit);
  d.cublas = o.get_bool("cuda.cublas", env_switch("DUET_CUDA_CUBLAS", true));
  d.graphs = o.get_bool("cuda.graphs", env_switch("DUET_CUDA_GRAPHS", true));
  d.group_matvecs = o.get_bool("cuda.group_matvecs", env_switch("DUET_CUDA_GROUP_MATVECS", true));
  d.fuse_norm_quant =
      o.get_bool("cuda.fuse_norm_quant", env_switch("DUET_CUDA_FUSE_NORM_QUANT", true));
  d.fuse_rope_write =
      o.get_bool("cuda.fuse_rope_write", env_switch("DUET_CUDA_FUSE_ROPE_WRITE", true));
  d.fuse_add_norm = o.get_bool("cuda.fuse_add_norm", env_switch("DUET_CUDA_FUSE_ADD_NORM", true));
  d.programmatic_launch =
      o.get_bool("cuda.programmatic_launch", env_switch("DUET_CUDA_PDL", false));
  d.fuse_silu_quant =
      o.get_bool("cuda.fuse_silu_quant", env_switch("DUET_CUDA_FUSE_SILU_QUANT", true));
  return d;
}

std::unique_ptr<CudaDevice> make_device(std::shared_ptr<Driver> driver, const DeviceProps& props,
                                        DeviceCaps caps, const BuildArchs& archs,
                                        const DeviceOptions& options) {
  return std::make_unique<Device>(std::move(driver), props, std::move(caps), archs, options);
}

Result<BackendOpenResult> open_backend(std::shared_ptr<Driver> driver, const BuildArchs& archs,
                                       const DeviceOptions& options) {
  const DriverStatus st = driver->status();
  DUET_TRY(availability(st));
  const std::string blas =
      options.cublas ? driver->blas_library() : "unavailable: disabled by cuda.cublas=off";
  BackendOpenResult r;
  for (int i = 0; i < st.device_count; ++i) {
    Result<DeviceProps> props = driver->properties(i);
    if (!props.ok()) {
      r.notes.push_back(options.id_prefix + ":" + std::to_string(i) +
                        " skipped: " + props.status().message());
      continue;
    }
    props->ordinal = i;
    if (!props->driver_version) props->driver_version = st.driver_version;
    if (!props->runtime_version) props->runtime_version = st.runtime_version;
    DeviceCaps caps = caps_from_props(*props);
    const ImageCheck image = check_image(archs, props->major, props->minor);
    caps.extra[std::string(kKernelImageKey)] = image.text;
    caps.gemm_library = blas;
    caps.gemm_library_loaded = !blas.empty() && blas.rfind("unavailable", 0) != 0;
    caps.extra[std::string(kCublasKey)] = blas;
    const std::string who =
        options.id_prefix + ":" + std::to_string(i) + " (" + props->name + ", " + caps.arch + ")";
    if (!image.ok()) r.notes.push_back(who + ": " + image.text + "; every op on it is refused");
    // A JIT device works, but its first run of every kernel waits for the driver's compiler
    // (seconds for a model); the user should hear that from `duet devices`, not from a profile.
    if (image.match == ImageMatch::ptx_jit)
      r.notes.push_back(who + " runs JIT-compiled PTX: this build has no cubin for it (" +
                        archs.str() + "), so the driver compiles compute_" +
                        std::to_string(image.arch) +
                        " PTX at each kernel's first launch (seconds on a model's first run; "
                        "cached up to CUDA_CACHE_MAXSIZE); rebuild with " +
                        std::to_string(props->major * 10 + props->minor) +
                        (props->major == 9 ? "a" : "") + " in DUET_CUDA_ARCHS for its cubins");
    r.devices.push_back(make_device(driver, *props, std::move(caps), archs, options));
  }
  return r;
}

}  // namespace duet::cuda
