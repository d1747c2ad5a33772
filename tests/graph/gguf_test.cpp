// GGUF files: what we write reads back bit for bit (metadata of every type, tensors of every
// dtype GGUF has, memory-mapped), and every malformed field is an error naming the file and the
// field, never a crash: truncations at every byte, corrupted counts, lengths, types, offsets.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "duet/gguf.h"
#include "duet/internal/files.h"
#include "duet/quantize.h"

namespace duet {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

using Meta = std::vector<std::pair<std::string, GgufValue>>;
using Tensors = std::vector<std::pair<std::string, HostTensor>>;

// The permissions of the mapping that holds `p`, from /proc/self/maps ("r--s").
std::string mapping_permissions(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= at && at < hi)
      return perms;
  }
  return "";
}

std::string tmp(const std::string& name) {
  return std::string(DUET_TEST_TMPDIR) + "/" + name;
}

HostTensor ramp(DType t, std::vector<int64_t> shape) {
  HostTensor f = HostTensor::empty(DType::f32, shape);
  for (int64_t i = 0; i < f.numel(); ++i)
    f.data<float>()[i] = std::cos(0.1f * static_cast<float>(i));
  if (t == DType::f32) return f;
  if (is_quantized(t)) return *quantize(f, t);
  HostTensor h = HostTensor::empty(t, shape);
  h.from_doubles(f.to_doubles());
  return h;
}

Meta sample_metadata() {
  GgufValue tokens;
  tokens.type = GgufType::array;
  tokens.elem = GgufType::string;
  tokens.strings = {"<unk>", "<s>", "</s>", "hello"};
  GgufValue scores;
  scores.type = GgufType::array;
  scores.elem = GgufType::f32;
  scores.floats = {0.0, -1.5, 2.25};
  GgufValue flags;
  flags.type = GgufType::array;
  flags.elem = GgufType::boolean;
  flags.ints = {1, 0, 1};
  return {{"general.architecture", GgufValue::of_string("llama")},
          {"general.name", GgufValue::of_string("tiny \"test\" model")},
          {"llama.block_count", GgufValue::of_int(GgufType::u32, 2)},
          {"llama.context_length", GgufValue::of_int(GgufType::u64, 4096)},
          {"llama.rope.freq_base", GgufValue::of_float(GgufType::f32, 10000.0)},
          {"test.i8", GgufValue::of_int(GgufType::i8, -5)},
          {"test.u8", GgufValue::of_int(GgufType::u8, 250)},
          {"test.i16", GgufValue::of_int(GgufType::i16, -300)},
          {"test.u16", GgufValue::of_int(GgufType::u16, 60000)},
          {"test.i32", GgufValue::of_int(GgufType::i32, -70000)},
          {"test.i64", GgufValue::of_int(GgufType::i64, -(int64_t{1} << 40))},
          {"test.f64", GgufValue::of_float(GgufType::f64, 0.1)},
          {"test.bool", GgufValue::of_int(GgufType::boolean, 1)},
          {"tokenizer.ggml.tokens", tokens},
          {"tokenizer.ggml.scores", scores},
          {"test.flags", flags}};
}

Tensors sample_tensors() {
  Tensors ts;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i8})
    ts.emplace_back("e." + std::string(dtype_name(t)), ramp(t, {3, 5}));
  for (DType t : kQuantizedDTypes)
    if (dtype_info(t).ggml_type >= 0)
      ts.emplace_back("blk.0." + std::string(dtype_name(t)),
                      ramp(t, {3, 2 * dtype_block_elems(t)}));
  ts.emplace_back("norm", ramp(DType::f32, {7}));
  return ts;
}

std::vector<std::byte> sample_file(uint32_t alignment = kGgufDefaultAlignment) {
  auto b = encode_gguf(sample_metadata(), sample_tensors(), alignment);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? *b : std::vector<std::byte>{};
}

