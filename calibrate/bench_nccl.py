#!/usr/bin/env python3
"""NCCL collectives and a tensor-parallel decode on the GPUs of one host, for perfmodel's link fit.

torch + the standard library only. One process per GPU, started by torchrun:

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    torchrun --nproc_per_node=2 calibrate/bench_nccl.py --out raw-nccl.json
    torchrun --nproc_per_node=2 calibrate/bench_nccl.py --smoke --out /tmp/x.json  # CPU, gloo

The three variables keep NVLink multicast off (the lending machines' rule); the script sets
them too (setdefault) before NCCL starts. Timing: CUDA events on the current stream (host
clock on the CPU), warm-up first, `inner` calls back to back per repeat, the median over
repeats per rank; `seconds` is the largest of the ranks' medians, `seconds_per_rank` all of them.
All-reduce is also timed as `inner` collectives captured in one CUDA graph (device-side cost, as
in a graph-captured decode step). Buffers are random normal, refilled before each repeat.

JSON (schema_version 1), written by rank 0 after every section; sizes in bytes, times in s:
  schema_version, complete, world_size, backend, args, sections_run
  env:  torch_version, cuda_version, nccl_version, python_version, hostname, date_utc,
        gpu_names [per local device], driver_version, topo (nvidia-smi topo -m text), cpu_count
  allreduce / allreduce_graph / allgather / alltoall: {records, skipped, elapsed_s};
        record: op, mode ("eager"|"graph"), dtype, bytes (nccl-tests "size": the all-reduced
        buffer; all-gather: the gathered output; all-to-all: one rank's buffer), seconds,
        seconds_per_rank, algbw_bytes_per_s (bytes/seconds), busbw_bytes_per_s (algbw *
        2(p-1)/p for all-reduce, * (p-1)/p otherwise), reps, inner
  decode_tp / decode_1gpu: {model (shape), records, skipped, elapsed_s}; record: mode
        ("graph": one CUDA graph per step | "eager" | "graph_nocomm": the TP step with its
        all-reduces left out, same kernels otherwise), tp, batch, context (KV tokens before
        the step), seconds (per step), seconds_per_rank, tokens_per_s, allreduces_per_step
        (2 per layer under TP), allreduce_bytes (B*D*2, one message), reps, inner.
        The TP model is Megatron-split: q/kv heads, ffn and the vocabulary over p ranks;
        embeddings replicated; logits stay sharded (argmax per shard, no gather).
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

for _k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_k, "0" if _k == "NCCL_NVLS_ENABLE" else "1")

try:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
except ImportError:
    torch = None

LLAMA_8B = {"name": "llama-3.1-8b-shape", "num_layers": 32, "d_model": 4096, "num_heads": 32,
            "num_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336, "vocab_size": 128256,
            "rope_theta": 500000.0}
TINY = {"name": "tiny-llama-shape", "num_layers": 2, "d_model": 256, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "ffn_dim": 512, "vocab_size": 1024, "rope_theta": 1e4}
AR_SIZES = [2**k for k in range(13, 30)]            # 8 KiB .. 512 MiB
AR_GRAPH_SIZES = [2**k for k in range(13, 23)]      # 8 KiB .. 4 MiB
AG_SIZES = [2**20, 2**24, 2**27]                    # 1, 16, 128 MiB
SMOKE_SIZES = [2**13, 2**15]
BATCHES, CONTEXTS = (1, 8, 32, 64), (512, 4096)
BF16 = None if torch is None else torch.bfloat16


def log(msg: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(msg, file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class Ctx:
    def __init__(self, args):
        self.args = args
        self.cuda = not args.smoke
        self.rank, self.p = dist.get_rank(), dist.get_world_size()
        self.dev = torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")
        self.deadline = time.monotonic() + args.budget_s

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def per_rank(self, value: float) -> list[float]:
        """Every rank's value, in rank order (a collective: all ranks must call it)."""
        t = torch.zeros(self.p, dtype=torch.float64, device=self.dev)
        t[self.rank] = value
        dist.all_reduce(t)
        return [float(v) for v in t.tolist()]

    def out_of_time(self) -> bool:
        """True on every rank once any rank passed the deadline."""
        return max(self.per_rank(float(time.monotonic() > self.deadline))) > 0

    def time(self, fn, inner: int, reps: int, warmup: int = 2, refill=None) -> dict:
        for _ in range(warmup):
            fn()
        self.sync()
        dist.barrier()
        samples = []
        gc.disable()
        try:
            for _ in range(reps):
                if refill is not None:
                    refill()
                if self.cuda:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    for _ in range(inner):
                        fn()
                    b.record()
                    b.synchronize()
                    samples.append(a.elapsed_time(b) / 1e3 / inner)
                else:
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        fn()
                    samples.append((time.perf_counter() - t0) / inner)
        finally:
            gc.enable()
        ranks = self.per_rank(statistics.median(samples))
        return {"seconds": max(ranks), "seconds_per_rank": ranks, "reps": reps, "inner": inner}


