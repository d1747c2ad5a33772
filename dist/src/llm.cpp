#include "duet/dist/llm.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "duet/llama.h"

namespace duet::dist {

namespace {
// The decoder's stages over the ranks: rank 0 runs and resets them, the others serve().
class DistributedRunner final : public llama::Runner {
 public:
  explicit DistributedRunner(std::unique_ptr<DistributedEngine> e) : e_(std::move(e)) {}
  Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) override {
    return e_->run(inputs);
  }
  // A prompt's chunks pipelined over the stages (rank 0 starts chunk i+1 while rank 1 runs i).
  Result<std::vector<std::map<std::string, HostTensor>>> run_all(
      std::span<const std::map<std::string, HostTensor>> runs) override {
    return e_->run_pipelined(runs);
  }
  Status reset_states() override { return e_->reset_states(); }
  std::string explain() const override { return e_->explain(); }
  DistributedEngine& engine() { return *e_; }

 private:
  std::unique_ptr<DistributedEngine> e_;
};
}  // namespace

std::string model_identity(const GgufFile& f) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  auto text = [&mix](const std::string& t) { mix(t.data(), t.size() + 1); };
  for (const auto& [key, value] : f.metadata) text(key + "=" + value.str());
  for (const GgufTensorInfo& t : f.tensors) {
    text(t.name);
    mix(t.ne.data(), t.ne.size() * sizeof(int64_t));
    mix(&t.ggml_type, sizeof t.ggml_type);
    mix(&t.offset, sizeof t.offset);
  }
  for (const GgufTensorInfo& t : f.tensors)
    if (t.name.find("norm.weight") != std::string::npos) {
      const auto bytes = f.tensor_bytes(t);
      mix(bytes.data(), bytes.size());
    }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

decltype(llm::ModelOptions::runner) llm_runner(Transport& transport, bool every_rank,
                                               DistributedEngine** stages) {
  Transport* t = &transport;
  return
      [t, every_rank, stages](const GgufFile& file, const llama::Config& cfg,
                              const llama::BuildOptions& opts, const std::vector<Device*>& devices,
                              const Policy& policy) -> Result<std::unique_ptr<llama::Runner>> {
        // Every rank builds the structure alone; each reads the weights of its own stage.
        llama::BuildOptions declared = opts;
        declared.declare_weights = true;
        DUET_ASSIGN_OR_RETURN(Graph graph, llama::build_graph(file, cfg, declared, 1));
        DistributedOptions o;
        o.policy = policy;
        o.cluster.every_rank = every_rank;
        o.agree_on = "model " + model_identity(file);
        o.load_stage = [&file, opts](const Graph& stage) -> Result<Graph> {
          Graph mine = stage;
          DUET_TRY(llama::bind_weights(file, mine, opts));
          return mine;
        };
        DUET_ASSIGN_OR_RETURN(auto e, DistributedEngine::create(*t, graph, devices, o));
        auto r = std::make_unique<DistributedRunner>(std::move(e));
        if (stages) *stages = &r->engine();
        return std::unique_ptr<llama::Runner>(std::move(r));
      };
}

}  // namespace duet::dist
