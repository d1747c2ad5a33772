// The duet command as one rank of an MPI run: every rank loads the model from its own path (only
// its stage's weights), opens its own devices and follows rank 0, which prints.
#include "duet/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "check/inputs.h"
#include "duet/backends.h"
#include "duet/commands.h"
#include "duet/graph_file.h"
#include "duet/safetensors.h"

#if DUET_HAVE_MPI
#include "duet/dist/agreement.h"
#include "duet/dist/engine.h"
#endif

namespace duet::cli {

void add_distributed_options(CLI::App& cmd, bool& distributed, DistributedArgs& args) {
  cmd.add_flag("--distributed", distributed,
               "Run as one rank of an MPI run (mpirun -np N duet ... --distributed): the graph "
               "is split into pipeline stages over the ranks (docs/distributed.md)");
  cmd.add_flag("--every-rank", args.every_rank,
               "With --distributed: a stage on every rank, even where fewer ranks are estimated "
               "faster (the plan says by how much)");
  cmd.add_flag("--pipelined", args.pipelined,
               "With --distributed (or rankN/NAME profiles): the stages planned for runs "
               "pipelined over them, the split of least time per run in the steady state; duet "
               "run pipelines its --repeats (rank 0 starts run i+1 while rank 1 works on run i; "
               "each sees the states the runs before it left) and prints the batch's time per "
               "run");
  cmd.add_option("--timeout", args.timeout_s,
                 "With --distributed: seconds any rank waits for another before the run is ended "
                 "with an error naming it, once started (default: $DUET_DIST_TIMEOUT, else 120)");
}

#if !DUET_HAVE_MPI

int run_distributed(const CLI::App& cmd, const DistributedArgs&) {
  return fail(cmd,
              "--distributed: this duet was built without MPI (install libopenmpi-dev and "
              "rebuild; docs/distributed.md)",
              2);
}

#else

// Named for the command, so that the sources compile together in a unity build.
namespace distributed_command {
namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool is_onnx(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

}  // namespace
}  // namespace distributed_command

int run_distributed(const CLI::App& cmd, const DistributedArgs& a) {
  using namespace distributed_command;
  if (!dist::launched_by_mpirun())
    return fail(cmd,
                "--distributed: start it with mpirun, one process per rank (mpirun -np 2 duet " +
                    cmd.get_name() + " MODEL --distributed); docs/distributed.md",
                2);
  dist::TransportOptions topts;
  topts.timeout_s = 120;
  auto opened = dist::Transport::open(topts);
  if (!opened.ok()) return fail(cmd, opened.status().message(), 1);
  dist::Transport& t = **opened;
  // Start-up waits for the slowest rank to open its devices and read its weights: the longer of
  // the default and --timeout; the runs, --timeout.
  const double run_timeout = a.timeout_s > 0 ? a.timeout_s : t.timeout_s();
  t.set_timeout(std::max(t.timeout_s(), run_timeout));
  auto end_all = [&](const Status& s, int code) -> int { t.abort(s, code); };
  // A refusal at start (another build or model on some rank) is the same on every rank: each
  // says it and ends alone, with no MPI_Abort racing the others' messages.
  auto refused = [&](const Status& s) {
    return fail(cmd, "rank " + std::to_string(t.rank()) + " (" + t.host() + "): " + s.message(), 1);
  };

  // The structure first; each rank reads its own stage's weights from its own copy of the file
  // (duet-graph JSON: only the stage's; ONNX keeps its weights in the model, read whole).
  std::vector<std::string> notes;
  const bool onnx = is_onnx(a.model.path);
  auto graph = load_graph_file(a.model, onnx, nullptr, &notes);
  if (!graph.ok()) end_all(graph.status(), 2);
  dist::DistributedOptions options;
  options.policy = a.policy.policy;
  options.cluster.every_rank = a.every_rank;
  options.cluster.pipelined = a.pipelined;
  if (!onnx && !a.plan_only) {
    const std::string base = folder_of(a.model.path);
    options.load_stage = [base](const Graph& stage) -> Result<Graph> {
      return graph_from_json(graph_to_json(stage), base);
    };
  }

  Registry reg = open_registry();
  std::vector<Device*> devices = reg.devices();
  if (a.plan_only) {
    std::string transports;
    auto cluster = dist::gather_cluster(t, *graph, devices, {}, &transports);
    if (!cluster.ok()) {
      if (dist::refused_at_start(cluster.status())) return refused(cluster.status());
      end_all(cluster.status(), 1);
    }
    if (t.rank() == 0) {
      ClusterOptions co;
      co.every_rank = a.every_rank;
      co.pipelined = a.pipelined;
      auto plan = plan_cluster(*graph, *cluster, a.policy.policy, co);
      if (!plan.ok()) end_all(plan.status(), 1);
      std::printf("%s%s", explain(*plan, *graph).c_str(), transports.c_str());
    }
    Status s = t.barrier("finish");
    if (!s.ok()) end_all(s, 1);
    return 0;
  }

  auto engine = dist::DistributedEngine::create(t, *graph, devices, options);
  if (!engine.ok()) {
    if (dist::refused_at_start(engine.status())) return refused(engine.status());
    end_all(engine.status(), 1);
  }
  dist::DistributedEngine& e = **engine;
  t.set_timeout(run_timeout);
  if (t.rank() != 0) {
    Status s = e.serve();
    if (!s.ok()) end_all(s, 1);
    return 0;
  }

  std::optional<std::map<std::string, HostTensor> > given;
  check::InputsSource source;
  if (!a.inputs_path.empty()) {
    auto read = read_inputs(a.inputs_path, source);
    if (!read.ok()) end_all(read.status(), 2);
    given = std::move(*read);
  }
  std::string inputs_note;
  auto inputs = check::graph_inputs(*graph, given ? &*given : nullptr, source, inputs_note);
  if (!inputs.ok()) end_all(inputs.status(), 2);

  if (a.explain) std::printf("%s", e.explain().c_str());
  std::vector<double> walls;
  std::map<std::string, HostTensor> outputs;
  if (a.pipelined) {
    const std::vector<std::map<std::string, HostTensor> > batch(static_cast<size_t>(a.repeats),
                                                                *inputs);
    const auto t0 = std::chrono::steady_clock::now();
    auto out = e.run_pipelined(batch);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!out.ok()) end_all(out.status(), 1);
    walls.push_back(wall / a.repeats);
    outputs = std::move(out->back());
  }
  for (int r = 0; r < (a.pipelined ? 0 : a.repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = e.run(*inputs);
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!out.ok()) end_all(out.status(), 1);
    outputs = std::move(*out);
  }
  std::sort(walls.begin(), walls.end());
  const ClusterPlan& plan = e.plan();
  std::printf("graph '%s': %d run%s over %d ranks, %zu stage%s\n", graph->name().c_str(), a.repeats,
              a.repeats == 1 ? "" : "s", t.size(), plan.stages.size(),
              plan.stages.size() == 1 ? "" : "s");
  std::printf("%s\n", a.policy.line().c_str());
  if (!inputs_note.empty()) std::printf("%s\n", inputs_note.c_str());
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    std::printf("stage %zu: rank%d, nodes %d..%d ('%s' .. '%s')\n", i, s.range.rank, s.range.begin,
                s.range.end - 1, graph->nodes()[static_cast<size_t>(s.range.begin)].name.c_str(),
                graph->nodes()[static_cast<size_t>(s.range.end - 1)].name.c_str());
  }
  if (a.pipelined)
    std::printf("run %s (%d runs pipelined over the stages: the batch's time per run)\n",
                format_us(walls[0] * 1e6).c_str(), a.repeats);
  else
    std::printf("run %s (median of %d)\n", format_us(walls[walls.size() / 2] * 1e6).c_str(),
                a.repeats);
  for (const auto& [name, tensor] : outputs)
    std::printf("output %s %s\n", name.c_str(), tensor.desc().str().c_str());
  if (!a.outputs_path.empty()) {
    std::vector<std::pair<std::string, HostTensor> > list(outputs.begin(), outputs.end());
    auto bytes = encode_safetensors(
        list, {{"graph", graph->name()}, {"producer", "duet run --distributed"}});
    if (!bytes.ok()) end_all(bytes.status(), 1);
    const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    if (Status s = write_file_atomically(a.outputs_path, text); !s.ok()) end_all(s, 1);
    std::printf("outputs written to %s\n", a.outputs_path.c_str());
  }
  if (Status s = e.finish(); !s.ok()) end_all(s, 1);
  return 0;
}

#endif

}  // namespace duet::cli
