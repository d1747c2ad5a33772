// Error-minimising fits of a block's scales to its values, the search behind duet::quantize.
//
// A fit chooses integers q for values x under a scale (and an offset), the pair that makes the
// squared error sum (x - scale * q - offset)^2 least among a set of candidates: each candidate
// inverse scale rounds the values to integers, and for those integers the best scale (and
// offset) is the least-squares solution. The candidates spread around the scale that maps the
// range onto the levels exactly (min/max rounding, always one of them), so a fit is never worse
// than min/max rounding. The same idea, as published by ggml (make_qx_quants,
// make_qkx2_quants); written here for the squared error itself.
#pragma once

namespace duet::quant {

// Symmetric: x ~ d * q with integers q in [qmin, qmax] (qmin < 0 < qmax). Returns d (0 for an
// all-zero block, whose q are 0) and writes q.
double fit_symmetric(const float* x, int n, int qmin, int qmax, int* q);

// Affine: x ~ scale * q + offset with q in [0, qmax] and scale >= 0. When `offset_nonpositive`
// the offset is at most 0 (the k-quants store it as a non-negative min subtracted). Writes q,
// *scale and *offset.
void fit_affine(const float* x, int n, int qmax, bool offset_nonpositive, int* q, double* scale,
                double* offset);

// The integers nearest to x / d (+ z) within [qmin, qmax] (0 / z where d is 0).
void round_to(const float* x, int n, double d, double z, int qmin, int qmax, int* q);

// Sum of (x - (d * q + off))^2.
double squared_error(const float* x, int n, double d, const int* q, double off);

}  // namespace duet::quant
