"""End-to-end points of a raw bench result, their hold-out split, and their prediction
through perfmodel's own step_time (the same code `perfmodel predict` runs).

Mode -> engine preset: eager -> torch-eager, graph -> torch-graph, compile -> torch-compile,
hf_generate -> hf-eager. dtype -> precision: bf16/fp16 weights, fp8_e4m3 -> W8A8 fp8 (the
bench's lm_head stays bf16, as perfmodel assumes). KV is bf16 throughout.
- decode record: one step (B, T=1, S=context);
- prefill record: one step (B, T=prompt, S=0), logits of the last position only;
- hf_generate decode: seconds per generated token, a step at the mean context of the
  generated tokens; hf_generate prefill: generate() of one token = the engine's
  per-request overhead + the prefill step (TTFT).

Hold-out: within each mode, records are ordered by a SHA-256 of their key and the first
round(HOLD_OUT * n) are held out (none when a mode has one record): deterministic, the same
for every run, and no mode is left out of either side.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from perfmodel.core.efficiency import burst
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Efficiency, EngineProfile, HardwareSpec, ModelSpec, Precision

MODE_ENGINE = {"eager": "torch-eager", "graph": "torch-graph", "compile": "torch-compile",
               "hf_generate": "hf-eager"}
DTYPE_WEIGHTS = {"bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8"}
HOLD_OUT = 0.3
CACHE_MAX = 4096        # predict()'s memo entries before it starts over (a few MB at most)
PER_LAYER = ("compile (per-layer torch.compile without CUDA graphs, from an older bench: not "
             "the torch-compile engine)")


@dataclass(frozen=True)
class Point:
    """One end-to-end measurement and what the model computes for it."""

    name: str
    mode: str
    engine: str
    dtype: str
    phase: str
    B: int
    T: int
    S: float
    request: bool          # adds the engine's per-request overhead (generate() of 1 token)
    measured_s: float
    kernels: int | None
    held_out: bool = False

    @property
    def key(self) -> str:
        return f"{self.mode}|{self.dtype}|{self.phase}|B={self.B}|T={self.T}|S={self.S:g}"


def compile_kind(raw: dict) -> str:
    """How the run's compile mode ran, from e2e.modes.compile (bench.py):
    'graphs': the whole step under torch.compile with CUDA graphs (the torch-compile preset,
    gpt-fast's mode="reduce-overhead"); 'graphless': the whole step compiled without graphs
    (a CPU run, or --compile-mode default); 'per_layer': an older bench without e2e.modes,
    which compiled each layer alone and called it from Python: not the torch-compile engine."""
    modes = raw["e2e"].get("modes")
    c = modes.get("compile") if isinstance(modes, dict) else None
    if not isinstance(c, dict) or c.get("scope") != "whole model":
        return "per_layer"
    return "graphs" if c.get("cuda_graphs") is True else "graphless"


def e2e_points(raw: dict) -> tuple[list[Point], list[str]]:
    """Points of the e2e section that map onto an engine preset; notes on the others."""
    points, notes, skipped = [], [], {}
    per_layer_compile = compile_kind(raw) == "per_layer"
    for rec in raw["e2e"]["records"]:
        mode, dtype, phase = rec["mode"], rec["dtype"], rec["phase"]
        if mode == "compile" and per_layer_compile:
            skipped[PER_LAYER] = skipped.get(PER_LAYER, 0) + 1
            continue
        if mode not in MODE_ENGINE or dtype not in DTYPE_WEIGHTS or phase not in ("decode", "prefill"):
            skipped[f"{mode} {dtype} {phase}"] = skipped.get(f"{mode} {dtype} {phase}", 0) + 1
            continue
        B = int(rec["batch"])
        if phase == "prefill":
            T = int(rec.get("prompt") or rec["new_tokens"])
            S = 0.0
        else:
            T = 1
            generated = int(rec.get("generated_tokens") or 1)
            S = float(rec["context"]) + (generated - 1) / 2.0 if mode == "hf_generate" \
                else float(rec["context"])
        request = mode == "hf_generate" and phase == "prefill"
        name = f"{mode} {dtype} {phase} B={B} " + (f"T={T}" if phase == "prefill" else f"S={int(rec['context'])}")
        kernels = rec.get("kernels")
        points.append(Point(name, mode, MODE_ENGINE[mode], dtype, phase, B, T, S, request,
                            measured_seconds(rec), int(kernels) if kernels else None))
    for what, n in sorted(skipped.items()):
        notes.append(f"{n} e2e record(s) '{what}' have no engine/precision mapping: not used")
    return split(points), notes


def measured_seconds(rec: dict) -> float:
    """The time a point is fitted to: for host-bound records timed in interleaved rounds
    (rounds_s; bench_hostbound.py), the fastest round's median, else `seconds`.

    Why the fastest round: on the H200 VM host-bound steps switch between a fast and a slow
    state that lasts seconds and moves between rounds, not with the shape (raw
    20261201b: eager bf16 decode B=1 S=512 rounds 18.5 / 27.8 / 26.1 ms; HF decode B=1
    prompt 512 91.0 / 32.1 / 32.7 ms, with the SM clock at 1980 MHz and host enqueue time ~
    synced time throughout, so it is the host CPU, not the GPU). The slow state is outside
    the process and outside the model; the fastest round is the host's unimpeded speed (as
    timeit takes the minimum of repeats) and repeats across shapes (HF decode 31.7-36.7 ms
    over six configs; medians 32.7-63.1). The record's median stays in the raw file."""
    rounds = rec.get("rounds_s")
    if isinstance(rounds, list) and rounds and all(isinstance(x, (int, float)) and x > 0 for x in rounds):
        return float(min(rounds))
    return float(rec["seconds"])


