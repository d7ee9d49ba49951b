"""Predict mapped serving rows, one call per configuration, with a pluggable predictor.

A predictor takes one configuration (everything but the concurrency: ServingTarget.config)
and the concurrencies measured for it, and returns a PredictedPoint per concurrency. Rows
sharing a configuration are predicted by one call (a curve is vectorized over concurrency),
so validating thousands of rows costs a few hundred calls.

Predictors:
- "steady": perfmodel.serving.curve.serve_curve, the steady-state formulas (one new prompt at
  a time among C running requests). Deterministic: its value is compared with the measured
  mean as is.
- "sim": the step-level simulator (api.serve, perfmodel/serving/simulate.py) when this checkout
  has it: a closed-loop benchmark at each concurrency. Its mean TTFT/TPOT are compared when it
  reports means, else its p50 (the report says which).
A predictor's `statistic` says which of its outputs is compared with the measured means.
`perfmodel validate` uses the steady-state formulas unless told otherwise (default_predictor,
for speed); `--write-docs` uses the simulator when present (docs_predictor).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.catalog import load_model
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.profile import Profile
from perfmodel.analysis.validation.serving_map import Capabilities, ServingTarget
from perfmodel.analysis.validation.serving_recipe import Recipe


class PredictedPoint(BaseModel):
    """The predicted latencies of one configuration at one concurrency."""

    model_config = ConfigDict(frozen=True)
    ttft_s: float = Field(gt=0)
    tpot_s: float = Field(gt=0)
    fits: bool = Field(description="The memory model holds this concurrency.")


PredictFn = Callable[..., dict[int, "PredictedPoint | str"]]   # str: why not at that level


@dataclass(frozen=True)
class Predictor:
    name: str
    description: str
    statistic: str          # what is compared with the measured means
    capabilities: Capabilities
    fn: PredictFn


class _Specs:
    """Catalog and hardware_db look-ups memoized for one validation pass."""

    def __init__(self) -> None:
        self._models: dict = {}
        self._gpus: dict = {}

    def model(self, mid: str):
        if mid not in self._models:
            self._models[mid] = load_model(mid)
        return self._models[mid]

    def gpu(self, gid: str):
        if gid not in self._gpus:
            self._gpus[gid] = load_gpu(gid)
        return self._gpus[gid]


def _check(value: float, what: str) -> float:
    if not (value > 0 and value != float("inf")):   # also rejects NaN
        raise ArithmeticError(f"non-finite or non-positive predicted {what}: {value!r}")
    return value


def steady_state(t: ServingTarget, concurrencies: list[int], profile: Profile | None,
                 specs: _Specs) -> dict[int, PredictedPoint]:
    """serve_curve at the measured concurrencies (perfmodel/serving/curve.py)."""
    from perfmodel.serving.curve import serve_curve   # noqa: PLC0415 - serving layer
    extra = _dp_kwarg(serve_curve, t)
    cv = serve_curve(specs.model(t.model), specs.gpu(t.gpu), weights=t.weights, kv=t.kv,
                     activations=t.activations, engine=t.engine, tp=t.tp, pp=t.pp, ep=t.ep,
                     prompt=t.prompt, output=t.output, concurrencies=concurrencies,
                     profile=profile, **extra)
    return {p.concurrency: PredictedPoint(ttft_s=_check(p.ttft_s, "TTFT"),
                                          tpot_s=_check(p.tpot_s, "TPOT"), fits=p.fits)
            for p in cv.points}


def _sim_stat(fields) -> str:
    """'mean' when the simulator reports means (what the file measured), else 'p50'."""
    return "mean" if {"ttft_mean_s", "tpot_mean_s"} <= set(fields) else "p50"


def simulated(t: ServingTarget, concurrencies: list[int], profile: Profile | None,
              specs: _Specs) -> dict[int, PredictedPoint | str]:
    """The step-level simulator (perfmodel/serving/simulate.py, as api.serve runs it), closed
    loop at the measured concurrencies; a level it cannot run gives its reason. 10 x C
    requests, the first C at t=0 (AIConfigurator's closed-loop oracle: n_mult=10,
    tools/queueing_oracle/validate_formula.py; InferenceMAX: --num-prompts 10 x C), with the
    lengths and engine flags of the row's harness (t.recipe, serving_recipe.py)."""
    from perfmodel import api   # noqa: PLC0415
    from perfmodel.serving.report import serve_report   # noqa: PLC0415
    if t.prefill and t.decode:
        return _simulated_disagg(t, concurrencies, profile, specs)
    # the expert parallelism the script launched, where it differs from the row's (a recipe
    # fact like the others the simulator replays: serving_recipe_sglang.INFERENCEX_SGLANG_NO_EP)
    ep = t.ep if t.recipe.expert_parallel is None or not t.moe else t.recipe.expert_parallel
    # likewise its attention data parallelism: the same tp x dp GPUs, regrouped
    # (serving_recipe_vllm.INFERENCEX_VLLM_TP_ONLY_SCRIPTS)
    dp = t.attention_dp if t.recipe.attention_dp is None else t.recipe.attention_dp
    tp = t.tp * t.attention_dp // dp
    q = api.make_query(model=specs.model(t.model), gpu=specs.gpu(t.gpu), weights=t.weights,
                       kv=t.kv, activations=t.activations, engine=t.engine, tp=tp, pp=t.pp,
                       ep=ep, dp=dp, profile=profile, prompt_tokens=t.prompt,
                       output_tokens=t.output, range_ratio=t.recipe.range_ratio)
    sc, warnings, assumptions = api.resolve(q)
    rep = serve_report(q, _with_recipe(sc, t.recipe), warnings, assumptions,
                       concurrencies=concurrencies)
    return _points(rep)


