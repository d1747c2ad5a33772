// Built when ONNX support is not: every entry point says why.
#include "duet/onnx.h"

namespace duet {

namespace {
Status not_built() {
  return Status(Code::unsupported, DUET_ONNX_STUB_REASON);
}
}  // namespace

bool onnx_supported() {
  return false;
}

Result<Graph> import_onnx(const std::string&, const OnnxOptions&) {
  return not_built();
}

Result<Graph> import_onnx(std::span<const std::byte>, const std::string&, std::string_view,
                          const OnnxOptions&) {
  return not_built();
}

Result<HostTensor> read_onnx_tensor(const std::string&, std::string*) {
  return not_built();
}

}  // namespace duet
