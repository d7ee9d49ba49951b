#!/usr/bin/env python3
"""Routed-expert GEMMs of one MoE layer at prompt sizes, per GPU shard. torch + stdlib (+ triton).

    python3 calibrate/bench_moe_prefill.py --device cuda --out calibrate/data/moe-prefill-h200-sxm-<date>.json
    python3 calibrate/bench_moe_prefill.py --quick --device cpu --out /tmp/m.json   # tiny, CI

For each catalog MoE model (d_model D, routed experts E, top-k, expert FFN width F; config.json
of each model) at the expert sharding the serving data uses (moe_tp GPUs share each expert's
F, moe_ep GPUs split the experts: E/ep experts of width F/moe_tp on one GPU), and prompt tokens
T = 1k..16k, one GPU's share of one layer:
  routing: uniform random top-k (top-k of U(0,1) logits per token, distinct experts): every
           expert gets T*k/E rows on average, Poisson-like spread; the GPU keeps the rows routed
           to its E/ep local experts (T*k/ep of them on average);
  gate_up: rows x D @ (D x 2F/moe_tp) per expert;  down: rows x F/moe_tp @ (F/moe_tp x D).
Kinds, each timed per GEMM (gate_up, down):
  bf16_grouped: torch._grouped_mm (CUTLASS grouped GEMM, rows already sorted by expert);
  fp8_grouped_row: torch._scaled_grouped_mm, fp8 e4m3 inputs, row-wise scales (per row of x,
           per output column of each expert), bf16 out;
  triton_fp8_block: moe_triton.fused_moe_gemm, vLLM's fused_moe kernel (gather by token id,
           rows padded per expert to BLOCK_M = 64, 1x128 / 128x128 block scales);
  dense_bf16, dense_fp8_row: ONE dense GEMM with the same rows, K and N (same FLOPs): the
           reference rate for that M;
  triton_fp8_block_m16 (only with --kinds): the same kernel with 16-row tiles (SMALL_TILE);
  permute (x[ids], gather of the routed rows), combine (index_add_ of the k weighted rows
           per token), act (silu(gate) * up): plain eager torch, an upper bound on the engines'
           fused kernels.
Quantization of the activations is not in any time (core/act_quant.py prices it).
Timing as calibrate/bench.py (bench_timing.Timer: warm-up, CUDA events behind a short GPU
sleep, median over repeats; random data, never zeros). The weights of one layer (>= 0.2 GB)
exceed the 60 MB L2, so no input rotation.

JSON (schema_version 1): env, checks [{kind, rel_err}], records [{model, moe_tp, ep, T, top_k,
experts (local), experts_total, D, F_local, rows (routed rows on this GPU), kind, gemm, M, K, N,
seconds, flops, flops_per_s}], skipped [{what, reason}], elapsed_s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

from bench_env import env_section, log, nvidia_smi, one_line, write_json  # noqa: E402
from bench_timing import Timer  # noqa: E402

# model: (D, E, top_k, F) from each model's config.json (perfmodel/core/catalog/*.yaml)
MODELS = {"minimax-m2.5": (3072, 256, 8, 1536), "qwen3-235b-a22b": (4096, 128, 8, 1536),
          "qwen3.5-397b-a17b": (4096, 512, 10, 1024), "deepseek-v3": (7168, 256, 8, 2048),
          "kimi-k2.5": (7168, 384, 8, 2048), "glm-5": (6144, 256, 8, 2048)}
# (model, moe_tp, moe_ep): the expert shardings of data/serving/aic_silicon_sample.csv on Hopper
SHARDS = (("minimax-m2.5", 4, 1), ("minimax-m2.5", 8, 1), ("minimax-m2.5", 1, 4),
          ("qwen3-235b-a22b", 4, 1), ("qwen3-235b-a22b", 2, 1), ("qwen3-235b-a22b", 1, 4),
          ("qwen3-235b-a22b", 1, 8), ("qwen3.5-397b-a17b", 1, 8), ("deepseek-v3", 8, 1),
          ("deepseek-v3", 1, 8), ("kimi-k2.5", 8, 1), ("glm-5", 8, 1))
TOKENS = (1024, 2048, 4096, 8192, 16384)
KINDS = ("bf16_grouped", "fp8_grouped_row", "triton_fp8_block", "dense_bf16", "dense_fp8_row")
SMALL_TILE = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4,
              "num_stages": 3}   # --small-tile: the 16-row tile for decode-sized batches


def routing(T: int, E: int, k: int, E_local: int, dev: str):
    """Uniform random top-k; the rows routed to experts [0, E_local) sorted by expert:
    (topk_ids (T, k), ids of the local rows in expert order, offsets (E_local,) int32)."""
    topk = torch.rand(T, E, device=dev).topk(k, dim=1).indices
    flat = topk.flatten()
    local = torch.nonzero(flat < E_local).squeeze(1)
    order = torch.argsort(flat[local], stable=True)
    ids = local[order]
    counts = torch.bincount(flat[ids], minlength=E_local)
    return topk, ids, torch.cumsum(counts, 0).to(torch.int32)


def fp8_rows(x):
    """Row-wise fp8: (q, scale (M,)) with scale = amax / 448 per row."""
    s = x.float().abs().amax(1).clamp(min=1e-10) / 448.0
    return (x.float() / s[:, None]).to(torch.float8_e4m3fn), s


class Layer:
    """One GPU's routed experts of one layer: weights (E_local, N, K) per GEMM, bf16 and fp8."""

    def __init__(self, D: int, F_local: int, E_local: int, dev: str, want_fp8: bool):
        self.shapes = {"gate_up": (D, 2 * F_local), "down": (F_local, D)}   # (K, N)
        self.w, self.w8, self.w8s, self.wb, self.wbs = {}, {}, {}, {}, {}
        for g, (K, N) in self.shapes.items():
            w = torch.randn(E_local, N, K, device=dev, dtype=torch.bfloat16) / K ** 0.5
            self.w[g] = w
            if want_fp8:
                s = w.float().abs().amax(2).clamp(min=1e-10) / 448.0           # (E, N)
                self.w8[g] = (w.float() / s[:, :, None]).to(torch.float8_e4m3fn)
                self.w8s[g] = s
                from moe_triton import quant_block_weight
                self.wb[g], self.wbs[g] = quant_block_weight(w)


