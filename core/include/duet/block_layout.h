/* Byte layouts of the block-quantized weight formats: sizes and field offsets in bytes, as plain
 * preprocessor constants so that one description serves C, C++, CUDA and GLSL (#include with
 * GL_GOOGLE_include_directive). Every block is little-endian; "f16" is IEEE binary16.
 *
 * The ggml formats are laid out exactly as ggml-common.h publishes them (GGUF files store them
 * byte for byte); q4_z is duet's own (GPTQ and AWQ groups, exactly). Each block's value per
 * element is given beside it, in the element order of the logical row; the C++ table in
 * duet/dtype.h and the decoders in core/src/quant/ are checked against these numbers.
 *
 * Notation: e is the element index within the block, nib(b, e) the low nibble of byte b when
 * the element sits in the low half, else its high nibble. */
#ifndef DUET_BLOCK_LAYOUT_H
#define DUET_BLOCK_LAYOUT_H

/* q8_0: w[e] = d * qs[e]                                         (qs int8) */
#define DUET_Q8_0_ELEMS 32
#define DUET_Q8_0_BYTES 34
#define DUET_Q8_0_D 0  /* f16 */
#define DUET_Q8_0_QS 2 /* 32 x int8 */

/* q4_0: w[e] = d * (q[e] - 8); q[e] = qs[e % 16] & 0xF for e < 16, qs[e % 16] >> 4 above */
#define DUET_Q4_0_ELEMS 32
#define DUET_Q4_0_BYTES 18
#define DUET_Q4_0_D 0  /* f16 */
#define DUET_Q4_0_QS 2 /* 16 bytes: element e in the low nibble, e + 16 in the high */

/* q4_1: w[e] = d * q[e] + m, q[e] as q4_0 */
#define DUET_Q4_1_ELEMS 32
#define DUET_Q4_1_BYTES 20
#define DUET_Q4_1_D 0  /* f16 */
#define DUET_Q4_1_M 2  /* f16 */
#define DUET_Q4_1_QS 4 /* 16 bytes, as q4_0 */

/* q5_0: w[e] = d * (q[e] - 16); q[e] = nibble as q4_0 | ((qh >> e) & 1) << 4 */
#define DUET_Q5_0_ELEMS 32
#define DUET_Q5_0_BYTES 22
#define DUET_Q5_0_D 0  /* f16 */
#define DUET_Q5_0_QH 2 /* uint32: bit e is the fifth bit of element e */
#define DUET_Q5_0_QS 6 /* 16 bytes, as q4_0 */

/* q5_1: w[e] = d * q[e] + m, q[e] as q5_0 */
#define DUET_Q5_1_ELEMS 32
#define DUET_Q5_1_BYTES 24
#define DUET_Q5_1_D 0  /* f16 */
#define DUET_Q5_1_M 2  /* f16 */
#define DUET_Q5_1_QH 4 /* uint32, as q5_0 */
#define DUET_Q5_1_QS 8 /* 16 bytes, as q4_0 */

/* The k-quants: super-blocks of 256 in two halves h = e / 128; r = e % 128, j = r / 32,
 * l = r % 32; sub-block s = e / 16 (or e / 32 where the scales are per 32). */
#define DUET_QK_K 256

/* q2_k: w[e] = d * (sc[s] & 0xF) * q - dmin * (sc[s] >> 4), s = e / 16;
 *       q = (qs[32h + l] >> 2j) & 3 */
#define DUET_Q2_K_ELEMS 256
#define DUET_Q2_K_BYTES 84
#define DUET_Q2_K_SCALES 0 /* 16 bytes: scale in the low nibble, min in the high */
#define DUET_Q2_K_QS 16    /* 64 bytes of 2-bit quants */
#define DUET_Q2_K_D 80     /* f16 */
#define DUET_Q2_K_DMIN 82  /* f16 */

/* q3_k: w[e] = d * (sc[s] - 32) * (q - 4 * !hbit), s = e / 16;
 *       q = (qs[32h + l] >> 2j) & 3, hbit = hmask[l] >> (4h + j) & 1;
 *       sc[s] (6 bits) = low nibble of scales[s] (s < 8) or high nibble of scales[s - 8],
 *       | ((scales[8 + s % 4] >> 2 * (s / 4)) & 3) << 4 */
#define DUET_Q3_K_ELEMS 256
#define DUET_Q3_K_BYTES 110
#define DUET_Q3_K_HMASK 0   /* 32 bytes: high bits */
#define DUET_Q3_K_QS 32     /* 64 bytes of 2-bit quants */
#define DUET_Q3_K_SCALES 96 /* 12 bytes of 6-bit scales */
#define DUET_Q3_K_D 108     /* f16 */

