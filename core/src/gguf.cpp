#include "duet/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "duet/internal/files.h"
#include "duet/internal/text.h"
#include "duet/policy.h"
#include "readers.h"

namespace duet {

static_assert(std::endian::native == std::endian::little,
              "GGUF data is read in place as little-endian");

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxNameBytes = 64 << 10;  // a key or a tensor name

// A ggml type a GGUF file may name: id, name, elements per block, bytes per block.
struct GgmlType {
  int id;
  std::string_view name;
  int64_t block_elems, block_bytes;
};
// The ggml types duet does not compute with, so that a file holding one still reads (its tensors
// are refused by name). duet's own are its dtype table's (duet/dtype.h). Ids that ggml removed
// are absent (a file naming one is malformed).
constexpr GgmlType kForeignGgmlTypes[] = {
    {9, "q8_1", 32, 36},      {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {25, "i16", 1, 2},        {27, "i64", 1, 8},
    {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},   {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},    {40, "nvfp4", 64, 36},
    {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
};

// ggml's spelling of a type duet has: its name, with the k-quants' K in capitals ("q4_K").
std::string_view ggml_spelling(DType t) {
  static const auto names = [] {
    std::array<std::string, kNumDTypes> n;
    for (const DTypeInfo& d : all_dtype_infos()) {
      std::string s(d.name);
      if (s.size() == 4 && s[0] == 'q' && s[3] == 'k') s[3] = 'K';
      n[static_cast<size_t>(d.dtype)] = s;
    }
    return n;
  }();
  return names[static_cast<size_t>(t)];
}

std::optional<GgmlType> ggml_type(int id) {
  if (const std::optional<DType> t = dtype_of_ggml_type(id)) {
    const DTypeInfo& d = dtype_info(*t);
    return GgmlType{id, ggml_spelling(*t), d.block_elems, d.block_bytes};
  }
  for (const GgmlType& t : kForeignGgmlTypes)
    if (t.id == id) return t;
  return std::nullopt;
}

// The dtypes a GGUF file can hold that duet computes with, for messages.
std::string ggml_dtype_names() {
  std::vector<DType> v;
  for (const DTypeInfo& d : all_dtype_infos())
    if (d.ggml_type >= 0) v.push_back(d.dtype);
  return dtype_names(v);
}

// Smallest encoded size of a value of each type (strings: the 8-byte length).
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      return 1;
    case GgufType::u16:
    case GgufType::i16:
      return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32:
      return 4;
    default:
      return 8;
  }
}

bool known_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::f64);
}

std::string in_quotes(std::string_view s, size_t max = 60) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (s.size() > max ? "...\"" : "\"");
}