def callables(layer: Layer, g: str, T: int, k: int, topk, ids, offs, dev: str, kinds) -> dict:
    """kind -> fn(i) running gate_up or down over this GPU's routed rows."""
    K, N = layer.shapes[g]
    R = ids.numel()
    x = torch.randn(R, K, device=dev, dtype=torch.bfloat16)
    out = {}
    if "bf16_grouped" in kinds:
        wt = layer.w[g].transpose(-2, -1)
        out["bf16_grouped"] = lambda i: torch._grouped_mm(x, wt, offs=offs, out_dtype=torch.bfloat16)
    if "dense_bf16" in kinds:
        wd = layer.w[g][0]
        out["dense_bf16"] = lambda i: F.linear(x, wd)
    if layer.w8:
        xq, xs = fp8_rows(x)
        w8t, w8s = layer.w8[g].transpose(-2, -1), layer.w8s[g]
        if "fp8_grouped_row" in kinds and hasattr(torch, "_scaled_grouped_mm"):
            out["fp8_grouped_row"] = lambda i: torch._scaled_grouped_mm(
                xq, w8t, xs, w8s, offs=offs, out_dtype=torch.bfloat16)
        if "dense_fp8_row" in kinds:
            wd8, sd8 = layer.w8[g][0], layer.w8s[g][0][None, :]
            out["dense_fp8_row"] = lambda i: torch._scaled_mm(
                xq, wd8.t(), scale_a=xs[:, None], scale_b=sd8, out_dtype=torch.bfloat16)
        if "triton_fp8_block" in kinds:
            out["triton_fp8_block"] = triton_call(layer, g, T, k, topk, dev)
        if "triton_fp8_block_m16" in kinds:
            out["triton_fp8_block_m16"] = triton_call(layer, g, T, k, topk, dev, SMALL_TILE)
    return out


def triton_call(layer: Layer, g: str, T: int, k: int, topk, dev: str, cfg=None):
    """vLLM's data flow: gate_up reads x (T, D) by token id // k; down reads the (T*k, F)
    intermediate by row id (top_k 1)."""
    from moe_triton import DEFAULT_CONFIG, align_block_size, fused_moe_gemm, quant_group
    cfg = cfg or DEFAULT_CONFIG
    K, N = layer.shapes[g]
    sorted_ids, expert_ids, padded = align_block_size(topk, layer.w[g].shape[0], cfg["BLOCK_M"])
    rows_in = T if g == "gate_up" else T * k
    a_q, a_s = quant_group(torch.randn(rows_in, K, device=dev, dtype=torch.bfloat16))
    c = torch.empty(T * k, N, device=dev, dtype=torch.bfloat16)
    top = k if g == "gate_up" else 1
    return lambda i: fused_moe_gemm(a_q, a_s, layer.wb[g], layer.wbs[g], c, sorted_ids,
                                    expert_ids, padded, top, cfg)


