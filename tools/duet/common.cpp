#include "duet/common.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace duet::cli {

Result<std::vector<Device*>> select_devices(const Registry& reg,
                                            const std::vector<std::string>& ids) {
  std::vector<Device*> out;
  for (const std::string& id : ids) {
    Device* d = reg.find(id);
    if (!d) {
      std::string known;
      for (Device* k : reg.devices()) known += (known.empty() ? "" : ", ") + k->id();
      return Err(Code::not_found)
          .device(id)
          .expected("one of: " + known)
          .note("see `duet devices`");
    }
    out.push_back(d);
  }
  if (out.empty()) out = reg.devices();
  return out;
}

Status validate_ops(const std::vector<std::string>& ops) {
  for (const std::string& op : ops)
    if (!parse_op(op)) return Err(Code::not_found).op(op).note("unknown op");
  return {};
}

Status validate_dtypes(const std::vector<std::string>& dtypes) {
  for (const std::string& t : dtypes)
    if (!parse_dtype(t))
      return Err(Code::not_found).expected("a dtype: f32, f16, bf16, i8, i32").got(t);
  return {};
}

Status write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << content;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return Status(Code::io_error, "cannot write " + path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status(Code::io_error, "cannot move the finished " + path + " into place");
  }
  return {};
}

bool selected(const std::vector<std::string>& list, std::string_view value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace duet::cli
