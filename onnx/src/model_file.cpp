#include "duet/model_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "duet/graph_file.h"
#include "duet/internal/files.h"

namespace duet {

Result<std::map<std::string, int64_t>> parse_onnx_dims(std::string_view text) {
  std::map<std::string, int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view term = text.substr(start, comma - start);
    start = comma + 1;
    if (term.empty()) continue;
    const size_t eq = term.find('=');
    if (eq == 0 || eq == std::string_view::npos)
      return Status(Code::invalid_argument,
                    "'" + std::string(term) + "': expected NAME=SIZE, e.g. batch=4");
    const std::string name(term.substr(0, eq));
    const std::string_view size = term.substr(eq + 1);
    auto bad = [&](const std::string& why) {
      return Status(Code::invalid_argument, "dimension '" + name + "': size '" + std::string(size) +
                                                "' " + why + " (expected a positive whole number)");
    };
    int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(size.data(), size.data() + size.size(), n);
    if (ec == std::errc::result_out_of_range)
      return bad(size.front() == '-' ? "is negative" : "is too large");
    if (size.empty() || ec != std::errc() || ptr != size.data() + size.size())
      return bad("is not a number");
    if (n <= 0) return bad(n == 0 ? "is zero" : "is negative");
    if (auto [at, added] = dims.emplace(name, n); !added && at->second != n)
      return Status(Code::invalid_argument, "dimension '" + name + "' is given two sizes, " +
                                                std::to_string(at->second) + " and " +
                                                std::to_string(n));
  }
  return dims;
}

namespace {

bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

ModelFormat format_of_text(std::string_view text) {
  for (char c : text)
    if (!blank(c)) return c == '{' ? ModelFormat::duet_json : ModelFormat::onnx;
  return ModelFormat::duet_json;  // nothing but blanks: the JSON parser says what is wrong
}

FileRules model_rules() {
  FileRules rules;
  rules.kind = "model file";
  rules.stream = true;
  return rules;
}

// A regular file's format from its first non-blank byte, read in place (nothing is consumed).
// Blanks are looked at up to the graph file cap: past it no file is a graph file.
ModelFormat format_of_file(const OpenFile& f) {
  std::string chunk(size_t{1} << 16, '\0');
  for (uint64_t at = 0; at < f.size() && at < kGraphFileMaxBytes;) {
    const ssize_t n = ::pread(f.fd(), chunk.data(), chunk.size(), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i)
      if (!blank(chunk[static_cast<size_t>(i)]))
        return chunk[static_cast<size_t>(i)] == '{' ? ModelFormat::duet_json : ModelFormat::onnx;
    at += static_cast<uint64_t>(n);
  }
  return f.size() > kGraphFileMaxBytes ? ModelFormat::onnx : ModelFormat::duet_json;
}

// A GGUF or safetensors file given where a graph is expected: refused by name, not as an ONNX
// model whose protobuf does not parse.
Status not_a_weights_file(const OpenFile& f) {
  unsigned char head[9] = {};
  ssize_t n = -1;
  do n = ::pread(f.fd(), head, sizeof head, 0);
  while (n < 0 && errno == EINTR);
  if (n < static_cast<ssize_t>(sizeof head)) return {};
  const char* what = nullptr;
  if (std::memcmp(head, "GGUF", 4) == 0) {
    what =
        "a GGUF file (weights and their metadata, no graph): a Llama-architecture GGUF runs "
        "with duet-llama, and a duet graph can take its constants from one (docs/models.md)";
  } else {
    // safetensors: an 8-byte little-endian header length, then the JSON header.
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = len << 8 | head[i];
    if (head[8] == '{' && len >= 2 && len + 8 <= f.size())
      what =
          "a safetensors file (tensors, no graph): a duet graph can take its constants from one "
          "(docs/models.md)";
  }
  if (!what) return {};
  return at(f.name(),
            Err(Code::invalid_argument).expected("a duet graph (JSON) or an ONNX model").got(what));
}

}  // namespace

Result<ModelFormat> model_format(const std::string& path) {
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, model_rules()));
  if (f.regular()) return format_of_file(f);
  // A stream can be looked at only by reading it: its first blanks and byte are consumed.
  char c = ' ';
  for (uint64_t n = 0; blank(c) && n < kGraphFileMaxBytes; ++n)
    if (::read(f.fd(), &c, 1) != 1) break;
  return c == '{' ? ModelFormat::duet_json : ModelFormat::onnx;
}

Result<Graph> load_model(const std::string& path, const ModelOptions& options,
                         ModelFormat* format) {
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, model_rules()));
  GraphLoadOptions g;
  g.load_constants = options.load_constants;
  g.memory_budget = options.memory_budget;
  OnnxOptions o = options.onnx;
  o.load_constants = options.load_constants;
  if (o.memory_budget == 0) o.memory_budget = options.memory_budget;
  if (!f.regular()) {
    // A stream is read once, within the graph file cap, and told apart by what it gave.
    DUET_ASSIGN_OR_RETURN(std::string text, read_all(f, kGraphFileMaxBytes));
    const ModelFormat fmt = format_of_text(text);
    if (format) *format = fmt;
    if (fmt == ModelFormat::duet_json) return graph_from_json_file(text, path, g);
    const std::string dir = std::filesystem::path(path).parent_path().string();
    return import_onnx(std::as_bytes(std::span(text.data(), text.size())), dir.empty() ? "." : dir,
                       path, o);
  }
  const ModelFormat fmt = format_of_file(f);
  if (format) *format = fmt;
  if (fmt == ModelFormat::duet_json) return load_graph(path, g);
  DUET_TRY(not_a_weights_file(f));
  return import_onnx(path, o);
}

}  // namespace duet
