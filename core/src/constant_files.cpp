#include "constant_files.h"

#include "duet/gguf.h"
#include "duet/int4_checkpoint.h"
#include "duet/safetensors.h"
#include "readers.h"

namespace duet {

struct ConstantFiles::Open {
  bool gguf = false;
  GgufFile g;
  SafetensorsFile st;
  std::optional<Int4Config> int4;  // read when the first int4 module is
};

ConstantFiles::ConstantFiles(const ModelFolder& folder) : folder_(folder) {}
ConstantFiles::~ConstantFiles() = default;

Result<HostTensor> ConstantFiles::load(const std::string& path, const std::string& key, DType dtype,
                                       const std::vector<int64_t>& shape) {
  auto it = files_.find(path);
  if (it == files_.end()) {
    auto open = std::make_unique<Open>();
    FileRules rules;
    rules.kind = "constant file";
    rules.inside = &folder_;
    DUET_ASSIGN_OR_RETURN(OpenFile file, open_file(path, rules));
    if (is_gguf(file)) {
      open->gguf = true;
      DUET_ASSIGN_OR_RETURN(open->g, read_gguf(file));
    } else {
      DUET_ASSIGN_OR_RETURN(open->st, read_safetensors(file));
    }
    it = files_.emplace(path, std::move(open)).first;
  }
  Open& f = *it->second;
  const TensorDesc want = TensorDesc::contiguous(dtype, shape);
  const std::string in = " in '" + path + "'";
  Result<HostTensor> t = Status(Code::internal, "unread");
  if (f.gguf) {
    t = f.g.tensor(key);
  } else if (!f.st.find(key) && is_int4_module(f.st, key)) {
    if (!f.int4) {
      DUET_ASSIGN_OR_RETURN(Int4Config c, int4_config_near(path));
      f.int4 = c;
    }
    t = read_int4_module(f.st, key, dtype, *f.int4, "file '" + path + "'");
  } else {
    t = f.st.view(key);
  }
  if (!t.ok()) return t.status().with_context("from '" + path + "'");
  if (t->dtype() != dtype || !t->desc().same_shape(want))
    return Err(Code::parse_error)
        .expected(want.str() + " as declared")
        .got(t->desc().str() + in +
             (f.gguf && t->desc().rank == 2
                  ? " (GGUF lists [" + std::to_string(t->desc().dim(1)) + ", " +
                        std::to_string(t->desc().dim(0)) + "] innermost first)"
                  : ""));
  return t;
}

}  // namespace duet
