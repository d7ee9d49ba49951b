"""The front door: one Query in, one typed result out.

    from perfmodel.api import evaluate, make_query
    q = make_query(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", batch=8)
    ev = evaluate(q)                                   # scalars, op breakdowns, memory
    ev = evaluate(q, batch=np.array([1, 2, 4, 8]))     # one vectorized call

`resolve(query)` is the only place ids become specs; `evaluate` runs the one step model
(core/predict.request_times) and attaches memory and `fits`, the roofline floor, the
prefill and decode op breakdowns, warnings and assumptions; with a serving workload in the
Query (concurrency, rate_rps or trace) also the simulated benchmark's point
(serving/report.py -> serving/simulate.py) and, for a concurrency, the steady-state estimate.
`serve(query, concurrencies=[...])` simulates several levels of one Query. `predict_request`,
`memory` and the keyword form of `serve` are thin wrappers that build a Query.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError, require_finite
from perfmodel.core.memory import MemoryEstimate, estimate_memory
from perfmodel.core.ops import FloatArray
from perfmodel.core.predict import Scenario, request_times
from perfmodel.core.query import ARRAY_FIELDS, Query, make_query
from perfmodel.core.resolve import resolve as _resolve_ids
from perfmodel.core.roofline import OpTime, roofline_floor_s
from perfmodel.core.units import GB
from perfmodel.serving.batching import capacity_bytes, used_bytes
from perfmodel.serving.curve import ServeCurve, serve_curve
from perfmodel.serving.disagg_report import DisaggReport, serve_disagg
from perfmodel.serving.report import ServeReport, serve_report
from perfmodel.serving.simulate import ServePoint
from perfmodel.serving.trace_record import Replay

__all__ = ["Query", "make_query", "resolve", "evaluate", "Evaluation", "predict_request",
           "memory", "RequestEstimate", "OpBreakdown", "op_breakdown", "serve",
           "ServeReport", "serve_disagg", "DisaggReport"]

METRIC_FIELDS = ("prefill_s", "ttft_s", "decode_step_s", "tpot_s", "e2e_s",
                 "decode_tok_s_per_user", "output_tok_s_total", "decode_tok_s_total",
                 "prefill_tok_s", "mbu", "mfu",
                 "roofline_floor_s")


class OpBreakdown(BaseModel):
    """One op's share of the reported step."""

    model_config = ConfigDict(frozen=True)
    name: str
    kind: str
    time_s: float
    share: float = Field(description="Fraction of the step's GPU time.")
    bound: str = Field(description="compute, memory, or communication.")
    flops: float
    bytes: float


def op_breakdown(op_times) -> list[OpBreakdown]:
    """Each op's time, share of the step's GPU time and bound (roofline.OpTime list; scalar
    times, as in a single-configuration step)."""
    if not isinstance(op_times, (list, tuple)) or not all(isinstance(o, OpTime) for o in op_times):
        raise PerfModelError("op_breakdown: expected a list of roofline.OpTime")
    gpu_total = sum(float(o.time_s) for o in op_times) or 1.0
    return [OpBreakdown(name=o.name, kind=o.kind, time_s=float(o.time_s),
                        share=float(o.time_s) / gpu_total,
                        bound="communication" if o.kind == "comm" else
                        ("compute" if float(o.compute_s) >= float(o.memory_s) else "memory"),
                        flops=float(o.flops), bytes=float(o.bytes)) for o in op_times]


def resolve(query: Query | str, gpu=None, **ids) -> tuple[Scenario, list[str], list[str]]:
    """A Query's ids -> (Scenario, warnings, assumptions filled in).

    Also accepts the older call resolve(model, gpu, weights=..., ...), which builds the Query."""
    q = query if isinstance(query, Query) else make_query(model=query, gpu=gpu, **ids)
    return _resolve_ids(q.model, q.gpu, weights=q.weights, kv=q.kv, activations=q.activations,
                        engine=q.engine, tp=q.tp, pp=q.pp, ep=q.ep, dp=q.dp, attention=q.attention,
                        profile=q.profile, hardware_dir=q.hardware_dir, nodes=q.nodes)


