"""The microbenchmark sections of calibrate/bench.py: memory bandwidth, GEMM per dtype over M,
decode attention, kernel launch cost. torch + the standard library only.

Each section takes a bench_timing.Ctx and returns {"records", "skipped"}; the record fields
are documented in bench.py's module docstring.
"""
from __future__ import annotations

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # bench.py reports a missing torch itself
    torch = F = None

from bench_env import log, one_line
from bench_timing import Ctx, capture_graph, wall_and_host

M_LIST = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
M_LIST_QUICK = (1, 4, 16, 64)
# (name, K, N) of one Llama-3.1-8B layer
GEMM_LAYERS = (("qkv", 4096, 6144), ("gate_up", 4096, 28672), ("down", 14336, 4096))
GEMM_DTYPES = ("bf16", "fp16", "fp8_e4m3", "int8")
ATTN_BATCHES, ATTN_BATCHES_QUICK = (1, 8, 32, 128), (1, 4)
ATTN_CONTEXTS, ATTN_CONTEXTS_QUICK = (512, 2048, 8192, 32768), (128, 512)
ATTN_MAX_KV_BYTES = 8e9
Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


# ----------------------------------------------------------------------------- bandwidth

def bandwidth_section(ctx: Ctx) -> dict:
    sizes = (2**22, 2**24) if ctx.quick else (2**28, 2**30, 2**31)
    records, skipped = [], []
    for size in sizes:
        n = size // 4
        try:
            src = torch.randn(n, device=ctx.device)
            dst = torch.empty_like(src)
            kinds = {"copy": (lambda i: dst.copy_(src), 2 * size),
                     "read": (lambda i: src.sum(), size),
                     "write": (lambda i: dst.fill_(1.5), size)}
            for kind, (fn, moved) in kinds.items():
                m = ctx.timer.measure(fn, target_s=0.05)
                records.append({"kind": kind, "dtype": "fp32", "buffer_bytes": size,
                                "bytes": moved, **m, "bytes_per_s": moved / m["seconds"]})
                log(f"[bandwidth {kind} {size / 1e6:.0f} MB] {moved / m['seconds'] / 1e9:.0f} GB/s")
            del src, dst
        except RuntimeError as exc:
            skipped.append({"what": f"buffer_bytes={size}", "reason": one_line(exc)})
        ctx.free_memory()
    return {"records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- gemm

def gemm_kind(ctx: Ctx, dtype: str):
    """(why unsupported or None, make(rows, cols) -> tensor, call(x, w), in/out bytes)."""
    dev = ctx.device
    if dtype in ("bf16", "fp16"):
        t = torch.bfloat16 if dtype == "bf16" else torch.float16
        return None, lambda r, c: torch.randn(r, c, device=dev, dtype=t), F.linear, 2, 2
    if dtype == "fp8_e4m3":
        if not ctx.cuda or torch.cuda.get_device_capability() < (8, 9):
            return "fp8 needs a CUDA GPU of compute capability >= 8.9", None, None, 1, 2
        one = torch.ones((), device=dev, dtype=torch.float32)

        def make(r, c):
            return torch.randn(r, c, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)

        def call(x, w):
            return torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return None, make, call, 1, 2

    def make_i8(r, c):
        return torch.randint(-8, 8, (r, c), device=dev, dtype=torch.int8)
    return None, make_i8, lambda x, w: torch._int_mm(x, w.t()), 1, 4


def gemm_point(ctx, call, ws, make, M, K, N, in_b, out_b) -> dict:
    n_in = ctx.n_sets(M * K * in_b, cap=len(ws))
    xs = [make(M, K) for _ in range(n_in)]
    m = ctx.timer.measure(lambda i: call(xs[i % n_in], ws[i % len(ws)]))
    flops = 2 * M * N * K
    nbytes = N * K * in_b + M * K * in_b + M * N * out_b
    return {"M": M, "N": N, "K": K, **m, "flops": flops, "bytes": nbytes,
            "flops_per_s": flops / m["seconds"]}


def gemm_section(ctx: Ctx) -> dict:
    records, skipped = [], []
    div = 16 if ctx.quick else 1
    m_list = M_LIST_QUICK if ctx.quick else M_LIST
    for dtype in GEMM_DTYPES:
        why, make, call, in_b, out_b = gemm_kind(ctx, dtype)
        if why:
            skipped.append({"what": f"gemm {dtype}", "reason": why})
            log(f"[gemm {dtype}] skipped: {why}")
            continue
        for layer, K, N in GEMM_LAYERS:
            K, N = K // div, N // div
            ws = [make(N, K) for _ in range(ctx.n_sets(N * K * in_b))]
            for M in m_list:
                try:
                    rec = gemm_point(ctx, call, ws, make, M, K, N, in_b, out_b)
                except RuntimeError as exc:
                    skipped.append({"what": f"gemm {dtype} {layer} M={M}", "reason": one_line(exc)})
                    log(f"[gemm {dtype} {layer} M={M}] skipped: {one_line(exc)}")
                    continue
                records.append({"dtype": dtype, "layer": layer, **rec})
                log(f"[gemm {dtype} {layer} M={M} K={K} N={N}] {rec['seconds'] * 1e6:.1f} us "
                    f"{rec['flops_per_s'] / 1e12:.1f} TFLOP/s {rec['bytes'] / rec['seconds'] / 1e9:.0f} GB/s")
            del ws
            ctx.free_memory()
    return {"records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- attention

def attention_kinds(q_sets, kv_sets):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    n = len(q_sets)
    group = Q_HEADS // KV_HEADS

    def sdpa(i):
        k, v = kv_sets[i % n]
        return F.scaled_dot_product_attention(q_sets[i % n], k, v, enable_gqa=True)

    def flash(i):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(i)

    def naive(i):
        k, v = kv_sets[i % n]
        q = q_sets[i % n]
        B = q.shape[0]
        qg = q.view(B, KV_HEADS, group, HEAD_DIM)           # query heads grouped by kv head
        scores = torch.matmul(qg, k.transpose(-1, -2)) * HEAD_DIM ** -0.5   # [B, K, g, S]
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        return torch.matmul(probs, v).view(B, Q_HEADS, 1, HEAD_DIM)
    return {"sdpa_gqa": sdpa, "sdpa_flash": flash, "naive": naive}


def attention_point(ctx, B, S) -> tuple[list, list]:
    dt = torch.bfloat16
    kv_bytes = 2 * B * S * KV_HEADS * HEAD_DIM * 2
    n = ctx.n_sets(kv_bytes)
    kv = torch.randn(n, 2, B, KV_HEADS, S, HEAD_DIM, device=ctx.device, dtype=dt)
    q_sets = list(torch.randn(n, B, Q_HEADS, 1, HEAD_DIM, device=ctx.device, dtype=dt))
    kv_sets = [(kv[i, 0], kv[i, 1]) for i in range(n)]
    base = {"B": B, "S": S, "q_heads": Q_HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
            "dtype": "bf16", "kv_bytes": kv_bytes, "flops": 4 * B * S * Q_HEADS * HEAD_DIM}
    records, skipped = [], []
    for kind, fn in attention_kinds(q_sets, kv_sets).items():
        try:
            m = ctx.timer.measure(fn)
        except RuntimeError as exc:
            skipped.append({"what": f"attention {kind} B={B} S={S}", "reason": one_line(exc)})
            continue
        records.append({"kind": kind, **base, **m})
        log(f"[attention {kind} B={B} S={S}] {m['seconds'] * 1e6:.1f} us "
            f"{kv_bytes / m['seconds'] / 1e9:.0f} GB/s of KV")
    return records, skipped


def attention_section(ctx: Ctx) -> dict:
    records, skipped = [], []
    batches = ATTN_BATCHES_QUICK if ctx.quick else ATTN_BATCHES
    contexts = ATTN_CONTEXTS_QUICK if ctx.quick else ATTN_CONTEXTS
    for B in batches:
        for S in contexts:
            kv_bytes = 2 * B * S * KV_HEADS * HEAD_DIM * 2
            if kv_bytes > ATTN_MAX_KV_BYTES:
                skipped.append({"what": f"attention B={B} S={S}",
                                "reason": f"KV {kv_bytes / 1e9:.1f} GB > {ATTN_MAX_KV_BYTES / 1e9:.0f} GB"})
                continue
            try:
                r, s = attention_point(ctx, B, S)
            except RuntimeError as exc:
                r, s = [], [{"what": f"attention B={B} S={S}", "reason": one_line(exc)}]
            records += r
            skipped += s
            ctx.free_memory()
    return {"records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- launch

def launch_section(ctx: Ctx) -> dict:
    """Tiny in-place adds: eager (host clock, and device-only) and replayed from a CUDA graph."""
    x = torch.full((1,), 1.5, device=ctx.device)

    def adds(n):
        def fn(_=0):
            for _ in range(n):
                x.add_(1.0)
        return fn

    records, skipped = [], []

    def add(mode, timing, n, seconds, host_s):
        records.append({"mode": mode, "timing": timing, "kernels": n, "seconds": seconds,
                        "seconds_per_kernel": seconds / n, "host_seconds_per_launch": host_s / n})
        log(f"[launch {mode} {timing} x{n}] {seconds / n * 1e6:.2f} us/kernel, "
            f"host {host_s / n * 1e6:.2f} us/launch")

    n = 1000
    adds(n)()
    wall, host = wall_and_host(adds(n), 5 if ctx.quick else 11, ctx.timer.sync)
    add("eager", "wall", n, wall, host)
    if not ctx.cuda:
        skipped.append({"what": "launch eager device, graph", "reason": "CUDA only"})
        return {"records": records, "skipped": skipped}
    few = 200  # queued behind a sleep; stays well inside the ~1000-entry launch queue
    m = ctx.timer.measure(adds(few), warmup=1, min_reps=7, max_reps=15, max_inner=1)
    add("eager", "device", few, m["seconds"], host * few / n)
    graph, _ = capture_graph(adds(n))
    m = ctx.timer.measure(lambda i: graph.replay(), max_inner=1, min_reps=9)
    wall_g, host_g = wall_and_host(graph.replay, 9, ctx.timer.sync)
    add("graph", "device", n, m["seconds"], host_g)
    add("graph", "wall", n, wall_g, host_g)
    return {"records": records, "skipped": skipped}
