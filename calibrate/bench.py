#!/usr/bin/env python3
"""Microbenchmarks that calibrate perfmodel. Needs only torch and the standard library.

    python calibrate/bench.py --device cuda [--sections gemm,e2e] [--out PATH]
    python calibrate/bench.py --quick --device cpu --out /tmp/raw.json   # tiny shapes, CI

Timing: CUDA events on the GPU (host clock + synchronize on the CPU), warm-up first, the
median over repeats, Python's garbage collector off while timing (as timeit does).
Microbenchmarks (bandwidth, gemm, attention, launch "device") start each repeat behind a short
GPU sleep, so the queue is full and the events time the device alone; `inner` calls run back
to back per repeat and `seconds` is per call. Inputs rotate over enough buffers to exceed
3x L2 and are random, never zeros. e2e steps (bench_e2e.py) are timed back to back without
that head start, so host-side launch cost counts as it does in a real decode loop.

JSON written (schema_version 1), one object; all sizes in bytes, all times in seconds:
  schema_version: 1;  complete: bool;  sections_run: [str];  args: {cli option: value}
  env:        device, torch_version, cuda_version, python_version, hostname, date_utc, argv,
              gpu_name, compute_capability [major, minor], sm_count, l2_bytes,
              total_memory_bytes, nvidia_smi_before, nvidia_smi_after ({driver_version,
              clocks_sm_mhz, clocks_mem_mhz, clocks_max_sm_mhz} or null), cpu_name,
              cpu_count, torch_threads (GPU fields are null on the CPU)
  every other section: {"records": [...], "skipped": [{"what", "reason"}], "elapsed_s"}
  bandwidth.records: kind ("copy"|"read"|"write"), dtype, buffer_bytes, bytes (moved per
              call; copy counts read + write), seconds, bytes_per_s, reps, inner
  gemm.records:  dtype ("bf16"|"fp16"|"fp8_e4m3"|"int8"), layer ("qkv"|"gate_up"|"down"),
              M, N, K, seconds, flops (2MKN; integer ops for int8), bytes (weights + inputs
              + outputs), flops_per_s, reps, inner.  y[M,N] = x[M,K] @ W[N,K]^T; fp8
              (torch._scaled_mm, per-tensor scales) outputs bf16; int8 (torch._int_mm) int32
  attention.records: kind ("sdpa_gqa": SDPA default dispatch with enable_gqa,
              "sdpa_flash": forced flash backend, "naive": matmul-softmax-matmul), B, S,
              q_heads, kv_heads, head_dim, dtype, seconds, kv_bytes, flops (4*B*S*N*H),
              reps, inner.  One query token per sequence.
  launch.records: mode ("eager"|"graph"), timing ("wall": host clock incl. sync;
              "device": events with the queue pre-filled), kernels, seconds (all kernels),
              seconds_per_kernel, host_seconds_per_launch (host enqueue time / kernels)
  e2e:        model (shape dict: name, num_layers, d_model, num_heads, num_kv_heads,
              head_dim, ffn_dim, vocab_size, tied_embeddings, rope_theta), records:
              model, mode ("eager" | "graph": one CUDA graph per step | "compile":
              torch.compile of each layer and the head, no CUDA graphs | "hf_generate"),
              dtype ("bf16"|"fp8_e4m3"), phase ("decode"|"prefill"), batch, context (KV
              tokens before the step; 0 for prefill), prompt (prefill length, else null),
              new_tokens (tokens per sequence in the step), seconds (per step; for
              hf_generate decode, per generated token), tokens_per_s (batch*new_tokens/s),
              kernels (kernel+memset+memcpy nodes of the step's CUDA graph, or null),
              compile_s (first-call time in compile mode, else null), reps.
              hf_generate records add generated_tokens; their decode seconds is
              (t(generate N) - t(generate 1)) / (N - 1), their prefill seconds t(generate 1).
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # reported in main(), after --help had a chance to work
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SCHEMA_VERSION = 1
SECTIONS = ("env", "bandwidth", "gemm", "attention", "launch", "e2e", "hf")
M_LIST = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
M_LIST_QUICK = (1, 4, 16, 64)
# (name, K, N) of one Llama-3.1-8B layer
GEMM_LAYERS = (("qkv", 4096, 6144), ("gate_up", 4096, 28672), ("down", 14336, 4096))
GEMM_DTYPES = ("bf16", "fp16", "fp8_e4m3", "int8")
ATTN_BATCHES, ATTN_BATCHES_QUICK = (1, 8, 32, 128), (1, 4)
ATTN_CONTEXTS, ATTN_CONTEXTS_QUICK = (512, 2048, 8192, 32768), (128, 512)
ATTN_MAX_KV_BYTES = 8e9
Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
SLEEP_CYCLES_PER_S = 2.0e9  # head start for torch.cuda._sleep; only needs to be roughly right


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class Timer:
    """Median timing of fn(i) on one device; see the module docstring."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def measure(self, fn, *, target_s=0.03, min_reps=5, max_reps=30, min_rep_s=5e-4,
                max_inner=64, warmup=2, head_start=True) -> dict:
        for i in range(warmup):
            fn(i)
        self.sync()
        t0 = time.perf_counter()
        fn(0)
        host_s = time.perf_counter() - t0
        self.sync()
        est_s = max(time.perf_counter() - t0, 1e-7)
        inner = max(1, min(max_inner, math.ceil(min_rep_s / est_s)))
        reps = max(min_reps, min(max_reps, int(target_s / (est_s * inner))))
        if not head_start:       # host-bound steps: no pending full collection in the timing
            gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()             # as timeit does
        try:
            if self.cuda:
                sleep_s = (2.0 * host_s * inner + 1e-4) if head_start else 0.0
                samples = self._cuda_samples(fn, reps, inner, sleep_s)
            else:
                samples = self._cpu_samples(fn, reps, inner)
        finally:
            if gc_was_enabled:
                gc.enable()
        return {"seconds": statistics.median(samples), "reps": reps, "inner": inner}

    @staticmethod
    def _cuda_samples(fn, reps, inner, sleep_s):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        k = 0
        for start, end in events:
            if sleep_s > 0:
                torch.cuda._sleep(int(sleep_s * SLEEP_CYCLES_PER_S))
            start.record()
            for _ in range(inner):
                fn(k)
                k += 1
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 / inner for s, e in events]

    @staticmethod
    def _cpu_samples(fn, reps, inner):
        samples, k = [], 0
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn(k)
                k += 1
            samples.append((time.perf_counter() - t0) / inner)
        return samples


