"""Predict a mapped row's metric with the model: datasheet defaults or a calibrated profile.

How each load and metric is read (the same rules for every row):
- "batch B": B sequences decoded together. Per-user decode = 1/TPOT at B; aggregate output
  tok/s = B * output / E2E (the benchmark times the whole batch, prefill included).
- "request rate r": concurrency C from Little's law, C = r * E2E(C) (fixed point); TPOT at
  C; TTFT of one prompt (arrivals are independent).
- "max throughput" / saturated: the serving module's max_throughput (perfmodel/serving/curve.py).
- "capacity search": max batch from the memory model at context input + output; rounded
  down to a power of two when the search went by powers of two.
- TPOT with output <= 1: the single decode step at context = input.
- memory_gb: weights + KV + activations summed over the GPUs, without the runtime reserve
  (tables report the tensors a framework allocates; CUDA context and workspaces vary).
- speculative rows: perfmodel/analysis/speculative.py (acceptance is taken from the row, never fitted).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.api import evaluate, make_query, resolve
from perfmodel.core.errors import PerfModelError
from perfmodel.core.memory import estimate_memory
from perfmodel.core.predict import Scenario
from perfmodel.core.profile import Profile
from perfmodel.core.specs import NumberFormat, Precision, parse_format
from perfmodel.core.units import GB, MS
from perfmodel.analysis.validation.mapping import Target


class NotModelled(PerfModelError):
    """The metric or load needs a module that does not exist (yet)."""


class Prediction(BaseModel):
    """A predicted value in the metric's unit, with what bounds it."""

    model_config = ConfigDict(frozen=True)
    value: float = Field(gt=0)
    bound: str
    fits: bool
    warnings: list[str] = Field(default_factory=list)


def scenario(t: Target, profile: Profile | None = None) -> tuple[Scenario, list[str]]:
    """The row's scenario (precision built from the parsed formats)."""
    sc, warnings, _ = resolve(t.model, t.gpu, engine=t.engine, tp=t.tp, pp=t.pp, profile=profile)
    prec = Precision(weights=t.weights, activations=parse_format(t.activations),
                     kv=parse_format(t.kv))
    return replace(sc, precision=prec), warnings


def _at_rate(sc: Scenario, t: Target) -> dict[str, float]:
    """Open-loop metrics at the row's request rate (perfmodel/serving/queueing.py): the settled
    concurrency C* with rate(C*) = rate, its TPOT, and TTFT with admission queueing."""
    from perfmodel.serving.batching import curve, limits    # noqa: PLC0415 - serving physics
    from perfmodel.serving.queueing import at_rate, open_loop
    from perfmodel.serving.curve import doubling_grid
    output = max(t.output, 1)
    lim = limits(sc, t.prompt, output)
    ol = open_loop(curve(sc, doubling_grid(lim.limit), t.prompt, output, lim))
    if ol is None:
        raise PerfModelError("the memory model says not even one sequence fits")
    m = at_rate(ol, t.rate_per_s)
    out = {k: float(np.asarray(v)) for k, v in m.items()}
    if not math.isfinite(out["ttft_s"]):
        raise PerfModelError(f"rate {t.rate_per_s:g}/s is above the modelled peak "
                             f"{ol.peak_rps:.3g}/s: the queue grows without bound")
    return out


def _memory(sc: Scenario, t: Target, batch: float):
    return estimate_memory(sc.model, sc.hw, sc.precision, batch=max(1, int(round(batch))),
                           context=t.prompt + t.output, engine=sc.engine, dep=sc.dep,
                           attention=sc.attention)


def format_text(f: NumberFormat) -> str | None:
    """'int4-g128', 'fp4-g16', 'fp8': the string parse_format reads back to f, or None."""
    text = f"{f.name}-g{f.group_size}" if f.group_size else f.name
    try:
        return text if parse_format(text) == f else None
    except ValueError:
        return None


def _max_throughput(sc: Scenario, t: Target, profile: Profile | None) -> tuple[float, str]:
    try:
        from perfmodel.serving.curve import max_throughput  # noqa: PLC0415 - written separately
    except ImportError:
        raise NotModelled("metric not modelled yet: offline max throughput needs "
                          "perfmodel/serving/curve.py") from None
    weights = format_text(t.weights)
    if weights is None:
        raise NotModelled(f"serving.max_throughput takes named formats; {t.weights} is not one")
    r = max_throughput(sc.model, sc.hw, weights=weights, kv=t.kv, activations=t.activations,
                       engine=t.engine, tp=t.tp, pp=t.pp, prompt=t.prompt, output=t.output,
                       profile=profile)
    return float(r.output_tok_s_total), f"capacity ({r.limited_by})"