void expect_same(const GgufFile& f) {
  const Meta meta = sample_metadata();
  // The writer appends general.alignment when it is not the default.
  ASSERT_EQ(f.metadata.size(), meta.size() + (f.alignment != kGgufDefaultAlignment ? 1 : 0));
  for (size_t i = 0; i < meta.size(); ++i) {
    EXPECT_EQ(f.metadata[i].first, meta[i].first);
    const GgufValue& a = f.metadata[i].second;
    const GgufValue& b = meta[i].second;
    EXPECT_EQ(a.type, b.type) << meta[i].first;
    EXPECT_EQ(a.value_type(), b.value_type()) << meta[i].first;
    EXPECT_EQ(a.ints, b.ints) << meta[i].first;
    EXPECT_EQ(a.strings, b.strings) << meta[i].first;
    ASSERT_EQ(a.floats.size(), b.floats.size());
    for (size_t k = 0; k < a.floats.size(); ++k)
      EXPECT_EQ(a.floats[k],
                a.value_type() == GgufType::f32 ? static_cast<float>(b.floats[k]) : b.floats[k]);
  }
  for (const auto& [name, t] : sample_tensors()) {
    const GgufTensorInfo* info = f.find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, t.dtype()) << name;
    EXPECT_EQ(info->offset % f.alignment, 0u);
    EXPECT_EQ(info->ne.front(), t.desc().dim(-1)) << "GGUF lists the innermost dimension first";
    auto back = f.tensor(name);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->desc(), t.desc()) << name;
    EXPECT_EQ(std::memcmp(back->storage(), t.storage(), static_cast<size_t>(t.desc().nbytes())), 0)
        << name;
  }
}

