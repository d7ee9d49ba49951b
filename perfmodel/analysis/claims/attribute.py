"""Attribute the ratio between two scenarios to the levers that differ.

Factor convention: a factor > 1 is an improvement. For metrics where higher is better
(tok/s) factor = improved / baseline; where lower is better (TTFT, TPOT, E2E, $/Mtok)
factor = baseline / improved, so a speed-up is > 1 either way.

Ordered factors: the levers are applied one at a time in a stated order; each factor is
the ratio across its step, so they multiply to the total exactly (a telescoping product).
Shapley factors: levers interact (quantization gains shrink at large batch), so each
lever's log-factor is also averaged over all orders (Shapley 1953):
    phi_i = sum over S not containing i of |S|! (n-|S|-1)! / n! * (g(S+i) - g(S)),
with g(S) the log of the oriented metric with the levers in S applied. The phi sum to
g(all) - g(none) = log(total), so exp(phi) multiply to the total exactly. Exact over the
2^n subsets for n <= EXACT_SHAPLEY_MAX (each subset evaluated once, cached); beyond that,
the average over random orders, drawn in antithetic pairs (an order and its reverse), as many
as MAX_EVALUATIONS scenario evaluations allow (at most SHAPLEY_PERMUTATIONS; each order's steps
still sum to log(total), so the product is still exact). The work is bounded: levers x orders
<= MAX_EVALUATIONS + one ordered pass, whatever the scenarios.
System vs output: the Shapley factors of the levers that change what the user gets
(levers.OUTPUT_LEVERS: a smaller model, routing to one) multiply to output_factor, the
others to system_factor (system x output = total); a caveat says how much of the total
comes from serving another model.
"""

from __future__ import annotations

import math
import random
from itertools import combinations

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.claims.inverse import ASSUMPTIONS, Inverse, solve
from perfmodel.analysis.claims.levers import (LEVER_NAMES, OUTPUT_CAVEAT, OUTPUT_LEVERS, apply,
                                             describe, differing, lever)
from perfmodel.analysis.claims.metrics import Evaluation, evaluate_filled
from perfmodel.analysis.claims.scenario import (Scenario, check_definitions, direction_note, fill,
                                        metric_info, oriented)
from perfmodel.core.errors import PerfModelError

MAX_EVALUATIONS = 64
"""Budget of distinct scenario evaluations for the Shapley factors (each costs 10-40 ms on a
busy 2-core machine, so an attribution stays within a few seconds; an assumption)."""
EXACT_SHAPLEY_MAX = 6     # 2**6 subsets = MAX_EVALUATIONS
CLAIM_TOLERANCE = 0.25    # a claimed factor is supported when the model gives >= claim / 1.25
SHAPLEY_PERMUTATIONS = 256
SHAPLEY_SEED = 0


class Step(BaseModel):
    """One lever applied in the stated order."""

    model_config = ConfigDict(frozen=True)
    lever: str
    factor: float = Field(description="Oriented ratio across this step (> 1: better).")
    regime_before: str
    regime_after: str
    value_before: float
    value_after: float
    change: str = Field(description="The fields this lever changes.")
    changes_output: bool = Field(default=False, description="The lever changes what the user "
                                 "gets (another model answers), not the system's speed.")


class Attribution(BaseModel):
    """The ratio between two scenarios on one metric, split over levers."""

    model_config = ConfigDict(frozen=True)
    metric: str
    unit: str
    higher_is_better: bool
    direction: str
    baseline: str
    improved: str
    baseline_value: float
    improved_value: float
    total: float = Field(description="Oriented ratio improved vs baseline (> 1: better).")
    factors: list[Step]
    shapley: dict[str, float]
    shapley_method: str
    evaluations: int
    combinations: list = Field(default_factory=list)
    verdict: str
    claim: float | None = Field(default=None, description="A claimed factor for this pair.")
    system_factor: float = Field(default=1.0, description="Shapley share of the system levers "
                                 "(everything but levers.OUTPUT_LEVERS): the speed-up of the "
                                 "same model.")
    output_factor: float = Field(default=1.0, description="Shapley share of the levers that "
                                 "change the model served (system x output = total).")
    caveats: list[str] = Field(default_factory=list)
    inverse: list[Inverse] = Field(default_factory=list)
    assumptions: list[str]
    warnings: list[str]