class Evaluation(BaseModel):
    """Everything the model says about one Query (metrics are arrays when the call was
    vectorized, scalars otherwise). Seconds, tokens/s, fractions; bytes in `memory`."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    query: Query
    vectorized: bool = Field(description="True when a workload field was given as an array.")
    model: str
    gpu: str
    engine: str
    precision: str
    compute_dtype: str
    batch: FloatArray
    prompt_tokens: FloatArray
    output_tokens: FloatArray
    context_tokens: FloatArray
    prefill_s: FloatArray = Field(description="Prefill of the prompt for the whole batch (s).")
    ttft_s: FloatArray = Field(description="Arrival to first token: overhead + prefill (s).")
    decode_step_s: FloatArray = Field(description="One step adding new_tokens at context (s).")
    tpot_s: FloatArray = Field(description="(E2E - TTFT) / (output - 1) (s).")
    e2e_s: FloatArray = Field(description="Arrival to last token (s).")
    decode_tok_s_per_user: FloatArray = Field(description="1 / TPOT (tok/s).")
    output_tok_s_total: FloatArray = Field(description="batch x output / E2E (tok/s).")
    decode_tok_s_total: FloatArray = Field(description="batch / TPOT (tok/s).")
    prefill_tok_s: FloatArray = Field(description="Prompt tokens per second during prefill.")
    mbu: FloatArray = Field(description="Bytes per step / (step time x peak bandwidth).")
    mfu: FloatArray = Field(description="FLOPs per step / (step time x peak FLOP/s).")
    roofline_floor_s: FloatArray = Field(description="max(bytes/peak bw, FLOPs/peak) of the step.")
    bound: str | np.ndarray = Field(description="What bounds the reported decode step.")
    prefill_bound: str | np.ndarray = Field(description="What bounds the prefill step.")
    fits: bool | np.ndarray = Field(description="Per-GPU memory at prompt+output fits.")
    memory: MemoryEstimate | None = Field(description="Memory parts (scalar queries only).")
    serving: ServePoint | None = Field(
        default=None, description="With a serving workload in the Query (concurrency, rate_rps "
        "or trace; scalar queries only): the simulated benchmark's point (ttft_p50_s, "
        "tpot_p50_s, ... as api.serve returns them; serving/simulate.py).")
    steady_state: ServeCurve | None = Field(
        default=None, description="With a concurrency: the closed-loop steady-state formulas "
        "(serving/curve.py), a quick estimate beside the simulation.")
    prefill_ops: list[OpBreakdown] = Field(description="Prefill step per op (scalar only).")
    decode_ops: list[OpBreakdown] = Field(description="Reported decode step per op (scalar only).")
    warnings: list[str]
    assumptions: list[str]


def _workload(q: Query, arrays: dict) -> dict[str, np.ndarray]:
    """The query's workload with the array overrides, validated and broadcast (floats)."""
    unknown = sorted(set(arrays) - set(ARRAY_FIELDS))
    if unknown:
        raise PerfModelError(f"evaluate accepts arrays only for {', '.join(ARRAY_FIELDS)}; "
                             f"got {', '.join(unknown)}")
    w = {"batch": q.batch, "prompt_tokens": q.prompt_tokens, "output_tokens": q.output_tokens,
         "context_tokens": q.context_tokens}
    for name, v in arrays.items():
        a = np.asarray(v)
        if a.size == 0 or a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)) \
                or np.any(a != np.round(a)) or np.any(a < (0 if name == "context_tokens" else 1)):
            raise PerfModelError(f"{name} must be a non-empty array of "
                                 f"{'non-negative' if name == 'context_tokens' else 'positive'} "
                                 f"integers")
        w[name] = a.astype(float)
    if w["context_tokens"] is None:
        w["context_tokens"] = w["prompt_tokens"]
    keys = list(w)
    return dict(zip(keys, np.broadcast_arrays(*(np.asarray(w[k], dtype=float) for k in keys))))


def _context_ok(q: Query, sc: Scenario, w: dict, vectorized: bool) -> np.ndarray:
    """Which entries stay within the model's context; a scalar query raises instead."""
    limit = sc.model.max_context
    total_ok = w["prompt_tokens"] + w["output_tokens"] <= limit
    step_ok = w["context_tokens"] + q.new_tokens <= limit
    if not vectorized:
        if not total_ok:
            raise PerfModelError(f"prompt {q.prompt_tokens} + output {q.output_tokens} tokens "
                                 f"exceed the {limit}-token context of {sc.model.id}")
        if not step_ok:
            raise PerfModelError(f"context {q.context} + {q.new_tokens} new tokens exceed the "
                                 f"{limit}-token context of {sc.model.id}")
    return total_ok & step_ok


