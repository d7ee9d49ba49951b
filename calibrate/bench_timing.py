"""Timing for the calibrate/ benchmarks: medians of CUDA events (host clock on the CPU), the
section context with its L2-defeating input rotation, and CUDA graph capture. torch + stdlib.

How bench.py times is described in its module docstring.
"""
from __future__ import annotations

import gc
import math
import statistics
import time

try:
    import torch
except ImportError:  # the scripts report a missing torch themselves
    torch = None

from bench_env import log

SLEEP_CYCLES_PER_S = 2.0e9  # head start for torch.cuda._sleep; only needs to be roughly right


class Timer:
    """Median timing of fn(i) on one device; see bench.py's module docstring."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def measure(self, fn, *, target_s=0.03, min_reps=5, max_reps=30, min_rep_s=5e-4,
                max_inner=64, warmup=2, warmup_s=0.0, head_start=True) -> dict:
        """Median time of fn over reps; warm-up runs at least `warmup` calls and, for
        host-bound steps, at least `warmup_s` seconds (a cold host thread runs slow)."""
        t_warm = time.perf_counter()
        i = 0
        while i < warmup or time.perf_counter() - t_warm < warmup_s:
            fn(i)
            i += 1
            if i % 8 == 0:
                self.sync()
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
    """What every bench.py section needs: device, quick flag, timer, L2 size, the options."""

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


# ----------------------------------------------------------------------------- CUDA graphs

def capture_graph(fn, keep_graph: bool = False):
    """Warm fn up on a side stream, capture one call; returns (graph, its output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep_graph else torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def capture_replay(body):
    """body() captured in one CUDA graph (after a warm-up on a side stream, thread-local
    capture errors, synchronized around the capture, as for NCCL calls); returns replay."""
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
