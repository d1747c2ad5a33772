// Part of the shader build tool (shaders/shaderc.cpp): finishes the cooperative-matrix shaders that
// glslang 12 (Debian 12) compiles through GL_EXT_spirv_intrinsics, and makes a twin of each that
// spirv-tools 2023.1 can validate (spirv_coopmat.h).
//
// glslang 12 predates GL_KHR_cooperative_matrix, and spirv-tools 2023.1 predates
// SPV_KHR_cooperative_matrix (it cannot even disassemble capability 6022). The shaders declare
// the matrix type as spirv_type(id = 4456, C, 3, R, K, USE) and the instructions as
// spirv_instruction(id = 4457..4459). glslang writes the type's parameters as literal words, where
// OpTypeCooperativeMatrixKHR takes ids: the component type (here the literal 16 or 32 stands for
// the f16 or f32 float type), and the ids of integer constants for scope, rows, columns and use.
// This tool rewrites those operands (declaring the constants, and moving the scalar types the
// matrix types name ahead of them), checks every cooperative-matrix instruction against the
// types it names (a load's result is an A, B or accumulator matrix, MulAdd takes an A, a B and an
// accumulator of matching sizes, a store writes a matrix): the module the device gets.
//
// The twin is the same module in SPV_NV_cooperative_matrix's terms (NVIDIA's older extension, which
// spirv-val 2023.1 knows): capability and extension renamed, the Use operand dropped (matrix
// types that then coincide merged), a load's or store's MemoryLayout id replaced by the boolean
// ColumnMajor it means, MulAdd without operands. spirv-val checks everything else in it: the
// pointers the loads and stores take, strides, scopes, matrix operand types, and the rest of the
// shader. The translation is mechanical, so a valid twin vouches for the module's structure.
#include "spirv_coopmat.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kMagic = 0x07230203;
enum : uint32_t {
  OpExtension = 10,
  OpTypeBool = 20,
  OpTypeInt = 21,
  OpTypeFloat = 22,
  OpConstantTrue = 41,
  OpConstantFalse = 42,
  OpConstant = 43,
  OpFunction = 54,
  OpCapability = 17,
  OpTypeCoopKHR = 4456,
  OpLoadKHR = 4457,
  OpStoreKHR = 4458,
  OpMulAddKHR = 4459,
  OpLengthKHR = 4460,
  OpTypeCoopNV = 5358,
  OpLoadNV = 5359,
  OpStoreNV = 5360,
  OpMulAddNV = 5361,
  OpLengthNV = 5362,
  CapCoopKHR = 6022,
  CapCoopNV = 5357,
};

struct Inst {
  uint32_t op = 0;
  std::vector<uint32_t> w;  // operands (after the first word)
};

struct Module {
  std::vector<uint32_t> header;  // 5 words
  std::vector<Inst> insts;
  uint32_t& bound() { return header[3]; }
};

bool fail(const std::string& m) {
  std::fprintf(stderr, "spirv_coopmat: %s\n", m.c_str());
  return false;
}

bool parse(const std::vector<uint32_t>& w, Module& m) {
  if (w.size() < 5 || w[0] != kMagic) return fail("not SPIR-V");
  m.header.assign(w.begin(), w.begin() + 5);
  for (size_t i = 5; i < w.size();) {
    const uint32_t n = w[i] >> 16;
    if (n == 0 || i + n > w.size()) return fail("truncated instruction");
    m.insts.push_back(
        {w[i] & 0xffffu, std::vector<uint32_t>(w.begin() + static_cast<long>(i) + 1,
                                               w.begin() + static_cast<long>(i + n))});
    i += n;
  }
  return true;
}

std::vector<uint32_t> words_of(const Module& m) {
  std::vector<uint32_t> w = m.header;
  for (const Inst& i : m.insts) {
    w.push_back(static_cast<uint32_t>((i.w.size() + 1) << 16) | i.op);
    w.insert(w.end(), i.w.begin(), i.w.end());
  }
  return w;
}

std::vector<uint32_t> string_words(const std::string& s) {
  std::vector<uint32_t> w((s.size() + 4) / 4, 0);
  std::memcpy(w.data(), s.data(), s.size());
  return w;
}

