// duet gguf FILE: what a GGUF file holds (header, metadata, tensors with their types and duet
// shapes), checked as strictly as loading it is.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "duet/commands.h"
#include "duet/common.h"
#include "duet/gguf.h"
#include "duet/internal/text.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace gguf_command {
namespace {

struct Options {
  std::string file;
  bool json = false;
  bool all = false;  // every array element
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string type_of(const GgufTensorInfo& t) {
  return t.dtype ? std::string(dtype_name(*t.dtype)) : ggml_type_name(t.ggml_type);
}

int run_gguf(const CLI::App& cmd, const Options& o) {
  auto f = read_gguf(o.file);
  if (!f.ok()) return fail(cmd, f.status().message(), exit_status_for(f.status()));
  const size_t items = o.all ? SIZE_MAX : 6;
  if (o.json) {
    nlohmann::ordered_json j;
    j["file"] = o.file;
    j["version"] = f->version;
    j["alignment"] = f->alignment;
    j["data_offset"] = f->data_offset;
    j["bytes"] = f->size;
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f->metadata)
      meta[k] = {{"type", v.is_array() ? "array of " + std::string(gguf_type_name(v.elem))
                                       : std::string(gguf_type_name(v.type))},
                 {"value", v.str(items)}};
    j["metadata"] = meta;
    nlohmann::ordered_json ts = nlohmann::ordered_json::array();
    for (const GgufTensorInfo& t : f->tensors)
      ts.push_back({{"name", t.name},
                    {"type", type_of(t)},
                    {"shape", t.shape()},
                    {"bytes", t.bytes},
                    {"offset", t.offset},
                    {"supported", t.dtype.has_value()}});
    j["tensors"] = ts;
    // GGUF strings (vocabularies above all) are not always valid UTF-8: such bytes print as U+FFFD.
    std::printf("%s\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s: GGUF v%u, %s, %s, alignment %llu, data at byte %llu of %s\n", o.file.c_str(),
              f->version, counted(int64_t(f->metadata.size()), "key").c_str(),
              counted(int64_t(f->tensors.size()), "tensor").c_str(),
              static_cast<unsigned long long>(f->alignment),
              static_cast<unsigned long long>(f->data_offset), format_bytes(f->size).c_str());
  size_t kw = 3;
  for (const auto& [k, v] : f->metadata) kw = std::max(kw, k.size());
  std::printf("\n%-*s  %-10s %s\n", static_cast<int>(kw), "key", "type", "value");
  for (const auto& [k, v] : f->metadata)
    std::printf("%-*s  %-10s %s\n", static_cast<int>(kw), k.c_str(),
                v.is_array() ? ("[" + std::string(gguf_type_name(v.elem)) + "]").c_str()
                             : std::string(gguf_type_name(v.type)).c_str(),
                v.str(items).c_str());
  size_t nw = 6;
  for (const GgufTensorInfo& t : f->tensors) nw = std::max(nw, t.name.size());
  std::printf("\n%-*s  %-8s %-20s %12s\n", static_cast<int>(nw), "tensor", "type", "shape (duet)",
              "bytes");
  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type -> (count, bytes)
  uint64_t weights = 0;
  int unsupported = 0;
  for (const GgufTensorInfo& t : f->tensors) {
    std::printf("%-*s  %-8s %-20s %12s%s\n", static_cast<int>(nw), t.name.c_str(),
                type_of(t).c_str(), shape_str(t.shape()).c_str(), format_bytes(t.bytes).c_str(),
                t.dtype ? "" : "  (no duet kernel reads this type)");
    auto& bt = by_type[type_of(t)];
    ++bt.first;
    bt.second += t.bytes;
    uint64_t n = 1;
    for (int64_t d : t.ne) n *= static_cast<uint64_t>(d);
    weights += n;
    unsupported += t.dtype ? 0 : 1;
  }
  std::printf("\n%llu weights in", static_cast<unsigned long long>(weights));
  bool first = true;
  for (const auto& [type, cb] : by_type) {
    std::printf("%s %d %s (%s)", first ? "" : ",", cb.first, type.c_str(),
                format_bytes(cb.second).c_str());
    first = false;
  }
  std::printf("\n");
  if (unsupported)
    std::printf("%s of types duet cannot compute with: a graph may not use them\n",
                counted(unsupported, "tensor").c_str());
  return 0;
}

}  // namespace
}  // namespace gguf_command

Command add_gguf(CLI::App& app) {
  using namespace gguf_command;
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "gguf", "List what a GGUF file holds: header, metadata, tensors (type, shape, bytes)");
  cmd->add_option("file", opts->file, "The .gguf file")->required();
  cmd->add_flag("--json", opts->json, "Print JSON instead of tables");
  cmd->add_flag("--all", opts->all, "Print every element of array values");
  return {cmd,
          std::make_shared<std::function<int()>>([cmd, opts] { return run_gguf(*cmd, *opts); })};
}

}  // namespace duet::cli
