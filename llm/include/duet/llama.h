// A Llama-architecture decoder read from a GGUF file (tensor names and metadata as llama.cpp
// writes them) and run by duet: the graph is built once, its KV cache lives on the devices as
// graph states, and every decode step reuses one plan with the position given at run time.
//
//   auto m = llama::Model::open("model.gguf", devices);
//   auto ids = (*m)->generate({1, 15043, 29892}, 32);
//
// Text in and out, sampling and a C API are in duet/llm.h and duet/duet_llm.h, over this.
//
// The graph, per layer N (x is the residual stream, f32, [rows, E]):
//   h = rmsnorm(x, blk.N.attn_norm)
//   q, k, v = h @ attn_q^T, h @ attn_k^T, h @ attn_v^T, viewed as [1, heads, rows, head_dim]
//   q, k = rope(q, pos), rope(k, pos)        (GPT-J pairs for "llama"; NeoX where the file says)
//   k_cache.N, v_cache.N <- k, v at rows [pos, pos + rows)  (write_slice into the states)
//   x += attention(q, k_cache.N, v_cache.N, len = pos + rows, causal) @ attn_output^T
//   h = rmsnorm(x, blk.N.ffn_norm)
//   x += (silu(h @ ffn_gate^T) * (h @ ffn_up^T)) @ ffn_down^T
// then logits = rmsnorm(x, output_norm) @ output^T (token_embd when the file has no output).
// Inputs: "tokens" (i32 [rows]), "pos" and "len" (i32 [1]); output "logits" ([rows, vocab] or
// the last row only).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/engine.h"
#include "duet/export.h"
#include "duet/gguf.h"
#include "duet/graph.h"

namespace duet::llama {

struct DUET_API Config {
  std::string arch = "llama";  // general.architecture
  int64_t layers = 0, embd = 0, ff = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t context = 0;  // the file's training context (llama.context_length), 0 when absent
  int rope_dims = 0;
  float rope_theta = 10000.0f;
  float eps = 1e-5f;
  RopeMode rope_mode = RopeMode::gptj;
  bool tied_output = false;  // no output.weight: logits through token_embd
};

// The architecture's hyper-parameters from the file's metadata and tensor shapes, every one
// checked (an error names the key or tensor and what was expected).
DUET_API Result<Config> read_config(const GgufFile& file);

struct DUET_API BuildOptions {
  int64_t max_context = 512;  // the KV cache's capacity (rows)
  bool all_logits = false;    // logits of every row, else of the last one only
  DType cache_dtype = DType::f32;
  // Block-format weights are dequantized once when the graph is built (to f32, on the host)
  // when true; kept as stored when false (Model::open sets it when the devices have no kernel
  // for them).
  bool dequantize = false;
  // Model::forward runs more tokens than this in runs of at most this many rows (0: one run).
  int64_t prefill_chunk = 0;
  // The weights declared by dtype and shape, their data not read (bind_weights gives it later):
  // the graph's structure, for a runner that loads only part of it (a stage of a split).
  bool declare_weights = false;
};

// The decoder graph at `rows` rows per run (any later row count re-plans the same graph).
DUET_API Result<Graph> build_graph(const GgufFile& file, const Config& cfg,
                                   const BuildOptions& opts, int64_t rows = 1);
// Gives every constant of `graph` that has no data yet its weight from the file (dequantized as
// `opts` says): a graph built with declare_weights, or the part of one that a stage runs.
DUET_API Status bind_weights(const GgufFile& file, Graph& graph, const BuildOptions& opts);

// What runs the decoder's graph (inputs "tokens", "pos", "len"; output "logits") and keeps its
// KV cache: an Engine on this process's devices (Model::open with devices), or anything that runs
// the same graph elsewhere (duet-llama --distributed: its stages over the ranks of an MPI run).
class DUET_API Runner {
 public:
  virtual ~Runner() = default;
  virtual Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) = 0;
  // Several runs one after another (a prompt's chunks), each seeing the cache its predecessors
  // left; the outputs are run()'s in a loop. A runner over pipeline stages overlaps them
  // (duet-llama
  // --distributed: a rank starts chunk i+1 while the next rank runs chunk i).
  virtual Result<std::vector<std::map<std::string, HostTensor>>> run_all(
      std::span<const std::map<std::string, HostTensor>> runs) {
    std::vector<std::map<std::string, HostTensor>> out;
    for (const auto& inputs : runs) {
      auto r = run(inputs);
      if (!r.ok()) return r.status();
      out.push_back(std::move(*r));
    }
    return out;
  }
  virtual Status reset_states() = 0;  // the KV cache back to zero
  virtual std::string explain() const = 0;
};

