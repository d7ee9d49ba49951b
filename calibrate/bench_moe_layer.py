#!/usr/bin/env python3
"""One GPU's share of one whole decoder layer's prompt step, eager. torch + stdlib (+ triton).

    python3 calibrate/bench_moe_layer.py --device cuda --out calibrate/data/moe-layer-h200-sxm-<date>.json
    python3 calibrate/bench_moe_layer.py --quick --device cpu --out /tmp/l.json   # tiny, CI

The layer of a TP-sharded model as vLLM runs it (tp GPUs share the heads and every expert's
width; ep 1), at T prompt tokens (one prompt, S = 0):
  norm1 (residual add + RMSNorm), qkv (per-token fp8 quant + fp8 GEMM, row-wise scales),
  qk_norm (MiniMax-M2: RMSNorm over all heads' q and k; Qwen3: per head), rope (rotary_dim of
  head_dim), attention (SDPA causal, GQA), o_proj (quant + fp8 GEMM), norm2, router (fp32 for
  MiniMax-M2, vLLM minimax_m2.py gate params_dtype float32; bf16 otherwise), topk (sigmoid +
  correction bias for MiniMax-M2, softmax for Qwen3; renormalised), align (vLLM
  moe_align_block_size without a host sync: sort by expert, pad each expert to BLOCK_M),
  moe_quant (1x128 group fp8), gate_up (moe_triton's vLLM-style fused kernel, early exit past
  the padded rows as vLLM's), act (silu(gate) * up + group quant), down (fused kernel), combine
  (x routed weights, sum over k: vLLM ops.moe_sum). Dense layers: gate_up / act / down as
  plain fp8 GEMMs. Plain torch for the small ops: their kernel counts are upper bounds on an
  engine's fused ones; their GPU times are close (memory-bound, a few passes over T x D).
No all-reduce (one GPU): core/parallel.py prices it separately.

Per (model, tp, T), random weights (timing depends on shapes):
  ops_s: each op's GPU time (CUDA events between ops, the whole layer queued behind a GPU
         sleep so the host is ahead: pure GPU time), median of repeats;
  layer_gpu_s: a loop of `reps` layers queued behind a sleep, per layer;
  layer_wall_s: the same loop without the head start (host issue and GPU run together);
  layer_issue_s: host time to enqueue one layer (the loop before its synchronize, per layer);
  ops_host_s: each op's host time to enqueue it (queued behind the sleep: no waiting on the GPU);
  experts_touched: distinct experts of the routing (uniform random top-k, as
         bench_moe_prefill.py: random weights make the router's own choice degenerate, so
         the router and top-k are timed on their logits but the dispatch follows this draw);
  kernels: CUDA kernels (and memcpy/memset) launched by one layer (torch.profiler).
JSON (schema_version 1): env, args, records [...], skipped, elapsed_s.
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
from layer_timing import measure_layer  # noqa: E402
import moe_triton as mt  # noqa: E402
from moe_layer_ops import (CFG, MODELS, SHARDS, Shard, align, layer_ops, moe_gemm,  # noqa: E402
                           run_layer)

TOKENS = (64, 1024, 8192)


def measure(sh: Shard, T: int, reps: int, cuda: bool) -> dict:
    ops = layer_ops(sh, T)
    s = {"x": torch.randn(T, sh.D, device=sh.dev, dtype=torch.bfloat16),
         "res": torch.zeros(T, sh.D, device=sh.dev, dtype=torch.bfloat16)}
    if sh.E:   # uniform random top-k, distinct experts per token (bench_moe_prefill.routing)
        s["route"] = torch.rand(T, sh.E, device=sh.dev).topk(sh.k, dim=1).indices
    for _ in range(3):
        run_layer(ops, s)
        s["x"] = s["x"] / (s["x"].abs().amax() + 1)
    rec = measure_layer(ops, s, reps, cuda)
    if sh.E:
        rec["experts_touched"] = int(torch.unique(s["route"]).numel())
    return rec


def check(dev: str) -> dict:
    """align(): every routed row once, in its expert's block; the gate_up GEMM (kernel on CUDA)
    against an fp32 reference on the dequantized operands, relative error of the routed rows."""
    sh = Shard("minimax-m2.5", 8, dev) if dev == "cuda" else None
    if sh is None:
        MODELS.setdefault("tiny-moe", (256, 8, 2, 32, 16, 16, 4, 64, "across", "fp32_sigmoid"))
        sh = Shard("tiny-moe", 2, dev)
    T, bm = 128, CFG["BLOCK_M"]
    h = torch.randn(T, sh.D, device=dev, dtype=torch.bfloat16)
    ids = torch.rand(T, sh.E, device=dev).topk(sh.k, -1).indices
    sorted_ids, eids, npp = align(ids, sh.E, bm)
    n = T * sh.k
    live = sorted_ids[: int(npp)].long()
    rows = live[live < n]
    blk_expert = eids.long().repeat_interleave(bm)[: sorted_ids.numel()][: int(npp)][live < n]
    ok_align = bool(torch.equal(rows.sort().values, torch.arange(n, device=dev))
                    and torch.equal(blk_expert, ids.flatten()[rows]))
    out = torch.zeros(n, 2 * sh.F, device=dev, dtype=torch.bfloat16)
    moe_gemm(sh, h, sh.w13, out, sorted_ids, eids, npp, T)
    if sh.fp8:
        wq, ws = sh.w13
        w = wq.float() * ws.repeat_interleave(128, 1)[:, : wq.shape[1]].repeat_interleave(
            128, 2)[:, :, : wq.shape[2]]
        aq, as_ = mt.quant_group(h)
        a = aq.float() * as_.repeat_interleave(128, 1)[:, : aq.shape[1]]
    else:
        w, a = sh.w13.float(), h.float()
    tok, ex = torch.arange(n, device=dev) // sh.k, ids.flatten()
    ref = torch.bmm(w[ex], a[tok].unsqueeze(-1)).squeeze(-1)
    err = float((out.float() - ref).norm() / ref.norm())
    return {"align_ok": ok_align, "gate_up_rel_err": err}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true", help="tiny shapes (CPU smoke test)")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    args = p.parse_args(argv)
    if torch is None:
        log("torch is not installed")
        return 2
    cuda = args.device == "cuda"
    t_start = time.perf_counter()
    tokens = [int(t) for t in args.tokens.split(",")]
    result = {"schema_version": 1, "env": env_section(args.device), "args": vars(args),
              "records": [], "skipped": []}
    try:
        result["checks"] = check(args.device)
    except Exception as exc:  # noqa: BLE001
        result["checks"] = {"error": one_line(exc)}
    log(f"checks: {result['checks']}")
    if args.quick:
        MODELS["tiny-moe"] = (256, 8, 2, 32, 16, 16, 4, 64, "across", "fp32_sigmoid")
        shards, tokens = (("tiny-moe", 2),), (16, 32)
    else:
        shards = SHARDS
    for model, tp in shards:
        sh = Shard(model, tp, args.device)
        for T in tokens:
            try:
                rec = measure(sh, T, args.reps if not args.quick else 2, cuda)
            except Exception as exc:  # noqa: BLE001 - the run records what failed and goes on
                result["skipped"].append({"what": f"{model} tp{tp} T{T}", "reason": one_line(exc)})
                log(f"skip {model} tp{tp} T{T}: {one_line(exc)}")
                continue
            rec.update(model=model, tp=tp, T=T, D=sh.D, heads_local=sh.hq, kv_heads_local=sh.hkv,
                       experts=sh.E, top_k=sh.k, F_local=sh.F)
            result["records"].append(rec)
            log(f"{model} tp{tp} T{T}: gpu {1e3 * (rec['layer_gpu_s'] or 0):.3f} ms wall "
                f"{1e3 * rec['layer_wall_s']:.3f} issue {1e3 * rec['layer_issue_s']:.3f} "
                f"ops {1e3 * rec['ops_sum_s']:.3f} kernels {rec['kernels']} "
                + " ".join(f"{n}={1e6 * v:.0f}" for n, v in rec["ops_s"].items()))
        del sh
        if cuda:
            torch.cuda.empty_cache()
    if cuda:
        result["env"]["nvidia_smi_after"] = nvidia_smi()
    result["elapsed_s"] = time.perf_counter() - t_start
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