class _Values:
    """Evaluations of lever subsets applied to the baseline, cached by subset."""

    def __init__(self, a: Scenario, b: Scenario, levers: list[str], metric: str):
        self.a, self.b, self.levers, self.metric = a, b, levers, metric
        self.cache: dict[frozenset, Evaluation] = {}
        self.warnings: list[str] = []

    def get(self, subset) -> Evaluation:
        key = frozenset(subset)
        if key not in self.cache:
            endpoint = len(key) in (0, len(self.levers))
            names = [n for n in self.levers if n in key]
            if endpoint:
                sc = self.b if key else self.a
            else:
                sc = apply(self.a, self.b, names)
                sc = sc.model_copy(update={"name": f"{self.a.label} + {', '.join(names)}"})
            try:
                ev = evaluate_filled(sc, strict=endpoint)
            except PerfModelError as exc:
                if endpoint:
                    raise
                raise PerfModelError(f"the intermediate scenario baseline + {sorted(key)} is "
                                     f"invalid: {exc}") from None
            self.cache[key] = ev
            self.warnings += ev.warnings
            ev.value(self.metric)  # raises when the metric cannot be produced
        return self.cache[key]

    def g(self, subset) -> float:
        v = self.get(subset).value(self.metric)
        return math.log(v) if metric_info(self.metric)[1] else -math.log(v)


def attribute(baseline: Scenario, improved: Scenario, metric: str, *,
              order: list[str] | None = None) -> Attribution:
    """Total ratio, ordered factors, Shapley factors and regimes (see module docstring)."""
    check_definitions(metric, baseline, improved)
    a, notes_a = fill(baseline)
    b, notes_b = fill(improved)
    levers = differing(a, b)
    seq = _order(levers, order)
    vals = _Values(a, b, seq, metric)
    steps, applied = [], []
    for name in seq:
        before = vals.get(applied)
        applied = applied + [name]
        after = vals.get(applied)
        steps.append(Step(lever=name, factor=math.exp(vals.g(applied) - vals.g(applied[:-1])),
                          regime_before=before.regimes[metric], regime_after=after.regimes[metric],
                          value_before=before.value(metric), value_after=after.value(metric),
                          change=describe(a, b, name), changes_output=name in OUTPUT_LEVERS))
    phi, method = _shapley(vals, seq)
    base_ev, imp_ev = vals.get([]), vals.get(seq)
    total = oriented(metric, imp_ev.value(metric), base_ev.value(metric))
    unit, higher, _ = metric_info(metric)
    warnings = list(dict.fromkeys(vals.warnings))
    if "workload" in levers:
        warnings.append("the scenarios differ in workload (" + describe(a, b, "workload")
                        + "): part of the ratio is a change of task, not a speed-up")
    shap = {n: math.exp(phi[n]) for n in seq}
    output = math.prod(v for n, v in shap.items() if n in OUTPUT_LEVERS)
    system = math.prod(v for n, v in shap.items() if n not in OUTPUT_LEVERS)
    caveats = []
    if any(n in OUTPUT_LEVERS for n in seq):
        caveats.append(f"{output:.3g}x of the {total:.3g}x comes from serving another model "
                       f"({', '.join(n for n in seq if n in OUTPUT_LEVERS)}); the system "
                       f"optimizations give {system:.3g}x for the same model: {OUTPUT_CAVEAT}")
    return Attribution(
        system_factor=system, output_factor=output, caveats=caveats,
        metric=metric, unit=unit, higher_is_better=higher, direction=direction_note(metric),
        baseline=a.label, improved=b.label, baseline_value=base_ev.value(metric),
        improved_value=imp_ev.value(metric), total=total, factors=steps,
        shapley=shap, shapley_method=method,
        evaluations=len(vals.cache), verdict="no claim given: the model's ratio",
        assumptions=list(dict.fromkeys(notes_a + notes_b + base_ev.assumptions
                                       + imp_ev.assumptions)),
        warnings=warnings)


