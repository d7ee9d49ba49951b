"""The prefill cost a closed loop's measured TPOT implies: a diagnostic that does not depend on
how synchronized the loop is.

In a closed loop of C requests (each new request sent the moment one finishes), a request
decodes its O - 1 tokens while the other C - 1 requests each pass through about one prefill
(every request is replaced once per request lifetime). A step that carries a prompt chunk
beside the decode rows costs about the decode step plus the chunk's own cost, so over its
decode a request sees about (C - 1) prefills' worth of extra time:

    TPOT ~= D(C) + (C - 1) * P_eff / (O - 1)
    =>  P_eff = (TPOT - D(C)) * (O - 1) / (C - 1)

D(C) is the model's decode step at batch C over the run's mean context (the model's decode is
good: aggregated TPOT median error about 10%), so P_eff is a measured prefill cost, per
prompt, however the prompts were spread over steps (in waves or one by one). Two ratios then
separate the prefill's physics from the loop's dynamics:
- P_eff / P_model: the measured prefill against the model's single-prompt prefill
  (core.predict: B=1, T = the mean prompt). Above 1: the model's prefill is too cheap.
- Q = TTFT / prefill: how many prefills a request waits on average before its first token,
  measured (TTFT_meas / P_eff) beside simulated (TTFT_pred / P_model). A Q that differs while
  P_eff / P_model is about 1 points at the simulator's queueing (how synchronized the loop
  is), not at the cost of a prefill.
The simulator's own TPOT gives the method's check: P_eff(sim) = (TPOT_pred - D) (O - 1) /
(C - 1) should come out near P_model when the simulator runs the same loop.

Assumptions: each request sees about C - 1 other prefills during its decode (steady closed
loop, O well above 1; the first wave's prefills are not all seen, a small bias at low C);
a prefill chunked over several steps costs what its tokens cost (chunks counted by their
tokens); a step's decode part costs D(C) whether or not a chunk rides along. Rows where the
measured TPOT is not above D(C), or where the memory model cannot hold C requests at their
mean full context (a KV pool that overflows preempts requests: other dynamics), are skipped
with their reason. Lengths are the means of each row's recipe (serving_recipe.py: uniform in
[ceil(r L), L] as serving/workload.py draws them).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import median
from typing import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.memory import estimate_memory
from perfmodel.core.predict import request_times
from perfmodel.serving import stepcost
from perfmodel.analysis.validation.serving_map import ServingTarget, map_serving_rows
from perfmodel.analysis.validation.serving_table import ServingMeasurement

MIN_CONCURRENCY = 8
"""Below this the (C - 1) other prefills are few and the first wave's weigh too much."""


def mean_length(length: int, ratio: float) -> float:
    """Mean of the integers uniform in [max(1, ceil(r L)), L] (serving/workload._lengths);
    L at r = 1."""
    if ratio >= 1.0:
        return float(length)
    return (max(1, math.ceil(ratio * length)) + length) / 2.0


def implied_prefill_s(tpot_s: float, decode_step_s: float, output_tokens: float,
                      concurrency: int) -> float:
    """P_eff = (TPOT - D) * (O - 1) / (C - 1)  (module docstring)."""
    if not (concurrency >= 2 and 1 < output_tokens < math.inf):
        raise PerfModelError(f"an implied prefill needs C >= 2 and a finite O > 1 (got "
                             f"C={concurrency}, O={output_tokens:g})")
    if not (math.inf > tpot_s > decode_step_s > 0):
        raise PerfModelError(f"TPOT {tpot_s:.4g} s is not above the decode step "
                             f"{decode_step_s:.4g} s: no prefill cost to read")
    return ((tpot_s - decode_step_s)       # the prefills' share of each decode step
            * (output_tokens - 1)          # summed over a request's decode steps
            / (concurrency - 1))           # shared by the other requests' prefills


