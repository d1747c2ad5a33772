// The public entry points of the ONNX importer.
#include "duet/onnx.h"

#include <filesystem>

#include "importer.h"
#include "proto.h"

namespace duet {

namespace {
std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
}  // namespace

bool onnx_supported() {
  return true;
}

namespace {
Result<Graph> import_model(onnx::ModelProto& m, onnx_import::DataFolder data, std::string_view what,
                           const OnnxOptions& options, Graph::Remake remake = {}) {
  if (!m.has_graph())
    return Status(Code::parse_error, std::string(what) + ": the model has no graph");
  onnx_import::Importer im{std::string(what), std::move(data), options};
  im.remake(std::move(remake));
  return im.run(m);
}

// A model read from a file is imported again from it at other input shapes: every input's shape
// given (they size the symbolic dimensions, so `dims` is not repeated), no notes (the caller's
// list may be gone by then).
Graph::Remake import_again(const std::string& path, const OnnxOptions& options) {
  std::error_code ec;
  const std::filesystem::path where = std::filesystem::absolute(path, ec);
  OnnxOptions o = options;
  o.dims.clear();
  o.input_shapes.clear();
  o.notes = nullptr;
  return [file = ec ? path : where.string(),
          o](const std::map<std::string, TensorDesc>& shapes) -> Result<Graph> {
    OnnxOptions at = o;
    for (const auto& [name, d] : shapes) at.input_shapes[name] = {d.dims().begin(), d.dims().end()};
    return import_onnx(file, at);
  };
}
}  // namespace

Result<Graph> import_onnx(const std::string& path, const OnnxOptions& options) {
  DUET_ASSIGN_OR_RETURN(onnx::ModelProto m, onnx_import::read_model(path));
  return import_model(m, onnx_import::DataFolder::of_model_file(path), path, options,
                      import_again(path, options));
}

Result<Graph> import_onnx(std::span<const std::byte> model, const std::string& base_dir,
                          std::string_view what, const OnnxOptions& options) {
  DUET_ASSIGN_OR_RETURN(onnx::ModelProto m, onnx_import::parse_model(model, what));
  return import_model(m, onnx_import::DataFolder::of_dir(base_dir), what, options);
}

Result<HostTensor> read_onnx_tensor(const std::string& path, std::string* name) {
  DUET_ASSIGN_OR_RETURN(std::string bytes, onnx_import::read_file(path, kOnnxMaxModelBytes));
  DUET_ASSIGN_OR_RETURN(onnx::TensorProto t, onnx_import::parse_tensor(as_bytes(bytes), path));
  if (name) *name = t.name();
  auto a = onnx_import::tensor_array(t, onnx_import::DataFolder::of_model_file(path));
  if (!a.ok()) return a.status().with_context(path);
  auto h = a->to_host(t.name());
  if (!h.ok()) return h.status().with_context(path);
  return h;
}

}  // namespace duet
