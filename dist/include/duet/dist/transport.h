// The transport between the ranks of a distributed run: MPI point-to-point messages, posted
// non-blocking and finished by waits that are bounded by a timeout, so that a rank that died or a
// link that stalled ends the run with an error naming the peer rank and the step, never a hang.
// Errors of the MPI library come back as values (the communicator uses MPI_ERRORS_RETURN).
//
// One duet process per rank, launched by mpirun (docs/distributed.md). No MPI type appears here:
// what includes this header does not need mpi.h.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/status.h"

namespace duet::dist {

// How a rank waits for a message (MPI's own waits cannot time out, and Open MPI's poll a core
// anyway): MPI_Test back to back for `spin_us`, then MPI_Test with sched_yield() between polls
// (the core goes to any other thread that wants it) while the wait is no longer than the recent
// ones (twice the longest of the last 8 waits, at least `yield_min_us`, at most `yield_max_us`),
// then sleeps between polls, each 1/16 of the time waited so far, from `sleep_min_us` up to
// `sleep_max_us`; a yield that kept the rank off the core for over 50 us (other threads want it:
// a loaded machine) ends the yielding phase at once. A pipeline's steady waits (a stage waiting for
// the previous one's kernels) are met within microseconds; a rank left waiting longer than usual
// (rank 0's user, a dead peer) costs a wake-up per `sleep_max_us`. Every phase checks the wait's
// deadline. tools/bench/dist measures each strategy (docs/performance.md).
struct WaitPolicy {
  double spin_us = 20;
  double yield_min_us = 1000, yield_max_us = 20000;
  double sleep_min_us = 20, sleep_max_us = 1000;
  bool adaptive = true;  // false: yield for exactly yield_min_us
};

struct TransportOptions {
  // The longest any one wait (a message, a collective) may take before the run is ended with an
  // error; DUET_DIST_TIMEOUT (seconds) overrides it.
  double timeout_s = 60;
  WaitPolicy wait;
};

// A message posted and not yet finished. Move-only; finish it with Transport::wait (the buffer it
// reads or fills must stay alive until then). Destroying an unfinished one cancels it.
class Pending {
 public:
  Pending();
  Pending(Pending&&) noexcept;
  Pending& operator=(Pending&&) noexcept;
  ~Pending();
  bool active() const;

 private:
  friend class Transport;
  struct State;
  std::unique_ptr<State> s_;
};

class Transport {
 public:
  // Initialises MPI (unless the process already did) for this process's rank. Fails with the
  // library's reason where MPI cannot start (not launched by mpirun and no singleton support).
  static Result<std::unique_ptr<Transport>> open(TransportOptions options = {});
  ~Transport();  // finalises MPI when open() initialised it
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }  // the processor name MPI reports
  double timeout_s() const { return timeout_s_; }
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  const WaitPolicy& wait_policy() const { return wait_; }
  void set_wait_policy(const WaitPolicy& policy) {
    wait_ = policy;
    recent_.fill(0);
  }
  // The MPI library, as it names itself ("Open MPI v4.1.4, ..."), and whether it says it can
  // send GPU memory directly (CUDA-aware: Open MPI's MPIX_Query_cuda_support), with how that was
  // found out ("no: the library was built without CUDA support ..."). Activations cross through
  // host memory either way today (host staging).
  const std::string& library() const { return library_; }
  bool cuda_aware() const { return cuda_aware_; }
  const std::string& cuda_support() const { return cuda_support_; }

  // Posts a send of `bytes` at `data` to `peer` with `tag` (0 <= tag < 32768), or a receive of
  // exactly `bytes` from it. `what` names the message in errors ("activation 'h3'").
  Result<Pending> post_send(int peer, int tag, const void* data, size_t bytes,
                            std::string_view what);
  Result<Pending> post_recv(int peer, int tag, void* data, size_t bytes, std::string_view what);
  // Finishes a posted message within the timeout. `step` names what the run was doing ("run 3,
  // stage 1 input 'h3'"). An error names this rank, the peer rank, the step and the message.
  // `timeout_s` < 0: the transport's; infinity: none (a rank waiting for its next request).
  Status wait(Pending& pending, std::string_view step, double timeout_s = -1);

  // A message of any length: its size first, then the bytes (both bounded by the timeout).
  Status send_blob(int peer, int tag, std::span<const std::byte> data, std::string_view step);
  Result<std::vector<std::byte>> recv_blob(int peer, int tag, std::string_view step,
                                           size_t max_bytes = size_t{1} << 31,
                                           double timeout_s = -1);

  // Every rank's `mine`, in rank order, on every rank (a collective: every rank must call it).
  Result<std::vector<std::string>> all_gather(std::string_view mine, std::string_view step);
  // Waits for every rank (a collective).
  Status barrier(std::string_view step);

  // Ends every rank of the run: prints `status` as this rank's error line on stderr and asks MPI
  // to end the others (MPI_Abort). For errors after which the ranks cannot agree to stop.
  [[noreturn]] void abort(const Status& status, int exit_code = 1);

 private:
  Transport() = default;
  Status waited(void* request, int peer, std::string_view what, std::string_view step,
                double timeout_s = -1);

  int rank_ = 0, size_ = 1;
  std::string host_, library_, cuda_support_;
  bool cuda_aware_ = false;
  bool initialised_here_ = false;
  double timeout_s_ = 60;
  WaitPolicy wait_;
  std::array<double, 8> recent_{};  // the last waits' lengths (us), for the yield window
  size_t next_recent_ = 0;
};

// Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, Hydra
// PMI_SIZE): a distributed command refuses to start otherwise rather than run as one rank.
bool launched_by_mpirun();

}  // namespace duet::dist
