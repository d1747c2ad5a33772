#!/usr/bin/python3
"""Exports the small transformer models that tests/onnx runs, with PyTorch's own outputs.

A GPT-2-style decoder block (pre-norm, causal attention through an additive mask, tanh GELU
written out as GPT-2 writes it) and a BERT-style encoder layer with its embeddings (int64 token
ids and attention mask as inputs, post-norm, erf GELU), both exported by torch.onnx.export at
opset 17 with dynamic batch and sequence axes. Weights are random and small; the inputs and
PyTorch's outputs are written beside each model as .safetensors, so that

    duet check tests/onnx/models/gpt2_block.onnx --inputs tests/onnx/models/gpt2_block.inputs.safetensors

runs what the test runs. Needs Debian's python3-torch and python3-onnx (tools/setup.sh); not
used at build or run time. Run from the repository root:

    /usr/bin/python3 tools/onnx/export_test_models.py tests/onnx/models
"""
import json
import math
import os
import struct
import sys

import torch
from torch import nn

DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def write_safetensors(path, tensors):
    """The safetensors layout: header length, JSON header, raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"producer": "tools/onnx/export_test_models.py, torch " +
                              torch.__version__}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class Gpt2Block(nn.Module):
    def __init__(self, d=32, heads=2, ctx=16):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_out = nn.Linear(4 * d, d)
        mask = torch.full((ctx, ctx), float("-inf")).triu(1)
        self.register_buffer("mask", mask.view(1, 1, ctx, ctx))

    @staticmethod
    def gelu(x):  # GPT-2's own tanh approximation, op by op
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                           (x + 0.044715 * torch.pow(x, 3.0))))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        hd = c // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = torch.softmax(att + self.mask[:, :, :t, :t], dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.c_out(self.gelu(self.c_fc(self.ln_2(x))))


class BertLayer(nn.Module):
    def __init__(self, vocab=100, d=32, heads=2, positions=16):
        super().__init__()
        self.heads = heads
        self.word = nn.Embedding(vocab, d)
        self.position = nn.Embedding(positions, d)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.dense = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.intermediate = nn.Linear(d, 4 * d)
        self.output = nn.Linear(4 * d, d)
        self.out_norm = nn.LayerNorm(d, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(positions).view(1, -1))

    def split(self, x):
        b, t, c = x.shape
        return x.view(b, t, self.heads, c // self.heads).permute(0, 2, 1, 3)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        x = self.word(input_ids) + self.position(self.position_ids[:, :t])
        x = self.emb_norm(x)
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * -10000.0
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + ext
        ctx = (torch.softmax(scores, dim=-1) @ v).permute(0, 2, 1, 3)
        ctx = ctx.reshape(x.shape)
        x = self.attn_norm(x + self.dense(ctx))
        h = nn.functional.gelu(self.intermediate(x))
        return self.out_norm(x + self.output(h))


class ConvEncoder(nn.Module):
    """A small Conv1d audio encoder: convolutions with BatchNorm (folded at import), a dilated
    depthwise one, a strided one and a grouped one, then LogSoftmax over the channels."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(4, 16, 5, padding=2)
        self.bn1 = nn.BatchNorm1d(16)
        self.depthwise = nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=16)
        self.bn2 = nn.BatchNorm1d(16)
        self.down = nn.Conv1d(16, 8, 4, stride=2, padding=1)
        self.grouped = nn.Conv1d(8, 8, 3, padding=1, groups=2, bias=False)
        for bn in (self.bn1, self.bn2):  # running statistics that are not the identity
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.depthwise(x)))
        return torch.log_softmax(self.grouped(self.down(x)), dim=1)


class ResNetBlock(nn.Module):
    """A ResNet-style stem and basic block, a strided convolution, global average pooling and a
    classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, classes)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(x + self.bn2(self.conv2(y)))
        x = nn.functional.adaptive_avg_pool2d(self.down(x), 1).flatten(1)
        return torch.log_softmax(self.fc(x), dim=-1)


class MaskedAttention(nn.Module):
    """Attention as nanoGPT writes it (masked_fill with a boolean buffer), a causal running mean
    made with torch.tril in forward, and nn.MultiheadAttention."""

    def __init__(self, d=32, heads=2, ctx=16):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
                             .view(1, 1, ctx, ctx))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        hd = c // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.bias[:, :, :t, :t], float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        w = torch.tril(torch.ones(t, t))
        y = y + (w / w.sum(1, keepdim=True)) @ x
        return y + self.mha(y, y, y, need_weights=False)[0]


def export(model, name, inputs, input_names, out_dir, axes_names=("batch", "sequence"),
           keep_batch_norm=False):
    model.eval()
    with torch.no_grad():
        out = model(*inputs)
    path = os.path.join(out_dir, name + ".onnx")
    axes = {n: {i: a for i, a in enumerate(axes_names) if a} for n in input_names}
    axes["y"] = {0: "batch", 1: "sequence"} if axes_names == ("batch", "sequence") else {0: "batch"}
    torch.onnx.export(model, inputs, path, opset_version=17, input_names=input_names,
                      output_names=["y"], dynamic_axes=axes, do_constant_folding=True,
                      # PRESERVE exports BatchNormalization as it is (eval mode folds it into
                      # the Conv itself), so that duet's import folds it.
                      training=(torch.onnx.TrainingMode.PRESERVE if keep_batch_norm
                                else torch.onnx.TrainingMode.EVAL))
    write_safetensors(os.path.join(out_dir, name + ".inputs.safetensors"),
                      dict(zip(input_names, inputs)))
    write_safetensors(os.path.join(out_dir, name + ".outputs.safetensors"), {"y": out})
    print(f"{path}: {os.path.getsize(path)} bytes, output {tuple(out.shape)}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/onnx/models"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(2024)
    gpt2 = Gpt2Block()
    export(gpt2, "gpt2_block", (torch.randn(2, 7, 32),), ["x"], out_dir)
    bert = BertLayer()
    ids = torch.randint(0, 100, (2, 9), dtype=torch.int64)
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0  # the second sequence is padded
    export(bert, "bert_layer", (ids, mask), ["input_ids", "attention_mask"], out_dir)
    export(ConvEncoder(), "conv1d_encoder", (torch.randn(2, 4, 20),), ["x"], out_dir,
           ("batch", None, "sequence"), keep_batch_norm=True)
    export(ResNetBlock(), "resnet_block", (torch.randn(2, 3, 8, 8),), ["x"], out_dir, ("batch",),
           keep_batch_norm=True)
    export(MaskedAttention(), "masked_attention", (torch.randn(2, 7, 32),), ["x"], out_dir)


if __name__ == "__main__":
    main()