def evaluate(query: Query, *, scenario: Scenario | None = None, **arrays) -> Evaluation:
    """The model's answer to one Query, vectorized over workload fields given as arrays
    (batch, prompt_tokens, output_tokens, context_tokens). Raises PerfModelError on bad
    input; never returns NaN. Entries of a vectorized call beyond the model's context
    report fits=False (a scalar query raises).

    `scenario`: an already resolved Scenario to evaluate instead of resolving the Query's ids
    (callers that vary what ids cannot name: fitted engine parameters, custom number
    formats); the Query then gives the workload only."""
    if not isinstance(query, Query):
        raise PerfModelError(f"evaluate needs a Query (perfmodel.api.make_query), got "
                             f"{type(query).__name__}")
    vectorized = bool(arrays)
    w = _workload(query, arrays)
    sc, warnings, assumptions = _scenario(query, scenario)
    in_context = _context_ok(query, sc, w, vectorized)
    B, prompt, output, ctx = (w[k] for k in ARRAY_FIELDS)
    rt = request_times(sc, B, prompt, output, context=ctx, new_tokens=query.new_tokens)
    floor = roofline_floor_s(sc.model, sc.hw, sc.precision, B, query.new_tokens, ctx, sc.dep)
    values = {k: getattr(rt, k) for k in METRIC_FIELDS if k != "roofline_floor_s"}
    values["roofline_floor_s"] = floor
    require_finite("result", **values)
    warnings = warnings + list(rt.step.warnings)
    mem = None
    if vectorized:
        fits = (used_bytes(sc, B, prompt + output) <= capacity_bytes(sc, B, prompt + output)) \
            & in_context
        shape = np.shape(B)
        values = {k: np.broadcast_to(np.asarray(v, dtype=float), shape).copy()
                  for k, v in values.items()}
        bound = np.broadcast_to(np.asarray(rt.step.bound, dtype=object), shape).copy()
        prefill_bound = np.broadcast_to(np.asarray(rt.prefill.bound, dtype=object), shape).copy()
        if not np.all(fits):
            warnings.append(f"{int(np.sum(~fits))} of {fits.size} entries do not fit in memory "
                            "or in the model's context")
        sizes = dict(batch=B, prompt_tokens=prompt, output_tokens=output, context_tokens=ctx)
        ops_pre, ops_dec = [], []
    else:
        mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=query.batch,
                              context=query.prompt_tokens + query.output_tokens,
                              engine=sc.engine, dep=sc.dep, attention=sc.attention)
        fits = mem.fits
        if not fits:
            warnings.append(f"does not fit: needs {mem.total_bytes / GB:.1f} GB per GPU, "
                            f"{mem.capacity_bytes / GB:.1f} GB usable; max batch "
                            f"{mem.max_batch} at this context")
        if query.batch % sc.dep.dp:   # request_times splits B evenly over the dp groups
            warnings.append(f"batch {query.batch} over dp={sc.dep.dp} groups: each is priced at "
                            f"the mean {query.batch / sc.dep.dp:g} sequences; the busiest holds "
                            f"{-(-query.batch // sc.dep.dp)}")
        values = {k: float(v) for k, v in values.items()}
        bound, prefill_bound = str(rt.step.bound), str(rt.prefill.bound)
        sizes = dict(batch=query.batch, prompt_tokens=query.prompt_tokens,
                     output_tokens=query.output_tokens, context_tokens=query.context)
        ops_pre, ops_dec = op_breakdown(rt.prefill.ops), op_breakdown(rt.step.ops)
    serving, steady = (None, None) if vectorized else \
        _serving(query, sc, warnings, assumptions, steady=scenario is None)
    return Evaluation(
        query=query, vectorized=vectorized, serving=serving, steady_state=steady,
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        compute_dtype=rt.step.compute_dtype, bound=bound, prefill_bound=prefill_bound, fits=fits,
        memory=mem, prefill_ops=ops_pre, decode_ops=ops_dec, warnings=warnings,
        assumptions=assumptions, **sizes, **values)


def _scenario(q: Query, scenario) -> tuple[Scenario, list[str], list[str]]:
    """The given resolved Scenario, else the Query's ids resolved."""
    if scenario is None:
        return resolve(q)
    if not isinstance(scenario, Scenario):
        raise PerfModelError(f"scenario must be a resolved Scenario, got {type(scenario).__name__}")
    return scenario, [], []