def _with_recipe(sc, recipe: Recipe):
    """The scenario with the scheduler flags the row's deployment set (serving_recipe.py)."""
    from perfmodel.serving.simulate import on_server, with_scheduler   # noqa: PLC0415
    sc = on_server(sc)
    budget = recipe.max_num_batched_tokens
    if recipe.max_prefill_tokens is not None:   # SGLang: capped by the chunk size on this GPU
        chunk = sc.engine.scheduler.limits(sc.hw, sc.dep.pp)[1]
        budget = recipe.max_prefill_tokens if chunk is None else min(recipe.max_prefill_tokens, chunk)
    out = with_scheduler(sc, max_num_batched_tokens=budget,
                         recv_interval_steps=recipe.recv_interval_steps,
                         chunked_prefill=recipe.chunked_prefill)
    upd = {k: v for k, v in (("mixed_prefill", recipe.mixed_prefill),
                             ("batch_wait_timeout_iters", recipe.batch_wait_timeout_iters),
                             ("batch_wait_max_tokens_ratio", recipe.batch_wait_max_tokens_ratio),
                             ("adp_balance_timeout_iters", recipe.adp_balance_timeout_iters),
                             ("overlap_scheduler", recipe.overlap_scheduler))
           if v is not None}
    if recipe.radix_cache is False:   # SGLang's no_buffer rule needs the radix cache on
        upd["overlap_off_linear_attention"] = False
    if upd:
        sched = out.engine.scheduler.model_copy(update=upd)
        out = replace(out, engine=out.engine.model_copy(update={"scheduler": sched}))
    eng = {}
    if recipe.kv_memory_fraction is not None:
        eng["kv_memory_fraction"] = recipe.kv_memory_fraction
    if recipe.prefill_attention is not None:   # an old vLLM's prompt kernels (serving_versions.py)
        eng["prefill_attention"] = recipe.prefill_attention
    if recipe.fp32_matmul is not None:   # the script's VLLM_FLOAT32_MATMUL_PRECISION
        eng["fp32_matmul"] = recipe.fp32_matmul
    if recipe.decode_graph_max_batch is not None:
        eng.update(decode_graph_max_batch=recipe.decode_graph_max_batch,
                   decode_graph_max_batch_by_gpu=())
    if recipe.prefill_graph_max_tokens is not None:   # vLLM --max-cudagraph-capture-size
        eng["prefill_graph_max_tokens"] = recipe.prefill_graph_max_tokens
    return replace(out, engine=out.engine.model_copy(update=eng)) if eng else out


DISAGG_SIM_MAX_CONCURRENCY = 16384
"""A bound on validation work, not a judgement of the rows: a disaggregated level is a
closed loop of 10 x C requests through both pools, iterated to a fixed point; above
BUNDLE_ABOVE_CONCURRENCY its requests are simulated in bundles (serving/disagg_bundle.py),
so a level costs about what a level at that concurrency does, but it still builds 10 x C
requests.
Levels above this bound (none in the default data: its largest is 12288) are listed
unpredicted with BOUND_REASON."""
BOUND_REASON = (f"disaggregated level above concurrency {DISAGG_SIM_MAX_CONCURRENCY} not "
                "simulated (a bound on validation work: the closed loop of 10 x C requests "
                "through both pools)")


