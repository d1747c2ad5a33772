#include "duet/int4_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "duet/block_layout.h"
#include "duet/half.h"
#include "duet/internal/files.h"
#include "duet/internal/json.h"

namespace duet {

namespace fs = std::filesystem;

namespace {

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
// The nibble of a word holding column j (< 8) of its group of 8 in AWQ's order.
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
static_assert(kAwqOrder[kAwqNibble[5]] == 5);

struct Tensor2 {
  const SafetensorsEntry* e = nullptr;
  const std::byte* data = nullptr;
  int64_t rows = 0, cols = 0;
};

class ModuleReader {
 public:
  ModuleReader(const SafetensorsFile& f, std::string_view prefix, std::string_view what)
      : f_(f), prefix_(prefix), what_(what) {}

  Status fail(const std::string& tensor, const std::string& expected,
              const std::string& got) const {
    return Status(Err(Code::unsupported).tensor(tensor).expected(expected).got(got))
        .with_context("int4 module '" + prefix_ + "' of " + what_);
  }
  Status malformed(const std::string& tensor, const std::string& expected,
                   const std::string& got) const {
    return Status(Err(Code::parse_error).tensor(tensor).expected(expected).got(got))
        .with_context("int4 module '" + prefix_ + "' of " + what_);
  }

  // prefix.<part> with rank `rank` and one of the dtypes listed.
  Result<Tensor2> get(const std::string& part, int rank,
                      std::initializer_list<std::string_view> dtypes, bool required = true) const {
    const std::string name = prefix_ + "." + part;
    Tensor2 t;
    t.e = f_.find(name);
    if (!t.e) {
      if (!required) return t;
      return malformed(name, "a tensor of the module", "none in the file");
    }
    bool dtype_ok = false;
    std::string list;
    for (std::string_view d : dtypes) {
      dtype_ok = dtype_ok || t.e->dtype == d;
      list += (list.empty() ? "" : " or ") + std::string(d);
    }
    if (!dtype_ok) return malformed(name, list, t.e->dtype);
    if (static_cast<int>(t.e->shape.size()) != rank)
      return malformed(name, "rank " + std::to_string(rank),
                       "rank " + std::to_string(t.e->shape.size()));
    t.rows = t.e->shape[0];
    t.cols = rank == 2 ? t.e->shape[1] : 1;
    if (t.rows <= 0 || t.cols <= 0)
      return malformed(name, "a non-empty tensor", "a zero dimension");
    t.data = f_.data.data() + t.e->begin;
    return t;
  }

  const std::string& prefix() const { return prefix_; }