def small_ops(D: int, F_local: int, T: int, k: int, ids, dev: str) -> dict:
    """permute, combine, act over this GPU's routed rows (eager torch: upper bounds)."""
    R = ids.numel()
    x = torch.randn(T, D, device=dev, dtype=torch.bfloat16)
    y = torch.randn(R, D, device=dev, dtype=torch.bfloat16)
    wts = torch.rand(R, device=dev, dtype=torch.bfloat16)
    tok = ids // k
    acc = torch.zeros(T, D, device=dev, dtype=torch.bfloat16)
    h = torch.randn(R, 2 * F_local, device=dev, dtype=torch.bfloat16)
    return {"permute": lambda i: x.index_select(0, tok),
            "combine": lambda i: acc.index_add_(0, tok, y * wts[:, None]),
            "act": lambda i: F.silu(h[:, :F_local]) * h[:, F_local:]}


def check(dev: str, kinds) -> list[dict]:
    """Correct first: each grouped kind against an fp32 per-expert reference, fresh data."""
    D, Fl, E, k, T = 256, 256, 8, 2, 96
    layer = Layer(D, Fl, E, dev, want_fp8=dev == "cuda")
    topk, ids, offs = routing(T, E, k, E, dev)
    res = []
    for g in ("gate_up", "down"):
        torch.manual_seed(1)
        fns = callables(layer, g, T, k, topk, ids, offs, dev, kinds)
        for kind, fn in fns.items():
            if kind.startswith(("dense", "triton")):   # the Triton kernel: check_triton
                continue
            try:
                y = fn(0).float()
            except Exception as exc:  # noqa: BLE001 - any backend error is reported
                res.append({"kind": kind, "gemm": g, "error": one_line(exc)})
                continue
            res.append({"kind": kind, "gemm": g, **_rel_err(kind, layer, g, topk, ids, y)})
    return res


def _rel_err(kind, layer, g, topk, ids, y) -> dict:
    """||y - ref|| / ||ref||, ref in fp32 on the operands the kind multiplied (fp8: dequantized).
    The callables drew x first after torch.manual_seed(1): it is redrawn identically."""
    K, _ = layer.shapes[g]
    torch.manual_seed(1)
    x = torch.randn(ids.numel(), K, device=y.device, dtype=torch.bfloat16)
    w = layer.w[g].float()
    if kind == "fp8_grouped_row":
        xq, xs = fp8_rows(x)
        x = xq.float() * xs[:, None]
        w = layer.w8[g].float() * layer.w8s[g][:, :, None]
    ex = topk.flatten()[ids]
    ref = torch.einsum("rk,rnk->rn", x.float(), w[ex])
    return {"rel_err": float((y - ref).norm() / ref.norm()), "finite": bool(torch.isfinite(y).all())}


def check_triton(dev: str, cfg=None) -> dict:
    """The Triton kernel against an fp32 reference on its own dequantized operands."""
    from moe_triton import (DEFAULT_CONFIG, align_block_size, fused_moe_gemm, quant_block_weight,
                            quant_group)
    D, N, E, k, T = 384, 256, 8, 2, 200
    w = torch.randn(E, N, D, device=dev, dtype=torch.bfloat16)
    wq, ws = quant_block_weight(w)
    aq, as_ = quant_group(torch.randn(T, D, device=dev, dtype=torch.bfloat16))
    topk = torch.rand(T, E, device=dev).topk(k, dim=1).indices
    cfg = cfg or DEFAULT_CONFIG
    sid, eid, padded = align_block_size(topk, E, cfg["BLOCK_M"])
    c = torch.full((T * k, N), float("nan"), device=dev, dtype=torch.bfloat16)
    fused_moe_gemm(aq, as_, wq, ws, c, sid, eid, padded, k, cfg)
    a = aq.float() * as_.repeat_interleave(128, 1)[:, :D]
    wd = wq.float() * ws.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :N, :D]
    ref = torch.einsum("tk,tnk->tn", a.repeat_interleave(k, 0), wd[topk.flatten()])
    return {"kind": "triton_fp8_block", "gemm": "check", "rel_err": float((c.float() - ref).norm() / ref.norm()),
            "finite": bool(torch.isfinite(c).all())}