class ImpliedRow(BaseModel):
    """One aggregated row's implied prefill beside the model's."""

    model_config = ConfigDict(frozen=True)
    row_id: str
    family: str = Field(description="The row's harness (serving_recipe.family).")
    model: str
    engine: str
    moe: bool
    gpu: str
    parallel: str = Field(description="tp, pp, ep and attention dp, e.g. 'tp4 pp1 ep4 dp1'.")
    weights: str
    prompt_tokens: int = Field(description="ISL as written (the group key).")
    prompt_mean: float = Field(gt=0, description="Mean prompt under the row's recipe.")
    output_mean: float = Field(gt=0, description="Mean output under the row's recipe.")
    concurrency: int = Field(ge=2)
    decode_step_s: float = Field(gt=0, description="D(C): model decode step, mean context.")
    prefill_model_s: float = Field(gt=0, description="P_model: one prompt alone.")
    prefill_implied_s: float | None = Field(
        default=None, gt=0, description="P_eff from the measured TPOT; None where the measured "
        "TPOT is not above D (no per-row reading; the level still enters the fit).")
    measured_ttft_s: float = Field(gt=0)
    measured_tpot_s: float = Field(gt=0)
    predicted_ttft_s: float | None = Field(default=None, description="From a validation JSON.")
    predicted_tpot_s: float | None = Field(default=None, description="From a validation JSON.")

    @property
    def readable(self) -> bool:
        """The measured TPOT is above D: P_eff can be read from this row alone."""
        return self.prefill_implied_s is not None

    @property
    def ratio(self) -> float | None:
        """P_eff / P_model."""
        return self.prefill_implied_s / self.prefill_model_s if self.readable else None

    @property
    def share(self) -> float:
        """(TPOT_meas - D) / TPOT_meas: the prefills' share of the measured TPOT. P_eff moves
        by (D's relative error) / share: a small share reads a noisy P_eff."""
        return 1.0 - self.decode_step_s / self.measured_tpot_s

    @property
    def prefill_implied_sim_s(self) -> float | None:
        """P_eff(sim): the same estimator on the simulated TPOT; None without a prediction
        or where the simulated TPOT is not above D."""
        if self.predicted_tpot_s is None or self.predicted_tpot_s <= self.decode_step_s:
            return None
        return implied_prefill_s(self.predicted_tpot_s, self.decode_step_s, self.output_mean,
                                 self.concurrency)

    @property
    def sim_ratio(self) -> float | None:
        """P_eff(sim) / P_model."""
        p = self.prefill_implied_sim_s
        return None if p is None else p / self.prefill_model_s

    @property
    def cost_factor(self) -> float | None:
        """P_eff(sim) / P_eff: the simulated prefill cost against the measured one."""
        p = self.prefill_implied_sim_s
        return None if p is None or not self.readable else p / self.prefill_implied_s

    @property
    def q_measured(self) -> float | None:
        """Q_meas = TTFT_meas / P_eff: prefills waited, measured."""
        return self.measured_ttft_s / self.prefill_implied_s if self.readable else None

    @property
    def q_simulated(self) -> float | None:
        """Q_sim = TTFT_pred / P_eff(sim): prefills waited, simulated."""
        p = self.prefill_implied_sim_s
        return None if p is None or self.predicted_ttft_s is None else self.predicted_ttft_s / p

    @property
    def queue_factor(self) -> float | None:
        """Q_sim / Q_meas. TTFT_pred / TTFT_meas = cost_factor x queue_factor, exactly."""
        q = self.q_simulated
        return None if q is None or not self.readable else q / self.q_measured

    @property
    def ttft_ratio(self) -> float | None:
        """TTFT_pred / TTFT_meas."""
        return None if self.predicted_ttft_s is None else \
            self.predicted_ttft_s / self.measured_ttft_s


class Skipped(BaseModel):
    model_config = ConfigDict(frozen=True)
    row_id: str
    reason: str


