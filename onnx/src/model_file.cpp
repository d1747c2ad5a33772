#include "duet/model_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "duet/graph_file.h"

namespace duet {

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