std::string word_string(const std::vector<uint32_t>& w) {
  std::string s(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  return s.substr(0, s.find('\0'));
}

// The result id of instructions that have one, for the few opcodes this tool looks up.
std::optional<uint32_t> result_id(const Inst& i) {
  switch (i.op) {
    case OpTypeBool:
    case OpTypeInt:
    case OpTypeFloat:
    case OpTypeCoopKHR:
    case OpTypeCoopNV:
      return i.w[0];
    case OpConstant:
    case OpConstantTrue:
    case OpConstantFalse:
      return i.w[1];
    default:
      return std::nullopt;
  }
}

size_t index_of(const Module& m, uint32_t id) {
  for (size_t k = 0; k < m.insts.size(); ++k)
    if (result_id(m.insts[k]) == id) return k;
  return m.insts.size();
}

// The matrix types, by id: component (16/32 float, or an int width), rows, columns, use.
struct MatType {
  uint32_t comp_id, rows, cols, use;
};

// Rewrites glslang's literal parameters into ids; fills `types`.
bool finish_khr(Module& m, std::map<uint32_t, MatType>& types) {
  size_t first = m.insts.size();
  for (size_t k = 0; k < m.insts.size(); ++k)
    if (m.insts[k].op == OpTypeCoopKHR) {
      first = k;
      break;
    }
  if (first == m.insts.size()) return fail("no OpTypeCooperativeMatrixKHR in the module");
  // The scalar types: found (hoisted ahead of the first matrix type where needed) or declared.
  auto scalar = [&](uint32_t op, uint32_t width, std::optional<uint32_t> sign) -> uint32_t {
    for (size_t k = 0; k < m.insts.size(); ++k) {
      Inst& i = m.insts[k];
      if (i.op == op && i.w[1] == width && (!sign || i.w[2] == *sign)) {
        const uint32_t id = i.w[0];
        if (k > first) {
          Inst moved = i;
          m.insts.erase(m.insts.begin() + static_cast<long>(k));
          m.insts.insert(m.insts.begin() + static_cast<long>(first), moved);
          ++first;
        }
        return id;
      }
    }
    const uint32_t id = m.bound()++;
    Inst t{op, {id, width}};
    if (sign) t.w.push_back(*sign);
    m.insts.insert(m.insts.begin() + static_cast<long>(first), t);
    ++first;
    return id;
  };
  const uint32_t u32 = scalar(OpTypeInt, 32, 0u);
  std::map<uint32_t, uint32_t> constants;  // value -> id, declared ahead of the first matrix
  auto constant = [&](uint32_t v) {
    auto it = constants.find(v);
    if (it != constants.end()) return it->second;
    const uint32_t id = m.bound()++;
    m.insts.insert(m.insts.begin() + static_cast<long>(first), Inst{OpConstant, {u32, id, v}});
    ++first;
    return constants[v] = id;
  };
  for (size_t k = first; k < m.insts.size(); ++k) {
    Inst& i = m.insts[k];
    if (i.op != OpTypeCoopKHR) continue;
    if (i.w.size() != 6) return fail("OpTypeCooperativeMatrixKHR with other than 5 operands");
    const uint32_t comp = i.w[1], scope = i.w[2], rows = i.w[3], cols = i.w[4], use = i.w[5];
    if (comp != 16 && comp != 32) return fail("matrix component must be written 16 or 32");
    if (scope != 3) return fail("matrix scope must be 3 (Subgroup)");
    if (use > 2) return fail("matrix use must be 0 (A), 1 (B) or 2 (accumulator)");
    if (rows == 0 || cols == 0 || rows > 64 || cols > 64) return fail("matrix size out of range");
    const uint32_t id = i.w[0];
    // Declare what the type names ahead of it (this may shift `k`).
    const uint32_t comp_id = scalar(OpTypeFloat, comp, std::nullopt);
    const uint32_t ids[4] = {constant(scope), constant(rows), constant(cols), constant(use)};
    Inst& t = m.insts[index_of(m, id)];
    t.w = {id, comp_id, ids[0], ids[1], ids[2], ids[3]};
    types[id] = {comp, rows, cols, use};
    k = index_of(m, id);
  }
  return true;
}

// Checks each cooperative-matrix instruction against its matrix types.
bool check_khr(const Module& m, const std::map<uint32_t, MatType>& types) {
  std::map<uint32_t, uint32_t> value_type;  // result id -> its matrix type id
  for (const Inst& i : m.insts)
    if ((i.op == OpLoadKHR || i.op == OpMulAddKHR || i.op == 80 /*OpCompositeConstruct*/ ||
         i.op == 61 /*OpLoad*/ || i.op == 65 /*OpAccessChain (no)*/) &&
        types.count(i.w[0]))
      value_type[i.w[1]] = i.w[0];
  auto type_of = [&](uint32_t v) -> const MatType* {
    auto it = value_type.find(v);
    return it == value_type.end() ? nullptr : &types.at(it->second);
  };
  int n = 0;
  for (const Inst& i : m.insts) {
    if (i.op == OpLoadKHR) {
      ++n;
      if (!types.count(i.w[0])) return fail("a load's result type is not a matrix type");
      if (i.w.size() < 5) return fail("a load without a stride");
    } else if (i.op == OpStoreKHR) {
      ++n;
      if (i.w.size() < 4) return fail("a store without a stride");
      const MatType* t = type_of(i.w[1]);
      if (!t) return fail("a store of a value whose matrix type is unknown");
    } else if (i.op == OpMulAddKHR) {
      ++n;
      const MatType *a = type_of(i.w[2]), *b = type_of(i.w[3]), *c = type_of(i.w[4]);
      if (!types.count(i.w[0]) || !a || !b || !c) return fail("MulAdd of unknown operand types");
      const MatType& r = types.at(i.w[0]);
      if (a->use != 0 || b->use != 1 || c->use != 2 || r.use != 2)
        return fail("MulAdd operands are not A, B and accumulator matrices");
      if (a->rows != r.rows || b->cols != r.cols || a->cols != b->rows || c->rows != r.rows ||
          c->cols != r.cols)
        return fail("MulAdd matrix sizes do not match");
    }
  }
  return n > 0 || fail("no cooperative-matrix instruction in the module");
}

// Whether an instruction's first operand is its result type (every value instruction of these
// shaders); false for declarations, decorations, debug info, stores, barriers and control flow.
bool has_result_type(uint32_t op) {
  if (op >= 19 && op <= 39) return false;  // types
  switch (op) {
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 10:
    case 11:
    case 14:
    case 15:
    case 16:
    case 17:
    case 56:
    case 62:
    case 63:
    case 71:
    case 72:
    case 224:
    case 225:
    case 246:
    case 247:
    case 248:
    case 249:
    case 250:
    case 251:
    case 252:
    case 253:
    case 254:
    case 255:
    case 317:
    case 330:
    case 331:
    case 332:
    case 5632:
    case 5633:
    case OpStoreNV:
    case OpStoreKHR:
      return false;
    default:
      return true;
  }
}

// The NV twin: see the file comment.
bool to_nv(Module& m) {
  uint32_t bool_type = 0, t_true = 0, t_false = 0;
  for (const Inst& i : m.insts) {
    if (i.op == OpTypeBool) bool_type = i.w[0];
    if (i.op == OpConstantTrue) t_true = i.w[1];
    if (i.op == OpConstantFalse) t_false = i.w[1];
  }
  std::map<uint32_t, uint32_t> layout_value;  // constant id -> value
  for (const Inst& i : m.insts)
    if (i.op == OpConstant && i.w.size() == 3) layout_value[i.w[1]] = i.w[2];
  // Booleans ahead of the first matrix type.
  size_t first = 0;
  while (first < m.insts.size() && m.insts[first].op != OpTypeCoopKHR) ++first;
  if (bool_type) {
    const size_t k = index_of(m, bool_type);
    if (k > first) {
      const Inst t = m.insts[k];
      m.insts.erase(m.insts.begin() + static_cast<long>(k));
      m.insts.insert(m.insts.begin() + static_cast<long>(first++), t);
    }
    t_true = t_false = 0;  // fresh constants ahead of the matrix types (duplicates are valid)
  } else {
    bool_type = m.bound()++;
    m.insts.insert(m.insts.begin() + static_cast<long>(first++), Inst{OpTypeBool, {bool_type}});
  }
  if (!t_true) {
    t_true = m.bound()++;
    m.insts.insert(m.insts.begin() + static_cast<long>(first++),
                   Inst{OpConstantTrue, {bool_type, t_true}});
  }
  if (!t_false) {
    t_false = m.bound()++;
    m.insts.insert(m.insts.begin() + static_cast<long>(first++),
                   Inst{OpConstantFalse, {bool_type, t_false}});
  }
  auto column_major = [&](uint32_t layout_id) -> std::optional<uint32_t> {
    auto it = layout_value.find(layout_id);
    if (it == layout_value.end() || it->second > 1) return std::nullopt;
    return it->second == 1 ? t_true : t_false;
  };
  // Matrix types that coincide without their Use: the first of each kind stands for the rest.
  std::map<std::vector<uint32_t>, uint32_t> seen;
  std::map<uint32_t, uint32_t> same;
  std::vector<Inst> out;
  for (Inst i : m.insts) {
    switch (i.op) {
      case OpCapability:
        if (i.w[0] == CapCoopKHR) i.w[0] = CapCoopNV;
        break;
      case OpExtension:
        if (word_string(i.w) == "SPV_KHR_cooperative_matrix")
          i.w = string_words("SPV_NV_cooperative_matrix");
        break;
      case OpTypeCoopKHR: {
        i.op = OpTypeCoopNV;
        i.w.pop_back();
        const std::vector<uint32_t> key(i.w.begin() + 1, i.w.end());
        auto it = seen.find(key);
        if (it != seen.end()) {
          same[i.w[0]] = it->second;
          continue;
        }
        seen[key] = i.w[0];
        break;
      }
      case OpLoadKHR: {
        auto cm = column_major(i.w[3]);
        if (!cm) return fail("a load's MemoryLayout is not the id of a constant 0 or 1");
        std::vector<uint32_t> w = {i.w[0], i.w[1], i.w[2], i.w[4], *cm};
        w.insert(w.end(), i.w.begin() + 5, i.w.end());
        i = {OpLoadNV, w};
        break;
      }
      case OpStoreKHR: {
        auto cm = column_major(i.w[2]);
        if (!cm) return fail("a store's MemoryLayout is not the id of a constant 0 or 1");
        std::vector<uint32_t> w = {i.w[0], i.w[1], i.w[3], *cm};
        w.insert(w.end(), i.w.begin() + 4, i.w.end());
        i = {OpStoreNV, w};
        break;
      }
      case OpMulAddKHR:
        i = {OpMulAddNV, {i.w[0], i.w[1], i.w[2], i.w[3], i.w[4]}};
        break;
      case OpLengthKHR:
        i.op = OpLengthNV;
        break;
      default:
        break;
    }
    out.push_back(i);
  }
  // Every operand that named a merged type names the one kept: type operands of type
  // declarations, and the result type of value instructions.
  auto remap = [&](uint32_t& w) {
    auto it = same.find(w);
    if (it != same.end()) w = it->second;
  };
  for (Inst& i : out) {
    if (i.w.empty()) continue;
    switch (i.op) {
      case 32:  // OpTypePointer
        remap(i.w[2]);
        break;
      case 28:  // OpTypeArray
      case 29:  // OpTypeRuntimeArray
        remap(i.w[1]);
        break;
      case 30:  // OpTypeStruct
      case 33:  // OpTypeFunction
        for (size_t k = 1; k < i.w.size(); ++k) remap(i.w[k]);
        break;
      default:
        if (has_result_type(i.op)) remap(i.w[0]);
        break;
    }
  }
  m.insts = std::move(out);
  return true;
}

}  // namespace

namespace duet::shaders {

bool finish_coopmat(std::vector<uint32_t>& words, std::vector<uint32_t>& twin) {
  Module m;
  std::map<uint32_t, MatType> types;
  if (!parse(words, m) || !finish_khr(m, types) || !check_khr(m, types)) return false;
  words = words_of(m);
  if (!to_nv(m)) return false;
  twin = words_of(m);
  return true;
}

}  // namespace duet::shaders