def _scenario(t: ServingTarget, specs):
    """The row's resolved scenario with its recipe's engine flags, as the sim predictor
    builds it (serving_predict.simulated)."""
    from perfmodel import api   # noqa: PLC0415
    from perfmodel.analysis.validation.serving_predict import _with_recipe   # noqa: PLC0415
    q = api.make_query(model=specs.model(t.model), gpu=specs.gpu(t.gpu), weights=t.weights,
                       kv=t.kv, activations=t.activations, engine=t.engine, tp=t.tp, pp=t.pp,
                       ep=t.ep, dp=t.attention_dp, prompt_tokens=t.prompt,
                       output_tokens=t.output, range_ratio=t.recipe.range_ratio)
    sc, _, _ = api.resolve(q)
    return _with_recipe(sc, t.recipe)


def _model_times(sc, C: int, prompt: float, output: float) -> tuple[float, float, bool]:
    """(D(C): the simulator's decode-only step at C rows over contexts prompt+1 .. prompt+O-1,
    mean over the steps (serving/stepcost.py); P_model: one prompt alone (core.predict);
    whether C requests fit at their mean full context)."""
    k = max(int(round(output)) - 1, 1)
    table = stepcost.build(sc, max_rows=C, max_seqs=C, max_chunk=int(math.ceil(prompt)),
                           max_context=int(math.ceil(prompt + output)))
    D = float(np.mean(table.decode_run_s(C, prompt + 1.0, k)))
    P = float(request_times(sc, 1.0, prompt, output).prefill_s)
    mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=C,
                          context=int(math.ceil(prompt + output)), engine=sc.engine,
                          dep=sc.dep, attention=sc.attention)
    return D, P, bool(mem.fits)


def _one(t: ServingTarget, sc, predicted: dict) -> ImpliedRow:
    r = t.measurement
    prompt = mean_length(t.prompt, t.recipe.range_ratio)
    output = mean_length(t.output, t.recipe.range_ratio)
    D, P, fits = _model_times(sc, t.concurrency, prompt, output)
    if not fits:
        raise PerfModelError(f"the KV pool cannot hold C={t.concurrency} requests at "
                             f"{prompt + output:.0f} tokens")
    p_eff = implied_prefill_s(r.tpot_s, D, output, t.concurrency) if r.tpot_s > D else None
    ttft, tpot = predicted.get(r.get("id"), (None, None))
    return ImpliedRow(row_id=r.get("id"), family=t.recipe.family, model=t.model,
                      engine=t.engine,
                      parallel=f"tp{t.tp} pp{t.pp} ep{t.ep} dp{t.attention_dp}", moe=t.moe,
                      gpu=t.gpu, weights=t.weights, prompt_tokens=t.prompt, prompt_mean=prompt,
                      output_mean=output, concurrency=t.concurrency, decode_step_s=D,
                      prefill_model_s=P, prefill_implied_s=p_eff, measured_ttft_s=r.ttft_s,
                      measured_tpot_s=r.tpot_s,
                      predicted_ttft_s=ttft, predicted_tpot_s=tpot)


def implied_rows(rows: Iterable[ServingMeasurement], predicted: dict | None = None,
                 min_concurrency: int = MIN_CONCURRENCY) -> tuple[list[ImpliedRow], list[Skipped]]:
    """The aggregated rows at C >= min_concurrency with their implied prefill (None where
    the measured TPOT is not above D); rows whose KV pool overflows or that the model refuses
    are skipped with their reason. `predicted`: row id -> (TTFT_pred s,
    TPOT_pred s) (load_predictions)."""
    from perfmodel.analysis.validation.serving_predict import _Specs   # noqa: PLC0415
    predicted = predicted or {}
    targets, _ = map_serving_rows(list(rows))
    specs, scenarios = _Specs(), {}
    out: list[ImpliedRow] = []
    skipped: list[Skipped] = []
    for t in targets:
        rid = t.measurement.get("id")
        if t.prefill or t.decode or t.concurrency < min_concurrency:
            continue
        try:
            key = t.config()
            if key not in scenarios:
                scenarios[key] = _scenario(t, specs)
            out.append(_one(t, scenarios[key], predicted))
        except PerfModelError as exc:
            skipped.append(Skipped(row_id=rid, reason=str(exc)))
    return out, skipped