def run_shard(timer: Timer, model: str, moe_tp: int, ep: int, tokens, dev: str, kinds,
              deadline: float, records: list, skipped: list) -> None:
    D, E, k, Fw = MODELS[model]
    E_local, F_local = E // ep, Fw // moe_tp
    layer = Layer(D, F_local, E_local, dev, want_fp8=dev == "cuda")
    for T in tokens:
        base = {"model": model, "moe_tp": moe_tp, "ep": ep, "T": T, "top_k": k, "experts": E_local,
                "experts_total": E, "D": D, "F_local": F_local}
        topk, ids, offs = routing(T, E, k, E_local, dev)
        R = ids.numel()
        base["rows"] = R
        jobs = [(g, kind, fn) for g in ("gate_up", "down")
                for kind, fn in callables(layer, g, T, k, topk, ids, offs, dev, kinds).items()]
        jobs += [("-", kind, fn) for kind, fn in small_ops(D, F_local, T, k, ids, dev).items()]
        for g, kind, fn in jobs:
            what = f"{model} tp{moe_tp} ep{ep} T={T} {g} {kind}"
            if time.perf_counter() > deadline:
                skipped.append({"what": what, "reason": "time budget"})
                continue
            try:
                m = timer.measure(fn, target_s=0.02, max_reps=15)
            except Exception as exc:  # noqa: BLE001 - a refused kernel is reported, not fatal
                skipped.append({"what": what, "reason": one_line(exc)})
                log(f"[{what}] skipped: {one_line(exc)}")
                continue
            K, N = layer.shapes[g] if g != "-" else (D, 0)
            flops = 2 * R * K * N
            records.append({**base, "kind": kind, "gemm": g, "M": R, "K": K, "N": N, **m,
                            "flops": flops, "flops_per_s": flops / m["seconds"]})
        log(f"[{model} tp{moe_tp} ep{ep} T={T}] rows {R} done")
    del layer
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def summary(recs: list) -> None:
    """TFLOP/s of gate_up + down per shard and T, per kind (printed last)."""
    kinds = [k for k in KINDS + ("triton_fp8_block_m16",) if any(r["kind"] == k for r in recs)]
    print(f"{'shard':32} {'T':>6} " + " ".join(f"{k[-14:]:>14}" for k in kinds) + "   perm+comb ms")
    keys = sorted({(r["model"], r["moe_tp"], r["ep"], r["T"]) for r in recs}, key=str)
    for key in keys:
        rs = [r for r in recs if (r["model"], r["moe_tp"], r["ep"], r["T"]) == key]
        row = []
        for kind in kinds:
            two = [r for r in rs if r["kind"] == kind and r["gemm"] != "-"]
            row.append(sum(r["flops"] for r in two) / sum(r["seconds"] for r in two) / 1e12
                       if len(two) == 2 else float("nan"))
        pc = sum(r["seconds"] for r in rs if r["kind"] in ("permute", "combine")) * 1e3
        print(f"{key[0] + ' tp' + str(key[1]) + ' ep' + str(key[2]):32} {key[3]:>6} "
              + " ".join(f"{v:>14.0f}" for v in row) + f"   {pc:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="prompt tokens per step")
    ap.add_argument("--kinds", default=",".join(KINDS), help="subset of the kinds (+ triton_fp8_block_m16)")
    args = ap.parse_args(argv)
    if torch is None:
        log("torch is not installed")
        return 2
    t0 = time.perf_counter()
    dev = args.device
    torch.manual_seed(0)
    kinds = tuple(args.kinds.split(",")) if dev == "cuda" else ("bf16_grouped", "dense_bf16")
    checks = check(dev, kinds)
    if dev == "cuda":
        try:
            checks.append(check_triton(dev))
        except Exception as exc:  # noqa: BLE001
            checks.append({"kind": "triton_fp8_block", "gemm": "check", "error": one_line(exc)})
    if "triton_fp8_block_m16" in kinds and not any(c["kind"] == "triton_fp8_block" and "error" in c for c in checks):
        checks.append({**check_triton(dev, SMALL_TILE), "kind": "triton_fp8_block_m16"})
    bad = {c["kind"] for c in checks if "error" in c or (c.get("rel_err") is not None and not c["rel_err"] < 3e-2)}
    kinds = tuple(k for k in kinds if k not in bad)
    for c in checks:
        log(f"check {c}")
    result = {"schema_version": 1, "env": env_section(dev), "args": vars(args), "checks": checks,
              "kinds": list(kinds), "records": [], "skipped": []}
    shards = SHARDS[:1] if args.quick else SHARDS
    tokens = (64, 128) if args.quick else tuple(int(t) for t in args.tokens.split(","))
    deadline = t0 + args.budget_s
    timer = Timer(dev)
    for model, moe_tp, ep in shards:
        D, E, k, Fw = MODELS[model]
        if args.quick:
            MODELS[model] = (D // 8, E // 8, k, Fw // 4)
        try:
            run_shard(timer, model, moe_tp, ep, tokens, dev, kinds, deadline,
                      result["records"], result["skipped"])
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the shard is skipped
            result["skipped"].append({"what": f"{model} tp{moe_tp} ep{ep}", "reason": one_line(exc)})
        result["elapsed_s"] = time.perf_counter() - t0
        write_json(args.out, result)
    if dev == "cuda":
        result["env"]["nvidia_smi_after"] = nvidia_smi()
    write_json(args.out, result)
    summary(result["records"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