class Ctx:
    """What every section needs: device, quick flag, timer, L2 size, a section deadline."""

    def __init__(self, args, env: dict):
        self.device = args.device
        self.cuda = args.device == "cuda"
        self.quick = args.quick
        self.args = args
        self.timer = Timer(args.device)
        self.l2_bytes = env.get("l2_bytes") or 0
        self.log = log

    def n_sets(self, set_bytes: float, cap: int = 64) -> int:
        """Copies of an input so that rotating through them defeats a warm L2 (3x L2)."""
        if not self.cuda or set_bytes <= 0:
            return 1
        return max(1, min(cap, math.ceil(3 * self.l2_bytes / set_bytes)))

    def free_memory(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- env

def nvidia_smi() -> dict | None:
    query = "driver_version,clocks.sm,clocks.mem,clocks.max.sm"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    fields = [f.strip() for f in out.strip().splitlines()[0].split(",")] if out.strip() else []
    if len(fields) != 4:
        return {"raw": out.strip()}

    def mhz(s):
        try:
            return float(s.split()[0])
        except (ValueError, IndexError):
            return None
    return {"driver_version": fields[0], "clocks_sm_mhz": mhz(fields[1]),
            "clocks_mem_mhz": mhz(fields[2]), "clocks_max_sm_mhz": mhz(fields[3])}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def env_section(device: str) -> dict:
    env = {"device": device, "torch_version": torch.__version__,
           "cuda_version": torch.version.cuda, "python_version": platform.python_version(),
           "hostname": socket.gethostname(),
           "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "argv": sys.argv, "cpu_name": cpu_name(), "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(), "gpu_name": None,
           "compute_capability": None, "sm_count": None, "l2_bytes": None,
           "total_memory_bytes": None, "nvidia_smi_before": None, "nvidia_smi_after": None}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_name=p.name, compute_capability=[p.major, p.minor],
                   sm_count=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None),
                   total_memory_bytes=p.total_memory, nvidia_smi_before=nvidia_smi())
    return env


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