/* q4_k: w[e] = d * sc[s] * q - dmin * m[s], s = e / 32;
 *       q = qs[32 * (e / 64) + e % 32] & 0xF if (e % 64) < 32, else >> 4;
 *       sc, m (6 bits) for s < 4: scales[s] & 63, scales[s + 4] & 63; for s >= 4:
 *       sc = (scales[s + 4] & 0xF) | (scales[s - 4] >> 6) << 4,
 *       m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4 */
#define DUET_Q4_K_ELEMS 256
#define DUET_Q4_K_BYTES 144
#define DUET_Q4_K_D 0      /* f16 */
#define DUET_Q4_K_DMIN 2   /* f16 */
#define DUET_Q4_K_SCALES 4 /* 12 bytes of 6-bit scales and mins */
#define DUET_Q4_K_QS 16    /* 128 bytes of nibbles */

/* q5_k: as q4_k with a fifth bit: q |= ((qh[e % 32] >> (2 * (e / 64) + (e % 64) / 32)) & 1) << 4 */
#define DUET_Q5_K_ELEMS 256
#define DUET_Q5_K_BYTES 176
#define DUET_Q5_K_D 0      /* f16 */
#define DUET_Q5_K_DMIN 2   /* f16 */
#define DUET_Q5_K_SCALES 4 /* 12 bytes, as q4_k */
#define DUET_Q5_K_QH 16    /* 32 bytes of fifth bits */
#define DUET_Q5_K_QS 48    /* 128 bytes of nibbles, as q4_k */

/* q6_k: w[e] = d * sc[s] * (q - 32), s = e / 16 (sc int8);
 *       q = nib(ql[64h + l + 32 * (j % 2)], j < 2 ? low : high) | ((qh[32h + l] >> 2j) & 3) << 4 */
#define DUET_Q6_K_ELEMS 256
#define DUET_Q6_K_BYTES 210
#define DUET_Q6_K_QL 0       /* 128 bytes of low nibbles */
#define DUET_Q6_K_QH 128     /* 64 bytes of 2-bit high parts */
#define DUET_Q6_K_SCALES 192 /* 16 x int8 */
#define DUET_Q6_K_D 208      /* f16 */

/* The packed 6-bit scales of the k-quants, decoded one sub-block at a time: the description the
 * CPU reference (and so the portable CPU kernels), CUDA and GLSL read. (The CPU's AVX kernels
 * decode all of a block's scales at once in 32-bit words, backends/cpu/kernels/qblocks_x86.inc;
 * the quantizer, core/src/quant/quantize.cpp, packs them.) B names a function-like macro of the
 * caller's that reads byte i of the block's scale bytes as an integer (C: #define B(i) sc[i];
 * GLSL: #define B(i) qrd8(S + (i))); s is the sub-block. */
/* q4_k, q5_k: the scale and the min of sub-block s (0..7), each 6 bits */
#define DUET_Q4_K_SCALE(B, s) \
  ((s) < 4 ? (B(s) & 63) : ((B((s) + 4) & 0xF) | ((B((s)-4) >> 6) << 4)))
#define DUET_Q4_K_MIN(B, s) ((s) < 4 ? (B((s) + 4) & 63) : ((B((s) + 4) >> 4) | ((B(s) >> 6) << 4)))
/* q3_k: the scale of sub-block s (0..15), 6 bits stored with an offset of 32 */
#define DUET_Q3_K_SCALE(B, s) \
  (((s) < 8 ? (B(s) & 0xF) : (B((s)-8) >> 4)) | (((B(8 + (s) % 4) >> (2 * ((s) / 4))) & 3) << 4))

/* q4_z (duet): w[e] = d * (q[e] - z), q[e] as q4_0, z in 0..15. GPTQ and AWQ int4 groups,
 * exactly: a group of g (a multiple of 32) weights becomes g / 32 blocks with its scale and
 * zero point. */
#define DUET_Q4_Z_ELEMS 32
#define DUET_Q4_Z_BYTES 20
#define DUET_Q4_Z_D 0   /* f16 */
#define DUET_Q4_Z_Z 2   /* uint8: the zero point z in the low nibble (the high nibble is 0) */
#define DUET_Q4_Z_PAD 3 /* uint8, 0 */
#define DUET_Q4_Z_QS 4  /* 16 bytes, as q4_0 */

#endif /* DUET_BLOCK_LAYOUT_H */