// Makes the runner of the graph that build_graph(file, cfg, opts) builds.
using RunnerFactory = std::function<Result<std::unique_ptr<Runner>>(
    const GgufFile& file, const Config& cfg, const BuildOptions& opts)>;

struct DUET_API StepStats {
  int64_t tokens = 0;
  double prefill_s = 0, decode_s = 0;  // wall time of the prefill run and of all decode runs
  int decode_steps = 0;
};

class DUET_API Model {
 public:
  // Reads the file, builds the graph and plans it on `devices` (the planner places layers and
  // their caches). `opts.dequantize` is set when the stored weights cannot be planned.
  static Result<std::unique_ptr<Model>> open(const std::string& path, std::vector<Device*> devices,
                                             BuildOptions opts = {}, Policy policy = {});
  // The same from a file already read.
  static Result<std::unique_ptr<Model>> open(GgufFile file, std::vector<Device*> devices,
                                             BuildOptions opts = {}, Policy policy = {});
  // The decoder run by what `runner` makes (called again with dequantize set where the first
  // runner cannot take the weights as stored).
  static Result<std::unique_ptr<Model>> open(GgufFile file, const RunnerFactory& runner,
                                             BuildOptions opts = {});

  const Config& config() const { return cfg_; }
  const BuildOptions& options() const { return opts_; }
  // The engine of a model opened on devices (runs_here()); a model run elsewhere has none.
  Engine& engine() { return *engine_; }
  bool runs_here() const { return engine_ != nullptr; }
  // The engine's plans made so far and what its plain runs replay (Engine::plans_made,
  // recording_summary); 0 and nothing for a model run elsewhere, through a runner.
  int plans_made() const { return engine_ ? engine_->plans_made() : 0; }
  std::string recording_summary() const {
    return engine_ ? engine_->recording_summary() : std::string();
  }
  Runner& runner() { return *runner_; }
  int64_t position() const { return pos_; }
  // Whether the weights were dequantized at load time (see BuildOptions).
  bool dequantized() const { return opts_.dequantize; }
  // Why the weights were dequantized (the planner's refusal of them as stored), else empty.
  const std::string& note() const { return note_; }
  const GgufFile& file() const { return file_; }

  // Runs `tokens` at the current position, appends them to the cache and returns the logits
  // (f32, [rows or 1, vocab] as built), in runs of at most BuildOptions::prefill_chunk rows.
  // An empty list, an id outside the vocabulary or a cache overflow is an error, before any
  // run.
  Result<HostTensor> forward(std::span<const int32_t> tokens);
  // Greedy decoding: the prompt, then up to `n` new tokens (stops early at `eos` when >= 0).
  Result<std::vector<int32_t>> generate(std::span<const int32_t> prompt, int n, int32_t eos = -1,
                                        StepStats* stats = nullptr);
  Status reset();  // empty cache, position 0

  // The file's token strings (tokenizer.ggml.tokens), empty when it has none.
  const std::vector<std::string>& vocab() const { return vocab_; }

 private:
  Model() = default;
  GgufFile file_;
  Config cfg_;
  BuildOptions opts_;
  std::unique_ptr<Runner> runner_;
  Engine* engine_ = nullptr;  // runner_'s, when it is an engine here
  std::vector<std::string> vocab_;
  std::string note_;
  int64_t pos_ = 0;
};

// The index of the largest logit of row `row` (the first on a tie).
DUET_API int32_t argmax(const HostTensor& logits, int64_t row);

}  // namespace duet::llama
