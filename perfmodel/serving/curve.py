"""Serving a model under load: the latency-throughput curve over concurrency, its knee,
goodput against TTFT/TPOT targets, and offline maximum throughput.

Public entry points (ids or specs are accepted as in perfmodel.api.predict_request):

    serve_curve(model, gpu, *, weights="bf16", kv=None, activations=None, engine="vllm",
                tp=1, pp=1, ep=1, prompt=512, output=128, concurrencies=None,
                ttft_slo_s=None, tpot_slo_s=None, chunked_prefill=None, max_batch=None,
                longest_prompt=None, longest_output=None, profile=None,
                hardware_dir=None) -> ServeCurve
        One CurvePoint per concurrency (default: 1, 2, 4, ... doubling up to the limit, and
        the limit itself): TTFT, TPOT, E2E, per-user and aggregate tok/s, request rate,
        fits, and with targets a meets_slo flag; goodput_rps under Poisson arrivals.
    find_knee(curve, gain=KNEE_GAIN) -> Knee
    max_throughput(model, gpu, *, ..., engine="trtllm", prompt, output) -> MaxThroughput
        (concurrency, output_tok_s_total, max_batch): what trtllm-bench-style offline runs
        measure, i.e. the throughput at the largest concurrency the engine can hold.

The physics is in perfmodel/serving/batching.py (continuous vs static batching, mixed prefill)
and perfmodel/serving/queueing.py (Little's law, M/D/1 admission wait, goodput).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.resolve import resolve
from perfmodel.serving.batching import Curve, Limits, concurrency_grid, curve, limits
from perfmodel.core.errors import PerfModelError, require_finite
from perfmodel.core.predict import Scenario
from perfmodel.serving.queueing import goodput_rps, open_loop

KNEE_GAIN = 0.10          # doubling concurrency must add at least 10% throughput
KNEE_RULE = ("knee: the first concurrency C (on the doubling grid the seed documents "
             "prescribe: 1, 2, 4, ...) after which doubling C raises aggregate output tok/s "
             "by less than 10% while TPOT grows; if throughput keeps rising the knee is the "
             "concurrency limit (memory or engine)")


class CurvePoint(BaseModel):
    """Closed-loop metrics at one concurrency (C requests always in flight)."""

    model_config = ConfigDict(frozen=True)
    concurrency: int
    fits: bool = Field(description="KV cache, engine batch cap and token budget allow it.")
    ttft_s: float = Field(description="Overhead + wait for the running step + prefill.")
    tpot_s: float = Field(description="Time per output token, prefill interleaving included.")
    e2e_s: float = Field(description="TTFT + (output - 1) x TPOT.")
    decode_tok_s_per_user: float = Field(description="1 / TPOT.")
    output_tok_s_total: float = Field(description="All users' output tokens per second.")
    request_rate_rps: float = Field(description="Completed requests per second (Little's law).")
    prefill_s: float = Field(description="Prefill latency of one request at this load.")
    meets_slo: bool | None = Field(
        description="fits and TTFT, TPOT within targets (None: no targets).")


class ServeCurve(BaseModel):
    """The latency-throughput curve of one replica."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    tp: int
    pp: int
    ep: int
    num_gpus: int
    prompt_tokens: int
    output_tokens: int
    batching: str = Field(description="continuous or static.")
    mixed_prefill: bool = Field(description="Prefill chunks ride in decode steps.")
    max_concurrency: int = Field(description="Largest concurrency the replica can hold.")
    kv_max_concurrency: int = Field(description="Largest concurrency the KV cache holds.")
    limited_by: str = Field(description="memory, engine max batch, or token budget.")
    ttft_slo_s: float | None
    tpot_slo_s: float | None
    goodput_rps: float | None = Field(description="Max Poisson rate meeting both targets.")
    points: list[CurvePoint]
    warnings: list[str]
    assumptions: list[str]


class Knee(BaseModel):
    """Where more concurrency stops paying."""

    model_config = ConfigDict(frozen=True)
    concurrency: int | None = Field(description="None when no point fits.")
    output_tok_s_total: float
    tpot_s: float
    ttft_s: float
    reason: str = Field(description="diminishing returns, memory, engine max batch, token budget.")
    rule: str = KNEE_RULE


