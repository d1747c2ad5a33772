// duet quantize IN OUT --type FORMAT: a GGUF file whose float weight matrices are quantized to a
// block format by duet's quantizer (duet/quantize.h); everything else (metadata, tensors of rank
// other than 2, tensors already quantized, integer tensors, matrices whose rows are not whole
// blocks) is copied as it is. IN is a .gguf or a .safetensors file.
#include <cstdio>

#include "duet/commands.h"
#include "duet/common.h"
#include "duet/gguf.h"
#include "duet/internal/text.h"
#include "duet/quantize.h"
#include "duet/safetensors.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace quantize_command {
namespace {

struct Options {
  std::string in, out, type;
};

using Tensors = std::vector<std::pair<std::string, HostTensor>>;
using Metadata = std::vector<std::pair<std::string, GgufValue>>;

Status read_input(const std::string& path, Metadata& metadata, Tensors& tensors) {
  if (is_gguf_file(path)) {
    auto f = read_gguf(path);
    if (!f.ok()) return f.status();
    for (const auto& kv : f->metadata)
      if (kv.first != "general.file_type") metadata.push_back(kv);  // no longer what it says
    for (const GgufTensorInfo& info : f->tensors) {
      auto t = f->tensor(info.name);
      if (!t.ok()) return t.status();
      tensors.emplace_back(info.name, std::move(*t));
    }
    return {};
  }
  auto f = read_safetensors(path);
  if (!f.ok()) return f.status();
  for (const SafetensorsEntry& e : f->tensors) {
    auto t = f->tensor(e.name);
    if (!t.ok()) return t.status();
    tensors.emplace_back(e.name, std::move(*t));
  }
  return {};
}

int run_quantize(const CLI::App& cmd, const Options& o) {
  const std::optional<DType> format = parse_dtype(o.type);
  if (!format || !is_quantized(*format))
    return fail(cmd,
                "--type: expected a block format (" + dtype_names(kQuantizedDTypes) + "), got '" +
                    o.type + "'",
                2);
  Metadata metadata;
  Tensors tensors;
  if (Status s = read_input(o.in, metadata, tensors); !s.ok())
    return fail(cmd, s.message(), exit_status_for(s));
  const int64_t be = dtype_block_elems(*format);
  int quantized = 0;
  int64_t bytes_in = 0, bytes_out = 0;
  for (auto& [name, t] : tensors) {
    bytes_in += t.desc().nbytes();
    const TensorDesc& d = t.desc();
    if (is_float(t.dtype()) && d.rank == 2 && d.dim(-1) % be == 0) {
      auto q = quantize(t, *format, name);
      if (!q.ok()) return fail(cmd, q.status().message(), exit_status_for(q.status()));
      t = std::move(*q);
      ++quantized;
    }
    bytes_out += t.desc().nbytes();
  }
  metadata.emplace_back("general.quantization_version", GgufValue::of_int(GgufType::u32, 2));
  if (Status s = write_gguf(o.out, metadata, tensors); !s.ok())
    return fail(cmd, s.message(), exit_status_for(s));
  std::printf("%s: %d of %zu tensors quantized to %s, %.1f MB -> %.1f MB\n", o.out.c_str(),
              quantized, tensors.size(), std::string(dtype_name(*format)).c_str(),
              static_cast<double>(bytes_in) / 1e6, static_cast<double>(bytes_out) / 1e6);
  return 0;
}

}  // namespace
}  // namespace quantize_command

Command add_quantize(CLI::App& app) {
  using namespace quantize_command;
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a GGUF file whose float weight matrices are quantized to a block format (from a "
      ".gguf or .safetensors file)");
  cmd->add_option("in", opts->in, "The .gguf or .safetensors file to read")->required();
  cmd->add_option("out", opts->out, "The .gguf file to write")->required();
  cmd->add_option("--type", opts->type, "The block format: q4_k, q8_0, ...")->required();
  return {cmd, std::make_shared<std::function<int()>>(
                   [cmd, opts] { return run_quantize(*cmd, *opts); })};
}

}  // namespace duet::cli