 private:
  const SafetensorsFile& f_;
  std::string prefix_;
  std::string what_;
};

uint32_t word_at(const Tensor2& t, int64_t r, int64_t c) {
  uint32_t w;
  std::memcpy(&w, t.data + (r * t.cols + c) * 4, 4);
  return w;
}

// Scale (g, n) as f16 bits, when the stored value is exactly an f16.
std::optional<uint16_t> scale_at(const Tensor2& t, int64_t g, int64_t n) {
  const std::byte* p = t.data;
  const int64_t i = g * t.cols + n;
  uint16_t h = 0;
  float v = 0;
  if (t.e->dtype == "F16") {
    std::memcpy(&h, p + i * 2, 2);
    return h;
  }
  if (t.e->dtype == "BF16") {
    std::memcpy(&h, p + i * 2, 2);
    v = bf16_to_f32(h);
  } else {
    std::memcpy(&v, p + i * 4, 4);
  }
  const uint16_t as_half = f32_to_f16(v);
  if (!(f16_to_f32(as_half) == v) && !(v != v)) return std::nullopt;
  return as_half;
}

}  // namespace

Result<Int4Config> int4_config_near(const std::string& weights_path) {
  Int4Config c;
  const fs::path dir = fs::path(weights_path).parent_path();
  for (const char* name : {"quantize_config.json", "quant_config.json", "config.json"}) {
    const fs::path p = dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    DUET_ASSIGN_OR_RETURN(std::string text,
                          read_whole_file(p.string(), kSidecarMaxBytes, "quantization config"));
    auto parsed = parse_json(text);
    if (!parsed.ok() || !parsed->is_object())
      return at("quantization config '" + p.string() + "'",
                Err(Code::parse_error)
                    .expected("a JSON object")
                    .got(parsed.ok() ? json_excerpt(*parsed) : parsed.status().message()));
    nlohmann::json j = std::move(*parsed);
    if (std::string(name) == "config.json") {
      if (!j.contains("quantization_config")) continue;
      j = j["quantization_config"];
      if (!j.is_object()) continue;
    }
    auto str = [&](const char* k) {
      return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
    };
    c.method = str("quant_method");
    c.checkpoint_format = str("checkpoint_format");
    if (j.contains("bits") && j["bits"].is_number_integer()) c.bits = j["bits"].get<int>();
    if (j.contains("w_bit") && j["w_bit"].is_number_integer()) c.bits = j["w_bit"].get<int>();
    for (const char* k : {"group_size", "q_group_size"})
      if (j.contains(k) && j[k].is_number_integer()) c.group_size = j[k].get<int64_t>();
    if (j.contains("desc_act") && j["desc_act"].is_boolean())
      c.desc_act = j["desc_act"].get<bool>();
    const std::string version = str("version");
    if (c.method == "awq" && !version.empty() && version != "gemm" && version != "GEMM")
      return Err(Code::unsupported)
          .tensor(p.string())
          .expected("AWQ's GEMM packing (version \"gemm\")")
          .got("version \"" + version + "\"");
    c.source = p.string();
    return c;
  }
  return c;
}

bool is_int4_module(const SafetensorsFile& file, std::string_view prefix) {
  return file.find(std::string(prefix) + ".qweight") != nullptr;
}

Result<HostTensor> read_int4_module(const SafetensorsFile& file, std::string_view prefix, DType as,
                                    const Int4Config& config, std::string_view what,
                                    Int4Module* info) {
  ModuleReader r(file, prefix, what);
  const std::string p(prefix);
  if (as != DType::q4_z && as != DType::q4_0)
    return r.fail(p, "a module declared q4_z (or q4_0 when symmetric)",
                  std::string(dtype_name(as)));
  if (config.bits && *config.bits != 4)
    return r.fail(p, "4-bit weights", std::to_string(*config.bits) + " bits in " + config.source);
  DUET_ASSIGN_OR_RETURN(Tensor2 qw, r.get("qweight", 2, {"I32", "U32"}));
  DUET_ASSIGN_OR_RETURN(Tensor2 qz, r.get("qzeros", 2, {"I32", "U32"}));
  DUET_ASSIGN_OR_RETURN(Tensor2 sc, r.get("scales", 2, {"F16", "BF16", "F32"}));
  DUET_ASSIGN_OR_RETURN(Tensor2 gi, r.get("g_idx", 1, {"I32", "I64"}, false));

  Int4Module m;
  if (sc.cols == qw.cols) {
    m.packing = Int4Packing::gptq;
    m.n = qw.cols;
    m.k = qw.rows * 8;
  } else if (sc.cols == qw.cols * 8) {
    m.packing = Int4Packing::awq;
    m.n = sc.cols;
    m.k = qw.rows;
    if (gi.e) return r.malformed(p + ".g_idx", "no g_idx in an AWQ module", "one");
  } else {
    return r.fail(p + ".qweight",
                  "GPTQ packing (qweight [K/8, N] beside scales [G, N]) or AWQ's GEMM packing "
                  "(qweight [K, N/8])",
                  "qweight [" + std::to_string(qw.rows) + ", " + std::to_string(qw.cols) +
                      "] beside scales [" + std::to_string(sc.rows) + ", " +
                      std::to_string(sc.cols) + "]");
  }
  const int64_t G = sc.rows;
  if (m.k % G != 0)
    return r.malformed(p + ".scales", "a group count dividing K = " + std::to_string(m.k),
                       std::to_string(G) + " groups");
  m.group = m.k / G;
  if (config.group_size && *config.group_size > 0 && *config.group_size != m.group)
    return r.malformed(
        p + ".scales",
        "groups of " + std::to_string(*config.group_size) + " as " + config.source + " says",
        "groups of " + std::to_string(m.group));
  if (m.group % DUET_Q4_Z_ELEMS != 0)
    return r.fail(p, "a group size that is a multiple of 32 (duet's block)",
                  "groups of " + std::to_string(m.group));
  if (m.n % 8 != 0 || qz.rows != G || qz.cols != m.n / 8)
    return r.malformed(p + ".qzeros",
                       "[" + std::to_string(G) + ", " + std::to_string(m.n / 8) + "]",
                       "[" + std::to_string(qz.rows) + ", " + std::to_string(qz.cols) + "]");
  if (gi.e) {
    if (gi.rows != m.k)
      return r.malformed(p + ".g_idx", std::to_string(m.k) + " entries", std::to_string(gi.rows));
    for (int64_t k = 0; k < m.k; ++k) {
      int64_t g = 0;
      if (gi.e->dtype == "I32") {
        int32_t v;
        std::memcpy(&v, gi.data + k * 4, 4);
        g = v;
      } else {
        std::memcpy(&g, gi.data + k * 8, 8);
      }
      if (g != k / m.group)
        return r.fail(p + ".g_idx",
                      "groups in the order of K (g_idx[k] = k / " + std::to_string(m.group) +
                          "): GPTQ act-order (desc_act) permutes them, which duet's blocks of 32 "
                          "consecutive weights with one scale cannot hold exactly; re-quantize "
                          "without desc_act",
                      "g_idx[" + std::to_string(k) + "] = " + std::to_string(g));
    }
  }

  // Zero points as integers [G][N].
  const bool v1 = m.packing == Int4Packing::gptq && config.gptq_v1();
  std::vector<uint8_t> zeros(static_cast<size_t>(G * m.n));
  m.symmetric = true;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < m.n / 8; ++c) {
      uint32_t w = word_at(qz, g, c);
      if (v1) w += 0x11111111u;  // as GPTQModel's v1 -> v2 conversion does, carries included
      for (int j = 0; j < 8; ++j) {
        const int nib = m.packing == Int4Packing::awq ? kAwqNibble[j] : j;
        const uint8_t z = static_cast<uint8_t>((w >> (4 * nib)) & 0xF);
        zeros[static_cast<size_t>(g * m.n + c * 8 + j)] = z;
        m.symmetric = m.symmetric && z == 8;
      }
    }
  if (as == DType::q4_0 && !m.symmetric)
    return r.fail(p, "zero points all 8 for q4_0 (a symmetric module)",
                  "other zero points: declare it q4_z");

