#!/usr/bin/env python3
"""Makes the test fixture of a Llama GGUF file as llama.cpp's own converter writes it.

A tiny random Hugging Face Llama checkpoint (config.json, pytorch_model.bin, a SentencePiece
tokenizer.model) is written to a scratch folder and converted by llama.cpp's
convert_hf_to_gguf.py (convert-hf-to-gguf.py in older trees) from a llama.cpp checkout given on
the command line; nothing of llama.cpp is kept in duet. The expected logits come from an
independent float64 forward pass of the checkpoint written here with PyTorch, in Hugging Face's
conventions (rotate_half rotary embedding on the unpermuted Q and K rows, GQA by repeating KV
heads), so the test checks that duet reads the converter's tensor names, metadata keys, Q/K row
permutation and tied embedding (no output.weight) as llama.cpp does.

Needs Debian's python3-torch, python3-numpy, python3-sentencepiece and python3-tqdm (the converter's imports;
Debian has no transformers or safetensors, so the checkpoint is a pytorch_model.bin, which the
converter reads through torch.load):

    /usr/bin/python3 tools/make_llamacpp_fixture.py /tmp/llama.cpp tests/llama/data

writes llamacpp_tiny.gguf (the converter's output, f32) and llamacpp_tiny.expected.safetensors
(tokens: i32 [T], logits: f32 [T, vocab], prompt: i32 [P]).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

# A GQA model with every hyper-parameter away from its default where the file carries it.
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 72,
    "max_position_embeddings": 64,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}
PROMPT = [1, 17, 5, 63, 40, 9]

# Runs the converter as its own __main__. Debian 12's torch (1.13) has no `mmap` argument to
# torch.load, which the converter passes when it reads a pytorch_model.bin: it is dropped (the
# file is small).
RUN_CONVERTER = """
import runpy, sys, torch
_load = torch.load
def load(*args, **kwargs):
    kwargs.pop("mmap", None)
    return _load(*args, **kwargs)
torch.load = load
sys.argv = sys.argv[1:]
sys.path.insert(0, __import__("os").path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""
NEW_TOKENS = 6


def random_weights(cfg):
    g = torch.Generator().manual_seed(20261124)
    e, ff = cfg["hidden_size"], cfg["intermediate_size"]
    hd = e // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd

    def mat(n, k, scale):
        return ((torch.rand(n, k, generator=g) * 2 - 1) * scale).float()

    def norm(n):
        return (0.5 + torch.rand(n, generator=g)).float()

    w = {"model.embed_tokens.weight": mat(cfg["vocab_size"], e, 1.0)}
    s = e**-0.5
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(e)
        w[p + "self_attn.q_proj.weight"] = mat(e, e, s)
        w[p + "self_attn.k_proj.weight"] = mat(kv, e, s)
        w[p + "self_attn.v_proj.weight"] = mat(kv, e, s)
        w[p + "self_attn.o_proj.weight"] = mat(e, e, s)
        w[p + "post_attention_layernorm.weight"] = norm(e)
        w[p + "mlp.gate_proj.weight"] = mat(ff, e, s)
        w[p + "mlp.up_proj.weight"] = mat(ff, e, s)
        w[p + "mlp.down_proj.weight"] = mat(e, ff, ff**-0.5)
    w["model.norm.weight"] = norm(e)
    return w  # tied: no lm_head.weight


def forward(w, cfg, tokens):
    """Logits of every position, float64, the whole sequence at once (Hugging Face's Llama)."""
    d = {k: v.double() for k, v in w.items()}
    e, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, theta = e // nh, cfg["rms_norm_eps"], cfg["rope_theta"]
    t = len(tokens)

    def rms(x, wt):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * wt

    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.outer(torch.arange(t, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2 :], x[..., : hd // 2]], -1)

    x = d["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.full((t, t), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, d[p + "input_layernorm.weight"])
        q = (h @ d[p + "self_attn.q_proj.weight"].T).view(t, nh, hd).transpose(0, 1)
        k = (h @ d[p + "self_attn.k_proj.weight"].T).view(t, nkv, hd).transpose(0, 1)
        v = (h @ d[p + "self_attn.v_proj.weight"].T).view(t, nkv, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(nh // nkv, 0), v.repeat_interleave(nh // nkv, 0)
        a = torch.softmax(q @ k.transpose(1, 2) / hd**0.5 + mask, -1) @ v
        x = x + a.transpose(0, 1).reshape(t, e) @ d[p + "self_attn.o_proj.weight"].T
        h = rms(x, d[p + "post_attention_layernorm.weight"])
        g = h @ d[p + "mlp.gate_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * (h @ d[p + "mlp.up_proj.weight"].T)) @ d[
            p + "mlp.down_proj.weight"
        ].T
    return rms(x, d["model.norm.weight"]) @ d["model.embed_tokens.weight"].T


def write_tokenizer(folder, vocab):
    """A SentencePiece model of `vocab` pieces trained on a little text (the converter reads its
    pieces, scores and types into tokenizer.ggml.*)."""
    import sentencepiece as spm

    text = os.path.join(folder, "corpus.txt")
    with open(text, "w") as f:
        for i in range(200):
            f.write(f"the quick brown fox {i} jumps over the lazy dog and runs away {i * 7}\n")
    spm.SentencePieceTrainer.train(
        input=text,
        model_prefix=os.path.join(folder, "tokenizer"),
        vocab_size=vocab,
        model_type="bpe",
        character_coverage=1.0,
        hard_vocab_limit=False,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        minloglevel=2,
    )
    os.remove(text)
    os.remove(os.path.join(folder, "tokenizer.vocab"))


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    llama_cpp, out = sys.argv[1], sys.argv[2]
    converter = next(
        (
            os.path.join(llama_cpp, n)
            for n in ("convert_hf_to_gguf.py", "convert-hf-to-gguf.py")
            if os.path.exists(os.path.join(llama_cpp, n))
        ),
        None,
    )
    if not converter:
        sys.exit(f"no convert_hf_to_gguf.py in {llama_cpp}")
    os.makedirs(out, exist_ok=True)
    w = random_weights(CONFIG)
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "tiny-llama")
        os.makedirs(hf)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(CONFIG, f, indent=1)
        torch.save(w, os.path.join(hf, "pytorch_model.bin"))
        write_tokenizer(hf, CONFIG["vocab_size"] - 8)  # the converter pads the rest
        gguf = os.path.join(out, "llamacpp_tiny.gguf")
        env = dict(os.environ, PYTHONPATH=os.path.join(llama_cpp, "gguf-py"))
        subprocess.run(
            [sys.executable, "-c", RUN_CONVERTER, converter, hf, "--outfile", gguf, "--outtype", "f32"],
            check=True,
            env=env,
        )

    # Greedy decoding by the float64 forward pass: the whole sequence recomputed every step.
    tokens = list(PROMPT)
    for _ in range(NEW_TOKENS):
        tokens.append(int(forward(w, CONFIG, tokens)[-1].argmax()))
    logits = forward(w, CONFIG, tokens).float()

    def i32(v):
        return struct.pack(f"<{len(v)}i", *v)

    write_safetensors(
        os.path.join(out, "llamacpp_tiny.expected.safetensors"),
        {
            "logits": ("F32", list(logits.shape), logits.contiguous().numpy().tobytes()),
            "prompt": ("I32", [len(PROMPT)], i32(PROMPT)),
            "tokens": ("I32", [len(tokens)], i32(tokens)),
        },
    )
    print(f"wrote {gguf} and the expected logits of {len(tokens)} tokens")


if __name__ == "__main__":
    main()