def _speculative(sc: Scenario, t: Target) -> tuple[float, str]:
    """Speculative decoding at the mean decode context (perfmodel/analysis/speculative.py); the
    acceptance is the row's stated mean accepted tokens per step."""
    spec = t.speculation
    try:
        from perfmodel.analysis.speculative import METHODS, estimate_specs  # noqa: PLC0415
    except ImportError:
        raise NotModelled("metric not modelled yet: speculative decoding rows need "
                          "perfmodel/analysis/speculative.py") from None
    if spec.kind not in METHODS:
        raise NotModelled(f"speculative method of {t.measurement.model!r} not recognised")
    if spec.accepted_tokens is None:
        raise NotModelled("mean accepted tokens per step not stated: the speed-up depends on "
                          "the acceptance, which is data, not something the model predicts")
    draft = None
    if spec.kind == "draft":
        if spec.draft_model is None:
            raise NotModelled("draft model not in the catalog")
        from perfmodel.core.catalog import load_model  # noqa: PLC0415
        draft = load_model(spec.draft_model)
    est = estimate_specs(sc, spec.kind, batch=t.batch, context=t.prompt + t.output // 2,
                         gamma=spec.draft_len, mean_accepted_tokens=spec.accepted_tokens,
                         draft=draft)
    metric = t.measurement.metric
    if metric == "speculative_speedup":
        return est.speedup, f"verify {est.verify_bound}"
    if metric == "decode_tok_s_per_user":
        return est.decode_tok_s_per_user, f"verify {est.verify_bound}"
    raise NotModelled(f"metric not modelled yet: {metric} with speculative decoding")


def predict_target(t: Target, profile: Profile | None = None) -> Prediction:
    """The model's value for the row's metric, in the table's unit."""
    sc, warnings = scenario(t, profile)
    metric = t.measurement.metric
    if t.speculation is not None:
        value, bound = _speculative(sc, t)
        return Prediction(value=value, bound=bound, fits=True, warnings=warnings)
    if metric == "max_batch":
        mb = _memory(sc, t, 1).max_batch
        if t.pow2 and mb >= 1:
            mb = 2 ** int(math.floor(math.log2(mb)))
        if mb < 1:
            raise PerfModelError("the model says not even one sequence fits")
        return Prediction(value=float(mb), bound="memory", fits=True, warnings=warnings)
    if metric == "memory_gb":
        mem = _memory(sc, t, t.batch)
        value = (mem.total_bytes - mem.reserve_bytes) * mem.num_gpus / GB
        return Prediction(value=value, bound="memory", fits=mem.fits, warnings=warnings)
    if t.load == "max_throughput":
        if metric != "output_tok_s_total":
            raise NotModelled(f"metric not modelled yet: {metric} at max throughput")
        value, bound = _max_throughput(sc, t, profile)
        return Prediction(value=value, bound=bound, fits=True, warnings=warnings)
    if t.load == "rate":
        return _rate_prediction(t, metric, _at_rate(sc, t), warnings)
    output = max(t.output, 1)
    q = make_query(model=sc.model, gpu=sc.hw, engine=sc.engine.id, tp=sc.dep.tp, pp=sc.dep.pp,
                   batch=t.batch, prompt_tokens=t.prompt, output_tokens=output)
    # the row's formats are in sc (the Query gives the workload); one-entry arrays, so a row
    # measured past the model's context (TRT-LLM runs allow it) is predicted with fits=False
    ev = evaluate(q, scenario=sc, batch=np.array([t.batch]))
    one = {k: float(getattr(ev, k)[0]) for k in ("decode_tok_s_per_user", "tpot_s",
                                                 "decode_step_s", "ttft_s", "e2e_s",
                                                 "prefill_tok_s", "output_tok_s_total")}
    step, pre = str(ev.bound[0]), str(ev.prefill_bound[0])
    values = {
        "decode_tok_s_per_user": (one["decode_tok_s_per_user"], step),
        "tpot_ms": ((one["tpot_s"] if output > 1 else one["decode_step_s"]) / MS, step),
        "ttft_ms": (one["ttft_s"] / MS, pre),
        "e2e_latency_s": (one["e2e_s"], step),
        "prefill_tok_s": (one["prefill_tok_s"], pre),
        "output_tok_s_total": (one["output_tok_s_total"], step),
    }
    if metric not in values:
        raise NotModelled(f"metric not modelled yet: {metric}")
    value, bound = values[metric]
    if not (math.isfinite(value) and value > 0):
        raise PerfModelError(f"non-finite or non-positive prediction {value!r} for {metric}")
    return Prediction(value=value, bound=str(bound), fits=bool(ev.fits[0]),
                      warnings=warnings + ev.warnings)


def _rate_prediction(t: Target, metric: str, m: dict[str, float], warnings) -> Prediction:
    values = {"ttft_ms": m["ttft_s"] / MS, "tpot_ms": m["tpot_s"] / MS,
              "decode_tok_s_per_user": 1.0 / m["tpot_s"], "e2e_latency_s": m["e2e_s"],
              "output_tok_s_total": (t.rate_per_s or 0.0) * max(t.output, 1)}
    if metric not in values:
        raise NotModelled(f"metric not modelled yet: {metric} at a request rate")
    return Prediction(value=values[metric], bound=f"open loop at C={m['concurrency']:.2g}",
                      fits=True, warnings=warnings)