TEST(Gguf, WriteThenReadIsExactForEveryValueTypeAndDtype) {
  auto f = parse_gguf(sample_file(), "test.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 32u);
  expect_same(*f);
  EXPECT_EQ(f->find_metadata("llama.block_count")->as_int(), 2);
  EXPECT_EQ(f->find_metadata("general.architecture")->as_string(), "llama");
  EXPECT_EQ(f->find_metadata("tokenizer.ggml.tokens")->str(2),
            "[4 string: \"<unk>\", \"<s>\", ...]");
  EXPECT_EQ(f->find_metadata("general.name")->str(), "\"tiny \\\"test\\\" model\"");
}

TEST(Gguf, AFileIsMemoryMappedAndItsTensorsOutliveTheFileObject) {
  const std::string path = tmp("mapped.gguf");
  ASSERT_TRUE(write_gguf(path, sample_metadata(), sample_tensors(), 64).ok());
  EXPECT_TRUE(is_gguf_file(path));
  HostTensor kept;
  {
    auto f = read_gguf(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(f->alignment, 64u) << "general.alignment is written when not 32";
    expect_same(*f);
    auto t = f->tensor("blk.0.q4_k");
    ASSERT_TRUE(t.ok());
    kept = *t;
    // Borrowed, not copied: the tensor's bytes are the mapping's.
    EXPECT_EQ(t->storage(), f->base + f->data_offset + f->find("blk.0.q4_k")->offset);
  }
  const std::vector<double> v = kept.to_doubles();  // the mapping lives on with the tensor
  EXPECT_EQ(v, ramp(DType::q4_k, {3, 512}).to_doubles());
  // Read-only and shared: nothing is committed against memory, and a write through it faults.
  EXPECT_EQ(mapping_permissions(kept.storage()), "r--s");
}

TEST(Gguf, AFileLargerThanMemoryOpensAndItsPagesAreReadOnDemand) {
  // A sparse file: one f32 tensor of the machine's memory and 8 GiB more, no disk spent.
  const int64_t row = int64_t{1} << 20;
  const int64_t rows = static_cast<int64_t>(
      (host_memory_bytes() + (uint64_t{8} << 30)) / (static_cast<uint64_t>(row) * 4) + 1);
  std::vector<std::byte> head;
  auto put = [&](const void* p, size_t n) {
    head.insert(head.end(), static_cast<const std::byte*>(p), static_cast<const std::byte*>(p) + n);
  };
  const uint32_t version = 3, dims = 2, type = 0;
  const uint64_t n_tensors = 1, n_kv = 0, name_len = 4, offset = 0;
  const int64_t ne[2] = {row, rows};
  put("GGUF", 4);
  put(&version, 4);
  put(&n_tensors, 8);
  put(&n_kv, 8);
  put(&name_len, 8);
  put("huge", 4);
  put(&dims, 4);
  put(ne, 16);
  put(&type, 4);
  put(&offset, 8);
  head.resize((head.size() + 31) / 32 * 32);
  const std::string path = tmp("huge.gguf");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  }
  std::filesystem::resize_file(path, head.size() + static_cast<uint64_t>(row * rows) * 4);
  auto f = read_gguf(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto t = f->tensor("huge");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->data<float>()[0], 0.0f);
  EXPECT_EQ(t->data<float>()[t->numel() - 1], 0.0f);
  std::filesystem::remove(path);
}

TEST(Gguf, TensorsDuetCannotComputeWithAreListedAndRefusedByName) {
  std::vector<std::byte> bytes = sample_file();
  // Retype the f32 "norm" tensor as f64 (same name length, 7 x 8 bytes would not fit: use i16,
  // 2 bytes, which fits in the 28 bytes of data).
  auto f = parse_gguf(bytes);
  ASSERT_TRUE(f.ok());
  // Find the tensor info of "norm" in the header and patch its type field.
  const std::string name = "norm";
  size_t at = 0;
  for (size_t i = 0; i + name.size() < bytes.size(); ++i)
    if (std::memcmp(bytes.data() + i, name.data(), name.size()) == 0 &&
        std::memcmp(bytes.data() + i - 8, "\x04\0\0\0\0\0\0\0", 8) == 0)
      at = i + name.size();
  ASSERT_GT(at, 0u);
  const uint32_t i16 = 25;  // ggml's I16
  std::memcpy(bytes.data() + at + 4 + 8, &i16, 4);
  auto g = parse_gguf(bytes, "retyped.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->find("norm")->dtype, std::nullopt);
  EXPECT_EQ(ggml_type_name(g->find("norm")->ggml_type), "i16");
  auto t = g->tensor("norm");
  ASSERT_FALSE(t.ok());
  EXPECT_HAS(t.status().message(), "'norm'");
  EXPECT_HAS(t.status().message(), "i16");
  EXPECT_EQ(ggml_type_name(16), "iq2_xxs");
  EXPECT_EQ(ggml_type_name(4), "type 4");  // removed from ggml
}

// duet's own types are named and sized by its dtype table (in ggml's spelling).
TEST(Gguf, TheTypesDuetComputesWithAreItsDtypeTables) {
  int with_ggml = 0;
  for (const DTypeInfo& d : all_dtype_infos()) {
    if (d.ggml_type < 0) continue;
    ++with_ggml;
    std::string ggml(d.name);  // ggml spells the k-quants with a capital K
    if (ggml.back() == 'k') ggml.back() = 'K';
    EXPECT_EQ(ggml_type_name(d.ggml_type), ggml);
    EXPECT_EQ(dtype_of_ggml_type(d.ggml_type), d.dtype);
  }
  EXPECT_EQ(with_ggml, kNumDTypes - 1) << "every dtype but q4_z is ggml's";
  EXPECT_EQ(ggml_type_name(12), "q4_K");
  EXPECT_EQ(ggml_type_name(9), "q8_1") << "a ggml type duet does not compute with";
}

std::string error_of(const std::vector<std::byte>& bytes) {
  auto r = parse_gguf(bytes, "bad.gguf");
  EXPECT_FALSE(r.ok()) << "a malformed file parsed";
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), Code::parse_error) << r.status().message();
  EXPECT_HAS(r.status().message(), "bad.gguf");
  return r.status().message();
}