class MaxThroughput(BaseModel):
    """Offline maximum output throughput (all requests queued)."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    tp: int
    pp: int
    ep: int
    prompt_tokens: int
    output_tokens: int
    concurrency: int = Field(description="Concurrency at which it is reached (the limit).")
    output_tok_s_total: float
    max_batch: int = Field(description="Largest batch whose KV cache fits at prompt+output.")
    limited_by: str
    tpot_s: float
    ttft_s: float
    warnings: list[str]


MAX_COUNT = 10**15   # as api.MAX_COUNT: any larger count leaves finite float products
MAX_SLO_S = 1e9      # a latency target beyond ~30 years is no target; larger ones overflow in ms


def check_positive_int(*, optional: tuple[str, ...] = (), **values) -> None:
    """Each value a positive integer (None allowed for the names in `optional`)."""
    for name, v in values.items():
        if v is None and name in optional:
            continue
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 < v <= MAX_COUNT:
            raise PerfModelError(f"{name} must be a positive integer up to {MAX_COUNT:.0e}, "
                                 f"got {v!r:.40}")


def check_slo(*, optional: bool = True, **values) -> None:
    """Each value a positive finite number of seconds (or None when optional)."""
    for name, v in values.items():
        if v is None and optional:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not math.isfinite(as_float(v)) or not 0 < v <= MAX_SLO_S:
            raise PerfModelError(f"{name} must be a positive number of seconds up to "
                                 f"{MAX_SLO_S:.0e}, got {v!r:.40}")


def as_float(v) -> float:
    """float(v), or inf for an integer too large for a float (10**400)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf


def check_shape(sc: Scenario, prompt: int, output: int, longest_prompt=None, longest_output=None):
    if (longest_prompt or prompt) < prompt or (longest_output or output) < output:
        raise PerfModelError("longest_prompt/longest_output must be at least prompt/output")
    total = (longest_prompt or prompt) + (longest_output or output)
    if total > sc.model.max_context:
        raise PerfModelError(f"prompt + output = {total} tokens exceed the "
                             f"{sc.model.max_context}-token context of {sc.model.id}")


def doubling_grid(limit: int) -> np.ndarray:
    """1, 2, 4, ... up to the limit, and the limit itself."""
    if limit <= 0:
        return np.array([1.0])
    grid = 2.0 ** np.arange(0, int(math.log2(limit)) + 1)
    return np.unique(np.append(grid, float(limit)))


def _setup(model, gpu, weights, kv, activations, engine, tp, pp, ep, prompt, output,
           profile, hardware_dir, longest_prompt=None, longest_output=None, **lim_kw):
    check_positive_int(prompt=prompt, output=output, tp=tp, pp=pp, ep=ep,
                       longest_prompt=longest_prompt, longest_output=longest_output,
                       max_batch=lim_kw.get("max_batch"),
                       optional=("longest_prompt", "longest_output", "max_batch"))
    if lim_kw.get("chunked_prefill") not in (None, True, False):
        raise PerfModelError("chunked_prefill must be True, False or None")
    sc, warnings, assumptions = resolve(model, gpu, weights=weights, kv=kv,
                                        activations=activations, engine=engine, tp=tp, pp=pp,
                                        ep=ep, profile=profile, hardware_dir=hardware_dir)
    check_shape(sc, prompt, output, longest_prompt, longest_output)
    lim = limits(sc, prompt, output, longest_prompt=longest_prompt,
                 longest_output=longest_output, **lim_kw)
    return sc, lim, warnings, assumptions


def _assumptions(lim: Limits, sc: Scenario) -> list[str]:
    out = []
    if lim.static:
        out.append("static batching: a batch runs until its longest request ends")
    elif lim.mixed:
        out.append(f"continuous batching with prefill mixed into decode steps "
                   f"(token budget {lim.token_budget})")
    else:
        out.append("continuous batching with separate prefill steps")
    if lim.engine_max is not None:
        out.append(f"{sc.engine.id} holds at most {lim.engine_max} running sequences")
    return out


