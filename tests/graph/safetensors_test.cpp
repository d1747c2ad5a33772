// .safetensors: what we write reads back bit for bit, and every malformed header field is an
// error naming the field, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "duet/internal/files.h"
#include "duet/safetensors.h"

namespace duet {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::vector<std::byte> file_of(const std::string& header, size_t data_bytes, uint64_t claimed = 0) {
  std::vector<std::byte> f(8 + header.size() + data_bytes, std::byte{0x3c});
  const uint64_t n = claimed ? claimed : header.size();
  std::memcpy(f.data(), &n, 8);
  std::memcpy(f.data() + 8, header.data(), header.size());
  return f;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  auto r = parse_safetensors(bytes, "test.safetensors");
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.status().message();
}

std::string error_of(const std::string& header, size_t data_bytes) {
  return error_of(file_of(header, data_bytes));
}

TEST(Safetensors, WriteThenReadIsBitExactForEveryDtype) {
  std::vector<std::pair<std::string, HostTensor>> ts;
  for (DType t : kElementDTypes) {
    HostTensor h = HostTensor::empty(t, std::vector<int64_t>{3, 5});
    std::vector<double> v(15);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = is_integer(t) ? double(int(i) - 7) : (double(i) - 7.3) * 0.71;
    h.from_doubles(v);
    ts.emplace_back(std::string("t_") + std::string(dtype_name(t)), h);
  }
  auto bytes = encode_safetensors(ts, {{"format", "pt"}, {"note", "duet test"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u) << "the header is padded to 8 bytes";
  auto f = parse_safetensors(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->metadata.at("note"), "duet test");
  for (const auto& [name, t] : ts) {
    auto back = f->tensor(name);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->desc(), t.desc());
    EXPECT_EQ(std::memcmp(back->storage(), t.storage(), static_cast<size_t>(t.desc().nbytes())), 0)
        << name;
  }
}

TEST(Safetensors, ViewsAreWrittenDense) {
  HostTensor h = HostTensor::empty(DType::f32, std::vector<int64_t>{2, 3});
  h.from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6});
  auto t = transpose(h.desc(), 0, 1);
  auto view = h.view(*t);
  auto bytes = encode_safetensors({{"t", *view}});
  auto f = parse_safetensors(*bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->tensor("t")->to_doubles(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(Safetensors, MalformedHeadersAreErrors) {
  EXPECT_HAS(error_of(std::vector<std::byte>(5)), "at least 8 bytes");
  EXPECT_HAS(error_of(file_of("{}", 0, 1ull << 40)), "header length");
  EXPECT_HAS(error_of(file_of("{}", 0, 64)), "inside the file");
  EXPECT_HAS(error_of("[1,2]", 0), "starting with '{'");
  EXPECT_HAS(error_of("{\"a\": ", 0), "malformed JSON");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4),
             "'F33'");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
             "non-negative integer");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
             "non-negative integer");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4),
             "8 bytes");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}})", 4),
             "the data size");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4),
             "begin <= end");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
             "data_offsets");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1]}})", 4), "data_offsets");
  EXPECT_HAS(
      error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4),
      "field 'x'");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
                      8),
             "overlapping");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
             "no gaps");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8),
             "covering all 8");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                         "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                      8),
             "duplicate key");
  EXPECT_HAS(error_of(R"({"__metadata__": {"k": 3}})", 0), "string value");
  EXPECT_HAS(error_of(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],
                              "data_offsets": [0, 4]}})",
                      4),
             "fits in the file");
}

TEST(Safetensors, ValidFilesWithTypesDuetLacksLoadUntilThoseTensorsAreRead) {
  auto f = parse_safetensors(file_of(
      R"({"__metadata__": {"format": "pt"}, "d": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]},
          "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
          "f": {"dtype": "I32", "shape": [], "data_offsets": [8, 12]}})",
      12));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_HAS(f->tensor("d").status().message(), "F64");
  EXPECT_FALSE(f->tensor("e").ok());  // a zero-sized tensor: duet has none
  EXPECT_TRUE(f->tensor("f").ok());   // a scalar
  EXPECT_HAS(f->tensor("nope").status().message(), "tensor 'nope'");
}

TEST(Safetensors, TruncatedAndGarbageFilesNeverCrash) {
  auto good =
      encode_safetensors({{"w", HostTensor::empty(DType::f16, std::vector<int64_t>{7, 3})}});
  ASSERT_TRUE(good.ok());
  for (size_t cut = 0; cut < good->size(); ++cut) {
    std::vector<std::byte> b(good->begin(), good->begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_FALSE(parse_safetensors(b).ok()) << "truncated at " << cut;
  }
  uint32_t x = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> b = *good;
    for (int k = 0; k < 3; ++k) {
      x = x * 1664525u + 1013904223u;
      b[(x >> 8) % b.size()] = std::byte(x >> 24);
    }
    auto r = parse_safetensors(b);
    if (r.ok())
      for (const auto& e : r->tensors) (void)r->tensor(e.name);
  }
}

TEST(Safetensors, ReadingAMissingFileIsNotFoundNamingIt) {
  auto r = read_safetensors("/nonexistent/w.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found);
  EXPECT_HAS(r.status().message(), "safetensors file '/nonexistent/w.safetensors': cannot open");
}

TEST(Safetensors, AFileLargerThanMemoryOpensMappedAndItsTensorsAreReadInPlace) {
  // A sparse file: a tensor of the machine's memory and 8 GiB more costs no disk.
  const uint64_t bytes = (host_memory_bytes() + (uint64_t{8} << 30)) / 4096 * 4096;
  std::string header = "{\"big\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(bytes / 4096) +
                       ",1024],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');  // the data 8-byte aligned
  const std::string path = std::string(DUET_TEST_TMPDIR) + "/sparse.safetensors";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
  }
  std::filesystem::resize_file(path, 8 + header.size() + bytes);
  auto file = read_safetensors(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto view = file->view("big");  // over the mapping, not copied
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->data<float>()[0], 0.0f);
  EXPECT_EQ(view->data<float>()[view->numel() - 1], 0.0f);
  auto copy = file->tensor("big");  // a copy of its own would not fit
  ASSERT_FALSE(copy.ok());
  EXPECT_HAS(copy.status().message(), "expected at most this machine's memory");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace duet
