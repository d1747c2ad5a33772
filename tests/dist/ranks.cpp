// The transport's behaviours, one per mode, run as the ranks of `mpirun -np 2` by
// transport_test.cpp: messages both ways, the start-up agreement, a stalled rank, a killed rank.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "duet/dist/agreement.h"
#include "duet/dist/transport.h"

using duet::dist::Transport;

namespace {
int fail(Transport& t, const duet::Status& s) {
  std::fprintf(stderr, "rank %d: %s\n", t.rank(), s.message().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto opened = Transport::open();
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().message().c_str());
    return 2;
  }
  Transport& t = **opened;
  const std::string fp = (mode == "mismatch" && t.rank() == 1) ? "another-graph" : "graph-a";
  // Rank 1's build: this one, or one of another commit ("other-build"), or this one with its
  // revision unknown (a tarball: agrees, the rest being the same).
  duet::BuildIdentity build = duet::build_identity();
  build.revision = "30e0be5ca0d1e1de5b8e0d1d3dd2c9f35c1cbd20";
  build.dirty = false;
  if (t.rank() == 1 && mode == "other-build") build.revision[0] = 'f';
  if (t.rank() == 1 && mode == "unknown-revision") {
    build.revision.clear();
    build.unknown_because = "the sources are not a git checkout";
  }
  if (auto s = duet::dist::agree_on_start(t, build, fp); !s.ok()) return fail(t, s);
  if (mode == "unknown-revision") {
    std::printf("rank %d: agreed with rank 1's revision unknown\n", t.rank());
    return 0;
  }
  // Started (however slowly a loaded machine started the ranks): from here a short timeout.
  if (argc > 2) t.set_timeout(std::atof(argv[2]));

  std::vector<float> data(1000);
  if (t.rank() == 0) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
    auto sent = t.post_send(1, 1, data.data(), data.size() * sizeof(float), "'x'");
    if (!sent.ok()) return fail(t, sent.status());
    if (auto s = t.wait(*sent, "send x"); !s.ok()) t.abort(s);
    auto got = t.post_recv(1, 2, data.data(), data.size() * sizeof(float), "'x+1'");
    if (!got.ok()) return fail(t, got.status());
    if (auto s = t.wait(*got, "receive x+1"); !s.ok()) t.abort(s);
    for (size_t i = 0; i < data.size(); ++i)
      if (data[i] != static_cast<float>(i) * 0.5f + 1) {
        std::fprintf(stderr, "rank 0: element %zu is %g\n", i, static_cast<double>(data[i]));
        return 1;
      }
    auto blob = t.recv_blob(1, 3, "receive blob");
    if (!blob.ok()) t.abort(blob.status());
    std::printf("rank 0: exchanged with rank 1, blob of %zu bytes\n", blob->size());
  } else {
    auto got = t.post_recv(0, 1, data.data(), data.size() * sizeof(float), "'x'");
    if (!got.ok()) return fail(t, got.status());
    if (auto s = t.wait(*got, "receive x"); !s.ok()) t.abort(s);
    if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(600));
    if (mode == "killed") std::raise(SIGKILL);
    for (float& v : data) v += 1;
    auto sent = t.post_send(0, 2, data.data(), data.size() * sizeof(float), "'x+1'");
    if (!sent.ok()) return fail(t, sent.status());
    if (auto s = t.wait(*sent, "send x+1"); !s.ok()) t.abort(s);
    std::vector<std::byte> blob(12345, std::byte{7});
    if (auto s = t.send_blob(0, 3, blob, "send blob"); !s.ok()) t.abort(s);
  }
  if (auto s = t.barrier("finish"); !s.ok()) t.abort(s);
  return 0;
}
