// The distributed engine: start-up (agreement, capability records, links, the stage plan), then
// each run's messages between the stages.
#include "duet/dist/engine.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <set>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "duet/builtin_engine.h"
#include "duet/dist/agreement.h"
#include "duet/planner.h"
#include "duet/profiles.h"

namespace duet::dist {

namespace {

size_t u(int i) {
  return static_cast<size_t>(i);
}

constexpr int kTagControl = 1;
constexpr int kTagLink = 2;
constexpr int kTagReady = 3;
int tensor_tag(int value) {
  return 16 + 2 * (value % 16000);
}

// ---- links -------------------------------------------------------------------------------------

// Half the round trip of a small message (best of several) and the bandwidth of a 4 MiB one
// (best of a few), between ranks a < b; the other ranks skip the pair.
Result<MeasuredLink> measure_pair(Transport& t, int a, int b) {
  const bool first = t.rank() == a;
  const int peer = first ? b : a;
  const std::string step = fmt::format("start: measuring the link rank{} <-> rank{}", a, b);
  using clock = std::chrono::steady_clock;
  uint64_t token = 0;
  auto exchange = [&](void* data, size_t bytes, bool send) -> Status {
    auto p = send ? t.post_send(peer, kTagLink, data, bytes, "a link probe")
                  : t.post_recv(peer, kTagLink, data, bytes, "a link probe");
    if (!p.ok()) return p.status();
    return t.wait(*p, step);
  };
  MeasuredLink link;
  double best_rtt = 1e30;
  for (int i = 0; i < 20; ++i) {
    const auto start = clock::now();
    DUET_TRY(exchange(&token, sizeof token, first));
    DUET_TRY(exchange(&token, sizeof token, !first));
    best_rtt = std::min(best_rtt, std::chrono::duration<double>(clock::now() - start).count());
  }
  link.latency_us = best_rtt / 2 * 1e6;
  std::vector<std::byte> big(size_t{4} << 20, std::byte{1});
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto start = clock::now();
    DUET_TRY(exchange(big.data(), big.size(), first));
    DUET_TRY(exchange(&token, sizeof token, !first));
    best = std::min(best, std::chrono::duration<double>(clock::now() - start).count());
  }
  const double transfer = std::max(best - best_rtt, 1e-9);
  link.gbps = static_cast<double>(big.size()) / transfer / 1e9;
  return link;
}

// ---- capability records
// --------------------------------------------------------------------------

std::string record_of(Transport& t, const std::vector<Device*>& devices,
                      const std::map<int, MeasuredLink>& links) {
  nlohmann::json j;
  j["host"] = t.host();
  j["mpi"] = t.library();
  j["cuda_aware"] = t.cuda_support();
  j["devices"] = nlohmann::json::array();
  for (Device* d : devices) {
    DeviceCaps caps = d->caps();
    caps.source = fmt::format("probed on rank {} ({})", t.rank(), t.host());
    j["devices"].push_back({{"id", d->id()}, {"caps", nlohmann::json::parse(profile_json(caps))}});
  }
  j["links"] = nlohmann::json::array();
  for (const auto& [peer, l] : links)
    j["links"].push_back({{"to", peer}, {"latency_us", l.latency_us}, {"gbps", l.gbps}});
  return j.dump();
}

// Each rank's MPI library and its CUDA-awareness, as --explain prints them.
std::string transports_of(const std::vector<std::string>& records) {
  std::string out =
      "transport (MPI point-to-point; activations cross through host memory on "
      "every rank: host staging):\n";
  for (size_t r = 0; r < records.size(); ++r) {
    nlohmann::json j = nlohmann::json::parse(records[r], nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    out += fmt::format("  rank{}: {}; CUDA-aware: {}\n", r, j.value("mpi", std::string("?")),
                       j.value("cuda_aware", std::string("?")));
  }
  // Every rank's build agreed with this one at start (agree_on_start).
  return out + "build (agreed by every rank at start): " + build_identity().text() + "\n";
}

Result<Cluster> cluster_of(const std::vector<std::string>& records) {
  Cluster c;
  const size_t n = records.size();
  c.links.assign(n, std::vector<ClusterLink>(n));
  for (size_t r = 0; r < n; ++r) {
    nlohmann::json j = nlohmann::json::parse(records[r], nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Status(Code::parse_error, fmt::format("start: rank {}'s record is not JSON", r));
    ClusterRank rank;
    rank.host = j.value("host", "");
    std::vector<DeviceCaps> caps;
    std::vector<std::string> ids;
    for (const auto& d : j["devices"]) {
      DUET_ASSIGN_OR_RETURN(DeviceCaps dc,
                            parse_profile(d["caps"].dump(), fmt::format("rank {}'s record", r)));
      caps.push_back(std::move(dc));
      ids.push_back(d.value("id", ""));
    }
    rank.devices = profile_devices(caps, {});
    for (size_t i = 0; i < rank.devices.size(); ++i) {
      rank.devices[i].id = ids[i];
      rank.devices[i].label.clear();
    }
    for (const auto& l : j["links"]) {
      const int to = l.value("to", -1);
      if (to < 0 || u(to) >= n) continue;
      ClusterLink link{l.value("latency_us", 0.0), l.value("gbps", 0.0), "measured"};
      c.links[r][u(to)] = link;
      c.links[u(to)][r] = link;  // measured one way, used both ways
    }
    c.ranks.push_back(std::move(rank));
  }
  return c;
}

std::string ranges_text(const std::vector<StageRange>& ranges) {
  std::string s;
  for (const StageRange& r : ranges) s += fmt::format("{} {} {}\n", r.rank, r.begin, r.end);
  return s;
}

std::vector<StageRange> parse_ranges(const std::string& text) {
  std::vector<StageRange> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    StageRange r;
    if (std::sscanf(text.substr(at, nl - at).c_str(), "%d %d %d", &r.rank, &r.begin, &r.end) == 3)
      out.push_back(r);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

// ---- tensors
// -------------------------------------------------------------------------------------

struct TensorHeader {
  int32_t dtype = 0, rank = 0;
  int64_t dims[4] = {0, 0, 0, 0};
  uint64_t bytes = 0;
};

// A tensor being sent: kept alive with its header until both messages are finished.
struct Outgoing {
  HostTensor tensor;
  TensorHeader header;
  Pending head, body;
  int peer = 0;
};

Status post_tensor(Transport& t, int peer, int value, const std::string& name,
                   const HostTensor& tensor, std::vector<std::unique_ptr<Outgoing>>& out) {
  auto o = std::make_unique<Outgoing>();
  o->tensor = tensor.contiguous();
  o->peer = peer;
  const auto dims = o->tensor.desc().dims();
  o->header.dtype = static_cast<int32_t>(o->tensor.dtype());
  o->header.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < 4; ++i) o->header.dims[i] = dims[i];
  o->header.bytes = static_cast<uint64_t>(o->tensor.desc().nbytes());
  const std::string what = "'" + name + "'";
  DUET_ASSIGN_OR_RETURN(o->head, t.post_send(peer, tensor_tag(value), &o->header, sizeof o->header,
                                             what + "'s shape"));
  DUET_ASSIGN_OR_RETURN(o->body, t.post_send(peer, tensor_tag(value) + 1,
                                             o->tensor.data<std::byte>(), o->header.bytes, what));
  out.push_back(std::move(o));
  return Status::ok_status();
}

Result<HostTensor> recv_tensor(Transport& t, int peer, int value, const GraphValue& expected,
                               std::string_view step) {
  TensorHeader h;
  const std::string what = "'" + expected.name + "'";
  DUET_ASSIGN_OR_RETURN(Pending head,
                        t.post_recv(peer, tensor_tag(value), &h, sizeof h, what + "'s shape"));
  DUET_TRY(t.wait(head, step));
  if (h.dtype != static_cast<int32_t>(expected.desc.dtype) || h.rank < 0 || h.rank > 4)
    return Status(Code::internal,
                  fmt::format("rank {}, step '{}': rank {} sent {} as dtype {} rank {}, expected "
                              "{} rank {}",
                              t.rank(), step, peer, what, h.dtype, h.rank,
                              static_cast<int>(expected.desc.dtype), expected.desc.rank));
  std::vector<int64_t> shape(h.dims, h.dims + h.rank);
  HostTensor out = HostTensor::empty(expected.desc.dtype, shape);
  if (static_cast<uint64_t>(out.desc().nbytes()) != h.bytes)
    return Status(Code::internal, fmt::format("rank {}, step '{}': {} announced {} bytes for its "
                                              "shape, expected {}",
                                              t.rank(), step, what, h.bytes, out.desc().nbytes()));
  DUET_ASSIGN_OR_RETURN(
      Pending body, t.post_recv(peer, tensor_tag(value) + 1, out.data<std::byte>(), h.bytes, what));
  DUET_TRY(t.wait(body, step));
  return out;
}

Status wait_all(Transport& t, std::vector<std::unique_ptr<Outgoing>>& out, std::string_view step) {
  for (auto& o : out) {
    DUET_TRY(t.wait(o->head, step));
    DUET_TRY(t.wait(o->body, step));
  }
  out.clear();
  return Status::ok_status();
}

// For the tests of faults: DUET_DIST_TEST_FAULT="RANK:die:RUN" kills this process when it is rank
// RANK about to take part in run RUN; "RANK:stall:RUN" makes it stop answering instead.
void injected_fault(int rank, int run) {
  const char* v = std::getenv("DUET_DIST_TEST_FAULT");
  if (!v) return;
  int r = -1, at = -1;
  char what[16] = {};
  if (std::sscanf(v, "%d:%15[a-z]:%d", &r, what, &at) != 3 || r != rank || at != run) return;
  if (std::strcmp(what, "die") == 0) std::raise(SIGKILL);
  if (std::strcmp(what, "stall") == 0) std::this_thread::sleep_for(std::chrono::hours(1));
}

// DUET_DIST_TEST_FAULT="RANK:build:0": rank RANK offers the identity of another build (another
// commit; where this build's is unknown, another compiler), as a rank of another duet would.
BuildIdentity injected_build(int rank) {
  BuildIdentity b = build_identity();
  const char* v = std::getenv("DUET_DIST_TEST_FAULT");
  int r = -1, at = -1;
  char what[16] = {};
  if (!v || std::sscanf(v, "%d:%15[a-z]:%d", &r, what, &at) != 3 || r != rank ||
      std::strcmp(what, "build") != 0)
    return b;
  if (b.revision.empty()) {
    b.compiler += " (another build)";
  } else {
    b.revision = "0123456789abcdef0123456789abcdef01234567";
    b.dirty = false;
  }
  return b;
}

}  // namespace

Result<Cluster> gather_cluster(Transport& t, const Graph& graph,
                               const std::vector<Device*>& devices, const std::string& agree_on,
                               std::string* transports) {
  DUET_TRY(agree_on_start(
      t, injected_build(t.rank()),
      agree_on.empty() ? graph_fingerprint(graph) : graph_fingerprint(graph) + " " + agree_on));
  // Links: every pair in one order on every rank (a rank takes part in its own pairs only).
  std::map<int, MeasuredLink> links;
  for (int a = 0; a < t.size(); ++a)
    for (int b = a + 1; b < t.size(); ++b) {
      if (t.rank() != a && t.rank() != b) continue;
      DUET_ASSIGN_OR_RETURN(MeasuredLink l, measure_pair(t, a, b));
      if (t.rank() == a) links[b] = l;
    }
  DUET_ASSIGN_OR_RETURN(auto records,
                        t.all_gather(record_of(t, devices, links), "start: gathering records"));
  if (transports) *transports = transports_of(records);
  return cluster_of(records);
}

DistributedEngine::~DistributedEngine() = default;

Result<std::unique_ptr<DistributedEngine>> DistributedEngine::create(Transport& transport,
                                                                     const Graph& graph,
                                                                     std::vector<Device*> devices,
                                                                     DistributedOptions options) {
  std::unique_ptr<DistributedEngine> e(new DistributedEngine());
  e->t_ = &transport;
  e->graph_ = graph;
  Transport& t = transport;
  std::string transports;
  DUET_ASSIGN_OR_RETURN(Cluster cluster,
                        gather_cluster(t, graph, devices, options.agree_on, &transports));

  // Rank 0 plans; every rank derives its stage from the ranges.
  std::string decided, failure;
  if (t.rank() == 0) {
    auto plan = plan_cluster(graph, cluster, options.policy, options.cluster);
    if (plan.ok()) {
      e->plan_ = std::move(*plan);
      e->explain_ = duet::explain(e->plan_, graph) + transports;
      decided = ranges_text(e->plan_.ranges());
    } else {
      failure = plan.status().message();
    }
  }
  DUET_ASSIGN_OR_RETURN(
      auto shared,
      t.all_gather(t.rank() == 0 ? (failure.empty() ? "ok\n" + decided : "error\n" + failure)
                                 : std::string(),
                   "start: sharing the stage plan"));
  if (shared[0].rfind("error\n", 0) == 0)
    return Status(Code::unsupported, "rank 0 could not plan the stages: " + shared[0].substr(6));
  if (t.rank() != 0) {
    DUET_ASSIGN_OR_RETURN(e->plan_, cluster_stages(graph, parse_ranges(shared[0].substr(3))));
  }

  // Each rank builds its stage; then all say whether they could.
  Status mine;
  for (size_t s = 0; s < e->plan_.stages.size(); ++s)
    if (e->plan_.stages[s].range.rank == t.rank()) e->stage_ = static_cast<int>(s);
  if (e->stage_ >= 0) {
    auto sg = stage_graph(graph, e->plan_.stages[u(e->stage_)]);
    if (sg.ok() && options.load_stage) sg = options.load_stage(*sg);
    if (sg.ok()) {
      auto engine = Engine::create(std::move(*sg), devices, options.policy);
      if (engine.ok())
        e->engine_ = std::move(*engine);
      else
        mine = engine.status();
    } else {
      mine = sg.status();
    }
  }
  DUET_ASSIGN_OR_RETURN(auto ready, t.all_gather(mine.ok() ? std::string() : mine.message(),
                                                 "start: preparing the stages"));
  for (size_t r = 0; r < ready.size(); ++r)
    if (!ready[r].empty())
      return Status(Code::unsupported,
                    fmt::format("start: rank {} cannot prepare its stage: {}", r, ready[r]));
  return e;
}

// A run's messages still going out (a stage's activations and outputs, rank 0's inputs), with
// what rank 0 gathers of its outputs; finished in order, by finish_run.
struct DistributedEngine::InFlight {
  int run = 0;
  std::vector<std::unique_ptr<Outgoing>> sending;
  std::map<std::string, HostTensor> outputs;
};

Status DistributedEngine::start_run(InFlight& f, const std::map<std::string, HostTensor>* caller) {
  Transport& t = *t_;
  const int me = t.rank(), run = f.run;
  // Rank 0 first sends every other stage its graph inputs.
  if (me == 0)
    for (const Stage& s : plan_.stages) {
      if (s.range.rank == 0) continue;
      for (int v : s.inputs)
        DUET_TRY(post_tensor(t, s.range.rank, v, graph_.value(v).name,
                             caller->at(graph_.value(v).name), f.sending));
    }
  if (stage_ < 0) return Status::ok_status();
  const Stage& s = plan_.stages[u(stage_)];
  const std::string step = fmt::format("run {}, stage {} on rank {}", run, stage_, me);
  std::map<std::string, HostTensor> have;
  for (int v : s.inputs) {
    const GraphValue& gv = graph_.value(v);
    if (me == 0) {
      have[gv.name] = caller->at(gv.name);
    } else {
      DUET_ASSIGN_OR_RETURN(have[gv.name], recv_tensor(t, 0, v, gv, step + ": input"));
    }
  }
  const int prev = stage_ > 0 ? plan_.stages[u(stage_ - 1)].range.rank : -1;
  for (int v : s.receives) {
    const GraphValue& gv = graph_.value(v);
    DUET_ASSIGN_OR_RETURN(have[gv.name], recv_tensor(t, prev, v, gv, step + ": activation"));
  }
  std::map<std::string, HostTensor> ins;
  for (int in : engine_->graph().inputs()) {
    const std::string& name = engine_->graph().value(in).name;
    ins[name] = have.at(name);
  }
  auto out = engine_->run(ins);
  if (!out.ok()) return out.status().with_context(fmt::format("rank {}, {}", me, step));
  for (auto& [name, tensor] : *out) have[name] = std::move(tensor);
  if (u(stage_) + 1 < plan_.stages.size()) {
    const int next = plan_.stages[u(stage_) + 1].range.rank;
    for (int v : s.sends)
      DUET_TRY(
          post_tensor(t, next, v, graph_.value(v).name, have.at(graph_.value(v).name), f.sending));
  }
  for (int v : s.outputs) {
    const std::string& name = graph_.value(v).name;
    if (me == 0)
      f.outputs[name] = have.at(name);
    else
      DUET_TRY(post_tensor(t, 0, v, name, have.at(name), f.sending));
  }
  return Status::ok_status();
}

Status DistributedEngine::finish_run(InFlight& f) {
  Transport& t = *t_;
  if (t.rank() == 0)
    for (const Stage& s : plan_.stages) {
      if (s.range.rank == 0) continue;
      for (int v : s.outputs) {
        const GraphValue& gv = graph_.value(v);
        DUET_ASSIGN_OR_RETURN(
            f.outputs[gv.name],
            recv_tensor(t, s.range.rank, v, gv, fmt::format("run {}: output", f.run)));
      }
    }
  return wait_all(t, f.sending, fmt::format("run {}: sending", f.run));
}

Status DistributedEngine::finish_sends(size_t keep) {
  while (sending_.size() > keep) {
    DUET_TRY(finish_run(*sending_.front()));
    sending_.pop_front();
  }
  return Status::ok_status();
}

Result<std::map<std::string, HostTensor>> DistributedEngine::run(
    const std::map<std::string, HostTensor>& inputs) {
  DUET_ASSIGN_OR_RETURN(auto outs, run_pipelined(std::span(&inputs, 1)));
  return std::move(outs[0]);
}

Result<std::vector<std::map<std::string, HostTensor>>> DistributedEngine::run_pipelined(
    std::span<const std::map<std::string, HostTensor>> requests, int depth) {
  Transport& t = *t_;
  if (t.rank() != 0)
    return Status(Code::invalid_argument, "distributed run: only rank 0 runs; the others serve()");
  for (const auto& inputs : requests)
    for (int in : graph_.inputs())
      if (!inputs.count(graph_.value(in).name))
        return Status(Code::invalid_argument,
                      "distributed run: input '" + graph_.value(in).name + "' not given");
  depth = std::max(depth, 1);
  std::vector<std::map<std::string, HostTensor>> results;
  std::deque<std::unique_ptr<InFlight>> flying;
  auto land = [&]() -> Status {
    DUET_TRY(finish_run(*flying.front()));
    results.push_back(std::move(flying.front()->outputs));
    flying.pop_front();
    return Status::ok_status();
  };
  for (const auto& inputs : requests) {
    auto f = std::make_unique<InFlight>();
    f->run = runs_++;
    const std::string command = fmt::format("run {}", f->run);
    for (int r = 1; r < t.size(); ++r)
      DUET_TRY(t.send_blob(r, kTagControl, std::as_bytes(std::span(command)), command));
    DUET_TRY(start_run(*f, &inputs));
    flying.push_back(std::move(f));
    // The next request starts on rank 0's stage while the later stages still run this one.
    if (flying.size() >= u(depth)) DUET_TRY(land());
  }
  while (!flying.empty()) DUET_TRY(land());
  // In the graph's order of outputs, as Engine::run returns them (by name).
  return results;
}

Status DistributedEngine::reset_states() {
  Transport& t = *t_;
  const std::string command = "reset";
  for (int r = 1; r < t.size(); ++r)
    DUET_TRY(t.send_blob(r, kTagControl, std::as_bytes(std::span(command)), "reset states"));
  if (engine_) DUET_TRY(engine_->reset_states());
  return t.barrier("reset states");
}

Status DistributedEngine::finish() {
  Transport& t = *t_;
  if (finished_ || t.rank() != 0) return Status::ok_status();
  finished_ = true;
  const std::string command = "finish";
  for (int r = 1; r < t.size(); ++r)
    DUET_TRY(t.send_blob(r, kTagControl, std::as_bytes(std::span(command)), "finish"));
  return t.barrier("finish");
}

Status DistributedEngine::serve() {
  Transport& t = *t_;
  for (;;) {
    // Waiting for the next request is not a fault: no timeout (rank 0 may wait for its user).
    DUET_ASSIGN_OR_RETURN(auto blob,
                          t.recv_blob(0, kTagControl, "waiting for rank 0's next request", 4096,
                                      std::numeric_limits<double>::infinity()));
    const std::string command(reinterpret_cast<const char*>(blob.data()), blob.size());
    if (command == "finish") {
      DUET_TRY(finish_sends(0));
      return t.barrier("finish");
    }
    if (command == "reset") {
      DUET_TRY(finish_sends(0));
      if (engine_) DUET_TRY(engine_->reset_states());
      DUET_TRY(t.barrier("reset states"));
      continue;
    }
    int run = -1;
    if (std::sscanf(command.c_str(), "run %d", &run) != 1)
      return Status(Code::internal, fmt::format("rank {}: rank 0 sent '{}'", t.rank(), command));
    runs_ = run + 1;
    injected_fault(t.rank(), run);
    auto f = std::make_unique<InFlight>();
    f->run = run;
    DUET_TRY(start_run(*f, nullptr));
    sending_.push_back(std::move(f));
    // This run's activations and outputs go out while the next request is awaited: the stage
    // takes the next run as soon as it comes (rank 0 may still be gathering an earlier one's
    // outputs). Two runs' messages at most are kept.
    DUET_TRY(finish_sends(1));
  }
}

}  // namespace duet::dist