def wall_and_host(fn, reps: int, sync) -> tuple[float, float]:
    """Medians of (enqueue + synchronize, enqueue alone) host-clock times of fn()."""
    wall, host = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        sync()
        wall.append(time.perf_counter() - t0)
        host.append(t1 - t0)
    return statistics.median(wall), statistics.median(host)


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
    import bench_e2e
    graph, _ = bench_e2e.capture_graph(adds(n))
    m = ctx.timer.measure(lambda i: graph.replay(), max_inner=1, min_reps=9)
    wall_g, host_g = wall_and_host(graph.replay, 9, ctx.timer.sync)
    add("graph", "device", n, m["seconds"], host_g)
    add("graph", "wall", n, wall_g, host_g)
    return {"records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- driver

def e2e_section(ctx: Ctx) -> dict:
    import bench_e2e
    return bench_e2e.run_e2e(ctx)


def hf_section(ctx: Ctx) -> dict:
    import bench_e2e
    return bench_e2e.run_hf(ctx)


RUNNERS = {"bandwidth": bandwidth_section, "gemm": gemm_section,
           "attention": attention_section, "launch": launch_section,
           "e2e": e2e_section, "hf": hf_section}


def finite(obj):
    """JSON without NaN/inf: non-finite floats become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def write_json(path: str, result: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(finite(result), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def default_out(env: dict) -> str:
    name = env["gpu_name"] or f"cpu-{platform.machine()}"
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    return os.path.join("calibrate", "data", f"raw-{slug}-{date}.json")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--quick", action="store_true", help="tiny shapes (CI); same JSON schema")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)} (env always runs)")
    p.add_argument("--out", help="JSON path (default calibrate/data/raw-<gpu>-<date>.json)")
    p.add_argument("--compile-mode", default="default",
                   choices=("default", "max-autotune-no-cudagraphs"))
    p.add_argument("--compile-budget-s", type=float, default=None,
                   help="stop adding torch.compile points after this long (default 120 on cuda)")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        p.error(f"unknown section(s) {unknown}; choose from {','.join(SECTIONS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if torch is None:
        print("error: bench.py needs torch; install it with: pip install '.[calibrate]'",
              file=sys.stderr)
        return 2
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA GPU; use --device cpu "
              "(add --quick for a short run)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    env = env_section(args.device)
    out = args.out or default_out(env)
    result = {"schema_version": SCHEMA_VERSION, "complete": False, "sections_run": ["env"],
              "args": {k: v for k, v in vars(args).items()}, "env": env}
    log(f"[env] {env['gpu_name'] or env['cpu_name']} torch {env['torch_version']} -> {out}")
    ctx = Ctx(args, env)
    for name in (s for s in SECTIONS if s != "env" and s in args.sections):
        t0 = time.perf_counter()
        part = RUNNERS[name](ctx)
        part["elapsed_s"] = time.perf_counter() - t0
        log(f"[{name}] done in {part['elapsed_s']:.1f} s")
        if name == "hf":   # HF generate records live in e2e, next to the plain-torch ones
            e2e = result.setdefault("e2e", {"model": part.get("model"), "records": [],
                                            "skipped": [], "elapsed_s": 0.0})
            e2e["records"] += part["records"]
            e2e["skipped"] += part["skipped"]
            e2e["elapsed_s"] += part["elapsed_s"]
        else:
            result[name] = part
        result["sections_run"].append(name)
        write_json(out, result)
    if ctx.cuda:
        env["nvidia_smi_after"] = nvidia_smi()
    result["complete"] = True
    write_json(out, result)
    log(f"[done] wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