# ----------------------------------------------------------------------------- env

def env_section(ctx: Ctx) -> dict:
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            return f"unavailable: {one_line(exc)}"
    nccl = None
    if ctx.cuda:
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # noqa: BLE001 -- recorded, not fatal
            nccl = f"unavailable: {one_line(exc)}"
    return {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "nccl_version": nccl, "python_version": platform.python_version(),
            "hostname": socket.gethostname(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if ctx.cuda else [],
            "driver_version": sh(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"]).splitlines()[:1] if ctx.cuda else None,
            "topo": sh(["nvidia-smi", "topo", "-m"]) if ctx.cuda else None,
            "cpu_count": os.cpu_count(),
            "multicast_env": {k: os.environ.get(k) for k in
                              ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                               "NVSHMEM_DISABLE_NVLS")}}


# ----------------------------------------------------------------------------- collectives

def plan(nbytes: int) -> tuple[int, int]:
    est = 20e-6 + nbytes / 100e9
    return max(1, min(50, math.ceil(2e-3 / est))), 15


def record(op, mode, nbytes, p, t):
    alg = nbytes / t["seconds"]
    factor = 2 * (p - 1) / p if op == "allreduce" else (p - 1) / p
    return {"op": op, "mode": mode, "dtype": "bf16", "bytes": nbytes, **t,
            "algbw_bytes_per_s": alg, "busbw_bytes_per_s": alg * factor}


def allreduce_section(ctx: Ctx, sizes, graph: bool) -> dict:
    records, skipped = [], []
    buf = torch.empty(max(sizes) // 2, dtype=BF16, device=ctx.dev)
    for nbytes in sizes:
        if ctx.out_of_time():
            skipped.append({"what": f"{nbytes} B", "reason": "time budget"})
            continue
        x = buf[: nbytes // 2]
        inner, reps = plan(nbytes)
        x.normal_()
        try:
            if graph:
                fn = capture(ctx, lambda: [dist.all_reduce(x) for _ in range(inner)])
                t = ctx.time(fn, 1, reps, refill=x.normal_)
                t["seconds"] /= inner
                t["seconds_per_rank"] = [s / inner for s in t["seconds_per_rank"]]
                t["inner"] = inner
            else:
                t = ctx.time(lambda: dist.all_reduce(x), inner, reps, refill=x.normal_)
        except RuntimeError as exc:
            skipped.append({"what": f"{nbytes} B", "reason": one_line(exc)})
            continue
        records.append(record("allreduce", "graph" if graph else "eager", nbytes, ctx.p, t))
        log(f"  allreduce {'graph' if graph else 'eager'} {nbytes:>10d} B "
            f"{t['seconds'] * 1e6:9.1f} us busbw {records[-1]['busbw_bytes_per_s'] / 1e9:7.1f} GB/s")
    return {"records": records, "skipped": skipped}


def gather_a2a_section(ctx: Ctx, sizes, op: str) -> dict:
    records, skipped = [], []
    for nbytes in sizes:
        if ctx.out_of_time():
            skipped.append({"what": f"{nbytes} B", "reason": "time budget"})
            continue
        n = nbytes // 2
        inner, reps = plan(nbytes)
        try:
            if op == "allgather":
                inp = torch.empty(n // ctx.p, dtype=BF16, device=ctx.dev).normal_()
                out = torch.empty(n, dtype=BF16, device=ctx.dev)
                t = ctx.time(lambda: dist.all_gather_into_tensor(out, inp), inner, reps)
            else:
                inp = torch.empty(n, dtype=BF16, device=ctx.dev).normal_()
                out = torch.empty_like(inp)
                t = ctx.time(lambda: dist.all_to_all_single(out, inp), inner, reps)
        except (RuntimeError, NotImplementedError) as exc:
            skipped.append({"what": f"{nbytes} B", "reason": one_line(exc)})
            continue
        records.append(record(op, "eager", nbytes, ctx.p, t))
        log(f"  {op} {nbytes:>10d} B {t['seconds'] * 1e6:9.1f} us")
    return {"records": records, "skipped": skipped}


def capture(ctx: Ctx, body):
    """body() captured in one CUDA graph (after a warm-up on a side stream); returns replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            body()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        body()
    torch.cuda.synchronize()
    return g.replay


# ----------------------------------------------------------------------------- TP decode

def rms_norm(x, w, eps: float = 1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


class TPLlama:
    """Random-weight Llama-shaped decoder, rank `rank` of a Megatron split over p ranks."""

    def __init__(self, shape, p, device, max_batch, max_len):
        H, D = shape["head_dim"], shape["d_model"]
        self.p, self.H = p, H
        self.heads = shape["num_heads"] // p
        self.kvh = max(1, shape["num_kv_heads"] // p)
        ffn = shape["ffn_dim"] // p

        def w(*dims):
            return torch.empty(*dims, dtype=BF16, device=device).normal_(0, 0.02)
        self.embed = w(shape["vocab_size"], D)
        self.layers = [(torch.ones(D, dtype=BF16, device=device), w((self.heads + 2 * self.kvh) * H, D),
                        w(D, self.heads * H), torch.ones(D, dtype=BF16, device=device),
                        w(2 * ffn, D), w(D, ffn)) for _ in range(shape["num_layers"])]
        self.norm = torch.ones(D, dtype=BF16, device=device)
        self.lm_head = w(shape["vocab_size"] // p, D)
        kv = (max_batch, self.kvh, max_len, H)
        self.kc = [torch.empty(kv, dtype=BF16, device=device).normal_() for _ in self.layers]
        self.vc = [torch.empty(kv, dtype=BF16, device=device).normal_() for _ in self.layers]
        inv = 1.0 / (shape["rope_theta"] ** (torch.arange(0, H, 2, device=device).float() / H))
        ang = torch.outer(torch.arange(max_len, device=device).float(), inv)
        self.cos, self.sin = ang.cos().to(BF16), ang.sin().to(BF16)
        self.comm = True

    def reduce(self, y):
        if self.p > 1 and self.comm:
            dist.all_reduce(y)
        return y

    def step(self, tokens, pos: int):
        B = tokens.shape[0]
        x = self.embed[tokens]                                   # [B, 1, D]
        cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
        qd, kd = self.heads * self.H, self.kvh * self.H
        for (an, wqkv, wo, mn, wgu, wd), kc, vc in zip(self.layers, self.kc, self.vc):
            q, k, v = F.linear(rms_norm(x, an), wqkv).split((qd, kd, kd), dim=-1)
            q = rope(q.view(B, 1, self.heads, self.H), cos, sin).transpose(1, 2)
            kc[:B, :, pos:pos + 1] = rope(k.view(B, 1, self.kvh, self.H), cos, sin).transpose(1, 2)
            vc[:B, :, pos:pos + 1] = v.view(B, 1, self.kvh, self.H).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, kc[:B, :, :pos + 1], vc[:B, :, :pos + 1],
                                               enable_gqa=True)
            x = x + self.reduce(F.linear(o.transpose(1, 2).reshape(B, 1, qd), wo))
            gate, up = F.linear(rms_norm(x, mn), wgu).chunk(2, dim=-1)
            x = x + self.reduce(F.linear(F.silu(gate) * up, wd))
        return F.linear(rms_norm(x[:, -1], self.norm), self.lm_head).argmax(-1)


def decode_section(ctx: Ctx, tp: int) -> dict:
    shape = TINY if ctx.args.smoke else LLAMA_8B
    batches = (1, 2) if ctx.args.smoke else BATCHES
    contexts = (16, 32) if ctx.args.smoke else CONTEXTS
    records, skipped = [], []
    model = TPLlama(shape, tp, ctx.dev, max(batches), max(contexts) + 1)
    tokens = torch.randint(0, shape["vocab_size"], (max(batches), 1), device=ctx.dev)
    modes = ["graph", "graph_nocomm", "eager"] if ctx.cuda else ["eager"]
    if tp == 1:
        modes = [m for m in modes if m != "graph_nocomm"]
    for B in batches:
        for S in contexts:
            for mode in modes:
                if ctx.out_of_time():
                    skipped.append({"what": f"{mode} B={B} S={S}", "reason": "time budget"})
                    continue
                model.comm = mode != "graph_nocomm"
                tok = tokens[:B]
                fn = lambda tok=tok, S=S: model.step(tok, S)  # noqa: E731
                try:
                    if mode.startswith("graph"):
                        t = ctx.time(capture(ctx, fn), 5, 8)
                    else:
                        t = ctx.time(fn, 3, 5)
                except (RuntimeError, torch.OutOfMemoryError) as exc:
                    skipped.append({"what": f"{mode} B={B} S={S}", "reason": one_line(exc)})
                    continue
                finally:
                    ctx.sync()
                    gc.collect()
                    if ctx.cuda:
                        torch.cuda.empty_cache()
                records.append({"mode": mode, "tp": tp, "batch": B, "context": S, **t,
                                "tokens_per_s": B / t["seconds"],
                                "allreduces_per_step": 2 * shape["num_layers"] if tp > 1 and model.comm else 0,
                                "allreduce_bytes": B * shape["d_model"] * 2})
                log(f"  decode tp={tp} {mode:12s} B={B:3d} S={S:5d} {t['seconds'] * 1e3:8.3f} ms")
    model.comm = True
    return {"model": shape, "records": records, "skipped": skipped}


# ----------------------------------------------------------------------------- main

def finite(obj):
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


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="JSON path (written by rank 0)")
    p.add_argument("--smoke", action="store_true", help="CPU + gloo, tiny sizes (tests)")
    p.add_argument("--budget-s", type=float, default=270.0,
                   help="skip what is left once this many seconds have passed")
    p.add_argument("--sections", default="allreduce,allreduce_graph,allgather,alltoall,"
                   "decode_tp,decode_1gpu")
    return p.parse_args(argv)


def check_setup(args) -> str | None:
    """A one-line reason why the run cannot start, or None."""
    if torch is None:
        return "bench_nccl.py needs torch"
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return "start it with torchrun --nproc_per_node=N (WORLD_SIZE/RANK are not set)"
    if int(os.environ["WORLD_SIZE"]) < 2:
        return "needs at least 2 processes (torchrun --nproc_per_node=2)"
    if args.smoke:
        return None if dist.is_gloo_available() else "--smoke needs torch's gloo backend"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (use --smoke for a CPU check)"
    if not dist.is_nccl_available():
        return "this torch has no NCCL backend"
    if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"])):
        return (f"{torch.cuda.device_count()} GPU(s) visible for "
                f"{os.environ.get('LOCAL_WORLD_SIZE')} local processes")
    return None


def run_sections(ctx: Ctx, args, result) -> None:
    smoke = args.smoke
    runners = {
        "allreduce": lambda: allreduce_section(ctx, SMOKE_SIZES if smoke else AR_SIZES, False),
        "allreduce_graph": lambda: allreduce_section(ctx, AR_GRAPH_SIZES, True),
        "allgather": lambda: gather_a2a_section(ctx, SMOKE_SIZES if smoke else AG_SIZES, "allgather"),
        "alltoall": lambda: gather_a2a_section(ctx, SMOKE_SIZES if smoke else AG_SIZES, "alltoall"),
        "decode_tp": lambda: decode_section(ctx, ctx.p),
        "decode_1gpu": lambda: decode_section(ctx, 1),
    }
    for name in [s.strip() for s in args.sections.split(",") if s.strip()]:
        if name not in runners or (name == "allreduce_graph" and not ctx.cuda):
            continue
        t0 = time.perf_counter()
        log(f"[{name}]")
        part = runners[name]()
        part["elapsed_s"] = time.perf_counter() - t0
        result[name] = part
        result["sections_run"].append(name)
        if ctx.rank == 0:
            write_json(args.out, result)
        ctx.sync()
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    why = check_setup(args)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.smoke:
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.manual_seed(1234 + dist.get_rank())
    ctx = Ctx(args)
    result = {"schema_version": 1, "complete": False, "world_size": ctx.p,
              "backend": dist.get_backend(), "args": vars(args), "sections_run": ["env"],
              "env": env_section(ctx)}
    log(f"[env] {result['env']['gpu_names']} nccl {result['env']['nccl_version']} p={ctx.p}")
    try:
        run_sections(ctx, args, result)
        result["complete"] = True
        if ctx.rank == 0:
            write_json(args.out, result)
            log(f"[done] wrote {args.out}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
