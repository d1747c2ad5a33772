#include "duet/internal/caps_json.h"

#include <cstdio>
#include <set>

#include "duet/internal/files.h"

namespace duet {

using nlohmann::json;

namespace {

std::string uuid_str(const std::array<uint8_t, 16>& u) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(b, sizeof b, "%02x", u[i]);
    s += b;
  }
  return s;
}

bool parse_uuid(const std::string& s, std::array<uint8_t, 16>* out) {
  size_t k = 0;
  for (size_t i = 0; i < s.size() && k < 32; ++i) {
    char c = s[i];
    if (c == '-') continue;
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return false;
    (*out)[k / 2] = static_cast<uint8_t>(k % 2 ? ((*out)[k / 2] | v) : v << 4);
    ++k;
  }
  return k == 32;
}

// The scalar fields, listed once for both directions.
template <class F>
void scalar_fields(DeviceCaps& c, F&& f) {
  f("name", c.name);
  f("vendor", c.vendor);
  f("vendor_id", c.vendor_id);
  f("device_id", c.device_id);
  f("driver_name", c.driver_name);
  f("driver_version", c.driver_version);
  f("api_version", c.api_version);
  f("pci_bus_id", c.pci_bus_id);
  f("cc_major", c.cc_major);
  f("cc_minor", c.cc_minor);
  f("arch", c.arch);
  f("compute_units", c.compute_units);
  f("clock_mhz", c.clock_mhz);
  f("fp16_arith", c.fp16_arith);
  f("bf16_arith", c.bf16_arith);
  f("int8_arith", c.int8_arith);
  f("int_dot", c.int_dot);
  f("int_dot_accelerated", c.int_dot_accelerated);
  f("fp16_storage", c.fp16_storage);
  f("bf16_storage", c.bf16_storage);
  f("int8_storage", c.int8_storage);
  f("tensor_cores", c.tensor_cores);
  f("async_copy", c.async_copy);
  f("subgroup_size", c.subgroup_size);
  f("subgroup_min", c.subgroup_min);
  f("subgroup_max", c.subgroup_max);
  f("subgroup_size_control", c.subgroup_size_control);
  f("subgroup_arithmetic", c.subgroup_arithmetic);
  f("shared_mem_per_block", c.shared_mem_per_block);
  f("shared_mem_per_block_optin", c.shared_mem_per_block_optin);
  f("registers_per_block", c.registers_per_block);
  f("max_threads_per_block", c.max_threads_per_block);
  f("max_block_dims", c.max_block_dims);
  f("max_grid_dims", c.max_grid_dims);
  f("max_buffer_range", c.max_buffer_range);
  f("max_allocation", c.max_allocation);
  f("memory_bytes", c.memory_bytes);
  f("host_visible_device_memory", c.host_visible_device_memory);
  f("reads_host_memory", c.reads_host_memory);
  f("peak_gflops_f32", c.peak_gflops_f32);
  f("peak_gflops_f16", c.peak_gflops_f16);
  f("peak_gflops_bf16", c.peak_gflops_bf16);
  f("memory_gbps", c.memory_gbps);
  f("host_link_gbps", c.host_link_gbps);
  f("gemm_library", c.gemm_library);
  f("gemm_library_loaded", c.gemm_library_loaded);
  f("extra", c.extra);
  f("source", c.source);
}

// Records written before these facts had typed fields (`duet devices --profile` of an older duet)
// said them in "extra": read there where the typed field is absent. "extra" itself stays what
// it is, for display.
Status typed_from_extra(const json& j, DeviceCaps& c) {
  const auto from_extra = [&](const char* typed, const char* key) -> const std::string* {
    if (j.contains(typed)) return nullptr;
    auto it = c.extra.find(key);
    return it == c.extra.end() ? nullptr : &it->second;
  };
  if (const std::string* v = from_extra("int_dot_accelerated", "integer_dot_accelerated"))
    c.int_dot_accelerated = *v == "yes";
  if (const std::string* v = from_extra("max_texel_elements", "max_texel_buffer_elements")) {
    uint64_t n = 0;
    for (char ch : *v) {
      if (ch < '0' || ch > '9')
        return at("field 'extra'",
                  Err(Code::parse_error).expected("max_texel_buffer_elements as a number"));
      n = n * 10 + static_cast<uint64_t>(ch - '0');
    }
    c.max_texel_elements = n;
  }
  if (const std::string* v = from_extra("gemm_library", "cublas")) {
    c.gemm_library = *v;
    c.gemm_library_loaded = !v->empty() && v->rfind("unavailable", 0) != 0;
  }
  return {};
}

}  // namespace