def split(points: list[Point]) -> list[Point]:
    """Mark about HOLD_OUT of each mode's points as held out (see module docstring)."""
    out = {id(p): p for p in points}
    for mode in sorted({p.mode for p in points}):
        group = sorted((p for p in points if p.mode == mode),
                       key=lambda p: hashlib.sha256(p.key.encode()).hexdigest())
        n_hold = int(round(HOLD_OUT * len(group))) if len(group) > 1 else 0
        for p in group[:n_hold]:
            out[id(p)] = Point(**{**p.__dict__, "held_out": True})
    return [out[id(p)] for p in points]


def precision_of(dtype: str) -> Precision:
    return Precision.of(DTYPE_WEIGHTS[dtype])


def predict(points: list[Point], m: ModelSpec, hw: HardwareSpec, eff: Efficiency,
            engines: dict[str, EngineProfile], cache: dict | None = None) -> np.ndarray:
    """Predicted seconds of every point, one vectorized step_time call per (engine, dtype).

    cache: a dict kept by the caller across calls with the same points, model and card; a
    group whose engine and efficiency are unchanged is not recomputed (the fit's Jacobian
    moves one parameter at a time, and an engine's parameter moves only its own groups)."""
    out = np.empty(len(points))
    # the points were timed in bursts (bench_timing: a GPU sleep before each timed batch), at
    # the boost clock: no sustained-load clock (Efficiency.sustained_clock_fraction)
    eff = burst(eff)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault((p.engine, p.dtype), []).append(i)
    for (eng_id, dtype), idx in groups.items():
        eng = engines[eng_id]
        key = (eng_id, dtype, tuple(idx), eng, eff)
        if cache is not None and key in cache:
            out[idx] = cache[key]
            continue
        B = np.array([points[i].B for i in idx], dtype=float)
        T = np.array([points[i].T for i in idx], dtype=float)
        S = np.array([points[i].S for i in idx], dtype=float)
        t = np.broadcast_to(step_time(m, hw, precision_of(dtype), eng, eff, B, T, S).time_s, B.shape)
        req = np.array([points[i].request for i in idx])
        out[idx] = t + np.where(req, eng.per_request_overhead_s, 0.0)
        if cache is not None:
            if len(cache) > CACHE_MAX:
                cache.clear()
            cache[key] = out[idx].copy()
    return out
