// NumPy's .npy format (numpy.lib.format), read and written without NumPy: the magic "\x93NUMPY",
// a version (1.0: 2-byte header length; 2.0 and 3.0: 4-byte), a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a newline
// so that the data starts on a 64-byte boundary, then the elements in C order.
//
// Arrays are held as raw bytes with a safetensors dtype name ("F32", "I64", "BOOL", ...), so a
// conversion between the two formats copies bytes and never rounds. Every header field is
// checked: a malformed file is an error naming the file and the field, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/status.h"

namespace duet::cli {

struct RawArray {
  std::string
      dtype;  // safetensors name: "F32", "F16", "F64", "I8", "I32", "I64", "U8", "BOOL", ...
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // little-endian, C order
};

// The .npy descr of a safetensors dtype ("<f4" for "F32"), or "" when NumPy has none (BF16, the
// F8 formats).
std::string_view npy_descr(std::string_view st_dtype);
// The size in bytes of one element of a safetensors dtype, 0 when unknown.
int st_element_bytes(std::string_view st_dtype);

// `what` names the source in errors ("npy file 'x.npy'").
Result<RawArray> parse_npy(std::span<const std::byte> bytes, std::string_view what);
Result<RawArray> read_npy(const std::string& path);
// Fails for dtypes NumPy has no type for.
Result<std::string> encode_npy(const RawArray& a);

}  // namespace duet::cli