json caps_to_json(const DeviceCaps& caps) {
  json j;
  j["backend"] = std::string(backend_name(caps.backend));
  j["type"] = std::string(device_type_name(caps.type));
  DeviceCaps& c = const_cast<DeviceCaps&>(caps);  // scalar_fields only reads here
  scalar_fields(c, [&j](const char* key, auto& v) { j[key] = v; });
  if (caps.uuid) j["uuid"] = uuid_str(*caps.uuid);
  if (caps.max_texel_elements) j["max_texel_elements"] = *caps.max_texel_elements;
  json units = json::array();
  for (const MatrixUnit& u : caps.matrix_units)
    units.push_back({{"api", u.api},
                     {"m", u.m},
                     {"n", u.n},
                     {"k", u.k},
                     {"a", std::string(dtype_name(u.a))},
                     {"acc", std::string(dtype_name(u.acc))}});
  j["matrix_units"] = units;
  return j;
}

Result<DeviceCaps> caps_from_json(const json& j) {
  auto bad = [](const std::string& key, const std::string& want) -> Status {
    return at("field '" + key + "'", Err(Code::parse_error).expected(want));
  };
  if (!j.is_object()) return Status(Code::parse_error, "capability record: expected a JSON object");
  DeviceCaps c;
  // "id" is the device's id in `duet devices --json` ("cuda:1"): a profile's id is given by the
  // order of the profiles planned for, so it is accepted and not read.
  std::set<std::string> known = {"backend",      "type", "uuid",
                                 "matrix_units", "id",   "max_texel_elements"};
  Status err;
  scalar_fields(c, [&](const char* key, auto& v) {
    known.insert(key);
    if (!err.ok() || !j.contains(key)) return;
    try {
      j.at(key).get_to(v);
    } catch (const json::exception&) {
      err = bad(key, "a value of the field's type");
    }
  });
  DUET_TRY(err);
  for (const auto& [key, _] : j.items())
    if (!known.count(key)) return bad(key, "a known capability field (see docs/profiles.md)");
  if (!j.contains("backend") || !j["backend"].is_string() ||
      !parse_backend(j["backend"].get<std::string>()))
    return bad("backend", "\"cpu\", \"vulkan\" or \"cuda\"");
  c.backend = *parse_backend(j["backend"].get<std::string>());
  if (j.contains("type")) {
    if (!j["type"].is_string() || !parse_device_type(j["type"].get<std::string>()))
      return bad("type", "cpu, integrated_gpu, discrete_gpu, virtual_gpu or other");
    c.type = *parse_device_type(j["type"].get<std::string>());
  }
  if (j.contains("uuid")) {
    std::array<uint8_t, 16> u{};
    if (!j["uuid"].is_string() || !parse_uuid(j["uuid"].get<std::string>(), &u))
      return bad("uuid", "32 hex digits");
    c.uuid = u;
  }
  if (j.contains("max_texel_elements")) {
    if (!j["max_texel_elements"].is_number_unsigned())
      return bad("max_texel_elements", "a number of elements");
    c.max_texel_elements = j["max_texel_elements"].get<uint64_t>();
  }
  DUET_TRY(typed_from_extra(j, c));
  if (j.contains("matrix_units")) {
    if (!j["matrix_units"].is_array()) return bad("matrix_units", "an array");
    for (const json& u : j["matrix_units"]) {
      MatrixUnit m;
      try {
        m.api = u.at("api").get<std::string>();
        m.m = u.at("m").get<int>();
        m.n = u.at("n").get<int>();
        m.k = u.at("k").get<int>();
        auto a = parse_dtype(u.at("a").get<std::string>());
        auto acc = parse_dtype(u.value("acc", std::string("f32")));
        if (!a || !acc) return bad("matrix_units", "dtypes f16, bf16, i8, f32");
        m.a = *a;
        m.acc = *acc;
      } catch (const json::exception&) {
        return bad("matrix_units", "objects with api, m, n, k, a, acc");
      }
      c.matrix_units.push_back(m);
    }
  }
  return c;
}

}  // namespace duet