  HostTensor out = HostTensor::empty(as, std::vector<int64_t>{m.n, m.k});
  const int64_t be = 32, bb = dtype_block_bytes(as);
  const int64_t blocks = m.k / be;
  std::byte* dst = out.storage();
  uint8_t q[32];
  for (int64_t n = 0; n < m.n; ++n) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t g = b * be / m.group;
      const std::optional<uint16_t> s = scale_at(sc, g, n);
      if (!s)
        return r.fail(p + ".scales", "scales that f16 holds exactly",
                      "a " + sc.e->dtype + " value f16 rounds, at [" + std::to_string(g) + ", " +
                          std::to_string(n) + "]");
      for (int e = 0; e < 32; ++e) {
        const int64_t k = b * be + e;
        uint32_t w;
        int nib;
        if (m.packing == Int4Packing::gptq) {
          w = word_at(qw, k / 8, n);
          nib = static_cast<int>(k % 8);
        } else {
          w = word_at(qw, k, n / 8);
          nib = kAwqNibble[n % 8];
        }
        q[e] = static_cast<uint8_t>((w >> (4 * nib)) & 0xF);
      }
      std::byte* blk = dst + (n * blocks + b) * bb;
      uint8_t* qs;
      if (as == DType::q4_z) {
        std::memcpy(blk + DUET_Q4_Z_D, &*s, 2);
        blk[DUET_Q4_Z_Z] = static_cast<std::byte>(zeros[static_cast<size_t>(g * m.n + n)]);
        blk[DUET_Q4_Z_PAD] = std::byte{0};
        qs = reinterpret_cast<uint8_t*>(blk + DUET_Q4_Z_QS);
      } else {
        std::memcpy(blk + DUET_Q4_0_D, &*s, 2);
        qs = reinterpret_cast<uint8_t*>(blk + DUET_Q4_0_QS);
      }
      for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>(q[i] | q[i + 16] << 4);
    }
  }
  if (info) *info = m;
  return out;
}

}  // namespace duet