// Byte offset of the value following the first occurrence of `text` in the header.
size_t after(const std::vector<std::byte>& bytes, const std::string& text) {
  for (size_t i = 0; i + text.size() <= bytes.size(); ++i)
    if (std::memcmp(bytes.data() + i, text.data(), text.size()) == 0) return i + text.size();
  ADD_FAILURE() << "no '" << text << "' in the file";
  return 0;
}

template <class T>
std::vector<std::byte> patched(std::vector<std::byte> bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
  return bytes;
}

TEST(Gguf, EveryTruncationIsAnErrorNeverACrash) {
  const std::vector<std::byte> full = sample_file();
  auto ok = parse_gguf(full);
  ASSERT_TRUE(ok.ok());
  // Every prefix shorter than the end of the last tensor is malformed.
  uint64_t end = 0;
  for (const GgufTensorInfo& t : ok->tensors)
    end = std::max(end, ok->data_offset + t.offset + t.bytes);
  for (size_t n = 0; n < end; ++n) {
    auto r = parse_gguf(std::span(full.data(), n), "cut.gguf");
    ASSERT_FALSE(r.ok()) << "a file cut at " << n << " bytes parsed";
    EXPECT_HAS(r.status().message(), "cut.gguf");
  }
}

TEST(Gguf, MalformedHeaderFieldsAreErrorsNamingTheField) {
  const std::vector<std::byte> good = sample_file();
  EXPECT_HAS(error_of(patched(good, 0, 'X')), "the magic \"GGUF\"");
  EXPECT_HAS(error_of(patched<uint32_t>(good, 4, 1)), "GGUF v1 is obsolete");
  EXPECT_HAS(error_of(patched<uint32_t>(good, 4, 4)), "version 2 or 3");
  EXPECT_HAS(error_of(patched<uint32_t>(good, 4, 0x03000000)), "big-endian");
  EXPECT_HAS(error_of(patched<uint64_t>(good, 8, uint64_t{1} << 60)), "tensor count");
  EXPECT_HAS(error_of(patched<uint64_t>(good, 16, uint64_t{1} << 60)), "key count");
  // A key's type, an array's element type and length, a string's length.
  const size_t arch = after(good, "general.architecture");
  EXPECT_HAS(error_of(patched<uint32_t>(good, arch, 13)), "type");
  EXPECT_HAS(error_of(patched<uint64_t>(good, arch + 4, uint64_t{1} << 50)), "string");
  const size_t tok = after(good, "tokenizer.ggml.tokens");
  EXPECT_HAS(error_of(patched<uint32_t>(good, tok + 4, 9)), "not an array");
  EXPECT_HAS(error_of(patched<uint64_t>(good, tok + 8, uint64_t{1} << 40)), "array length");
  const size_t flag = after(good, "test.bool");
  EXPECT_HAS(error_of(patched<uint8_t>(good, flag + 4, 2)), "a bool (0 or 1)");
  // Duplicate keys and tensor names.
  {
    std::vector<std::byte> dup = good;
    const size_t k = after(dup, "test.u16") - 3;
    std::memcpy(dup.data() + k, "i16", 3);
    EXPECT_HAS(error_of(dup), "each key once");
  }
  {
    std::vector<std::byte> dup = good;
    const size_t k = after(dup, "e.f16") - 3;
    std::memcpy(dup.data() + k, "f32", 3);
    EXPECT_HAS(error_of(dup), "each tensor name once");
  }
}

