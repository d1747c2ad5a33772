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
    int64_t n = 0;
    const char* end = term.data() + term.size();
    if (eq == 0 || eq == std::string_view::npos ||
        std::from_chars(term.data() + eq + 1, end, n).ptr != end || n <= 0)
      return Status(Code::invalid_argument,
                    "dimension '" + std::string(term) +
                        "': expected NAME=SIZE with a positive size, e.g. batch=4");
    dims[std::string(term.substr(0, eq))] = n;
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