def serve_curve(model, gpu, *, weights: str = "bf16", kv: str | None = None,
                activations: str | None = None, engine: str = "vllm", tp: int = 1,
                pp: int = 1, ep: int = 1, prompt: int = 512, output: int = 128,
                concurrencies: list[int] | None = None, ttft_slo_s: float | None = None,
                tpot_slo_s: float | None = None, chunked_prefill: bool | None = None,
                max_batch: int | None = None, longest_prompt: int | None = None,
                longest_output: int | None = None, profile=None,
                hardware_dir: str | None = None) -> ServeCurve:
    """The latency-throughput curve of one replica (see the module docstring)."""
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    sc, lim, warnings, assumptions = _setup(
        model, gpu, weights, kv, activations, engine, tp, pp, ep, prompt, output, profile,
        hardware_dir, longest_prompt, longest_output, max_batch=max_batch,
        chunked_prefill=chunked_prefill)
    if concurrencies is not None:
        if not len(concurrencies):
            raise PerfModelError("concurrencies must be a non-empty list of positive integers")
        check_positive_int(**{f"concurrency[{i}]": c for i, c in enumerate(concurrencies)})
        grid = np.unique(np.asarray(concurrencies, dtype=float))
    else:
        grid = doubling_grid(lim.limit)
    cv = curve(sc, grid, prompt, output, lim, longest_prompt=longest_prompt,
               longest_output=longest_output)
    _check_finite(cv)
    slo = ttft_slo_s is not None or tpot_slo_s is not None
    goodput = None
    if slo:
        full = curve(sc, concurrency_grid(lim.limit), prompt, output, lim,   # as sizing does
                     longest_prompt=longest_prompt, longest_output=longest_output)
        goodput = goodput_rps(open_loop(full), ttft_slo_s, tpot_slo_s)
    if lim.limit == 0:
        warnings = warnings + [f"not even one sequence of {lim.context} tokens fits in "
                               f"{sc.hw.id} memory with {sc.precision.label} weights"]
    points = []
    for i, c in enumerate(cv.concurrency):
        meets = None
        if slo:
            meets = bool(cv.fits[i]
                         and (ttft_slo_s is None or cv.ttft_s[i] <= ttft_slo_s)
                         and (tpot_slo_s is None or cv.tpot_s[i] <= tpot_slo_s))
        points.append(CurvePoint(
            concurrency=int(c), fits=bool(cv.fits[i]), ttft_s=float(cv.ttft_s[i]),
            tpot_s=float(cv.tpot_s[i]), e2e_s=float(cv.e2e_s[i]),
            decode_tok_s_per_user=float(1.0 / cv.tpot_s[i]),
            output_tok_s_total=float(cv.output_tok_s_total[i]),
            request_rate_rps=float(cv.rate_rps[i]), prefill_s=float(cv.prefill_s[i]),
            meets_slo=meets))
    return ServeCurve(
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        tp=tp, pp=pp, ep=ep, num_gpus=tp * pp, prompt_tokens=prompt, output_tokens=output,
        batching="static" if lim.static else "continuous", mixed_prefill=lim.mixed,
        max_concurrency=lim.limit, kv_max_concurrency=lim.kv_max, limited_by=lim.limited_by,
        ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, goodput_rps=goodput, points=points,
        warnings=warnings, assumptions=assumptions + _assumptions(lim, sc))


def _check_finite(cv: Curve) -> None:
    require_finite({name: getattr(cv, name) for name in
                    ("ttft_s", "tpot_s", "e2e_s", "output_tok_s_total", "rate_rps")},
                   what="serving curve")


def find_knee(curve_: ServeCurve, gain: float = KNEE_GAIN) -> Knee:
    """The knee of the curve by KNEE_RULE, over its fitting points in concurrency order."""
    pts = [p for p in curve_.points if p.fits]
    if not pts:
        return Knee(concurrency=None, output_tok_s_total=0.0, tpot_s=0.0, ttft_s=0.0,
                    reason="nothing fits")
    for a, b in zip(pts, pts[1:]):
        doubled = b.concurrency >= 2 * a.concurrency
        if doubled and b.output_tok_s_total < (1.0 + gain) * a.output_tok_s_total \
                and b.tpot_s > a.tpot_s:
            return Knee(concurrency=a.concurrency, output_tok_s_total=a.output_tok_s_total,
                        tpot_s=a.tpot_s, ttft_s=a.ttft_s, reason="diminishing returns")
    last = pts[-1]
    reason = curve_.limited_by if last.concurrency >= curve_.max_concurrency else "end of grid"
    return Knee(concurrency=last.concurrency, output_tok_s_total=last.output_tok_s_total,
                tpot_s=last.tpot_s, ttft_s=last.ttft_s, reason=reason)


def max_throughput(model, gpu, *, weights: str = "bf16", kv: str | None = None,
                   activations: str | None = None, engine: str = "trtllm", tp: int = 1,
                   pp: int = 1, ep: int = 1, prompt: int = 128, output: int = 128,
                   max_batch: int | None = None, chunked_prefill: bool | None = None,
                   profile=None, hardware_dir: str | None = None) -> MaxThroughput:
    """Offline max throughput: output tok/s at the largest concurrency the replica holds
    (KV memory at prompt+output, the engine's batch cap, its token budget)."""
    sc, lim, warnings, _ = _setup(model, gpu, weights, kv, activations, engine, tp, pp, ep,
                                  prompt, output, profile, hardware_dir, max_batch=max_batch,
                                  chunked_prefill=chunked_prefill)
    if lim.limit == 0:
        raise PerfModelError(f"{sc.model.id} with {sc.precision.label} does not fit on "
                             f"{tp * pp} x {sc.hw.id} with even one {lim.context}-token sequence")
    cv = curve(sc, [float(lim.limit)], prompt, output, lim)
    _check_finite(cv)
    return MaxThroughput(
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        tp=tp, pp=pp, ep=ep, prompt_tokens=prompt, output_tokens=output,
        concurrency=lim.limit, output_tok_s_total=float(cv.output_tok_s_total[0]),
        max_batch=lim.kv_max, limited_by=lim.limited_by, tpot_s=float(cv.tpot_s[0]),
        ttft_s=float(cv.ttft_s[0]), warnings=warnings)