def load_predictions(path: str | Path) -> dict[str, tuple[float, float]]:
    """Row id -> (predicted TTFT s, predicted TPOT s) from `perfmodel validate --json`."""
    try:
        rows = json.loads(Path(path).read_text())["serving"]["rows"]
        return {r["row_id"]: (float(r["predicted_ttft_s"]), float(r["predicted_tpot_s"]))
                for r in rows if r.get("predicted_ttft_s") and r.get("predicted_tpot_s")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PerfModelError(f"{path}: not a `perfmodel validate --json` result ({exc})") from exc


class ImpliedGroup(BaseModel):
    """Medians over the rows sharing a key (the factors over the rows that have them)."""

    model_config = ConfigDict(frozen=True)
    key: tuple
    n: int
    prefill_model_s: float = Field(description="median P_model")
    share: float = Field(description="median (TPOT_meas - D) / TPOT_meas")
    ratio: float = Field(description="median P_eff / P_model")
    sim_ratio: float | None = Field(description="median P_eff(sim) / P_model")
    cost_factor: float | None = Field(description="median P_eff(sim) / P_eff")
    q_measured: float = Field(description="median Q_meas = TTFT_meas / P_eff")
    q_simulated: float | None = Field(description="median Q_sim = TTFT_pred / P_eff(sim)")
    queue_factor: float | None = Field(description="median Q_sim / Q_meas")
    ttft_ratio: float | None = Field(description="median TTFT_pred / TTFT_meas")


GROUP_STATS = ("share", "ratio", "sim_ratio", "cost_factor", "q_measured", "q_simulated",
               "queue_factor", "ttft_ratio")


def _med(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return median(xs) if xs else None


def group(rows: list[ImpliedRow], fields: tuple[str, ...]) -> list[ImpliedGroup]:
    """Medians per value of the given ImpliedRow fields over the readable rows, sorted by key."""
    by: dict[tuple, list[ImpliedRow]] = {}
    for r in (r for r in rows if r.readable):
        by.setdefault(tuple(getattr(r, f) for f in fields), []).append(r)
    return [ImpliedGroup(key=k, n=len(g), prefill_model_s=median(r.prefill_model_s for r in g),
                         **{f: _med(getattr(r, f) for r in g) for f in GROUP_STATS})
            for k, g in sorted(by.items(), key=lambda kv: tuple(map(str, kv[0])))]


MIN_FIT_LEVELS = 3
"""Concurrency levels a configuration needs for the two-factor fit (two unknowns + one)."""


class ConfigFit(BaseModel):
    """One configuration's levels fitted as TPOT(C) = a D(C) + b (C - 1) P_model / (O - 1):
    a scales the model's decode step, b is P_eff / P_model. D grows slowly with C and the
    prefill term linearly, so the levels separate them: a uniform error of the decode step
    lands in a instead of in b (least squares on relative residuals)."""

    model_config = ConfigDict(frozen=True)
    row: ImpliedRow = Field(description="The configuration's first row (its key fields).")
    levels: int
    decode_scale: float = Field(description="a (measured)")
    ratio: float = Field(description="b = P_eff / P_model (measured)")
    decode_scale_sim: float | None = Field(default=None, description="a (simulated)")
    ratio_sim: float | None = Field(default=None, description="b (simulated)")
    q_measured: float = Field(description="median over the levels of TTFT_meas / (b P_model)")
    q_simulated: float | None = Field(default=None, description="median over the levels of "
                                      "TTFT_pred / (b_sim P_model)")
    ttft_ratio: float | None = Field(default=None, description="median TTFT_pred / TTFT_meas")

    @property
    def cost_factor(self) -> float | None:
        """b_sim / b: the simulated prefill cost against the measured one."""
        return None if self.ratio_sim is None else self.ratio_sim / self.ratio

    @property
    def queue_factor(self) -> float | None:
        """Q_sim / Q_meas; TTFT_pred / TTFT_meas = cost_factor x queue_factor per level."""
        return None if self.q_simulated is None else self.q_simulated / self.q_measured


def _fit(rows: list[ImpliedRow], tpots: list[float]) -> tuple[float, float] | None:
    t = np.asarray(tpots, dtype=float)
    A = np.stack([[r.decode_step_s for r in rows],
                  [(r.concurrency - 1) * r.prefill_model_s / (r.output_mean - 1) for r in rows]],
                 axis=1) / t[:, None]
    (a, b), *_ = np.linalg.lstsq(A, np.ones(len(rows)), rcond=None)
    return (float(a), float(b)) if a > 0 and b > 0 and np.isfinite([a, b]).all() else None


def fit_configs(rows: list[ImpliedRow]) -> list[ConfigFit]:
    """The two-factor fit of every configuration with MIN_FIT_LEVELS levels or more whose
    factors come out positive (ConfigFit); the simulated factors where every level has a
    prediction."""
    by: dict[tuple, list[ImpliedRow]] = {}
    for r in rows:
        key = r.model_dump(include={"family", "model", "engine", "gpu", "parallel", "weights",
                                    "prompt_tokens", "output_mean"})
        by.setdefault(tuple(sorted(key.items())), []).append(r)
    out = []
    for g in by.values():
        if len({r.concurrency for r in g}) < MIN_FIT_LEVELS:
            continue
        got = _fit(g, [r.measured_tpot_s for r in g])
        if got is None:
            continue
        sim = None
        if all(r.predicted_tpot_s and r.predicted_ttft_s for r in g):
            sim = _fit(g, [r.predicted_tpot_s for r in g])
        q_sim = None if sim is None else \
            median(r.predicted_ttft_s / (sim[1] * r.prefill_model_s) for r in g)
        out.append(ConfigFit(row=g[0], levels=len(g), decode_scale=got[0], ratio=got[1],
                             decode_scale_sim=sim[0] if sim else None,
                             ratio_sim=sim[1] if sim else None, q_simulated=q_sim,
                             q_measured=median(r.measured_ttft_s / (got[1] * r.prefill_model_s)
                                               for r in g),
                             ttft_ratio=_med(r.ttft_ratio for r in g)))
    return out


class FitGroup(BaseModel):
    """Medians of the two-factor fits over the configurations sharing a key."""

    model_config = ConfigDict(frozen=True)
    key: tuple
    configs: int
    decode_scale: float
    ratio: float
    decode_scale_sim: float | None
    ratio_sim: float | None
    cost_factor: float | None = Field(description="median b_sim / b")
    q_measured: float
    q_simulated: float | None
    queue_factor: float | None = Field(description="median Q_sim / Q_meas")
    ttft_ratio: float | None = Field(description="median TTFT_pred / TTFT_meas")


def group_fits(fits: list[ConfigFit], fields: tuple[str, ...]) -> list[FitGroup]:
    """Medians per value of the given ImpliedRow fields (of each fit's first row)."""
    by: dict[tuple, list[ConfigFit]] = {}
    for f in fits:
        by.setdefault(tuple(getattr(f.row, k) for k in fields), []).append(f)
    return [FitGroup(key=k, configs=len(g), decode_scale=median(f.decode_scale for f in g),
                     ratio=median(f.ratio for f in g),
                     decode_scale_sim=_med(f.decode_scale_sim for f in g),
                     ratio_sim=_med(f.ratio_sim for f in g),
                     cost_factor=_med(f.cost_factor for f in g),
                     q_measured=median(f.q_measured for f in g),
                     q_simulated=_med(f.q_simulated for f in g),
                     queue_factor=_med(f.queue_factor for f in g),
                     ttft_ratio=_med(f.ttft_ratio for f in g))
            for k, g in sorted(by.items(), key=lambda kv: tuple(map(str, kv[0])))]
