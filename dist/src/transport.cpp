// MPI under the transport: non-blocking point-to-point and collectives, each finished by polling
// against a deadline (MPI's own waits cannot time out), errors returned (MPI_ERRORS_RETURN).
#include "duet/dist/transport.h"

// The C API only: Open MPI's and MPICH's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace duet::dist {

struct Pending::State {
  MPI_Request request = MPI_REQUEST_NULL;
  int peer = -1;
  bool send = false;
  std::string what;
};

Pending::Pending() = default;
Pending::Pending(Pending&&) noexcept = default;
Pending& Pending::operator=(Pending&&) noexcept = default;
Pending::~Pending() {
  if (!s_ || s_->request == MPI_REQUEST_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Cancel(&s_->request);
  MPI_Request_free(&s_->request);
}
bool Pending::active() const {
  return s_ && s_->request != MPI_REQUEST_NULL;
}

namespace {
std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<size_t>(len));
}

std::string peer_name(int peer) {
  return peer < 0 ? std::string("every rank") : fmt::format("rank {}", peer);
}

double env_timeout(double fallback) {
  const char* v = std::getenv("DUET_DIST_TIMEOUT");
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double t = std::strtod(v, &end);
  return (end && *end == '\0' && t > 0) ? t : fallback;
}

constexpr int kMaxTag = 32767;  // the least MPI_TAG_UB the standard allows
}  // namespace

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

Result<std::unique_ptr<Transport>> Transport::open(TransportOptions options) {
  std::unique_ptr<Transport> t(new Transport());
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return Status(Code::unsupported, "MPI did not start: " + mpi_error(rc));
    t->initialised_here_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &t->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &t->size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  t->host_.assign(name, static_cast<size_t>(len));
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  MPI_Get_library_version(lib, &len);
  t->library_.assign(lib, static_cast<size_t>(len));
  if (auto nl = t->library_.find_first_of("\r\n"); nl != std::string::npos) t->library_.resize(nl);
  if (auto comma = t->library_.find(','); comma != std::string::npos) t->library_.resize(comma);
    // Open MPI's CUDA extension (mpi-ext.h): MPIX_CUDA_AWARE_SUPPORT says how the headers were
    // built, MPIX_Query_cuda_support() what the library loaded now can do (asked either way: the
    // library at run time may not be the one the headers came with).
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  t->cuda_aware_ = MPIX_Query_cuda_support() == 1;
  if (t->cuda_aware_)
    t->cuda_support_ = "yes (MPIX_Query_cuda_support)";
  else if (MPIX_CUDA_AWARE_SUPPORT)
    t->cuda_support_ =
        "no: the library was built with CUDA support but reports none now "
        "(MPIX_Query_cuda_support: no CUDA driver, or its CUDA support turned off)";
  else
    t->cuda_support_ = "no: the library was built without CUDA support (MPIX_Query_cuda_support)";
#else
  t->cuda_support_ = "no: the library has no CUDA extension to ask (mpi-ext.h); taken as none";
#endif
  t->timeout_s_ = env_timeout(options.timeout_s);
  t->wait_ = options.wait;
  return t;
}

Transport::~Transport() {
  if (!initialised_here_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Result<Pending> Transport::post_send(int peer, int tag, const void* data, size_t bytes,
                                     std::string_view what) {
  if (peer < 0 || peer >= size_ || peer == rank_ || tag < 0 || tag > kMaxTag ||
      bytes > static_cast<size_t>(INT32_MAX))
    return Status(Code::invalid_argument,
                  fmt::format("rank {}: cannot send {} ({} bytes, tag {}) to rank {} of {}", rank_,
                              what, bytes, tag, peer, size_));
  Pending p;
  p.s_ = std::make_unique<Pending::State>();
  p.s_->peer = peer;
  p.s_->send = true;
  p.s_->what = std::string(what);
  int rc =
      MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &p.s_->request);
  if (rc != MPI_SUCCESS)
    return Status(Code::device_lost, fmt::format("rank {}: sending {} to rank {}: {}", rank_, what,
                                                 peer, mpi_error(rc)));
  return p;
}

Result<Pending> Transport::post_recv(int peer, int tag, void* data, size_t bytes,
                                     std::string_view what) {
  if (peer < 0 || peer >= size_ || peer == rank_ || tag < 0 || tag > kMaxTag ||
      bytes > static_cast<size_t>(INT32_MAX))
    return Status(Code::invalid_argument,
                  fmt::format("rank {}: cannot receive {} ({} bytes, tag {}) from rank {} of {}",
                              rank_, what, bytes, tag, peer, size_));
  Pending p;
  p.s_ = std::make_unique<Pending::State>();
  p.s_->peer = peer;
  p.s_->what = std::string(what);
  int rc =
      MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &p.s_->request);
  if (rc != MPI_SUCCESS)
    return Status(Code::device_lost, fmt::format("rank {}: receiving {} from rank {}: {}", rank_,
                                                 what, peer, mpi_error(rc)));
  return p;
}