// Sequential reads over the header with the bytes left checked before every read.
class Reader {
 public:
  Reader(const std::byte* p, uint64_t size) : p_(p), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <class T>
  bool get(T* v) {
    if (left() < sizeof(T)) return false;
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // A string of at most `max` bytes (a longer one sets *too_long and is not read).
  bool get_string(std::string* s, uint64_t max = UINT64_MAX, bool* too_long = nullptr) {
    uint64_t n = 0;
    if (!get(&n) || n > left()) return false;
    if (n > max) {
      if (too_long) *too_long = true;
      return false;
    }
    s->assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return true;
  }

 private:
  const std::byte* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

class Parser {
 public:
  Parser(const std::byte* p, uint64_t size, std::string what) : r_(p, size), size_(size) {
    f_.what = std::move(what);
    f_.base = p;
    f_.size = size;
  }

  Result<GgufFile> parse();

 private:
  Status bad(const std::string& where, const std::string& expected, const std::string& got) {
    Err e(Code::parse_error);
    if (!where.empty())
      e.note(where + ": expected " + expected + ", got " + got);
    else
      e.expected(expected).got(got);
    return Status(e).with_context("gguf " + f_.what);
  }
  Status truncated(const std::string& where) {
    return bad(where, "more bytes", "the end of the file at byte " + std::to_string(r_.pos()));
  }

  Status header(uint64_t* n_tensors, uint64_t* n_kv);
  Status value(const std::string& where, GgufType type, GgufValue* v);
  Status metadata(uint64_t n_kv);
  Status tensor_infos(uint64_t n_tensors);
  Status data_section();

  Reader r_;
  uint64_t size_;
  GgufFile f_;
  // What the metadata's values take in memory (an 8-byte integer per u8 of an array, a string's
  // bytes and its object), within the reader's budget: a file cannot make the reader hold many
  // times its own size.
  uint64_t held_ = 0;
  uint64_t budget_ = import_memory_budget();
};

Status Parser::header(uint64_t* n_tensors, uint64_t* n_kv) {
  char magic[4] = {};
  if (!r_.get(&magic)) return bad("header", "the magic \"GGUF\"", std::to_string(size_) + " bytes");
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return bad("header", "the magic \"GGUF\"", in_quotes(std::string_view(magic, 4)));
  if (!r_.get(&f_.version)) return truncated("header version");
  if (f_.version == 1)
    return bad("header version", "version 2 or 3 (GGUF v1 is obsolete: convert the file again)",
               "1");
  if (f_.version > 3) {
    if (__builtin_bswap32(f_.version) <= 3)
      return bad("header version", "a little-endian file (big-endian GGUF is not supported)",
                 "version " + std::to_string(__builtin_bswap32(f_.version)) + " big-endian");
    return bad("header version", "version 2 or 3", std::to_string(f_.version));
  }
  if (!r_.get(n_tensors)) return truncated("header tensor count");
  if (!r_.get(n_kv)) return truncated("header key count");
  // Every tensor info takes at least 24 bytes and every key/value 13: counts beyond what the
  // file can hold are malformed (and must not size an allocation).
  if (*n_tensors > r_.left() / 24)
    return bad("header tensor count",
               "at most " + std::to_string(r_.left() / 24) + " tensors in a file of " +
                   std::to_string(size_) + " bytes",
               std::to_string(*n_tensors));
  if (*n_kv > r_.left() / 13)
    return bad("header key count",
               "at most " + std::to_string(r_.left() / 13) + " keys in a file of " +
                   std::to_string(size_) + " bytes",
               std::to_string(*n_kv));
  return {};
}

Status Parser::value(const std::string& where, GgufType type, GgufValue* v) {
  switch (type) {
    case GgufType::u8: {
      uint8_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::i8: {
      int8_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::u16: {
      uint16_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::i16: {
      int16_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::u32: {
      uint32_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::i32: {
      int32_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::u64: {
      uint64_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(static_cast<int64_t>(x));  // the bits; as_int() says when it overflows
      return {};
    }
    case GgufType::i64: {
      int64_t x;
      if (!r_.get(&x)) return truncated(where);
      v->ints.push_back(x);
      return {};
    }
    case GgufType::f32: {
      float x;
      if (!r_.get(&x)) return truncated(where);
      v->floats.push_back(x);
      return {};
    }
    case GgufType::f64: {
      double x;
      if (!r_.get(&x)) return truncated(where);
      v->floats.push_back(x);
      return {};
    }
    case GgufType::boolean: {
      uint8_t x;
      if (!r_.get(&x)) return truncated(where);
      if (x > 1) return bad(where, "a bool (0 or 1)", std::to_string(x));
      v->ints.push_back(x);
      return {};
    }
    case GgufType::string: {
      std::string s;
      bool too_long = false;
      if (!r_.get_string(&s, budget_ - std::min(held_, budget_), &too_long))
        return too_long ? bad(where,
                              "metadata that fits the reader's memory budget of " +
                                  format_bytes(budget_) + " (DUET_IMPORT_MEMORY raises it)",
                              "a longer string")
                        : bad(where, "a string inside the file", "a length past its end");
      held_ += s.size();
      v->strings.push_back(std::move(s));
      return {};
    }
    case GgufType::array:
      break;
  }
  return bad(where, "a scalar type", "an array inside an array");
}

Status Parser::metadata(uint64_t n_kv) {
  std::set<std::string, std::less<>> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string at = "key " + std::to_string(i);
    std::string key;
    bool too_long = false;
    if (!r_.get_string(&key, kMaxNameBytes, &too_long))
      return bad(at, too_long ? "a key of at most 64 KiB" : "a key string inside the file",
                 too_long ? "a longer one" : "a length past its end");
    if (key.empty()) return bad(at, "a non-empty key", "\"\"");
    const std::string where = "key " + in_quotes(key);
    held_ += 160 + 2 * key.size();  // the value, and the key in the list and the set of keys
    if (held_ > budget_)
      return bad(where,
                 "metadata that fits the reader's memory budget of " + format_bytes(budget_) +
                     " (DUET_IMPORT_MEMORY raises it)",
                 std::to_string(n_kv) + " keys");
    if (!keys.insert(key).second) return bad(where, "each key once", "a duplicate");
    uint32_t type = 0;
    if (!r_.get(&type)) return truncated(where + " type");
    if (!known_type(type))
      return bad(where + " type", "a GGUF value type (0 to 12)", std::to_string(type));
    GgufValue v;
    v.type = static_cast<GgufType>(type);
    if (v.type == GgufType::array) {
      uint32_t elem = 0;
      uint64_t n = 0;
      if (!r_.get(&elem)) return truncated(where + " array type");
      if (!known_type(elem) || elem == static_cast<uint32_t>(GgufType::array))
        return bad(where + " array type", "a scalar GGUF type (0 to 12, not an array)",
                   std::to_string(elem));
      v.elem = static_cast<GgufType>(elem);
      if (!r_.get(&n)) return truncated(where + " array length");
      const uint64_t each = v.elem == GgufType::string ? 40 : 8;
      if (n > (budget_ - std::min(held_, budget_)) / each)
        return bad(where + " array length",
                   "an array whose values fit the reader's memory budget of " +
                       format_bytes(budget_) + " (DUET_IMPORT_MEMORY raises it)",
                   std::to_string(n) + " " + std::string(gguf_type_name(v.elem)) + " values");
      held_ += n * each;
      if (n > r_.left() / min_value_bytes(v.elem))
        return bad(where + " array length",
                   "an array inside the file (at most " +
                       std::to_string(r_.left() / min_value_bytes(v.elem)) + " " +
                       std::string(gguf_type_name(v.elem)) + " values)",
                   std::to_string(n));
      for (uint64_t k = 0; k < n; ++k)
        DUET_TRY(value(where + " element " + std::to_string(k), v.elem, &v));
    } else {
      DUET_TRY(value(where, v.type, &v));
    }
    f_.metadata.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f_.find_metadata("general.alignment")) {
    if (a->type != GgufType::u32)
      return bad("key \"general.alignment\"", "a u32", std::string(gguf_type_name(a->type)));
    const uint64_t al = static_cast<uint64_t>(a->ints[0]);
    if (al == 0 || (al & (al - 1)) != 0)
      return bad("key \"general.alignment\"", "a power of two", std::to_string(al));
    f_.alignment = al;
  }
  return {};
}

Status Parser::tensor_infos(uint64_t n_tensors) {
  std::set<std::string, std::less<>> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    const std::string at = "tensor " + std::to_string(i);
    bool too_long = false;
    if (!r_.get_string(&t.name, kMaxNameBytes, &too_long))
      return bad(at, too_long ? "a name of at most 64 KiB" : "a name string inside the file",
                 too_long ? "a longer one" : "a length past its end");
    if (t.name.empty()) return bad(at, "a non-empty tensor name", "\"\"");
    const std::string where = "tensor " + in_quotes(t.name);
    held_ += 192 + 2 * t.name.size();  // the info, and its name in the set of names
    if (held_ > budget_)
      return bad(where,
                 "tensor infos that fit the reader's memory budget of " + format_bytes(budget_) +
                     " (DUET_IMPORT_MEMORY raises it)",
                 std::to_string(n_tensors) + " tensors");
    if (!names.insert(t.name).second) return bad(where, "each tensor name once", "a duplicate");
    uint32_t n_dims = 0;
    if (!r_.get(&n_dims)) return truncated(where + " dimension count");
    if (n_dims > kMaxDims)
      return bad(where + " dimension count", "at most 4", std::to_string(n_dims));
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      int64_t ne = 0;
      if (!r_.get(&ne)) return truncated(where + " dimensions");
      if (ne < 0)
        return bad(where + " dimension " + std::to_string(d), "a size >= 0", std::to_string(ne));
      t.ne.push_back(ne);
      if (ne != 0 && numel > (uint64_t{1} << 62) / static_cast<uint64_t>(ne))
        return bad(where + " dimensions", "fewer than 2^62 elements", "more");
      numel *= static_cast<uint64_t>(ne);
    }
    if (n_dims == 0) t.ne.push_back(1);  // a scalar
    uint32_t type = 0;
    if (!r_.get(&type)) return truncated(where + " type");
    t.ggml_type = static_cast<int>(type);
    const std::optional<GgmlType> gt =
        type < 1024 ? ggml_type(static_cast<int>(type)) : std::nullopt;
    if (!gt) return bad(where + " type", "a ggml type id", std::to_string(type));
    if (t.ne[0] % gt->block_elems != 0)
      return bad(where + " dimension 0",
                 "a multiple of " + std::to_string(gt->block_elems) + " (the " +
                     std::string(gt->name) + " block)",
                 std::to_string(t.ne[0]));
    t.bytes =
        numel / static_cast<uint64_t>(gt->block_elems) * static_cast<uint64_t>(gt->block_bytes);
    if (!r_.get(&t.offset)) return truncated(where + " offset");
    if (t.offset % f_.alignment != 0)
      return bad(where + " offset", "a multiple of the alignment " + std::to_string(f_.alignment),
                 std::to_string(t.offset));
    t.dtype = dtype_of_ggml_type(t.ggml_type);
    f_.tensors.push_back(std::move(t));
  }
  return {};
}

Status Parser::data_section() {
  const uint64_t al = f_.alignment;
  const uint64_t start = (r_.pos() + al - 1) / al * al;
  if (start < r_.pos() || (start > size_ && !f_.tensors.empty()))
    return bad("data section", "to start inside the file (at byte " + std::to_string(start) + ")",
               "a file of " + std::to_string(size_) + " bytes");
  f_.data_offset = std::min(start, size_);
  const uint64_t data_size = size_ - f_.data_offset;
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : f_.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      return bad("tensor " + in_quotes(t.name) + " data",
                 "bytes inside the data section of " + std::to_string(data_size) + " bytes",
                 "offset " + std::to_string(t.offset) + " + " + std::to_string(t.bytes) + " bytes");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo* prev = order[i - 1];
    if (order[i]->offset < prev->offset + prev->bytes)
      return bad("tensor " + in_quotes(order[i]->name) + " data",
                 "no overlap with tensor " + in_quotes(prev->name) + " (ending at " +
                     std::to_string(prev->offset + prev->bytes) + ")",
                 "offset " + std::to_string(order[i]->offset));
  }
  return {};
}

Result<GgufFile> Parser::parse() {
  uint64_t n_tensors = 0, n_kv = 0;
  DUET_TRY(header(&n_tensors, &n_kv));
  DUET_TRY(metadata(n_kv));
  DUET_TRY(tensor_infos(n_tensors));
  DUET_TRY(data_section());
  return std::move(f_);
}

void put_bytes(std::vector<std::byte>& out, const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}
template <class T>
void put(std::vector<std::byte>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::vector<std::byte>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

Status put_value(std::vector<std::byte>& out, GgufType t, const GgufValue& v, size_t i,
                 const std::string& key) {
  auto need = [&](size_t have) -> Status {
    if (i < have) return {};
    return Err(Code::invalid_argument)
        .op("gguf", key)
        .expected(std::to_string(i + 1) + " values of " + std::string(gguf_type_name(t)))
        .got(std::to_string(have));
  };
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      DUET_TRY(need(v.ints.size()));
      put<uint8_t>(out, static_cast<uint8_t>(v.ints[i]));
      return {};
    case GgufType::u16:
    case GgufType::i16:
      DUET_TRY(need(v.ints.size()));
      put<uint16_t>(out, static_cast<uint16_t>(v.ints[i]));
      return {};
    case GgufType::u32:
    case GgufType::i32:
      DUET_TRY(need(v.ints.size()));
      put<uint32_t>(out, static_cast<uint32_t>(v.ints[i]));
      return {};
    case GgufType::u64:
    case GgufType::i64:
      DUET_TRY(need(v.ints.size()));
      put<uint64_t>(out, static_cast<uint64_t>(v.ints[i]));
      return {};
    case GgufType::f32:
      DUET_TRY(need(v.floats.size()));
      put<float>(out, static_cast<float>(v.floats[i]));
      return {};
    case GgufType::f64:
      DUET_TRY(need(v.floats.size()));
      put<double>(out, v.floats[i]);
      return {};
    case GgufType::string:
      DUET_TRY(need(v.strings.size()));
      put_string(out, v.strings[i]);
      return {};
    case GgufType::array:
      break;
  }
  return Err(Code::invalid_argument).op("gguf", key).expected("a scalar element type").got("array");
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::u8:
      return "u8";
    case GgufType::i8:
      return "i8";
    case GgufType::u16:
      return "u16";
    case GgufType::i16:
      return "i16";
    case GgufType::u32:
      return "u32";
    case GgufType::i32:
      return "i32";
    case GgufType::f32:
      return "f32";
    case GgufType::boolean:
      return "bool";
    case GgufType::string:
      return "string";
    case GgufType::array:
      return "array";
    case GgufType::u64:
      return "u64";
    case GgufType::i64:
      return "i64";
    case GgufType::f64:
      return "f64";
  }
  return "?";
}

size_t GgufValue::size() const {
  switch (value_type()) {
    case GgufType::string:
      return strings.size();
    case GgufType::f32:
    case GgufType::f64:
      return floats.size();
    default:
      return ints.size();
  }
}

std::optional<int64_t> GgufValue::as_int() const {
  if (is_array() || ints.size() != 1 || value_type() == GgufType::boolean) return std::nullopt;
  if (type == GgufType::u64 && ints[0] < 0) return std::nullopt;  // beyond 2^63
  return ints[0];
}

std::optional<std::string> GgufValue::as_string() const {
  if (type != GgufType::string || strings.size() != 1) return std::nullopt;
  return strings[0];
}

std::string GgufValue::str(size_t max_items) const {
  auto item = [&](size_t i) -> std::string {
    switch (value_type()) {
      case GgufType::string:
        return in_quotes(strings[i]);
      case GgufType::f32:
      case GgufType::f64: {
        char b[32];
        std::snprintf(b, sizeof b, "%.9g", floats[i]);
        return b;
      }
      case GgufType::boolean:
        return ints[i] ? "true" : "false";
      case GgufType::u64:
        return std::to_string(static_cast<uint64_t>(ints[i]));
      default:
        return std::to_string(ints[i]);
    }
  };
  if (!is_array()) return size() ? item(0) : "";
  std::string s = "[" + std::to_string(size()) + " " + std::string(gguf_type_name(elem)) + ":";
  for (size_t i = 0; i < size() && i < max_items; ++i) s += (i ? ", " : " ") + item(i);
  return s + (size() > max_items ? ", ...]" : "]");
}

GgufValue GgufValue::of_int(GgufType t, int64_t v) {
  GgufValue g;
  g.type = t;
  g.ints = {v};
  return g;
}
GgufValue GgufValue::of_float(GgufType t, double v) {
  GgufValue g;
  g.type = t;
  g.floats = {v};
  return g;
}
GgufValue GgufValue::of_string(std::string v) {
  GgufValue g;
  g.type = GgufType::string;
  g.strings = {std::move(v)};
  return g;
}

std::string ggml_type_name(int id) {
  if (const std::optional<GgmlType> t = ggml_type(id)) return std::string(t->name);
  return "type " + std::to_string(id);
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

const GgufValue* GgufFile::find_metadata(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  return {base + data_offset + t.offset, static_cast<size_t>(t.bytes)};
}

Result<HostTensor> GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find(name);
  auto err = [&](Code c) { return Err(c).tensor(name); };
  if (!t) return err(Code::not_found).expected("a tensor of gguf " + what).got("no such name");
  if (!t->dtype)
    return err(Code::unsupported)
        .expected("a type duet computes with (" + ggml_dtype_names() + ")")
        .got(ggml_type_name(t->ggml_type) + " in gguf " + what);
  const std::vector<int64_t> shape = t->shape();
  const TensorDesc desc = TensorDesc::contiguous(*t->dtype, shape);
  if (Status s = validate(desc); !s.ok())
    return s.with_context("tensor '" + std::string(name) + "' of gguf " + what);
  auto* p = const_cast<std::byte*>(base + data_offset + t->offset);
  // A file whose general.alignment is 1 or 2 may place a tensor where its elements cannot be
  // loaded in place (an f32 at an odd address): such a tensor is copied to aligned memory.
  if (reinterpret_cast<uintptr_t>(p) % 4 != 0) {
    DUET_ASSIGN_OR_RETURN(HostTensor copy, HostTensor::with_storage(desc, t->bytes));
    std::memcpy(copy.storage(), p, static_cast<size_t>(t->bytes));
    return copy;
  }
  return HostTensor::borrow(desc, p, t->bytes, storage);
}

Result<GgufFile> parse_gguf(std::span<const std::byte> bytes, std::string_view what) {
  // An aligned copy, so tensors borrowed from it are as aligned as the file's offsets say.
  const size_t n = std::max<size_t>(bytes.size(), 1);
  std::shared_ptr<std::byte[]> copy(new (std::align_val_t(64)) std::byte[n], [](std::byte* p) {
    ::operator delete[](p, std::align_val_t(64));
  });
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  Parser p(copy.get(), bytes.size(), std::string(what));
  DUET_ASSIGN_OR_RETURN(GgufFile f, p.parse());
  f.storage = std::shared_ptr<void>(copy, copy.get());
  return f;
}

Result<GgufFile> read_gguf(const OpenFile& file) {
  // Read-only and shared: nothing is committed against memory (a file larger than memory and swap
  // opens, its pages read when touched), and a tensor over it cannot be written through.
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> map, map_file(file));
  const std::span<const std::byte> bytes = map->bytes();
  Parser parser(bytes.data(), bytes.size(), "file '" + file.path() + "'");
  DUET_ASSIGN_OR_RETURN(GgufFile f, parser.parse());
  f.storage = std::shared_ptr<void>(map, const_cast<std::byte*>(bytes.data()));
  return f;
}

Result<GgufFile> read_gguf(const std::string& path) {
  FileRules rules;
  rules.kind = "gguf file";
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, rules));
  return read_gguf(f);
}

