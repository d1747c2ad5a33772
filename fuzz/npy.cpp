// Fuzz target: the .npy reader of `duet convert` and `duet run --inputs` (tools/duet/npy.h). An
// array that reads is written again, and the written file must read back to the same array:
// dtype, shape and bytes (a big-endian or Fortran-order file comes back little-endian, C order).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "duet/npy.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using duet::cli::RawArray;
  auto a =
      duet::cli::parse_npy(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz input");
  if (!a.ok()) return 0;
  int64_t elements = 1;
  for (int64_t d : a->shape) elements *= d;  // the reader checked that the product fits
  if (a->data.size() !=
      static_cast<size_t>(elements) * static_cast<size_t>(duet::cli::st_element_bytes(a->dtype)))
    fail("the data read does not match its shape", a->dtype);
  // Every dtype the reader accepts has a .npy descr, so the writer must take it.
  auto bytes = duet::cli::encode_npy(*a);
  if (!bytes.ok()) fail("an array read cannot be written", bytes.status().message());
  if (bytes->size() % 64 != a->data.size() % 64)
    fail("the written header does not end on a 64-byte boundary", a->dtype);
  auto back =
      duet::cli::parse_npy(std::as_bytes(std::span(bytes->data(), bytes->size())), "written");
  if (!back.ok()) fail("a written file does not read back", back.status().message());
  if (back->dtype != a->dtype || back->shape != a->shape || back->data != a->data)
    fail("the array differs after a write and a read", a->dtype);
  return 0;
}