def _order(levers: list[str], order: list[str] | None) -> list[str]:
    """The stated order (unknown names refused), then any remaining levers in LEVERS order."""
    if order is None:
        return list(levers)
    for n in order:
        lever(n)
    twice = sorted({n for n in order if order.count(n) > 1})
    if twice:   # a lever applied twice would enter the Shapley subsets as two players
        raise PerfModelError(f"order names a lever more than once: {', '.join(twice)}")
    extra = [n for n in order if n not in levers]
    if extra:
        raise PerfModelError(f"order names levers that do not differ: {', '.join(extra)} "
                             f"(differing: {', '.join(levers) or 'none'})")
    return [n for n in order] + [n for n in LEVER_NAMES if n in levers and n not in order]


def _shapley(vals: _Values, levers: list[str]) -> tuple[dict[str, float], str]:
    """phi_i in log space: exact over subsets, or averaged over random orders."""
    n = len(levers)
    if n == 0:
        return {}, "exact (no levers)"
    if n <= EXACT_SHAPLEY_MAX:
        weight = [math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n)
                  for s in range(n)]
        phi = {}
        for i in levers:
            others = [x for x in levers if x != i]
            phi[i] = sum(weight[s] * (vals.g(set(S) | {i}) - vals.g(S))
                         for s in range(n) for S in combinations(others, s))
        return phi, f"exact over {2 ** n} subsets"
    rng = random.Random(SHAPLEY_SEED)
    phi = dict.fromkeys(levers, 0.0)
    budget = len(vals.cache) + MAX_EVALUATIONS
    orders = 0
    while orders < SHAPLEY_PERMUTATIONS and (orders < 2 or len(vals.cache) + 2 * (n - 1) <= budget):
        perm = list(levers)
        rng.shuffle(perm)
        for p in (perm, perm[::-1]):          # antithetic pair: lower variance per evaluation
            done: list[str] = []
            for i in p:
                phi[i] += vals.g(done + [i]) - vals.g(done)
                done.append(i)
            orders += 1
    return ({k: v / orders for k, v in phi.items()},
            f"mean over {orders} random orders (seed {SHAPLEY_SEED}, antithetic pairs; "
            f"{len(vals.cache)} evaluations)")


def check_pair(claim: float, metric: str, baseline: Scenario, improved: Scenario, *,
               solve_for: tuple[str, ...] = ASSUMPTIONS, order: list[str] | None = None
               ) -> Attribution:
    """A claimed factor for a stated pair: the attribution, a verdict (supported when the
    model's total is at least claim / (1 + CLAIM_TOLERANCE)) and, for each free assumption,
    the value on the improved side that would make the claim true."""
    att = attribute(baseline, improved, metric, order=order)
    need = claim / (1.0 + CLAIM_TOLERANCE)
    ok = att.total >= need
    verdict = (f"{'supported' if ok else 'not supported'}: the model gives {att.total:.3g}x "
               f"for this pair, the claim is {claim:.3g}x (tolerance {CLAIM_TOLERANCE:.0%})")
    if ok and att.system_factor < need:
        verdict = (f"supported only by changing the model: the model gives {att.total:.3g}x "
                   f"for this pair, of which the system optimizations give "
                   f"{att.system_factor:.3g}x; the claim is {claim:.3g}x")
    inv = [solve(claim, metric, baseline, improved, assumption=a) for a in solve_for]
    return att.model_copy(update={"verdict": verdict, "claim": claim, "inverse": inv})
