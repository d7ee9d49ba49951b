#!/usr/bin/env python3
"""GEMM rate per dtype and scaling recipe on LLM layer shapes. torch + the standard library only.

    python3 calibrate/bench_gemm_dtype.py --device cuda --out calibrate/data/gemm-dtype-<gpu>-<date>.json

(not raw-*.json: those names are bench.py results, read by `perfmodel validate` and the web app)
    python3 calibrate/bench_gemm_dtype.py --quick --device cpu --out /tmp/g.json   # tiny, CI

Timing as calibrate/bench.py (bench_timing.Timer: warm-up, CUDA events behind a short GPU
sleep, median over repeats, inputs rotated over > 3x L2, random data, never zeros).

JSON (schema_version 1), sizes in bytes, times in seconds:
  env: as bench.py's env section
  checks: [{kind, M, N, K, rel_err, layout}] ||y - ref|| / ||ref|| against an fp32 matmul of
          the dequantized operands (first shape, M=256); a kind that fails its check is not timed
  gemm.records: kind, model, layer, M, N, K, seconds, flops (2MNK), bytes (weights + inputs +
          outputs), flops_per_s, reps, inner.  y[M,N] = x[M,K] @ W[N,K]^T, out bf16.
          kind: "bf16" (F.linear); "fp8_tensor" (torch._scaled_mm, one fp32 scale per tensor);
          "fp8_row" (scale per activation row (M,1) and per weight row (1,N));
          "fp8_block" (DeepSeek-V3 recipe: activation scales per 1x128 group (M, K/128), weight
          scales per 128x128 block (K/128, N/128)); quantization of x is NOT in these times;
          checks[].layout says which scale layout / API ran (check_kind)
  quant.records: kind ("group128": per-token-group fp8 quantization, one scale per 1x128;
          "row": one scale per row), impl ("eager": torch ops; "compiled": torch.compile, one
          fused kernel), M, K, seconds, bytes (read bf16 x, write fp8 x and fp32 scales),
          bytes_per_s
  grouped.records: kind "bf16_grouped" (torch._grouped_mm, 2D x 3D with offsets), model,
          layer, experts, tokens_per_expert, M (experts x tokens_per_expert), N, K, seconds,
          flops, bytes, flops_per_s
  every section also has skipped: [{what, reason}] and elapsed_s
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

from bench_env import env_section, log, nvidia_smi, one_line, write_json  # noqa: E402
from bench_timing import Ctx  # noqa: E402

M_LIST = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
M_LIST_QUICK = (1, 16, 64)
# (model, layer, K, N) per GPU; TP shards named in the model tag (config.json of each model)
SHAPES = (
    ("qwen3-32b", "qkv", 5120, 10240), ("qwen3-32b", "o", 8192, 5120),
    ("qwen3-32b", "gate_up", 5120, 51200), ("qwen3-32b", "down", 25600, 5120),
    ("llama-3.1-8b", "qkv", 4096, 6144), ("llama-3.1-8b", "o", 4096, 4096),
    ("llama-3.1-8b", "gate_up", 4096, 28672), ("llama-3.1-8b", "down", 14336, 4096),
    ("deepseek-v3", "qkv_a", 7168, 2112), ("deepseek-v3", "q_b", 1536, 24576),
    ("deepseek-v3", "o", 16384, 7168), ("deepseek-v3", "dense_gate_up", 7168, 36864),
    ("deepseek-v3", "dense_down", 18432, 7168),
    ("llama-3.1-70b-tp4", "qkv", 8192, 2560), ("llama-3.1-70b-tp4", "o", 2048, 8192),
    ("llama-3.1-70b-tp4", "gate_up", 8192, 14336), ("llama-3.1-70b-tp4", "down", 7168, 8192),
    ("qwen3-32b-tp2", "gate_up", 5120, 25600), ("qwen3-32b-tp2", "down", 12800, 5120),
)
KINDS = ("bf16", "fp8_tensor", "fp8_row", "fp8_block")
QUANT_K = (4096, 7168, 14336, 25600)
# (model, layer, local experts, K, N) of one GPU's routed experts
GROUPED = (("qwen3-30b-a3b", "gate_up", 128, 2048, 1536), ("qwen3-30b-a3b", "down", 128, 768, 2048),
           ("deepseek-v3-ep8", "gate_up", 32, 7168, 4096), ("deepseek-v3-ep8", "down", 32, 2048, 7168))
TOKENS_PER_EXPERT = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
FP8_MAX = 448.0      # largest finite float8_e4m3fn
GROUP = 128


class Budget:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def spent(self) -> bool:
        return time.perf_counter() > self.end


# ----------------------------------------------------------------------------- operands

def _fp8(x):
    return x.to(torch.float8_e4m3fn)


def make_kind(kind: str, dev: str, layout: int = 0):
    """(make_x(M, K), make_w(N, K), call(x, w), in_bytes): x and w carry their scales."""
    if kind == "bf16":
        def mk(r, c):
            return torch.randn(r, c, device=dev, dtype=torch.bfloat16)
        return mk, mk, lambda x, w: F.linear(x, w), 2

    def scales(shape, transpose):
        s = torch.rand(*shape, device=dev, dtype=torch.float32) + 0.5
        return s.t().contiguous().t() if transpose else s

    def make_x(M, K):
        q = _fp8(torch.randn(M, K, device=dev))
        if kind == "fp8_tensor":
            return q, torch.ones((), device=dev)
        if kind == "fp8_row":
            return q, scales((M, 1), False)
        return q, scales((M, math.ceil(K / GROUP)), layout % 4 in (1, 3))

    def make_w(N, K):
        q = _fp8(torch.randn(N, K, device=dev))
        if kind == "fp8_tensor":
            return q, torch.ones((), device=dev)
        if kind == "fp8_row":
            return q, scales((1, N), False)
        return q, scales((math.ceil(K / GROUP), math.ceil(N / GROUP)), layout % 4 in (2, 3))

    if layout >= 4:   # the explicit-recipe API (torch.nn.functional.scaled_mm, torch >= 2.10)
        st = F.ScalingType

        def call_v2(x, w):
            return F.scaled_mm(x[0], w[0].t(), x[1], st.BlockWise1x128, w[1], st.BlockWise128x128,
                               output_dtype=torch.bfloat16)
        return make_x, make_w, call_v2, 1

    def call(x, w):
        return torch._scaled_mm(x[0], w[0].t(), scale_a=x[1], scale_b=w[1], out_dtype=torch.bfloat16)
    return make_x, make_w, call, 1


def dequant(kind: str, t, rows_are_k: bool = False):
    """fp32 value of an operand (q, scale) or bf16 tensor; the weight's block scales are
    (K/128, N/128) over w[N, K]."""
    if kind == "bf16":
        return t.float()
    q, s = t[0].float(), t[1]
    if s.dim() == 0 or kind == "fp8_tensor":
        return q * s
    if kind == "fp8_row":
        return q * (s.t() if rows_are_k else s)
    if rows_are_k:   # weight (N, K), scales (K/128, N/128)
        full = s.t().repeat_interleave(GROUP, 0).repeat_interleave(GROUP, 1)
    else:            # activation (M, K), scales (M, K/128)
        full = s.repeat_interleave(GROUP, 1)
    return q * full[:q.shape[0], :q.shape[1]]


def check_kind(kind: str, dev: str) -> dict:
    """Correct first: rel. error against fp32 on the dequantized operands, fresh random data;
    for fp8_block the scale layouts are tried in turn (layout % 4: 0 both scales row-major,
    1 activation scales column-major, 2 weight scales column-major, 3 both; layout >= 4: through
    F.scaled_mm with explicit BlockWise1x128 / BlockWise128x128 recipes, else torch._scaled_mm)."""
    M, K, N = 256, 4096, 6144
    last, tried = {}, []
    layouts = (0, 1, 2, 3, 4, 5, 6, 7) if hasattr(F, "scaled_mm") else (0, 1, 2, 3)
    for layout in (layouts if kind == "fp8_block" else (0,)):
        make_x, make_w, call, _ = make_kind(kind, dev, layout)
        x, w = make_x(M, K), make_w(N, K)
        try:
            y = call(x, w).float()
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
            last = {"kind": kind, "M": M, "N": N, "K": K, "layout": layout, "error": one_line(exc)}
            tried.append(f"layout {layout}: {one_line(exc)[:160]}")
            continue
        ref = dequant(kind, x) @ dequant(kind, w, rows_are_k=True).t()
        rel = float((y - ref).norm() / ref.norm())
        last = {"kind": kind, "M": M, "N": N, "K": K, "layout": layout, "rel_err": rel,
                "finite": bool(torch.isfinite(y).all())}
        if rel < 2e-2 and last["finite"]:
            return {**last, "tried": tried}
        tried.append(f"layout {layout}: rel_err {rel:.3g}")
    return {**last, "tried": tried}


# ----------------------------------------------------------------------------- sections

def gemm_section(ctx: Ctx, budget: Budget, layouts: dict) -> dict:
    """Every kind on one shape before the next shape, so a spent budget drops whole shapes."""
    records, skipped = [], []
    div = 16 if ctx.quick else 1
    for model, layer, K, N in (SHAPES[:2] if ctx.quick else SHAPES[:ctx.args.max_shapes]):
        K, N = K // div, N // div
        for kind, layout in layouts.items():
            what = f"gemm {kind} {model} {layer}"
            if budget.spent():
                skipped.append({"what": what, "reason": "time budget"})
                continue
            make_x, make_w, call, in_b = make_kind(kind, ctx.device, layout)
            try:
                ws = [make_w(N, K) for _ in range(ctx.n_sets(N * K * in_b))]
            except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
                skipped.append({"what": what, "reason": one_line(exc)})
                continue
            for M in (M_LIST_QUICK if ctx.quick else M_LIST):
                try:
                    rec = gemm_point(ctx, call, ws, make_x, M, K, N, in_b)
                except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
                    skipped.append({"what": f"{what} M={M}", "reason": one_line(exc)})
                    log(f"[{what} M={M}] skipped: {one_line(exc)}")
                    continue
                records.append({"kind": kind, "model": model, "layer": layer, **rec})
                log(f"[{what} M={M}] {rec['seconds'] * 1e6:.1f} us {rec['flops_per_s'] / 1e12:.1f} TFLOP/s")
            del ws
            ctx.free_memory()
    return {"records": records, "skipped": skipped}


def gemm_point(ctx: Ctx, call, ws, make_x, M, K, N, in_b) -> dict:
    n_in = ctx.n_sets(M * K * in_b, cap=len(ws))
    xs = [make_x(M, K) for _ in range(n_in)]
    m = ctx.timer.measure(lambda i: call(xs[i % n_in], ws[i % len(ws)]))
    flops = 2 * M * N * K
    return {"M": M, "N": N, "K": K, **m, "flops": flops, "bytes": (N * K + M * K) * in_b + 2 * M * N,
            "flops_per_s": flops / m["seconds"]}


def quant_fn(kind: str):
    """fp8 quantization of a bf16 x[M, K], as the W8A8 engines quantize activations:
    "group128": one scale per 1x128 group, scale = amax / 448 (sglang per_token_group_quant_fp8);
    "row": one scale per row (dynamic per-token); "tensor": a given static scale (TRT-LLM /
    vLLM per-tensor fp8); "cast": x.to(fp8) alone, the floor of any of them (same bytes)."""
    inv = 1.0 / 4.0

    def quant(x):
        M, K = x.shape
        if kind == "cast":
            return x.to(torch.float8_e4m3fn)
        if kind == "tensor":
            return (x.float() * inv).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        g = x.float().view(M, -1, GROUP if kind == "group128" else K)
        s = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10) / FP8_MAX
        q = (g / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return q.view(M, K), s.squeeze(-1)
    return quant


QUANT_KINDS = ("group128", "row", "tensor", "cast")
QUANT_STATIC = ((1024, 5120), (4096, 5120), (16384, 5120), (4096, 8192), (4096, 25600), (16384, 25600))


def quant_plan(ctx: Ctx, skipped: list) -> list:
    """(impl, kind, fn, shapes): eager ops, torch.compile(dynamic=True) over all shapes, and
    torch.compile(dynamic=False) (one specialised fused kernel per shape) over a few."""
    all_shapes = [(M, K) for K in (QUANT_K[:1] if ctx.quick else QUANT_K)
                  for M in (M_LIST_QUICK if ctx.quick else M_LIST)]
    plan = [("eager", k, quant_fn(k), all_shapes) for k in QUANT_KINDS]
    if not ctx.cuda:
        return plan
    try:
        plan += [("compiled", k, torch.compile(quant_fn(k), dynamic=True), all_shapes) for k in QUANT_KINDS]
        for k in QUANT_KINDS:
            plan.append(("compiled_static", k, None, list(QUANT_STATIC)))
    except Exception as exc:  # noqa: BLE001 - any compile failure is reported, not fatal
        skipped.append({"what": "quant compiled", "reason": one_line(exc)})
    return plan


def quant_section(ctx: Ctx, budget: Budget) -> dict:
    records, skipped = [], []
    for impl, kind, fn, shapes in quant_plan(ctx, skipped):
        for M, K in shapes:
            if budget.spent():
                skipped.append({"what": f"quant {impl} {kind} K={K} M={M}", "reason": "time budget"})
                continue
            try:
                if fn is None:   # dynamo caches per code object: start clean, one shape each
                    torch._dynamo.reset()
                f = fn or torch.compile(quant_fn(kind), dynamic=False)
                n = ctx.n_sets(M * K * 2)
                xs = [torch.randn(M, K, device=ctx.device, dtype=torch.bfloat16) for _ in range(n)]
                m = ctx.timer.measure(lambda i: f(xs[i % n]))
            except Exception as exc:  # noqa: BLE001 - inductor errors are not RuntimeError
                skipped.append({"what": f"quant {impl} {kind} K={K} M={M}", "reason": one_line(exc)})
                continue
            scales = K // GROUP if kind == "group128" else 1 if kind == "row" else 0
            nbytes = M * K * 3 + 4 * M * scales
            records.append({"kind": kind, "impl": impl, "M": M, "K": K, **m, "bytes": nbytes,
                            "bytes_per_s": nbytes / m["seconds"]})
        ctx.free_memory()
    return {"records": records, "skipped": skipped}


def grouped_section(ctx: Ctx, budget: Budget) -> dict:
    records, skipped = [], []
    if not ctx.cuda or not hasattr(torch, "_grouped_mm"):
        return {"records": [], "skipped": [{"what": "grouped", "reason": "needs CUDA and torch._grouped_mm"}]}
    dev, bf = ctx.device, torch.bfloat16
    for model, layer, E, K, N in GROUPED:
        try:
            w = torch.randn(E, N, K, device=dev, dtype=bf).transpose(-2, -1)   # (E, K, N) col-major
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
            skipped.append({"what": f"grouped {model} {layer}", "reason": one_line(exc)})
            continue
        for t in TOKENS_PER_EXPERT:
            if budget.spent():
                skipped.append({"what": f"grouped {model} {layer} t={t}", "reason": "time budget"})
                continue
            M = E * t
            offs = torch.arange(t, M + 1, t, device=dev, dtype=torch.int32)
            try:
                n = ctx.n_sets(M * K * 2, cap=8)
                xs = [torch.randn(M, K, device=dev, dtype=bf) for _ in range(n)]
                m = ctx.timer.measure(lambda i: torch._grouped_mm(xs[i % n], w, offs=offs, out_dtype=bf))
            except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
                skipped.append({"what": f"grouped {model} {layer} t={t}", "reason": one_line(exc)})
                log(f"[grouped {model} {layer} t={t}] skipped: {one_line(exc)}")
                continue
            flops = 2 * M * N * K
            records.append({"kind": "bf16_grouped", "model": model, "layer": layer, "experts": E,
                            "tokens_per_expert": t, "M": M, "N": N, "K": K, **m, "flops": flops,
                            "bytes": 2 * (E * N * K + M * K + M * N), "flops_per_s": flops / m["seconds"]})
        del w
        ctx.free_memory()
    return {"records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- main

def summary(result: dict) -> None:
    """Median TFLOP/s over the layer shapes, per kind and M (printed last: the call's tail)."""
    recs = result["gemm"]["records"]
    kinds = [k for k in KINDS if any(r["kind"] == k for r in recs)]
    print("M      " + " ".join(f"{k:>11}" for k in kinds))
    for M in sorted({r["M"] for r in recs}):
        row = [statistics.median([r["flops_per_s"] / 1e12 for r in recs if r["kind"] == k and r["M"] == M] or [0])
               for k in kinds]
        print(f"{M:<6} " + " ".join(f"{v:>11.1f}" for v in row))
    for r in result["checks"]:
        print("check", r)
    q = [r for r in result["quant"]["records"] if r["M"] >= 4096]
    for impl in ("eager", "compiled", "compiled_static"):
        for kind in QUANT_KINDS:
            v = [r["bytes_per_s"] / 1e9 for r in q if r["impl"] == impl and r["kind"] == kind]
            if v:
                print(f"quant {impl} {kind} M>=4096: median {statistics.median(v):.0f} GB/s")
    g = result["grouped"]["records"]
    for t in TOKENS_PER_EXPERT:
        v = [r["flops_per_s"] / 1e12 for r in g if r["tokens_per_expert"] == t]
        if v:
            print(f"grouped t={t}: {' '.join(f'{x:.0f}' for x in v)} TFLOP/s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sections", default="gemm,grouped,quant")
    ap.add_argument("--max-shapes", type=int, default=len(SHAPES), help="first N of SHAPES only")
    ap.add_argument("--budget-s", type=float, default=420.0, help="timing time of all sections: gemm 65%%, grouped 10%%, quant 25%%")
    args = ap.parse_args(argv)
    if torch is None:
        log("torch is not installed")
        return 2
    env = env_section(args.device)
    ctx = Ctx(args, env)
    torch.manual_seed(0)
    checks, layouts = [], {"bf16": 0}
    fp8_ok = ctx.cuda and torch.cuda.get_device_capability() >= (8, 9)
    for kind in KINDS[1:] if fp8_ok else ():
        c = check_kind(kind, args.device)
        checks.append(c)
        if c.get("rel_err", 1.0) < 2e-2 and c.get("finite"):
            layouts[kind] = c["layout"]
    result = {"schema_version": 1, "env": env, "checks": checks, "args": vars(args)}
    for name, share, fn in (("gemm", 0.65, lambda b: gemm_section(ctx, b, layouts)),
                            ("grouped", 0.10, lambda b: grouped_section(ctx, b)),
                            ("quant", 0.25, lambda b: quant_section(ctx, b))):
        if name not in args.sections.split(","):
            result[name] = {"records": [], "skipped": [{"what": name, "reason": "not in --sections"}]}
            continue
        t0 = time.perf_counter()
        total = sum(sh for n, sh in (("gemm", 0.65), ("grouped", 0.10), ("quant", 0.25))
                    if n in args.sections.split(","))
        result[name] = fn(Budget(share / total * args.budget_s))
        result[name]["elapsed_s"] = time.perf_counter() - t0
        write_json(args.out, result)
    if ctx.cuda:
        env["nvidia_smi_after"] = nvidia_smi()
    write_json(args.out, result)
    summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
