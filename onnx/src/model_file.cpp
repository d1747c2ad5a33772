#include "duet/model_file.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "duet/graph_file.h"

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

Result<ModelFormat> model_format(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status(Code::invalid_argument, "'" + path + "' is a folder, not a model file");
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Status(Code::not_found,
                  "cannot open model file '" + path + "': " + std::strerror(errno));
  char c = 0;
  while (f.get(c))
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
  return f && c == '{' ? ModelFormat::duet_json : ModelFormat::onnx;
}

Result<Graph> load_model(const std::string& path, const ModelOptions& options) {
  DUET_ASSIGN_OR_RETURN(ModelFormat format, model_format(path));
  if (format == ModelFormat::duet_json) {
    GraphLoadOptions o;
    o.load_constants = options.load_constants;
    return load_graph(path, o);
  }
  OnnxOptions o = options.onnx;
  o.load_constants = options.load_constants;
  return import_onnx(path, o);
}

}  // namespace duet
