#!/usr/bin/env python3
"""One table of ratios from a GPU run's logs: duet's rows (`duet bench --json`, one file per device)
against PyTorch's (peer_torch.py's JSON lines) on the same shapes, and Vulkan against CUDA on the
same GPU. Every ratio is a speed ratio (above 1: duet or Vulkan is faster).

  summarize.py OUT_DIR        (reads bench_cuda*.json, bench_vulkan.json, bench_vk_decode*.json, torch.jsonl there)
"""
import json
import os
import re
import sys


def load_rows(path):
    if not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            return [r for r in json.load(f).get("rows", []) if not r.get("error") and r.get("median_s")]
    except (OSError, ValueError) as e:
        print(f"summarize: {path}: {e}", file=sys.stderr)
        return []


def load_torch(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def num(pattern, name):
    m = re.search(pattern, name)
    return int(m.group(1)) if m else None


def peer_key(name):
    """The PyTorch row a duet bench case corresponds to, as a tuple, or None."""
    words = name.split()
    if len(words) < 2:
        return None
    op, dtype = words[0], words[1]
    # Block formats and mixed rows compare with the f16 peer of the same shape.
    if dtype not in ("f32", "f16", "bf16"):
        dtype = "f16"
    if op == "matmul":
        m = re.search(r"(\d+)x(\d+)x(\d+)", name)
        if m:
            M, N, K = (int(g) for g in m.groups())
            return ("matmul", dtype, M, N, K)
        M, N, K = num(r"\bM(\d+)", name), num(r"\bN(\d+)", name), num(r"\bK(\d+)", name)
        if None in (M, N, K):
            return None
        # "M4096 N512 K14336" is a weight of 4096 rows against 512 activation rows.
        if "decode" not in name and M > N:
            M, N = N, M
        return ("matmul", dtype, M, N, K)
    if op == "attention":
        B = num(r"\bB(\d+)", name) or 1
        H = num(r"\bHq?(\d+)", name)
        Hkv = num(r"\bHkv(\d+)", name) or H
        D = num(r"\bD(\d+)", name)
        if "decode" in name:
            S, KV = 1, num(r"\bLk(\d+)", name)
        else:
            S = num(r"\b[LS](\d+)", name)
            KV = num(r"\bLk(\d+)", name) or S
        causal = "causal" in words and "decode" not in name
        return ("attention", dtype, B, H, Hkv, S, KV, D, causal)
    return None


DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def torch_key(r):
    dt = DTYPES.get(r.get("dtype"), r.get("dtype"))
    if r["op"] == "matmul":
        return ("matmul", dt, r["M"], r["N"], r["K"])
    if r["op"] == "attention":
        return ("attention", dt, r["B"], r["H"], r["Hkv"], r["S"], r["KV"], r["D"],
                bool(r["causal"]) and r["S"] == r["KV"])
    return None


def best_by_case(rows):
    best = {}
    for r in rows:
        b = best.get(r["op"])
        if b is None or r["median_s"] < b["median_s"]:
            best[r["op"]] = r
    return best


def ms(x):
    return f"{x * 1e3:.3f}" if x is not None else "-"


def main(out):
    # The decode steps' rows (int_dot on cuda:0; matvec and int_dot on vulkan:0) beside the rest.
    cuda = [r for f in ("bench_cuda.json", "bench_cuda_decode.json")
            for r in load_rows(os.path.join(out, f))]
    vk = [r for f in ("bench_vulkan.json", "bench_vk_decode.json", "bench_vk_decode2.json")
          for r in load_rows(os.path.join(out, f))]
    torch = load_torch(os.path.join(out, "torch.jsonl"))
    peers = {}
    copy_gbps = None
    for r in torch:
        if r.get("op") == "copy":
            copy_gbps = r["gbps"]
            continue
        k = torch_key(r)
        if k is not None:
            peers[k] = r
    bc, bv = best_by_case(cuda), best_by_case(vk)
    names = list(dict.fromkeys([r["op"] for r in cuda] + [r["op"] for r in vk]))
    print(f"copy bandwidth (PyTorch, bytes read + written): "
          f"{copy_gbps:.0f} GB/s" if copy_gbps else "copy bandwidth: not measured")
    print()
    print("| case | CUDA tier | CUDA ms | PyTorch ms | CUDA/PyTorch | Vulkan tier | Vulkan ms |"
          " Vulkan/CUDA | CUDA %bw | Vulkan %bw |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        c, v = bc.get(n), bv.get(n)
        k = peer_key(n)
        p = peers.get(k) if k else None
        pms = p["ms"] / 1e3 if p else None
        # A block-format row's peer is f16 PyTorch on the same shape: a reference time, not a race.
        same = p is not None and n.split()[1] in ("f32", "f16", "bf16")
        ratio = f"{pms / c['median_s']:.2f}" if (c and pms) else "-"
        if p is not None and not same:
            ratio = f"({ratio} vs f16)"
        vr = f"{c['median_s'] / v['median_s']:.3f}" if (c and v) else "-"

        def bw(r):
            if not r or not copy_gbps or not r.get("gbps"):
                return "-"
            return f"{100 * r['gbps'] / copy_gbps:.0f}%"

        print(f"| {n} | {c['tier'] if c else '-'} | {ms(c['median_s']) if c else '-'} | {ms(pms)} |"
              f" {ratio} | {v['tier'] if v else '-'} | {ms(v['median_s']) if v else '-'} | {vr} |"
              f" {bw(c)} | {bw(v)} |")
    print()
    print("Every tier (device, case, tier, ms, GFLOP/s, GB/s):")
    for r in cuda + vk:
        print(f"  {r['device']:10s} {r['op']:55s} {r['tier']:16s} {ms(r['median_s']):>9s}"
              f" {r.get('gflops') or 0:10.1f} {r.get('gbps') or 0:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
