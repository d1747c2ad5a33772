#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF file with random weights, for timing duet-llama.

Only the standard library: no torch, no numpy. The weights are random f16 (or f32) values of
magnitude 2^-7 .. 2^-6 with random signs (norm weights are 1), so activations stay bounded; the
generated text is meaningless. The default shape is about 100M parameters (E 768, 12 layers,
12 heads over 4 KV heads, FF 2048, vocab 32000, output tied to the embedding).

    tools/make_llama_gguf.py /tmp/llama100m.gguf
    tools/make_llama_gguf.py tiny.gguf --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 96 --vocab 80
"""
import argparse
import random
import struct
import sys

ALIGN = 32
GGML_F32, GGML_F16 = 0, 1
T_U32, T_F32, T_STRING = 4, 6, 8


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_F32:
        return out + struct.pack("<f", value)
    return out + gguf_string(value)


def random_f16(n, rng):
    """n random f16 values, |x| in [2^-7, 2^-6), as bytes (little-endian)."""
    # High byte: sign from the random bit 7, exponent field 8 (2^-7), top mantissa bits random.
    table = bytes(((b & 0x80) | 0x20 | (b & 0x03)) for b in range(256))
    out = bytearray(2 * n)
    out[0::2] = rng.randbytes(n)
    out[1::2] = rng.randbytes(n).translate(table)
    return bytes(out)


def random_f32(n, rng):
    # f32: the f16 values widened (exact).
    h = random_f16(n, rng)
    vals = struct.unpack("<%de" % n, h)
    return struct.pack("<%df" % n, *vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--untied", action="store_true", help="write output.weight")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.embd % a.heads or a.heads % a.kv_heads:
        sys.exit("make_llama_gguf: heads must divide embd and kv-heads must divide heads")
    hd = a.embd // a.heads
    rng = random.Random(a.seed)

    # (name, shape in duet order [rows, cols], is_norm)
    tensors = [("token_embd.weight", [a.vocab, a.embd], False)]
    for l in range(a.layers):
        p = "blk.%d." % l
        tensors += [
            (p + "attn_norm.weight", [a.embd], True),
            (p + "attn_q.weight", [a.embd, a.embd], False),
            (p + "attn_k.weight", [a.kv_heads * hd, a.embd], False),
            (p + "attn_v.weight", [a.kv_heads * hd, a.embd], False),
            (p + "attn_output.weight", [a.embd, a.embd], False),
            (p + "ffn_norm.weight", [a.embd], True),
            (p + "ffn_gate.weight", [a.ff, a.embd], False),
            (p + "ffn_up.weight", [a.ff, a.embd], False),
            (p + "ffn_down.weight", [a.embd, a.ff], False),
        ]
    tensors.append(("output_norm.weight", [a.embd], True))
    if a.untied:
        tensors.append(("output.weight", [a.vocab, a.embd], False))

    meta = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "random llama (make_llama_gguf.py)"),
        kv("llama.block_count", T_U32, a.layers),
        kv("llama.embedding_length", T_U32, a.embd),
        kv("llama.feed_forward_length", T_U32, a.ff),
        kv("llama.attention.head_count", T_U32, a.heads),
        kv("llama.attention.head_count_kv", T_U32, a.kv_heads),
        kv("llama.rope.freq_base", T_F32, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
        kv("llama.context_length", T_U32, 2048),
    ]
    infos, sizes, offset = [], [], 0
    for name, shape, norm in tensors:
        n = 1
        for d in shape:
            n *= d
        gtype = GGML_F32 if norm or a.dtype == "f32" else GGML_F16
        nbytes = n * (4 if gtype == GGML_F32 else 2)
        info = gguf_string(name) + struct.pack("<I", len(shape))
        info += b"".join(struct.pack("<Q", d) for d in reversed(shape))  # innermost first
        info += struct.pack("<IQ", gtype, offset)
        infos.append(info)
        sizes.append((n, gtype, norm))
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN

    params = sum(n for n, _, _ in sizes)
    with open(a.path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        for m in meta:
            f.write(m)
        for i in infos:
            f.write(i)
        f.write(b"\0" * ((-f.tell()) % ALIGN))
        for n, gtype, norm in sizes:
            if norm:
                data = struct.pack("<f", 1.0) * n
            elif gtype == GGML_F16:
                data = random_f16(n, rng)
            else:
                data = random_f32(n, rng)
            f.write(data)
            f.write(b"\0" * ((-len(data)) % ALIGN))
    print("%s: %d tensors, %.1fM parameters, %s" % (a.path, len(tensors), params / 1e6, a.dtype))


if __name__ == "__main__":
    main()
