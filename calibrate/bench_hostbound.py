"""Robust timing of host-bound end-to-end steps (eager PyTorch, HF generate), for
calibrate/bench_e2e.py and bench_hf.py. torch + the standard library only.

Host-bound steps on the H200 VM carry about +-30 % noise that moves slowly in time
(BENCH_NOTES.md), so one timing window per point can land a whole point in a slow stretch.
Here every point is timed in `rounds` rounds, and each round visits all points of a group
in turn (interleaved), so a slow stretch spreads over several points instead of sinking one:
- each round warms the point up first (the first round for warmup_s, later ones for
  warmup_s / 4) and discards those steps;
- a round's value is the median of its timed steps (bench_timing.Timer, gc off);
- the record's `seconds` is the median of its rounds; `rounds_s` keeps every round and
  `spread` = max/min - 1 over the rounds;
- `host_s`: median host time to enqueue one step (no sync inside), and `synced_s`: median
  time of one step ending in a synchronize, both from `sync_reps` extra steps: host_s close
  to synced_s means the host is the bound; synced_s well above host_s, the GPU;
- `sm_clock_mhz`, `mem_clock_mhz`: median nvidia-smi clocks sampled while the point was
  timed (ClockSampler), or null.
"""
from __future__ import annotations

import datetime
import statistics
import subprocess
import threading
import time

SAMPLE_MS = 50   # nvidia-smi sampling period while e2e points run


class ClockSampler:
    """nvidia-smi's SM and memory clocks every SAMPLE_MS in a background process; window()
    gives the median clocks between two time.time() stamps. Optional: inert without nvidia-smi."""

    def __init__(self, enabled: bool):
        self.samples: list[tuple[float, float, float]] = []
        self.proc = None
        self.thread = None
        if not enabled:
            return
        query = "timestamp,clocks.sm,clocks.mem"
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                 f"-lms={SAMPLE_MS}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True, bufsize=1)
        except OSError:
            self.proc = None
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((stamp, float(parts[1]), float(parts[2])))
            except ValueError:
                continue

    def window(self, t0: float, t1: float) -> tuple[float | None, float | None]:
        got = [(sm, mem) for t, sm, mem in list(self.samples) if t0 <= t <= t1]
        if not got:
            return None, None
        return statistics.median(s for s, _ in got), statistics.median(m for _, m in got)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def host_and_synced(fn, reps: int, sync) -> tuple[float, float]:
    """Medians of (enqueue alone, enqueue + synchronize) of single steps started on an idle queue."""
    host, synced = [], []
    for i in range(reps):
        sync()
        t0 = time.perf_counter()
        fn(i)
        t1 = time.perf_counter()
        sync()
        host.append(t1 - t0)
        synced.append(time.perf_counter() - t0)
    return statistics.median(host), statistics.median(synced)


def measure_rounds(ctx, fns: dict, *, rounds: int, warmup_s: float, sync_reps: int = 5,
                   clocks: ClockSampler | None = None) -> dict:
    """{key: fn} -> {key: {"seconds", "rounds_s", "spread", "reps", "host_s", "synced_s",
    "sm_clock_mhz", "mem_clock_mhz"}}; see the module docstring. A key whose fn raises is
    left out of the result and its error kept under "errors"."""
    per: dict = {k: {"rounds_s": [], "reps": 0, "host": [], "synced": [], "windows": []}
                 for k in fns}
    errors: dict = {}
    for r in range(rounds):
        for key, fn in fns.items():
            if key in errors:
                continue
            try:
                t0 = time.time()
                m = ctx.timer.measure(fn, target_s=0.2, min_reps=5, max_reps=15, max_inner=1,
                                      warmup=2, warmup_s=warmup_s if r == 0 else warmup_s / 4,
                                      head_start=False)
                h, s = host_and_synced(fn, sync_reps, ctx.timer.sync)
                per[key]["windows"].append((t0, time.time()))
            except Exception as exc:  # a failing point is data, not a crash
                errors[key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                continue
            per[key]["rounds_s"].append(m["seconds"])
            per[key]["reps"] += m["reps"]
            per[key]["host"].append(h)
            per[key]["synced"].append(s)
    out = {}
    for key, p in per.items():
        if key in errors or not p["rounds_s"]:
            continue
        sm = mem = None
        if clocks is not None:
            got = [clocks.window(a, b) for a, b in p["windows"]]
            sms = [g[0] for g in got if g[0] is not None]
            mems = [g[1] for g in got if g[1] is not None]
            sm = statistics.median(sms) if sms else None
            mem = statistics.median(mems) if mems else None
        rs = p["rounds_s"]
        out[key] = {"seconds": statistics.median(rs), "rounds_s": rs,
                    "spread": max(rs) / min(rs) - 1.0, "reps": p["reps"],
                    "host_s": statistics.median(p["host"]), "synced_s": statistics.median(p["synced"]),
                    "sm_clock_mhz": sm, "mem_clock_mhz": mem}
    out["errors"] = errors
    return out