TEST(Gguf, MalformedTensorInfosAreErrorsNamingTheTensor) {
  const std::vector<std::byte> good = sample_file();
  const size_t info = after(good, "blk.0.q4_k");  // n_dims, ne[2], type, offset follow
  std::string e = error_of(patched<uint32_t>(good, info, 5));
  EXPECT_HAS(e, "blk.0.q4_k");
  EXPECT_HAS(e, "at most 4");
  EXPECT_HAS(error_of(patched<int64_t>(good, info + 4, -512)), "a size >= 0");
  EXPECT_HAS(error_of(patched<int64_t>(good, info + 4, 500)), "a multiple of 256");
  EXPECT_HAS(error_of(patched<int64_t>(good, info + 12, int64_t{1} << 62)), "2^62");
  EXPECT_HAS(error_of(patched<uint32_t>(good, info + 20, 4)), "a ggml type id");
  EXPECT_HAS(error_of(patched<uint32_t>(good, info + 20, 0xffffffff)), "a ggml type id");
  EXPECT_HAS(error_of(patched<uint64_t>(good, info + 24, 7)), "a multiple of the alignment");
  EXPECT_HAS(error_of(patched<uint64_t>(good, info + 24, uint64_t{1} << 62)), "inside the data");
  // Two tensors over the same bytes.
  auto f = parse_gguf(good);
  ASSERT_TRUE(f.ok());
  e = error_of(patched<uint64_t>(good, info + 24, f->find("blk.0.q8_0")->offset));
  EXPECT_HAS(e, "no overlap");
  // More bytes than the data section holds (a bigger shape).
  EXPECT_HAS(error_of(patched<int64_t>(good, info + 12, 1000)), "inside the data");
}

TEST(Gguf, AlignmentMustBeAU32PowerOfTwo) {
  Meta m = {{"general.alignment", GgufValue::of_int(GgufType::u32, 48)}};
  auto b = encode_gguf(m, {});
  EXPECT_FALSE(b.ok());
  // Written by hand: a u32 of 48, and a u64 alignment.
  Meta ok = {{"general.alignment", GgufValue::of_int(GgufType::u32, 16)}};
  auto good = encode_gguf(ok, sample_tensors());
  ASSERT_TRUE(good.ok());
  auto f = parse_gguf(*good);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->alignment, 16u);
  const size_t at = after(*good, "general.alignment");
  EXPECT_HAS(error_of(patched<uint32_t>(*good, at + 4, 48)), "a power of two");
  EXPECT_HAS(error_of(patched<uint32_t>(*good, at, 5)), "a u32");
}

// Random corruption of a valid file: parsing must end in a value or a clear error (run under
// the sanitizers in the debug preset, this is a small fuzzer).
TEST(Gguf, RandomlyCorruptedFilesNeverCrash) {
  const std::vector<std::byte> good = sample_file();
  std::mt19937_64 rng(7);
  int parsed = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::byte> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the header, where the structure is.
      const size_t at = rng() % std::min<size_t>(b.size(), round % 2 ? 600 : b.size());
      b[at] = static_cast<std::byte>(rng());
    }
    auto r = parse_gguf(b, "fuzz.gguf");
    if (!r.ok()) {
      EXPECT_HAS(r.status().message(), "fuzz.gguf");
      continue;
    }
    ++parsed;
    for (const GgufTensorInfo& t : r->tensors) {
      auto h = r->tensor(t.name);
      if (h.ok()) (void)h->to_doubles();
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(Gguf, AMissingFileOrAFolderIsBadInputNamingTheFile) {
  auto r = read_gguf(tmp("no-such-file.gguf"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found);
  EXPECT_HAS(r.status().message(), "gguf file '" + tmp("no-such-file.gguf") +
                                       "': cannot open: No such file or directory");
  auto d = read_gguf(DUET_TEST_TMPDIR);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::invalid_argument);
  EXPECT_HAS(d.status().message(), "expected a file, got a folder");
  EXPECT_FALSE(is_gguf_file(tmp("no-such-file.gguf")));
}

TEST(Gguf, WritingRefusesDtypesGgufHasNot) {
  Tensors ts = {{"w", ramp(DType::q4_z, {2, 32})}};
  auto b = encode_gguf({}, ts);
  ASSERT_FALSE(b.ok());
  EXPECT_HAS(b.status().message(), "q4_z");
}

}  // namespace
}  // namespace duet