def _serving(q: Query, sc: Scenario, warnings: list[str], assumptions: list[str], *,
             steady: bool) -> tuple[ServePoint | None, ServeCurve | None]:
    """The Query's serving workload: the simulated point (serving/report.py) and, for a
    concurrency, the steady-state quick estimate (serving/curve.py, which resolves the ids
    itself: not with a given scenario)."""
    if not q.has_serving_workload:
        return None, None
    rep = serve_report(q, sc, [], [])
    assumptions.extend(a for a in rep.assumptions if a not in assumptions)
    if q.concurrency is None or not steady:
        return rep.points[0], None
    curve = serve_curve(q.model, q.gpu, weights=q.weights, kv=q.kv, activations=q.activations,
                        engine=q.engine, tp=q.tp, pp=q.pp, ep=q.ep, prompt=q.prompt_tokens,
                        output=q.output_tokens, concurrencies=[q.concurrency],
                        ttft_slo_s=q.ttft_slo_s, tpot_slo_s=q.tpot_slo_s,
                        longest_prompt=q.longest_prompt_tokens,
                        longest_output=q.longest_output_tokens, profile=q.profile,
                        hardware_dir=q.hardware_dir, dp=q.dp)
    return rep.points[0], curve


# --------------------------------------------------------------------------- thin wrappers


class RequestEstimate(BaseModel):
    """Predicted request metrics for one configuration (seconds, tokens/s, bytes)."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    compute_dtype: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    context_tokens: int
    new_tokens: int
    tp: int
    pp: int
    ep: int
    dp: int = 1
    prefill_s: float = Field(description="Prefill of the prompt for the whole batch.")
    ttft_s: float = Field(description="Arrival to first token: overhead + prefill.")
    decode_step_s: float = Field(description="One step adding new_tokens per sequence at context.")
    tpot_s: float = Field(description="(E2E - TTFT) / (output - 1).")
    e2e_s: float = Field(description="Arrival to last token.")
    decode_tok_s_per_user: float = Field(description="1 / TPOT.")
    output_tok_s_total: float = Field(description="batch x output / E2E: all users' output "
                                      "tokens per second of wall time (core/metrics.py).")
    decode_tok_s_total: float = Field(description="batch / TPOT: all users' tokens per second "
                                      "while decoding.")
    prefill_tok_s: float = Field(description="Prompt tokens per second during prefill.")
    mbu: float = Field(description="Bytes moved per step / (step time x peak bandwidth).")
    mfu: float = Field(description="FLOPs per step / (step time x peak FLOP/s of the compute dtype).")
    bound: str = Field(description="What bounds the reported step.")
    roofline_floor_s: float = Field(description="max(bytes/peak bw, FLOPs/peak) of the step.")
    fits: bool
    memory: MemoryEstimate
    ops: list[OpBreakdown]
    warnings: list[str]
    assumptions: list[str]


def request_estimate(ev: Evaluation) -> RequestEstimate:
    """A scalar Evaluation as the RequestEstimate of predict_request."""
    if ev.vectorized:
        raise PerfModelError("request_estimate needs a scalar evaluation")
    q = ev.query
    return RequestEstimate(
        model=ev.model, gpu=ev.gpu, engine=ev.engine, precision=ev.precision,
        compute_dtype=ev.compute_dtype, batch=q.batch, prompt_tokens=q.prompt_tokens,
        output_tokens=q.output_tokens, context_tokens=q.context, new_tokens=q.new_tokens,
        tp=q.tp, pp=q.pp, ep=q.ep, dp=q.dp, bound=ev.bound, fits=ev.fits, memory=ev.memory,
        ops=ev.decode_ops, warnings=ev.warnings, assumptions=ev.assumptions,
        **{k: getattr(ev, k) for k in METRIC_FIELDS})


def predict_request(model, gpu, *, weights: str = "bf16", kv: str | None = None,
                    activations: str | None = None, engine: str = "vllm", batch: int = 1,
                    prompt: int = 512, output: int = 128, context: int | None = None,
                    new_tokens: int = 1, tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1,
                    attention: str | None = None, profile: str | Path | None = None,
                    hardware_dir: str | None = None) -> RequestEstimate:
    """Predict one configuration: evaluate(Query(...)) as a RequestEstimate. Raises
    PerfModelError on bad input; never returns NaN."""
    q = make_query(model=model, gpu=gpu, weights=weights, kv=kv, activations=activations,
                   engine=engine, batch=batch, prompt_tokens=prompt, output_tokens=output,
                   context_tokens=context, new_tokens=new_tokens, tp=tp, pp=pp, ep=ep, dp=dp,
                   attention=attention, profile=profile, hardware_dir=hardware_dir)
    return request_estimate(evaluate(q))


def memory_of(query: Query) -> MemoryEstimate:
    """Per-GPU memory of the query's batch holding context_tokens (default: the prompt)
    per sequence."""
    sc, _, _ = resolve(query)
    if query.context > sc.model.max_context:
        raise PerfModelError(f"context {query.context} exceeds the {sc.model.max_context}-token "
                             f"context of {sc.model.id}")
    return estimate_memory(sc.model, sc.hw, sc.precision, batch=query.batch,
                           context=query.context, engine=sc.engine, dep=sc.dep)


def memory(model, gpu, *, weights: str = "bf16", kv: str | None = None, batch: int = 1,
           context: int = 4096, tp: int = 1, pp: int = 1, engine: str = "vllm",
           hardware_dir: str | None = None, ep: int = 1, dp: int = 1) -> MemoryEstimate:
    """Memory of one configuration per GPU (a positive context: tokens held per sequence).
    Under attention DP (dp groups of tp GPUs, experts over ep of the tp x dp GPUs) `batch`
    is the whole deployment's, spread over the dp groups."""
    if isinstance(context, (int, np.integer)) and not isinstance(context, bool) and context == 0:
        raise PerfModelError("context must be a positive integer, got 0")
    q = make_query(model=model, gpu=gpu, weights=weights, kv=kv, batch=batch,
                   context_tokens=context, tp=tp, pp=pp, ep=ep, dp=dp, engine=engine,
                   hardware_dir=hardware_dir)
    return memory_of(q)


