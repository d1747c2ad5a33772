// The C API's distributed runs (duet/duet.h, "distributed runs") over duet::dist: a graph in
// pipeline stages over the ranks of an MPI run. Built into libduet.so in a build with MPI; without
// it every function says so (DUET_ERROR_UNSUPPORTED).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "duet/duet.h"

#if DUET_HAVE_MPI
#include "duet/dist/engine.h"
#include "duet/dist/transport.h"
#endif

struct duet_dist {
#if DUET_HAVE_MPI
  std::shared_ptr<duet::Registry> registry;  // this rank's devices, alive as long as the engine
  std::unique_ptr<duet::dist::Transport> transport;
  std::unique_ptr<duet::dist::DistributedEngine> engine;
#endif
  std::vector<std::string> outputs;
};

namespace {
using duet::Code;
using duet::Status;
using duet::capi::guard;

#if !DUET_HAVE_MPI
Status no_mpi(const char* fn) {
  return Status(Code::unsupported, std::string(fn) +
                                       ": this duet was built without MPI (install libopenmpi-dev "
                                       "and rebuild; docs/distributed.md)");
}
#else
Status only_rank0(const duet_dist* d, const char* fn) {
  if (d->transport->rank() == 0) return {};
  return Status(Code::invalid_argument,
                std::string(fn) + ": called on rank " + std::to_string(d->transport->rank()) +
                    "; only rank 0 runs (the other ranks call duet_dist_serve)");
}
#endif
}  // namespace

extern "C" {

duet_status duet_dist_create(const duet_graph* g, const char* policy, int every_rank,
                             double timeout_s, duet_dist** out) {
  return guard("duet_dist_create", [&]() -> Status {
    DUET_REQUIRE("duet_dist_create", out);
    *out = nullptr;
    DUET_REQUIRE("duet_dist_create", g);
#if !DUET_HAVE_MPI
    (void)policy;
    (void)every_rank;
    (void)timeout_s;
    return no_mpi("duet_dist_create");
#else
    if (!duet::dist::launched_by_mpirun())
      return Status(Code::unsupported,
                    "duet_dist_create: not started by mpirun (mpirun -np N APP ...: one process "
                    "per rank; docs/distributed.md)");
    DUET_ASSIGN_OR_RETURN(duet::Policy p, duet::capi::policy_from(policy));
    auto h = std::make_unique<duet_dist>();
    duet::dist::TransportOptions topts;
    topts.timeout_s = 120;  // start-up: the slowest rank opens its devices
    DUET_ASSIGN_OR_RETURN(h->transport, duet::dist::Transport::open(topts));
    h->registry = duet::capi::machine();
    duet::dist::DistributedOptions o;
    o.policy = std::move(p);
    o.cluster.every_rank = every_rank != 0;
    DUET_ASSIGN_OR_RETURN(h->engine, duet::dist::DistributedEngine::create(
                                         *h->transport, g->g, h->registry->devices(), o));
    if (timeout_s > 0) h->transport->set_timeout(timeout_s);
    for (int id : g->g.outputs()) h->outputs.push_back(g->g.value(id).name);
    *out = h.release();
    return {};
#endif
  });
}

void duet_dist_destroy(duet_dist* d) {
  try {
    delete d;  // the engine, then the transport (finalizing MPI where it started it)
  } catch (...) {
  }
}

int duet_dist_rank(const duet_dist* d) {
#if DUET_HAVE_MPI
  return d ? d->transport->rank() : -1;
#else
  (void)d;
  return -1;
#endif
}

int duet_dist_size(const duet_dist* d) {
#if DUET_HAVE_MPI
  return d ? d->transport->size() : 0;
#else
  (void)d;
  return 0;
#endif
}

duet_status duet_dist_run(duet_dist* d, const char* const* input_names,
                          const duet_tensor* const* inputs, size_t input_count,
                          duet_tensor** outputs, size_t output_count) {
  return guard("duet_dist_run", [&]() -> Status {
    DUET_REQUIRE("duet_dist_run", d);
#if !DUET_HAVE_MPI
    (void)input_names;
    (void)inputs;
    (void)input_count;
    (void)outputs;
    (void)output_count;
    return no_mpi("duet_dist_run");
#else
    DUET_TRY(only_rank0(d, "duet_dist_run"));
    DUET_ASSIGN_OR_RETURN(auto in, duet::capi::run_inputs("duet_dist_run", input_names, inputs, input_count,
                                              outputs, output_count, d->outputs.size()));
    DUET_ASSIGN_OR_RETURN(auto result, d->engine->run(in));
    return duet::capi::hand_out_outputs("duet_dist_run", result, d->outputs, outputs);
#endif
  });
}

duet_status duet_dist_reset_states(duet_dist* d) {
  return guard("duet_dist_reset_states", [&]() -> Status {
    DUET_REQUIRE("duet_dist_reset_states", d);
#if !DUET_HAVE_MPI
    return no_mpi("duet_dist_reset_states");
#else
    DUET_TRY(only_rank0(d, "duet_dist_reset_states"));
    return d->engine->reset_states();
#endif
  });
}

duet_status duet_dist_finish(duet_dist* d) {
  return guard("duet_dist_finish", [&]() -> Status {
    DUET_REQUIRE("duet_dist_finish", d);
#if !DUET_HAVE_MPI
    return no_mpi("duet_dist_finish");
#else
    DUET_TRY(only_rank0(d, "duet_dist_finish"));
    return d->engine->finish();
#endif
  });
}

duet_status duet_dist_serve(duet_dist* d) {
  return guard("duet_dist_serve", [&]() -> Status {
    DUET_REQUIRE("duet_dist_serve", d);
#if !DUET_HAVE_MPI
    return no_mpi("duet_dist_serve");
#else
    if (d->transport->rank() == 0)
      return Status(Code::invalid_argument,
                    "duet_dist_serve: called on rank 0, which runs (duet_dist_run) and finishes "
                    "(duet_dist_finish)");
    return d->engine->serve();
#endif
  });
}

duet_status duet_dist_explain(const duet_dist* d, char** out) {
  return guard("duet_dist_explain", [&]() -> Status {
    DUET_REQUIRE("duet_dist_explain", out);
    *out = nullptr;
    DUET_REQUIRE("duet_dist_explain", d);
#if !DUET_HAVE_MPI
    return no_mpi("duet_dist_explain");
#else
    DUET_TRY(only_rank0(d, "duet_dist_explain"));
    *out = duet::capi::copy_string(d->engine->explain());
    return {};
#endif
  });
}

void duet_dist_abort(duet_dist* d, const char* message) {
#if DUET_HAVE_MPI
  if (d && d->transport)
    d->transport->abort(Status(Code::internal, message ? message : "duet_dist_abort"));
#else
  (void)d;
#endif
  // No run to end beyond this process: it ends alone, with the message.
  std::fprintf(stderr, "duet: %s\n", message ? message : "duet_dist_abort");
  std::exit(1);
}

}  // extern "C"