bool is_gguf(const OpenFile& file) {
  return file.regular() && read_prefix(file, 4) == "GGUF";
}

bool is_gguf_file(const std::string& path) {
  FileRules rules;
  rules.kind = "gguf file";
  auto f = open_file(path, rules);
  return f.ok() && is_gguf(*f);
}

Result<std::vector<std::byte>> encode_gguf(
    const std::vector<std::pair<std::string, GgufValue>>& metadata,
    const std::vector<std::pair<std::string, HostTensor>>& tensors, uint32_t alignment) {
  auto err = [](const std::string& what) { return Err(Code::invalid_argument).op("gguf", what); };
  uint64_t al = alignment;
  bool alignment_key = false;
  for (const auto& [k, v] : metadata)
    if (k == "general.alignment") {
      if (v.type != GgufType::u32 || v.ints.size() != 1)
        return err(k).expected("a u32").got(std::string(gguf_type_name(v.type)));
      al = static_cast<uint64_t>(v.ints[0]);
      alignment_key = true;
    }
  if (al == 0 || (al & (al - 1)) != 0)
    return err("alignment").expected("a power of two").got(std::to_string(al));
  // Readers assume 32 unless the file says otherwise.
  std::vector<std::pair<std::string, GgufValue>> meta = metadata;
  if (!alignment_key && al != kGgufDefaultAlignment)
    meta.emplace_back("general.alignment",
                      GgufValue::of_int(GgufType::u32, static_cast<int64_t>(al)));
  std::vector<std::byte> out;
  put_bytes(out, "GGUF", 4);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, meta.size());
  std::set<std::string> keys;
  for (const auto& [k, v] : meta) {
    if (k.empty() || !keys.insert(k).second)
      return err(k).expected("unique, non-empty keys").got("'" + k + "'");
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    if (v.is_array()) {
      if (v.elem == GgufType::array) return err(k).expected("a scalar element type").got("array");
      put<uint32_t>(out, static_cast<uint32_t>(v.elem));
      put<uint64_t>(out, v.size());
      for (size_t i = 0; i < v.size(); ++i) DUET_TRY(put_value(out, v.elem, v, i, k));
    } else {
      DUET_TRY(put_value(out, v.type, v, 0, k));
    }
  }
  std::set<std::string> names;
  std::vector<HostTensor> dense;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || !names.insert(name).second)
      return err(name).expected("unique, non-empty tensor names").got("'" + name + "'");
    if (!t.defined()) return err(name).expected("tensor data").got("none");
    const int id = dtype_info(t.dtype()).ggml_type;
    if (id < 0)
      return err(name).expected("a dtype GGUF has").got(std::string(dtype_name(t.dtype())));
    dense.push_back(t.desc().is_contiguous() && t.desc().offset == 0 ? t : t.contiguous());
    put_string(out, name);
    put<uint32_t>(out, static_cast<uint32_t>(t.desc().rank));
    for (int d = t.desc().rank - 1; d >= 0; --d) put<int64_t>(out, t.desc().dim(d));
    put<uint32_t>(out, static_cast<uint32_t>(id));
    put<uint64_t>(out, offset);
    offset += (static_cast<uint64_t>(t.desc().nbytes()) + al - 1) / al * al;
  }
  out.resize((out.size() + al - 1) / al * al);
  for (const HostTensor& t : dense) {
    const size_t b = static_cast<size_t>(t.desc().nbytes());
    put_bytes(out, t.storage(), b);
    out.resize((out.size() + al - 1) / al * al);
  }
  return out;
}

Status write_gguf(const std::string& path,
                  const std::vector<std::pair<std::string, GgufValue>>& metadata,
                  const std::vector<std::pair<std::string, HostTensor>>& tensors,
                  uint32_t alignment) {
  DUET_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, encode_gguf(metadata, tensors, alignment));
  return write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace duet