def _simulated_disagg(t: ServingTarget, concurrencies, profile, specs):
    """api.serve_disagg: the prefill and decode pools of a disaggregated row, at the levels up
    to DISAGG_SIM_MAX_CONCURRENCY (the rest get BOUND_REASON)."""
    from perfmodel import api   # noqa: PLC0415
    out: dict[int, PredictedPoint | str] = {c: BOUND_REASON for c in concurrencies
                                            if c > DISAGG_SIM_MAX_CONCURRENCY}
    run = [c for c in concurrencies if c <= DISAGG_SIM_MAX_CONCURRENCY]
    if run:
        rep = api.serve_disagg(specs.model(t.model), specs.gpu(t.gpu), prefill=t.prefill,
                               decode=t.decode, weights=t.weights, kv=t.kv,
                               activations=t.activations, engine=t.engine, profile=profile,
                               prompt_tokens=t.prompt, output_tokens=t.output,
                               concurrencies=run, range_ratio=t.recipe.range_ratio,
                               recv_interval_steps=t.recipe.recv_interval_steps)
        out.update(_points(rep))
    return out


def _points(rep) -> dict[int, PredictedPoint | str]:
    out: dict[int, PredictedPoint | str] = {}
    for p in rep.points:
        stat = _sim_stat(type(p).model_fields)
        ttft, tpot = getattr(p, f"ttft_{stat}_s"), getattr(p, f"tpot_{stat}_s")
        if ttft is None or tpot is None or not (ttft > 0 and tpot > 0):
            out[p.concurrency] = f"the simulator gives no TTFT/TPOT: {p.reason or 'no reason'}"
            continue
        out[p.concurrency] = PredictedPoint(ttft_s=_check(ttft, "TTFT"),
                                            tpot_s=_check(tpot, "TPOT"), fits=p.fits)
    return out


DP_KEYWORDS = ("dp", "attention_dp")   # how a predictor may spell attention data parallelism


def _dp_keyword(fn) -> str | None:
    params = inspect.signature(fn).parameters
    return next((k for k in DP_KEYWORDS if k in params), None)


def _dp_kwarg(fn, t: ServingTarget) -> dict:
    """{dp keyword: attention DP} when the row needs it (mapping only lets such rows through
    when the predictor takes the keyword)."""
    key = _dp_keyword(fn)
    return {key: t.attention_dp} if key and t.attention_dp > 1 else {}


def predictors() -> dict[str, Predictor]:
    """Every predictor available in this checkout, by name."""
    from perfmodel.serving.curve import serve_curve   # noqa: PLC0415
    out = {"steady": Predictor(
        name="steady", description="steady-state serve_curve (perfmodel/serving/curve.py)",
        statistic="steady-state value (deterministic)",
        capabilities=Capabilities(attention_dp=_dp_keyword(serve_curve) is not None),
        fn=steady_state)}
    try:
        from perfmodel import api   # noqa: PLC0415
        from perfmodel.serving.simulate import ServePoint   # noqa: PLC0415
    except ImportError:
        return out
    if hasattr(api, "serve"):
        stat = _sim_stat(ServePoint.model_fields)
        out["sim"] = Predictor(
            name="sim", description="step-level simulator (perfmodel/serving/simulate.py)",
            statistic=f"simulated {stat} over the run's requests",
            capabilities=Capabilities(attention_dp=True,   # Query.dp
                                      disagg=hasattr(api, "serve_disagg")),
            fn=simulated)
    return out


def default_predictor() -> str:
    """The steady-state formulas: a quick estimate that keeps `perfmodel validate` within a
    few seconds. The simulator costs a few tenths of a second per configuration, minutes
    over the file's hundreds of configurations; it is what the docs report (docs_predictor)."""
    return "steady"


def docs_predictor() -> str:
    """What docs/accuracy.md reports: the simulator when this checkout has it."""
    return "sim" if "sim" in predictors() else "steady"


def get_predictor(name: str | None) -> Predictor:
    avail = predictors()
    key = default_predictor() if name is None else name
    if key not in avail:
        raise PerfModelError(f"unknown serving predictor {name!r}; available: {', '.join(avail)}")
    return avail[key]


def predict_targets(targets: list[ServingTarget], predictor: Predictor,
                    profile: Profile | None = None):
    """(per-target PredictedPoint or None, per-target reason or None), in input order.
    Rows whose configuration the model refuses get the refusal as their reason."""
    specs = _Specs()
    groups: dict[tuple, list[int]] = {}
    for i, t in enumerate(targets):
        groups.setdefault(t.config(), []).append(i)
    points: list[PredictedPoint | None] = [None] * len(targets)
    reasons: list[str | None] = [None] * len(targets)
    for idx in groups.values():
        first = targets[idx[0]]
        concs = sorted({targets[i].concurrency for i in idx})
        try:
            got = predictor.fn(first, concs, profile, specs)
        except PerfModelError as exc:
            for i in idx:
                reasons[i] = f"the model refuses: {exc}"
            continue
        for i in idx:
            g = got.get(targets[i].concurrency, "no prediction at this concurrency")
            if isinstance(g, str):
                reasons[i] = g
            else:
                points[i] = g
    return points, reasons