Status Transport::waited(void* request, int peer, std::string_view what, std::string_view step,
                         double timeout_s) {
  auto* req = static_cast<MPI_Request*>(request);
  using clock = std::chrono::steady_clock;
  const double limit = timeout_s < 0 ? timeout_s_ : timeout_s;
  const bool bounded = std::isfinite(limit);
  const auto start = clock::now();
  // The window of polls with yields: twice the longest of the recent waits, within the bounds.
  double yield_us = wait_.yield_min_us;
  if (wait_.adaptive) {
    const double longest = *std::max_element(recent_.begin(), recent_.end());
    yield_us = std::clamp(2 * longest, wait_.yield_min_us, wait_.yield_max_us);
  }
  bool contended = false;
  MPI_Status st;
  for (long polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Test(req, &done, &st);
    if (rc != MPI_SUCCESS) {
      int cls = 0;
      MPI_Error_class(rc, &cls);
      return Status(Code::device_lost,
                    fmt::format("rank {} ({}), step '{}': {} {}: {} (did {} end?)", rank_, host_,
                                step, what, peer_name(peer), mpi_error(rc), peer_name(peer)));
    }
    if (done) {
      const double waited_us =
          std::chrono::duration<double, std::micro>(clock::now() - start).count();
      recent_[next_recent_++ % recent_.size()] = waited_us;
      return Status::ok_status();
    }
    if (polls < 16) continue;  // the first polls back to back
    const double waited_us =
        std::chrono::duration<double, std::micro>(clock::now() - start).count();
    if (bounded && waited_us > limit * 1e6) {
      MPI_Cancel(req);
      MPI_Request_free(req);
      return Status(Code::device_lost,
                    fmt::format("rank {} ({}), step '{}': {} {}: nothing after {:.1f} s ({} ended, "
                                "stalled, or the link did; DUET_DIST_TIMEOUT sets the limit)",
                                rank_, host_, step, what, peer_name(peer), limit, peer_name(peer)));
    }
    if (waited_us < wait_.spin_us) continue;
    if (!contended && waited_us < wait_.spin_us + yield_us) {
      // A yield that took long means other threads wanted this core (a loaded machine, ranks
      // sharing cores): a yielding rank then waits behind them for whole time slices, while one
      // that sleeps is woken at once when its time is up. It sleeps for the rest of this wait.
      const auto before = clock::now();
      sched_yield();
      contended = clock::now() - before > std::chrono::microseconds(50);
      continue;
    }
    const double sleep_us = std::clamp(waited_us / 16, wait_.sleep_min_us, wait_.sleep_max_us);
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(sleep_us));
  }
}

Status Transport::wait(Pending& pending, std::string_view step, double timeout_s) {
  if (!pending.active()) return Status::ok_status();
  auto& s = *pending.s_;
  std::string what = (s.send ? "sending " : "receiving ") + s.what + (s.send ? " to" : " from");
  Status st = waited(&s.request, s.peer, what, step, timeout_s);
  s.request = MPI_REQUEST_NULL;
  return st;
}

Status Transport::send_blob(int peer, int tag, std::span<const std::byte> data,
                            std::string_view step) {
  uint64_t n = data.size();
  auto head = post_send(peer, tag, &n, sizeof n, "a message's size");
  if (!head.ok()) return head.status();
  auto body = post_send(peer, tag, data.data(), data.size(), "a message");
  if (!body.ok()) return body.status();
  if (Status s = wait(*head, step); !s.ok()) return s;
  return wait(*body, step);
}

Result<std::vector<std::byte>> Transport::recv_blob(int peer, int tag, std::string_view step,
                                                    size_t max_bytes, double timeout_s) {
  uint64_t n = 0;
  auto head = post_recv(peer, tag, &n, sizeof n, "a message's size");
  if (!head.ok()) return head.status();
  if (Status s = wait(*head, step, timeout_s); !s.ok()) return s;
  if (n > max_bytes)
    return Status(Code::invalid_argument,
                  fmt::format("rank {}, step '{}': rank {} announced a message of {} bytes, more "
                              "than the {} expected",
                              rank_, step, peer, n, max_bytes));
  std::vector<std::byte> data(static_cast<size_t>(n));
  auto body = post_recv(peer, tag, data.data(), data.size(), "a message");
  if (!body.ok()) return body.status();
  if (Status s = wait(*body, step); !s.ok()) return s;
  return data;
}

Result<std::vector<std::string>> Transport::all_gather(std::string_view mine,
                                                       std::string_view step) {
  std::vector<long long> sizes(static_cast<size_t>(size_));
  long long my_size = static_cast<long long>(mine.size());
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallgather(&my_size, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG,
                          MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS)
    return Status(Code::device_lost,
                  fmt::format("rank {}, step '{}': gathering: {}", rank_, step, mpi_error(rc)));
  if (Status s = waited(&req, -1, "gathering sizes from", step); !s.ok()) return s;
  std::vector<int> counts(sizes.size()), displs(sizes.size());
  long long total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || total + sizes[i] > INT32_MAX)
      return Status(Code::invalid_argument,
                    fmt::format("rank {}, step '{}': rank {} offers {} bytes to gather", rank_,
                                step, i, sizes[i]));
    counts[i] = static_cast<int>(sizes[i]);
    displs[i] = static_cast<int>(total);
    total += sizes[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  rc = MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                       counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS)
    return Status(Code::device_lost,
                  fmt::format("rank {}, step '{}': gathering: {}", rank_, step, mpi_error(rc)));
  if (Status s = waited(&req, -1, "gathering records from", step); !s.ok()) return s;
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(counts[i])));
  return out;
}

Status Transport::barrier(std::string_view step) {
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS)
    return Status(Code::device_lost,
                  fmt::format("rank {}, step '{}': barrier: {}", rank_, step, mpi_error(rc)));
  return waited(&req, -1, "waiting at a barrier for", step);
}

void Transport::abort(const Status& status, int exit_code) {
  // The transport's own errors already begin with this rank and its host.
  const std::string me = fmt::format("rank {} ", rank_);
  if (status.message().rfind(me, 0) == 0)
    std::fprintf(stderr, "duet: %s\n", status.message().c_str());
  else
    std::fprintf(stderr, "duet: rank %d (%s): %s\n", rank_, host_.c_str(),
                 status.message().c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace duet::dist
