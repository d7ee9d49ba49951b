"""Timing of one decoder layer's ops on one GPU for the whole-layer benches (bench_moe_layer.py,
bench_gdn_prefill.py). torch + stdlib.

Per op: CUDA-event GPU time with the layer queued behind a GPU sleep (pure GPU time, no launch
gaps) and the host time to enqueue it; per layer: the GPU time of a loop of layers (queued
behind a sleep), its wall time and its host issue time with no head start, and the kernels per
op (torch.profiler). On the CPU the per-op times are host times and there is no GPU column.
"""
from __future__ import annotations

import statistics
import time

try:
    import torch
except ImportError:  # the scripts report a missing torch themselves
    torch = None

SLEEP_CYCLES_PER_S = 1.98e9   # SM clock ~1.98 GHz (H200): torch.cuda._sleep counts cycles
SYNC_SLEEP_S = 0.05           # a long head start: an enqueue that outlasts half of it waited


def gpu_sleep(s: float, cuda: bool) -> None:
    if cuda and s > 0:
        torch.cuda._sleep(int(s * SLEEP_CYCLES_PER_S))


def run_layer(ops, s) -> None:
    for _, fn in ops:
        fn(s)


def estimate_s(ops, s, cuda: bool) -> float:
    """Wall time of one synchronized layer (sizes the sleeps and the loop)."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    run_layer(ops, s)
    sync()
    return time.perf_counter() - t0


def per_op(ops, s, reps: int, cuda: bool, est: float) -> tuple[dict, dict]:
    """(GPU seconds per op, host enqueue seconds per op), medians over reps."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    gpu = {n: [] for n, _ in ops}
    host = {n: [] for n, _ in ops}
    for _ in range(reps):
        if cuda:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(ops) + 1)]
            gpu_sleep(2 * est + 2e-3, cuda)
            ev[0].record()
            for i, (n, fn) in enumerate(ops):
                t = time.perf_counter()
                fn(s)
                host[n].append(time.perf_counter() - t)
                ev[i + 1].record()
            sync()
            for i, (n, _) in enumerate(ops):
                gpu[n].append(ev[i].elapsed_time(ev[i + 1]) / 1e3)
        else:
            for n, fn in ops:
                t = time.perf_counter()
                fn(s)
                gpu[n].append(time.perf_counter() - t)
    return ({n: statistics.median(v) for n, v in gpu.items()},
            {n: statistics.median(v) for n, v in host.items() if v})


def layer_loop(ops, s, cuda: bool, est: float) -> dict:
    """Per layer over a loop of layers: GPU time (queued behind a sleep), wall and host issue
    time (no head start), medians of 5."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    loop = max(4, min(32, int(0.2 / max(est, 1e-6))))
    gpu, wall, issue = [], [], []
    for _ in range(5):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            gpu_sleep(2 * loop * est + 2e-3, cuda)
            a.record()
            for _ in range(loop):
                run_layer(ops, s)
            b.record()
            sync()
            gpu.append(a.elapsed_time(b) / 1e3 / loop)
        sync()
        t0 = time.perf_counter()
        for _ in range(loop):
            run_layer(ops, s)
        t1 = time.perf_counter()
        sync()
        wall.append((time.perf_counter() - t0) / loop)
        issue.append((t1 - t0) / loop)
    return {"layer_wall_s": statistics.median(wall), "layer_issue_s": statistics.median(issue),
            "layer_gpu_s": statistics.median(gpu) if gpu else None, "loop": loop}


def host_waits(ops, s, cuda: bool) -> bool | None:
    """Whether enqueueing the layer waits for the GPU (a host-device sync in its ops)."""
    if not cuda:
        return None
    gpu_sleep(SYNC_SLEEP_S, cuda)
    t = time.perf_counter()
    run_layer(ops, s)
    waited = (time.perf_counter() - t) > SYNC_SLEEP_S / 2
    torch.cuda.synchronize()
    return waited


def count_kernels(ops, s, cuda: bool) -> dict | None:
    """CUDA kernels, memcpy and memset of one layer, per op and in total (torch.profiler)."""
    if not cuda:
        return None
    from torch.profiler import ProfilerActivity, profile
    out = {}
    for n, fn in ops:
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            fn(s)
            torch.cuda.synchronize()
        out[n] = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    out["total"] = sum(out.values())
    return out


def measure_layer(ops, s, reps: int, cuda: bool) -> dict:
    """The record of one layer: per-op times, the layer loop, kernels (see the module doc)."""
    est = estimate_s(ops, s, cuda)
    ops_s, ops_host_s = per_op(ops, s, reps, cuda, est)
    rec = {"ops_s": ops_s, "ops_host_s": ops_host_s, **layer_loop(ops, s, cuda, est)}
    rec["ops_sum_s"] = sum(ops_s.values())
    rec["kernels"] = count_kernels(ops, s, cuda)
    return rec
