// GPTQ and AWQ int4 checkpoints (safetensors, as AutoGPTQ / GPTQModel and AutoAWQ write them).
// A linear layer with prefix P is stored as
//   GPTQ: P.qweight  int32 [K/8, N]   8 weights of one column per word, k = 8r + i in bits 4i..
//         P.qzeros   int32 [G, N/8]   8 zero points per word along N, same nibble order
//         P.scales   f16   [G, N]
//         P.g_idx    int32 [K]        the group of every k (optional)
//   AWQ (GEMM packing): P.qweight int32 [K, N/8] and P.qzeros int32 [G, N/8], 8 columns per word
//         in the order 0, 2, 4, 6, 1, 3, 5, 7 (nibble i holds column 8c + order[i]);
//         P.scales f16 [G, N]
// with G = K / group size, and w[n][k] = scales[g][n] * (q[k][n] - z[g][n]), g = k / group size.
// GPTQ's checkpoint format "gptq" (v1, the default) stores every zero point minus one, read back
// as AutoGPTQ and GPTQModel do (adding 0x11111111 to each int32 word); "gptq_v2" and AWQ store
// them as they are.
//
// Such a layer loads as one duet weight [N, K] in q4_z (exactly: each group becomes group/32
// blocks with its scale and zero point), or in q4_0 when every zero point is 8 (symmetric).
// Refused, with the reason: act-order (desc_act: a g_idx that permutes the groups over K),
// group sizes that are not multiples of 32, bit widths other than 4, AWQ's GEMV packings,
// scales that f16 cannot hold exactly.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "duet/export.h"
#include "duet/host_tensor.h"
#include "duet/safetensors.h"
#include "duet/status.h"

namespace duet {

// What a checkpoint's configuration says (quantize_config.json, quant_config.json or
// config.json's "quantization_config" beside the weights); fields it does not give stay unset.
struct DUET_API Int4Config {
  std::string method;             // "gptq", "awq", or "" when no configuration was found
  std::string checkpoint_format;  // "gptq" (v1), "gptq_v2", ...
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  std::optional<bool> desc_act;
  std::string source;  // the file it came from
  bool gptq_v1() const { return checkpoint_format.empty() || checkpoint_format == "gptq"; }
};
// Reads the configuration beside a weights file; no configuration file is not an error.
DUET_API Result<Int4Config> int4_config_near(const std::string& weights_path);

enum class Int4Packing : uint8_t { gptq, awq };

struct DUET_API Int4Module {
  Int4Packing packing = Int4Packing::gptq;
  int64_t n = 0, k = 0, group = 0;
  bool symmetric = false;  // every zero point is 8
};

// Whether `prefix` names an int4 module of the file (prefix.qweight exists).
DUET_API bool is_int4_module(const SafetensorsFile& file, std::string_view prefix);
// The module as a duet weight [N, K] of dtype `as` (q4_z, or q4_0 for a symmetric module).
// `what` names the file in errors.
DUET_API Result<HostTensor> read_int4_module(const SafetensorsFile& file, std::string_view prefix,
                                             DType as, const Int4Config& config,
                                             std::string_view what, Int4Module* info = nullptr);

}  // namespace duet
