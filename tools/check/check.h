// Cross-backend correctness: test cases, the float64 reference, comparison with tolerances set
// by the precision actually used, and a runner that guards and poisons outputs. Used by
// `duet check` and by the test suite, so that both apply exactly the same rules.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/host_tensor.h"

namespace duet::check {

// How a case's input is drawn. Never zeros: every float value has magnitude >= 0.05.
enum class Fill : uint8_t {
  unit,        // +-[0.05, 1]
  positive,    // [0.5, 2] (divisors, norm weights)
  steps,       // +-{0.25, 0.5, 1}: comparisons meet ties
  above_one,   // [1, 3] (acosh)
  open_unit,   // +-[0.05, 0.9]: inside (-1, 1) in every float dtype (atanh)
  wide,        // +-[0.05, 300] (casts: saturation and rounding)
  mask,        // additive mask: [-2, 0), about 1 in 8 entries -inf
  ids,         // integer ids in [0, ids_range)
  signed_ids,  // integer ids in [-ids_range, ids_range) (embedding with negative_ids)
  scalar,      // a run-time scalar: Case::scalar
  cache,       // a KV cache holding Case::scalar rows along dim 2: +-[0.05, 1], NaN past them (a
               // kernel that reads a key past the valid ones gives NaN)
  blocks,      // block formats: random bytes (every bit pattern of the integers, scales and zero
               // points) with finite f16 scales of either sign; Fill::unit quantizes unit values
};

struct Case {
  std::string name;  // unique, e.g. "matmul/f16/17x33x9.tb"
  OpKind kind = OpKind::copy;
  OpAttrs attrs;
  std::vector<TensorDesc> inputs;  // may be strided views (storage spans storage_extent())
  std::vector<Fill> fills;
  int64_t ids_range = 0;   // for Fill::ids
  int64_t scalar = 0;      // for Fill::scalar and Fill::cache
  bool full_only = false;  // only in the --full set
};

// Input layouts the cases use, for tests that build their own cases: `shape` stored with its
// last two dims swapped (a transposed view), and `shape` reading every other element of a wider
// last dim from an offset (a strided view).
TensorDesc transposed_view(DType t, std::vector<int64_t> shape);
TensorDesc strided_view(DType t, std::vector<int64_t> shape);

// The default set covers every non-view op with odd sizes, broadcasting, strided inputs, masks,
// GQA, causal and decode attention, for each dtype the op accepts; `full` adds large shapes and
// every attention head dim.
std::vector<Case> cases(bool full = false);
// The case's op (validated) and its inputs drawn deterministically from the case name.
Result<OpDesc> case_op(const Case& c);
std::vector<HostTensor> case_inputs(const Case& c, uint64_t seed = 0);
// Where the checks draw input `input` of op `k` from (op_input_range, duet/op.h).
Fill fill_for(OpKind k, size_t input);

// Tolerances depend on the op's class and on the precision actually used by the kernel, and
// never go below what rounding the output to its dtype costs.
struct Tolerance {
  bool exact = false;  // data movement and casts: bit-exact values
  double nmse = 0;     // normalised mean squared error bound
  double max_rel = 0;  // max |error| / rms(reference) bound
  std::string str() const;
};
Tolerance tolerance(const OpDesc& op, Precision used);

struct Metrics {
  double nmse = 0;
  double max_abs = 0;
  double max_rel = 0;  // max |error| / rms(reference)
  int64_t worst = -1;  // index of the largest error
  int64_t nan = 0;     // NaN outputs (the poison is NaN, so unwritten elements count here)
  int64_t inf_mismatch = 0;
  int64_t mismatches = 0;  // exact comparisons that differ
  // Elements whose reference is NaN (inputs outside the op's domain): left out of the comparison,
  // except that exact (data movement) comparisons expect NaN there too.
  int64_t undefined = 0;
};
Metrics compare(std::span<const double> got, std::span<const double> want, bool exact);
bool passes(const Metrics& m, const Tolerance& t);

struct Outcome {
  bool passed = false;
  bool skipped = false;
  std::string message;  // why it failed or was skipped
  Metrics metrics;
  Tolerance tol;
  double seconds = 0;  // execute + synchronize
};

// Runs `op` with `choice` on `device`: uploads the inputs, poisons the output, surrounds it with
// guard regions, executes, reads back, and compares with `reference`. An output element left
// unwritten, a write outside the output, NaN or a wrong infinity fails the case.
Outcome run_case(Device& device, const KernelChoice& choice, const OpDesc& op,
                 std::span<const HostTensor> inputs, std::span<const double> reference);

}  // namespace duet::check
