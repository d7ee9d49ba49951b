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

Modules next to this script (torch + the standard library as well): bench_env (environment,
JSON file), bench_timing (CUDA graph capture), bench_tp + bench_model (the TP decode).
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time

for _k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_k, "0" if _k == "NCCL_NVLS_ENABLE" else "1")

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import log_rank0 as log  # noqa: E402
from bench_env import nccl_env_section, one_line, write_json  # noqa: E402
from bench_timing import capture_replay  # noqa: E402

AR_SIZES = [2**k for k in range(13, 30)]            # 8 KiB .. 512 MiB
AR_GRAPH_SIZES = [2**k for k in range(13, 23)]      # 8 KiB .. 4 MiB
AG_SIZES = [2**20, 2**24, 2**27]                    # 1, 16, 128 MiB
SMOKE_SIZES = [2**13, 2**15]
BF16 = None if torch is None else torch.bfloat16


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
                fn = capture_replay(lambda: [dist.all_reduce(x) for _ in range(inner)])
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


# ----------------------------------------------------------------------------- main

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
    from bench_tp import decode_section
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
              "env": nccl_env_section(ctx.cuda)}
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
