// duet_bench_dist: what one crossing between two ranks costs, in wall time and in CPU time, for
// each way a rank can wait for a message (a benchmark, never a test).
//
//   mpirun -np 2 build/tools/duet_bench_dist [--bytes 256] [--gaps 0,100,1000,10000] [--ms 300]
//       [--waits spin,before,default]
//
// Each round emulates a pipeline of two stages: rank 0 computes for GAP us (a busy loop, as a
// stage's kernels), sends BYTES to rank 1 and waits; rank 1, which waited meanwhile, computes for
// GAP us and sends them back. A round is 2 GAP + 2 crossings, so a crossing's overhead is
// (round - 2 GAP) / 2 (the median round, and the mean). CPU: the CPU time of each rank's thread
// outside its computing, as a share of the wall time it spent so (100%: a core kept polling).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "duet/dist/transport.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace duet::dist {
namespace {

using clock_type = std::chrono::steady_clock;

double cpu_seconds() {  // this thread's
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void compute(double us) {
  const auto until = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                             std::chrono::duration<double, std::micro>(us));
  while (clock_type::now() < until) {
  }
}

struct Strategy {
  const char* name;
  WaitPolicy policy;
};

std::vector<Strategy> strategies(double poll_us) {
  WaitPolicy spin;  // MPI_Test back to back, never giving the core up
  spin.spin_us = 1e12;
  // The strategy until 2026-11-27: 2000 polls, then 50 us sleeps (the poll's time is printed).
  WaitPolicy before;
  before.spin_us = 2000 * poll_us;
  before.yield_min_us = before.yield_max_us = 0;
  before.adaptive = false;
  before.sleep_min_us = before.sleep_max_us = 50;
  return {{"spin", spin}, {"before", before}, {"default", WaitPolicy{}}};
}

int fail(Transport& t, const Status& s) {
  t.abort(s);
}

int run(int bytes, const std::vector<double>& gaps, double ms,
        const std::vector<std::string>& waits) {
  auto opened = Transport::open();
  if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().message().c_str()), 2;
  Transport& t = **opened;
  if (t.size() != 2) {
    if (t.rank() == 0) std::fprintf(stderr, "duet_bench_dist: run it as 2 ranks (mpirun -np 2)\n");
    return 2;
  }
  const int me = t.rank(), peer = 1 - me;
  std::vector<std::byte> buf(static_cast<size_t>(bytes), std::byte{1});
  // One MPI_Test of a receive nothing answers: the "before" strategy spun 2000 of them.
  double poll_us = 0;
  {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Irecv(buf.data(), bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req);
    const auto t0 = clock_type::now();
    for (int i = 0; i < 20000; ++i) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    poll_us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 20000;
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
  if (me == 0) std::printf("one MPI_Test: %.3f us; %d bytes a crossing\n", poll_us, bytes);
  if (me == 0)
    std::printf("%-8s %8s %7s %14s %14s %12s %12s\n", "wait", "gap us", "rounds", "crossing us",
                "(mean)", "rank0 CPU", "rank1 CPU");
  for (const Strategy& s : strategies(poll_us)) {
    if (!waits.empty() && std::find(waits.begin(), waits.end(), s.name) == waits.end()) continue;
    for (double gap : gaps) {
      t.set_wait_policy(s.policy);
      const int rounds = std::clamp(static_cast<int>(ms * 1000 / (2 * gap + 20)), 50, 20000);
      if (auto st = t.barrier("bench: row start"); !st.ok()) return fail(t, st);
      std::vector<double> round_us;
      double cpu = 0, busy_cpu = 0, busy_wall = 0;
      const auto row0 = clock_type::now();
      const double cpu0 = cpu_seconds();
      for (int r = 0; r < rounds; ++r) {
        const auto t0 = clock_type::now();
        for (int leg = 0; leg < 2; ++leg) {
          const bool sending = (leg == 0) == (me == 0);
          if (sending) {
            if (gap > 0) {
              const double c0 = cpu_seconds();
              const auto w0 = clock_type::now();
              compute(gap);
              busy_wall += std::chrono::duration<double>(clock_type::now() - w0).count();
              busy_cpu += cpu_seconds() - c0;
            }
            auto p = t.post_send(peer, 5, buf.data(), buf.size(), "an activation");
            if (!p.ok()) return fail(t, p.status());
            if (auto st = t.wait(*p, "bench: send"); !st.ok()) return fail(t, st);
          } else {
            auto p = t.post_recv(peer, 5, buf.data(), buf.size(), "an activation");
            if (!p.ok()) return fail(t, p.status());
            if (auto st = t.wait(*p, "bench: receive"); !st.ok()) return fail(t, st);
          }
        }
        round_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      }
      cpu = cpu_seconds() - cpu0;
      const double wall = std::chrono::duration<double>(clock_type::now() - row0).count();
      // The share of the time outside computing (waiting, mostly) this rank spent on a CPU.
      const double waited = wall - busy_wall;
      double share = waited > 0 ? (cpu - busy_cpu) / waited : 0;
      double other = 0;
      auto p = me == 1 ? t.post_send(0, 6, &share, sizeof share, "the CPU share")
                       : t.post_recv(1, 6, &other, sizeof other, "the CPU share");
      if (!p.ok()) return fail(t, p.status());
      if (auto st = t.wait(*p, "bench: row end"); !st.ok()) return fail(t, st);
      if (me != 0) continue;
      std::sort(round_us.begin(), round_us.end());
      double mean = 0;
      for (double v : round_us) mean += v;
      mean /= static_cast<double>(round_us.size());
      std::printf("%-8s %8.0f %7d %14.1f %14.1f %11.0f%% %11.0f%%\n", s.name, gap, rounds,
                  (round_us[round_us.size() / 2] - 2 * gap) / 2, (mean - 2 * gap) / 2, 100 * share,
                  100 * other);
      std::fflush(stdout);
    }
  }
  if (auto st = t.barrier("bench: end"); !st.ok()) return fail(t, st);
  return 0;
}

}  // namespace
}  // namespace duet::dist

int main(int argc, char** argv) {
  CLI::App app{"duet_bench_dist: a crossing's cost between two ranks, for each way of waiting"};
  int bytes = 256;
  std::vector<double> gaps = {0, 100, 1000, 10000};
  double ms = 300;
  app.add_option("--bytes", bytes, "bytes a crossing sends (an activation)")
      ->check(CLI::Range(1, 1 << 26));
  app.add_option("--gaps", gaps, "each stage's compute time per round, us")->delimiter(',');
  app.add_option("--ms", ms, "about how long each row runs")->check(CLI::Range(1.0, 60000.0));
  std::vector<std::string> waits;
  app.add_option("--waits", waits,
                 "the strategies to time (spin, before, default; all if not given)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  return duet::dist::run(bytes, gaps, ms, waits);
}
