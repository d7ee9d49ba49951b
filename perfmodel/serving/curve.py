"""Serving a model under load: the latency-throughput curve over concurrency, its knee,
goodput against TTFT/TPOT targets, and offline maximum throughput, from the steady-state
quick estimate (serving/batching.py). For a benchmark's percentiles under load use the
simulation (serving/simulate.py, api.serve).

Public entry points (ids or specs are accepted as in perfmodel.api.predict_request):

    serve_curve(model, gpu, *, weights="bf16", kv=None, activations=None, engine="vllm",
                tp=1, pp=1, ep=1, prompt=512, output=128, concurrencies=None,
                ttft_slo_s=None, tpot_slo_s=None, chunked_prefill=None, max_batch=None,
                longest_prompt=None, longest_output=None, profile=None,
                hardware_dir=None) -> ServeCurve
        One CurvePoint per concurrency (default: 1, 2, 4, ... doubling up to the limit, and
        the limit itself): TTFT, TPOT, E2E, per-user and aggregate tok/s, request rate,
        fits, and with targets a meets_slo flag; goodput_rps under Poisson arrivals.
    find_knee(curve, gain=KNEE_GAIN) -> Knee   (the one rule: perfmodel/serving/knee.py)
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
from perfmodel.core.query import MAX_COUNT, make_query
from perfmodel.core.units import GIGA
from perfmodel.serving.knee import KNEE_MIN_GAIN, KNEE_RULE, Knee, KneePoint  # noqa: F401 (re-exported)

__all__ = ["KNEE_MIN_GAIN", "KNEE_RULE", "Knee", "KneePoint"]
from perfmodel.serving.knee import find_knee as knee_of
from perfmodel.serving.queueing import goodput_rps, open_loop

KNEE_GAIN = KNEE_MIN_GAIN   # kept name: the one threshold lives in serving/knee.py


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


class Served(BaseModel):
    """What runs: the resolved ids every serving result starts with."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    tp: int
    pp: int
    ep: int


class ServeCurve(Served):
    """The latency-throughput curve of one replica."""

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


class MaxThroughput(Served):
    """Offline maximum output throughput (all requests queued)."""

    prompt_tokens: int
    output_tokens: int
    concurrency: int = Field(description="Concurrency at which it is reached (the limit).")
    output_tok_s_total: float
    max_batch: int = Field(description="Largest batch whose KV cache fits at prompt+output.")
    limited_by: str
    tpot_s: float
    ttft_s: float
    warnings: list[str]


MAX_SLO_S = 1.0 * GIGA  # seconds: a latency target beyond ~30 years is no target; larger ones overflow in ms


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
           profile, hardware_dir, longest_prompt=None, longest_output=None, ttft_slo_s=None,
           tpot_slo_s=None, dp=1, **lim_kw):
    """Validate the inputs once (as a Query), resolve the ids, and find the limits."""
    q = make_query(model=model, gpu=gpu, weights=weights, kv=kv, activations=activations,
                   engine=engine, tp=tp, pp=pp, ep=ep, dp=dp, prompt_tokens=prompt, output_tokens=output,
                   longest_prompt_tokens=longest_prompt, longest_output_tokens=longest_output,
                   ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, profile=profile,
                   hardware_dir=hardware_dir)
    check_positive_int(max_batch=lim_kw.get("max_batch"), optional=("max_batch",))
    if lim_kw.get("chunked_prefill") not in (None, True, False):
        raise PerfModelError("chunked_prefill must be True, False or None")
    sc, warnings, assumptions = resolve(q.model, q.gpu, weights=q.weights, kv=q.kv,
                                        activations=q.activations, engine=q.engine, tp=q.tp,
                                        pp=q.pp, ep=q.ep, dp=q.dp, profile=q.profile,
                                        hardware_dir=q.hardware_dir)
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
                hardware_dir: str | None = None, dp: int = 1) -> ServeCurve:
    """The latency-throughput curve of one replica (see the module docstring); dp: attention
    data-parallel groups (concurrency counts all of them)."""
    sc, lim, warnings, assumptions = _setup(
        model, gpu, weights, kv, activations, engine, tp, pp, ep, prompt, output, profile,
        hardware_dir, longest_prompt, longest_output, ttft_slo_s, tpot_slo_s, dp=dp,
        max_batch=max_batch, chunked_prefill=chunked_prefill)
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
        tp=tp, pp=pp, ep=ep, num_gpus=sc.dep.num_gpus, prompt_tokens=prompt, output_tokens=output,
        batching="static" if lim.static else "continuous", mixed_prefill=lim.mixed,
        max_concurrency=lim.limit, kv_max_concurrency=lim.kv_max, limited_by=lim.limited_by,
        ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, goodput_rps=goodput, points=points,
        warnings=warnings, assumptions=assumptions + _assumptions(lim, sc))


def _check_finite(cv: Curve) -> None:
    require_finite("serving curve", **{k: getattr(cv, k) for k in
                                       ("ttft_s", "tpot_s", "e2e_s", "output_tok_s_total", "rate_rps")})


def find_knee(curve_: ServeCurve, gain: float = KNEE_MIN_GAIN) -> Knee:
    """The knee of the curve by the one rule (serving/knee.py), over its fitting points."""
    pts = [KneePoint(concurrency=p.concurrency, output_tok_s_total=p.output_tok_s_total,
                     e2e_s=p.e2e_s, ttft_s=p.ttft_s, tpot_s=p.tpot_s)
           for p in curve_.points if p.fits]
    return knee_of(pts, gain, limit=curve_.max_concurrency, limited_by=curve_.limited_by)


def max_throughput(model, gpu, *, weights: str = "bf16", kv: str | None = None,
                   activations: str | None = None, engine: str = "trtllm", tp: int = 1,
                   pp: int = 1, ep: int = 1, prompt: int = 128, output: int = 128,
                   max_batch: int | None = None, chunked_prefill: bool | None = None,
                   profile=None, hardware_dir: str | None = None, dp: int = 1) -> MaxThroughput:
    """Offline max throughput: output tok/s at the largest concurrency the replica holds
    (KV memory at prompt+output, the engine's batch cap, its token budget)."""
    sc, lim, warnings, _ = _setup(model, gpu, weights, kv, activations, engine, tp, pp, ep,
                                  prompt, output, profile, hardware_dir, dp=dp,
                                  max_batch=max_batch, chunked_prefill=chunked_prefill)
    if lim.limit == 0:
        raise PerfModelError(f"{sc.model.id} with {sc.precision.label} does not fit on "
                             f"{sc.dep.num_gpus} x {sc.hw.id} with even one {lim.context}-token sequence")
    cv = curve(sc, [float(lim.limit)], prompt, output, lim)
    _check_finite(cv)
    return MaxThroughput(
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        tp=tp, pp=pp, ep=ep, prompt_tokens=prompt, output_tokens=output,
        concurrency=lim.limit, output_tok_s_total=float(cv.output_tok_s_total[0]),
        max_batch=lim.kv_max, limited_by=lim.limited_by, tpot_s=float(cv.tpot_s[0]),
        ttft_s=float(cv.ttft_s[0]), warnings=warnings)