# --------------------------------------------------------------------------- serving simulation


_UNSET = object()      # serve(): lengths not given (1024 each in the older call)


def serve(query: Query | str | object = None, gpu=None, *, concurrencies=None, rate_rps=None,
          timeline: bool = False, prompt_tokens: int | None | object = _UNSET,
          output_tokens: int | None | object = _UNSET, replay: Replay | None = None,
          **fields) -> ServeReport:
    """Simulate a serving benchmark of a Query: closed loop at each of `concurrencies`, open
    loop at each of `rate_rps`, or the Query's own level (concurrency, rate_rps or trace: CSV
    path or (arrival_s, prompt, output) rows, or a bench-endpoint record's path: a point per
    measured level, serving/trace_record.py), or `replay`, a record already read
    (serving.trace_record.replay_of); with a record, a given prompt_tokens is the prompt of
    its requests that have no usage count. Also accepts the older call
    serve(model, gpu, prompt_tokens=..., output_tokens=..., trace=..., ...), whose keywords
    are the Query's field names. max_num_seqs / max_num_batched_tokens override the
    engine's scheduler limits (as the engines' flags of those names do). Raises
    PerfModelError on bad input; a level that cannot run says why (fits=False)."""
    if query is None:
        query = fields.pop("model", None)
    if isinstance(query, Query):
        if gpu is not None or fields or prompt_tokens is not _UNSET or output_tokens is not _UNSET:
            raise PerfModelError("serve(query) takes the levels only; put the rest (lengths "
                                 "included) in the Query")
        q = query
    else:
        traced = fields.get("trace") is not None or replay is not None   # lengths from the trace
        prompt_tokens = (None if traced else 1024) if prompt_tokens is _UNSET else prompt_tokens
        output_tokens = (None if traced else 1024) if output_tokens is _UNSET else output_tokens
        if not traced and (prompt_tokens is None or output_tokens is None):
            raise PerfModelError("prompt_tokens and output_tokens are required without a trace")
        lengths = {k: v for k, v in (("prompt_tokens", prompt_tokens),
                                     ("output_tokens", output_tokens)) if v is not None}
        q = make_query(model=query, gpu=gpu, **lengths, **fields)
    sc, warnings, assumptions = resolve(q)
    return serve_report(q, sc, warnings, assumptions, concurrencies=concurrencies,
                        rate_rps=rate_rps, timeline=timeline, replay=replay)
