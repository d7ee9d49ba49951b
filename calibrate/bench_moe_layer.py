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
import moe_triton as mt  # noqa: E402

if mt.triton is not None:
    tl = mt.tl

    @mt.triton.jit
    def _moe_kernel_exit(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, sorted_ptr, expert_ptr, npp_ptr,
                         N, K, EM, num_valid, stride_am, stride_be, stride_bn, stride_cm,
                         stride_asm, stride_bse, stride_bsn,
                         TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """moe_triton._moe_kernel + vLLM's early exit past num_tokens_post_padded (a device
        scalar, so the grid is sized for the worst case and no host sync is needed)."""
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(EM, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        in_group = GROUP_M * num_pid_n
        first_m = (pid // in_group) * GROUP_M
        size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % in_group) % size_m)
        pid_n = (pid % in_group) // size_m
        if pid_m * BLOCK_M >= tl.load(npp_ptr):
            return
        offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        tok = tl.load(sorted_ptr + offs).to(tl.int64)
        valid = tok < num_valid
        expert = tl.load(expert_ptr + pid_m).to(tl.int64)
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (tok[:, None] // TOP_K) * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None]
        as_ptrs = as_ptr + (tok // TOP_K) * stride_asm
        bs_ptrs = bs_ptr + expert * stride_bse + (offs_n // 128) * stride_bsn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BLOCK_K)):
            kmask = offs_k < K - kk * BLOCK_K
            a = tl.load(a_ptrs, mask=valid[:, None] & kmask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
            ks = (kk * BLOCK_K) // 128
            a_s = tl.load(as_ptrs + ks, mask=valid, other=0.0)
            b_s = tl.load(bs_ptrs + ks)
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K
        offs_c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + tok[:, None] * stride_cm + offs_c[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=valid[:, None] & (offs_c[None, :] < N))

# (D, q heads, kv heads, head_dim, rotary_dim, E, top_k, expert F (or dense F), qk_norm, router)
# from each model's config.json (perfmodel/core/catalog/*.yaml)
MODELS = {
    "minimax-m2.5": (3072, 48, 8, 128, 64, 256, 8, 1536, "across", "fp32_sigmoid"),
    "qwen3-235b-a22b": (4096, 64, 4, 128, 128, 128, 8, 1536, "per_head", "softmax"),
    "llama-3.1-70b": (8192, 64, 8, 128, 128, 0, 0, 28672, "none", "none"),
}
SHARDS = (("minimax-m2.5", 8), ("minimax-m2.5", 4), ("minimax-m2.5", 2),
          ("qwen3-235b-a22b", 4), ("qwen3-235b-a22b", 8), ("llama-3.1-70b", 8))
TOKENS = (64, 1024, 8192)
CFG = mt.DEFAULT_CONFIG
SLEEP_CYCLES_PER_S = 1.98e9   # SM clock ~1.98 GHz (H200): torch.cuda._sleep counts cycles


def rms(x, w):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def quant_rows(x):
    """Per-token fp8 (vLLM's dynamic per-token quant): (fp8 x, fp32 scale (M, 1))."""
    s = x.abs().amax(-1, keepdim=True).float().clamp(min=1e-10) / 448.0
    return (x.float() / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), s


class Shard:
    def __init__(self, model: str, tp: int, dev: str):
        (D, Hq, Hkv, hd, rot, E, k, Fw, qkn, router) = MODELS[model]
        self.D, self.hq, self.hkv, self.hd, self.rot = D, Hq // tp, max(1, Hkv // tp), hd, rot
        self.E, self.k, self.F, self.qkn, self.router = E, k, Fw // tp, qkn, router
        self.dev, self.fp8 = dev, dev == "cuda"
        bf = dict(device=dev, dtype=torch.bfloat16)
        r = lambda *s: torch.randn(*s, **bf) * 0.02  # noqa: E731
        nq = (self.hq + 2 * self.hkv) * hd
        self.w_qkv, self.w_o = self._lin(r(nq, D)), self._lin(r(D, self.hq * hd))
        self.n1, self.n2 = torch.ones(D, **bf), torch.ones(D, **bf)
        self.qn = torch.ones(self.hq * hd if qkn == "across" else hd, **bf)
        self.kn = torch.ones(self.hkv * hd if qkn == "across" else hd, **bf)
        if E:
            self.w_g = torch.randn(E, D, device=dev, dtype=torch.float32 if "fp32" in router
                                   else torch.bfloat16) * 0.02
            self.bias = torch.randn(E, device=dev) * 0.01
            if self.fp8:
                self.w13 = mt.quant_block_weight(r(E, 2 * self.F, D))
                self.w2 = mt.quant_block_weight(r(E, D, self.F))
            else:
                self.w13, self.w2 = r(E, 2 * self.F, D), r(E, D, self.F)
        else:
            self.w13, self.w2 = self._lin(r(2 * self.F, D)), self._lin(r(D, self.F))

    def _lin(self, w):
        if not self.fp8:
            return w
        s = w.abs().amax(-1, keepdim=True).float().clamp(min=1e-10) / 448.0
        return ((w.float() / s).to(torch.float8_e4m3fn), s.t().contiguous())

    def mm(self, x, w):
        if not self.fp8:
            return x @ w.t()
        xq, xs = quant_rows(x)
        return torch._scaled_mm(xq, w[0].t(), scale_a=xs, scale_b=w[1], out_dtype=torch.bfloat16)


def rope(x, rot: int, pos):
    half = rot // 2
    inv = 1.0 / (10000.0 ** (torch.arange(half, device=x.device, dtype=torch.float32) / half))
    ang = pos[:, None].float() * inv[None, :]
    cos, sin = ang.cos()[:, None, :].to(x.dtype), ang.sin()[:, None, :].to(x.dtype)
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)


def align(topk_ids, E: int, bm: int):
    """vLLM moe_align_block_size with no host sync: (sorted_ids, expert per block, padded
    count as a device scalar); the worst-case length T*k + E*(bm-1), as vLLM sizes it."""
    flat = topk_ids.flatten()
    n = flat.numel()
    cap = n + E * (bm - 1)
    counts = torch.zeros(E, device=flat.device, dtype=torch.long).scatter_add_(
        0, flat, torch.ones_like(flat))
    padded = (counts + bm - 1) // bm * bm
    end_p = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    ex = flat[order]
    start = torch.cumsum(counts, 0) - counts
    pos = (end_p - padded)[ex] + torch.arange(n, device=flat.device) - start[ex]
    sorted_ids = torch.full((cap,), n, device=flat.device, dtype=torch.int32)
    sorted_ids.scatter_(0, pos, order.to(torch.int32))
    blocks = torch.arange(0, cap, bm, device=flat.device)
    expert_ids = torch.searchsorted(end_p, blocks, right=True).clamp(max=E - 1).to(torch.int32)
    return sorted_ids, expert_ids, end_p[-1:].to(torch.int32)


def moe_gemm(sh: Shard, a, w, out, sorted_ids, expert_ids, npp, T: int):
    """The routed GEMM over (T*k) rows: the Triton kernel on CUDA, a gather reference on CPU."""
    if not sh.fp8:
        ids = sorted_ids.long()
        keep = ids < T * sh.k
        rows = ids[keep]
        exs = expert_ids.long().repeat_interleave(CFG["BLOCK_M"])[:ids.numel()][keep]
        src = a[rows // sh.k] if a.shape[0] == T else a[rows]
        out[rows] = torch.bmm(w[exs], src.unsqueeze(-1)).squeeze(-1).to(out.dtype)
        return out
    top_k = sh.k if a.shape[0] == T else 1
    aq, as_ = mt.quant_group(a)
    wq, ws = w
    N, K = wq.shape[1], wq.shape[2]
    EM = sorted_ids.numel()
    grid = (mt.triton.cdiv(EM, CFG["BLOCK_M"]) * mt.triton.cdiv(N, CFG["BLOCK_N"]),)
    _moe_kernel_exit[grid](aq, wq, out, as_, ws, sorted_ids, expert_ids, npp, N, K, EM,
                           out.shape[0], aq.stride(0), wq.stride(0), wq.stride(1),
                           out.stride(0), as_.stride(0), ws.stride(0), ws.stride(1),
                           TOP_K=top_k, BLOCK_M=CFG["BLOCK_M"], BLOCK_N=CFG["BLOCK_N"],
                           BLOCK_K=CFG["BLOCK_K"], GROUP_M=CFG["GROUP_M"],
                           num_warps=CFG["num_warps"], num_stages=CFG["num_stages"])
    return out


def layer_ops(sh: Shard, T: int):
    """The layer as a list of (name, fn(state) -> None) over a dict state."""
    pos = torch.arange(T, device=sh.dev)
    hd, hq, hkv = sh.hd, sh.hq, sh.hkv

    def norm1(s):
        s["res"] = s["x"] + s["res"]
        s["h"] = rms(s["res"], sh.n1)

    def qkv(s):
        s["qkv"] = sh.mm(s["h"], sh.w_qkv)

    def qk_norm(s):
        q, k, v = s["qkv"].split([hq * hd, hkv * hd, hkv * hd], -1)
        if sh.qkn == "across":
            q, k = rms(q, sh.qn), rms(k, sh.kn)
        q, k = q.view(T, hq, hd), k.view(T, hkv, hd)
        if sh.qkn == "per_head":
            q, k = rms(q, sh.qn), rms(k, sh.kn)
        s["q"], s["k"], s["v"] = q, k, v.view(T, hkv, hd)

    def rotary(s):
        s["q"], s["k"] = rope(s["q"], sh.rot, pos), rope(s["k"], sh.rot, pos)

    def attention(s):
        q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (s["q"], s["k"], s["v"]))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        s["attn"] = o.squeeze(0).transpose(0, 1).reshape(T, hq * hd)

    def o_proj(s):
        s["o"] = sh.mm(s["attn"], sh.w_o)

    def norm2(s):
        s["res"] = s["o"] + s["res"]
        s["h"] = rms(s["res"], sh.n2)

    ops = [("norm1", norm1), ("qkv", qkv), ("qk_norm", qk_norm), ("rope", rotary),
           ("attention", attention), ("o_proj", o_proj), ("norm2", norm2)]
    return ops + (_moe_ops(sh, T) if sh.E else _dense_mlp_ops(sh))


def _dense_mlp_ops(sh: Shard):
    def gate_up(s):
        s["gu"] = sh.mm(s["h"], sh.w13)

    def act(s):
        g, u = s["gu"].chunk(2, -1)
        s["a"] = F.silu(g) * u

    def down(s):
        s["x"] = sh.mm(s["a"], sh.w2)
    return [("gate_up", gate_up), ("act", act), ("down", down)]


def _moe_ops(sh: Shard, T: int):
    k, D, Fl = sh.k, sh.D, sh.F
    bf = dict(device=sh.dev, dtype=torch.bfloat16)

    def router(s):
        h = s["h"].float() if "fp32" in sh.router else s["h"]
        s["logits"] = h @ sh.w_g.t()

    def topk(s):
        lg = s["logits"].float()
        if "sigmoid" in sh.router:
            sc = lg.sigmoid()
            ids = (sc + sh.bias).topk(k, -1).indices
            w = sc.gather(1, ids)
        else:
            w, ids = lg.softmax(-1).topk(k, -1)
        # dispatch follows the uniform routing drawn in measure() (s["route"]): random weights
        # give degenerate logits (every token picks the same experts); the top-k is still timed
        s["ids"], s["w"] = s.get("route", ids), w / w.sum(-1, keepdim=True)

    def align_(s):
        s["sorted"], s["eids"], s["npp"] = align(s["ids"], sh.E, CFG["BLOCK_M"])

    def gate_up(s):
        out = torch.empty(T * k, 2 * Fl, **bf)
        s["gu"] = moe_gemm(sh, s["h"], sh.w13, out, s["sorted"], s["eids"], s["npp"], T)

    def act(s):
        g, u = s["gu"].chunk(2, -1)
        s["a"] = F.silu(g) * u

    def down(s):
        out = torch.empty(T * k, D, **bf)
        s["dn"] = moe_gemm(sh, s["a"], sh.w2, out, s["sorted"], s["eids"], s["npp"], T)

    def combine(s):
        s["x"] = (s["dn"].view(T, k, D) * s["w"].to(torch.bfloat16)[..., None]).sum(1)
    return [("router", router), ("topk", topk), ("align", align_), ("gate_up", gate_up),
            ("act", act), ("down", down), ("combine", combine)]


def run_layer(ops, s):
    for _, fn in ops:
        fn(s)


def _sleep(s: float, cuda: bool):
    if cuda and s > 0:
        torch.cuda._sleep(int(s * SLEEP_CYCLES_PER_S))


def measure(sh: Shard, T: int, reps: int, cuda: bool) -> dict:
    ops = layer_ops(sh, T)
    s = {"x": torch.randn(T, sh.D, device=sh.dev, dtype=torch.bfloat16),
         "res": torch.zeros(T, sh.D, device=sh.dev, dtype=torch.bfloat16)}
    if sh.E:   # uniform random top-k, distinct experts per token (bench_moe_prefill.routing)
        s["route"] = torch.rand(T, sh.E, device=sh.dev).topk(sh.k, dim=1).indices
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(3):
        run_layer(ops, s)
        s["x"] = s["x"] / (s["x"].abs().amax() + 1)
    sync()
    t0 = time.perf_counter()
    run_layer(ops, s)
    sync()
    est = time.perf_counter() - t0
    per_op = {n: [] for n, _ in ops}
    host_op = {n: [] for n, _ in ops}
    for _ in range(reps):             # per-op GPU time: the whole layer queued behind a sleep
        if cuda:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(ops) + 1)]
            _sleep(2 * est + 2e-3, cuda)
            ev[0].record()
            for i, (n, fn) in enumerate(ops):
                t = time.perf_counter()
                fn(s)
                host_op[n].append(time.perf_counter() - t)
                ev[i + 1].record()
            sync()
            for i, (n, _) in enumerate(ops):
                per_op[n].append(ev[i].elapsed_time(ev[i + 1]) / 1e3)
        else:
            for n, fn in ops:
                t = time.perf_counter()
                fn(s)
                per_op[n].append(time.perf_counter() - t)
    loop = max(4, min(32, int(0.2 / max(est, 1e-6))))
    gpu, wall, issue = [], [], []
    for _ in range(5):
        if cuda:                      # GPU: loop queued behind a sleep
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            _sleep(2 * loop * est + 2e-3, cuda)
            a.record()
            for _ in range(loop):
                run_layer(ops, s)
            b.record()
            sync()
            gpu.append(a.elapsed_time(b) / 1e3 / loop)
        sync()
        t0 = time.perf_counter()      # wall and host issue: no head start
        for _ in range(loop):
            run_layer(ops, s)
        t1 = time.perf_counter()
        sync()
        wall.append((time.perf_counter() - t0) / loop)
        issue.append((t1 - t0) / loop)
    rec = {"ops_s": {n: statistics.median(v) for n, v in per_op.items()},
           "layer_wall_s": statistics.median(wall), "layer_issue_s": statistics.median(issue),
           "layer_gpu_s": statistics.median(gpu) if gpu else None, "loop": loop}
    rec["ops_sum_s"] = sum(rec["ops_s"].values())
    rec["ops_host_s"] = {n: statistics.median(v) for n, v in host_op.items() if v}
    if sh.E:
        rec["experts_touched"] = int(torch.unique(s["route"]).numel())
    rec["kernels"] = count_kernels(ops, s, cuda)
    return rec


def count_kernels(ops, s, cuda: bool) -> dict | None:
    """CUDA kernels, memcpy and memset of one layer, per op (torch.profiler)."""
    if not cuda:
        return None
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for n, fn in ops:
            with record_function("op::" + n):
                fn(s)
        torch.cuda.synchronize()
    total = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return {"total": total}


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
