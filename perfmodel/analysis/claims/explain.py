"""Explain a claimed factor: the lever combinations that reach it, each lever kept within
its plausible range (levers.py), ranked by how far they must be stretched; a verdict; the
physical limit; and the single assumptions that would make the claim true (inverse.py).

Search. Each lever's candidate moves are evaluated alone; those that help the metric are
kept. For every subset of helpful levers (up to max_levers) and every stretch level s, each
lever takes its most helpful move with stretch <= s; the subset is evaluated at increasing
s until the claim is reached. A combination's stretch is the largest stretch among its
moves. Batch moves are cut to the largest batch that fits; other combinations that do not
fit in memory are dropped. Combinations whose levers include a smaller one that reaches the
claim at no larger stretch are dropped (dominated).

Weak baselines. A combination that moves away from a weak baseline setting (an eager
runtime, no KV cache, fp32 weights) is "plausible only with a weak baseline". If the stated
baseline is not weak, it may still have been measured weaker than it reads: the reference
is then weakened (levers.weakenings) and the factor becomes F(moves) x G(weakening).

Verdict: "plausible" (a combination of system levers within range, no weak baseline);
"plausible only with a weak baseline"; "plausible only by changing the model" (every
combination within range serves another model: a smaller one, or routing to one, changes
what the user gets, levers.OUTPUT_LEVERS; never called plausible on that alone); "beyond
physics" (the claimed value exceeds the roofline limit on the baseline's GPUs and model,
physics.py); otherwise "implausible" (only stretched levers).
"""

from __future__ import annotations

import math
import re
from itertools import combinations

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.claims import physics
from perfmodel.analysis.claims.attribute import Step, attribute
from perfmodel.analysis.claims.inverse import ASSUMPTIONS, Inverse, solve
from perfmodel.analysis.claims.levers import (OUTPUT_CAVEAT, OUTPUT_LEVERS, Move, apply_moves,
                                             layout_notes, moves, weakenings)
from perfmodel.analysis.claims.metrics import Evaluation, evaluate_filled
from perfmodel.analysis.claims.scenario import (Scenario, check_definitions, direction_note, fill,
                                        metric_info, oriented, revise)
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import MILLION

MAX_LEVERS = 5            # largest combination searched by default
MAX_SEARCH_LEVERS = 8     # largest combination one may ask for
TOP = 12                  # combinations reported
HELPS = 1.005             # a move helps when its factor alone exceeds this
MAX_CLAIM = MILLION       # a claimed factor beyond a million-fold is refused as input
MAX_SEARCH_EVALUATIONS = 240
"""Distinct scenarios the combination search may evaluate (10-40 ms each on a busy 2-core
machine: a few seconds); smaller combinations are searched first, so a search cut short
drops only the largest ones, and says so in the warnings. An assumption."""
PLAUSIBLE, WEAK, STRETCHED = "plausible", "plausible only with a weak baseline", "stretched"
MODEL_SWAP = "plausible only by changing the model"
BEYOND, IMPLAUSIBLE = "beyond physics", "implausible"


class Combination(BaseModel):
    """Levers at given settings that reach the claimed factor."""

    model_config = ConfigDict(frozen=True)
    levers: list[str]
    moves: list[str]
    factor: float = Field(description="Oriented factor against the baseline (weakened by "
                          "baseline_changes when there are any).")
    stretch: float = Field(description="Largest stretch of its moves (1.0: edge of range).")
    verdict: str
    weak_baseline: list[str] = Field(description="Weak baseline settings it relies on.")
    changes: dict = Field(description="Scenario fields the combination sets on the baseline.")
    baseline_changes: dict = Field(
        default_factory=dict, description="Fields a weakened reference sets on the baseline.")
    changes_output: list[str] = Field(
        default_factory=list, description="Its levers that change what the user gets (another "
        "model answers): not system optimizations (levers.OUTPUT_CAVEAT).")


class Explanation(BaseModel):
    """A claim checked against one baseline on one metric."""

    model_config = ConfigDict(frozen=True)
    metric: str
    unit: str
    higher_is_better: bool
    direction: str
    claim: float
    total: float = Field(description="The claimed factor.")
    baseline: str
    baseline_value: float
    claimed_value: float
    combinations: list[Combination]
    verdict: str
    reason: str
    physics: physics.Physics
    inverse: list[Inverse]
    factors: list[Step] = Field(description="Ordered factors of the top combination.")
    shapley: dict[str, float] = Field(description="Shapley factors of the top combination.")
    evaluations: int
    assumptions: list[str]
    warnings: list[str]
    lever_notes: list[str] = Field(
        default_factory=list, description="One line per lever that cannot keep the baseline's "
        "layout as it is, or whose moves could not be evaluated on it (with the first reason).")


def parse_claim(claim) -> float:
    """'14x', '14', '2.5×', '50%' (= 1.5x: 50% better) -> an oriented factor > 1."""
    if isinstance(claim, bool):
        raise PerfModelError(f"claim {claim!r} is not a number")
    if isinstance(claim, (int, float)):
        value = float(claim)
    else:
        m = re.fullmatch(r"\s*\+?([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(x|×|%)?\s*",
                         str(claim), flags=re.IGNORECASE)
        if not m:
            raise PerfModelError(f"claim {claim!r} is not a factor like '14x', '2.5' or '50%'")
        value = float(m.group(1))
        if m.group(2) == "%":
            value = 1.0 + value / 100.0
    if not math.isfinite(value) or value > MAX_CLAIM:
        raise PerfModelError(f"claim {claim!r} is not a finite factor up to {MAX_CLAIM:g}x")
    if value <= 1.0:   # 1x is the baseline itself: nothing to check
        raise PerfModelError(f"claim {claim!r} is {'no change' if value == 1.0 else 'below 1'}: "
                             "a speed-up claim is a factor > 1 (for latency and cost, "
                             "baseline / improved)")
    return value


class _Search:
    def __init__(self, f0: Scenario, metric: str):
        self.f0, self.metric = f0, metric
        self.cache: dict[tuple, Evaluation | None] = {}
        self.failed: dict[str, list[str]] = {}   # lever -> "move: why" of single moves that raised
        self.errors: dict[str, str] = {}
        self.base = evaluate_filled(f0).value(metric)
        self.truncated = False

    def over_budget(self) -> bool:
        self.truncated = self.truncated or len(self.cache) >= MAX_SEARCH_EVALUATIONS
        return self.truncated

    def evaluate(self, chosen: tuple[Move, ...]) -> tuple[float | None, tuple[Move, ...]]:
        key = tuple(sorted(m.label for m in chosen))
        if key not in self.cache:
            if self.over_budget():
                return None, chosen
            self.cache[key] = self._eval(chosen)
        ev = self.cache[key]
        if ev is None and len(chosen) == 1 and chosen[0].label in self.errors:
            self.failed.setdefault(chosen[0].lever, []).append(
                f"{chosen[0].label}: {self.errors.pop(chosen[0].label)}")
        if ev is not None and not ev.fits and any(m.lever == "batching" for m in chosen):
            chosen = self._cut_batch(chosen, ev.max_batch)
            if chosen is None:
                return None, ()
            return self.evaluate(chosen)
        if ev is None or not ev.fits:
            return None, chosen
        return oriented(self.metric, ev.value(self.metric), self.base), chosen

    def _eval(self, chosen) -> Evaluation | None:
        try:
            sc, _ = fill(apply_moves(self.f0, chosen))
            ev = evaluate_filled(sc)
            ev.value(self.metric)
        except PerfModelError as exc:
            if len(chosen) == 1:
                self.errors[chosen[0].label] = str(exc)
            return None
        return ev

    def skipped(self) -> list[str]:
        """One line per lever some of whose moves could not be evaluated at all."""
        return [f"{lever}: {len(why)} move(s) not evaluated on this baseline ({why[0]})"
                for lever, why in self.failed.items()]

    def _cut_batch(self, chosen, max_batch: int):
        out = []
        for m in chosen:
            if m.lever == "batching":
                key = "concurrency" if self.f0.concurrency is not None else "batch"
                if key not in m.changes or max_batch <= self.f0.width:
                    return None
                m = Move("batching", dict(m.changes, **{key: max_batch}), m.stretch,
                         f"{key} {self.f0.width} -> {max_batch} (largest that fits), continuous")
            out.append(m)
        return tuple(out)


def explain(claim, metric: str, baseline: Scenario, *, max_levers: int = MAX_LEVERS,
            top: int = TOP, inverse: bool = True) -> Explanation:
    """Combinations, verdict, physical limit and inverse solutions for a claimed factor."""
    factor = parse_claim(claim)
    check_definitions(metric, baseline)
    if isinstance(max_levers, bool) or not isinstance(max_levers, int) \
            or not 1 <= max_levers <= MAX_SEARCH_LEVERS:
        raise PerfModelError(f"max_levers must be an integer in 1..{MAX_SEARCH_LEVERS}, "
                             f"got {max_levers!r}")
    f0, notes = fill(baseline)
    s = _Search(f0, metric)
    unit, higher, _ = metric_info(metric)
    claimed_value = s.base * factor if higher else s.base / factor
    weak_refs = _weak_refs(s, f0, metric)
    g_best = max([ref[0] for ref in weak_refs if ref[1] <= 1.0] + [1.0])
    combos = _search(s, metric, factor, g_best, int(max_levers), weak_refs)
    phys = physics.limit(f0, metric, claimed_value)
    verdict, reason = _verdict(combos, phys, factor)
    shown = combos[:top]
    steps, shap = [], {}
    if shown:
        best = next((c for c in shown if not c[0].weak_baseline and not c[0].changes_output),
                    next((c for c in shown if not c[0].weak_baseline), shown[0]))
        steps, shap = _decompose(f0, best[1], metric)
    inv = [solve(factor, metric, f0, assumption=a) for a in ASSUMPTIONS] if inverse else []
    if inverse:
        inv.append(solve(factor, metric, f0, assumption="mem_bw_utilization", side="baseline"))
    base_ev = evaluate_filled(f0)
    return Explanation(
        metric=metric, unit=unit, higher_is_better=higher, direction=direction_note(metric),
        claim=factor, total=factor, baseline=f0.label, baseline_value=s.base,
        claimed_value=claimed_value, combinations=[c for c, _ in shown], verdict=verdict,
        reason=reason, physics=phys, inverse=inv, factors=steps, shapley=shap,
        evaluations=len(s.cache), assumptions=notes + base_ev.assumptions,
        lever_notes=layout_notes(f0) + s.skipped(),
        warnings=base_ev.warnings + ([f"the combination search stopped at "
                                      f"{MAX_SEARCH_EVALUATIONS} evaluated scenarios: larger "
                                      "combinations were not all tried"] if s.truncated else []))


def _weak_refs(s: _Search, f0: Scenario, metric: str) -> list[tuple]:
    """(G, stretch, labels, changes) for each weakening of the stated baseline, alone and
    together; G = how much better the stated baseline is than the weakened one."""
    ws = weakenings(f0, metric)
    out = []
    for k in range(1, len(ws) + 1):
        for group in combinations(ws, k):
            try:
                sc, _ = fill(apply_moves(f0, group))
                v = evaluate_filled(sc, strict=False).value(metric)
            except PerfModelError:
                continue
            out.append((oriented(metric, s.base, v), max(m.stretch for m in group),
                        [m.label for m in group], _merged(group)))
    return out


def _search(s: _Search, metric: str, claim: float, g_best: float, max_levers: int,
            weak_refs) -> list[tuple[Combination, tuple[Move, ...]]]:
    helpful = _helpful(s, metric)
    threshold = claim / g_best
    found: list[tuple[Combination, tuple[Move, ...]]] = []
    names = list(helpful)
    for k in range(1, min(max_levers, len(names)) + 1):
        for subset in combinations(names, k):
            levels = sorted({mv.stretch for n in subset for mv, _ in helpful[n]})
            fac, _ = s.evaluate(_pick(helpful, subset, levels[-1]))
            if fac is None or fac < threshold:
                continue            # not even at full stretch
            for level in levels:
                chosen = _pick(helpful, subset, level)
                if chosen is None:
                    continue
                fac, used = s.evaluate(chosen)
                if fac is None or fac < threshold:
                    continue
                combo = _classify(used, fac, claim, weak_refs)
                if combo is not None:
                    found.append((combo, used))
                if fac >= claim:
                    break
    return _rank(found)


def _helpful(s: _Search, metric: str) -> dict[str, list[tuple[Move, float]]]:
    """Moves that help alone, or on top of the best single move (a lever can only pay off
    once another one lifts a bound: quantization does nothing while the CPU is the limit)."""
    alone = [(mv, s.evaluate((mv,))[0]) for mv in moves(s.f0, metric)]
    alone = [(mv, fac) for mv, fac in alone if fac is not None]
    best = max(alone, key=lambda x: x[1], default=(None, 1.0))
    out: dict[str, list[tuple[Move, float]]] = {}
    for mv, fac in alone:
        gain = fac
        if best[0] is not None and mv.lever != best[0].lever and best[1] > HELPS:
            both, _ = s.evaluate((best[0], mv))
            if both is not None:
                gain = max(gain, both / best[1])
        if gain > HELPS:
            out.setdefault(mv.lever, []).append((mv, gain))
    return out


def _pick(helpful, subset, level) -> tuple[Move, ...] | None:
    chosen = []
    for n in subset:
        ok = [(mv, fac) for mv, fac in helpful[n] if mv.stretch <= level + 1e-9]
        if not ok:
            return None
        chosen.append(max(ok, key=lambda x: x[1])[0])
    return tuple(chosen)


def _merged(moves_) -> dict:
    out: dict = {}
    for m in moves_:
        out.update(m.changes)
    return out


def _classify(used, fac: float, claim: float, weak_refs) -> Combination | None:
    stretch = max(m.stretch for m in used)
    weak = [m.label for m in used if m.weak_fix]
    ref_changes: dict = {}
    if fac < claim:
        options = [(max(st, stretch), labels, g, ch) for g, st, labels, ch in weak_refs
                   if fac * g >= claim]
        if not options:
            return None
        stretch, labels, g, ref_changes = min(options, key=lambda x: (x[0], len(x[1])))
        weak = weak + labels
        fac = fac * g
    output = sorted({m.lever for m in used if m.lever in OUTPUT_LEVERS})
    verdict = (STRETCHED if stretch > 1.0 + 1e-9 else MODEL_SWAP if output
               else WEAK if weak else PLAUSIBLE)
    return Combination(levers=sorted({m.lever for m in used}), moves=[m.label for m in used],
                       factor=fac, stretch=stretch, verdict=verdict, weak_baseline=weak,
                       changes=_merged(used), baseline_changes=ref_changes,
                       changes_output=output)


def _rank(found):
    """Drop dominated combinations; order by verdict, stretch, size, then factor."""
    order = {PLAUSIBLE: 0, WEAK: 1, MODEL_SWAP: 2, STRETCHED: 3}
    found = sorted(found, key=lambda x: (order[x[0].verdict], x[0].stretch, len(x[0].levers),
                                         -x[0].factor))
    kept: list = []
    seen: set = set()
    for c, used in found:
        twin = (len(c.levers), round(c.factor, 9), round(c.stretch, 9), c.verdict)
        if twin in seen:    # the same result by another route (e.g. W8A16 vs W8A8)
            continue
        seen.add(twin)
        if any(set(k.levers) <= set(c.levers) and k.stretch <= c.stretch + 1e-9
               and order[k.verdict] <= order[c.verdict] for k, _ in kept):
            continue
        kept.append((c, used))
    return kept


def _verdict(combos, phys: physics.Physics, claim: float) -> tuple[str, str]:
    verdicts = [c.verdict for c, _ in combos]
    note = (f"; on the baseline's own GPUs and model it is out of reach, so the combination "
            f"must change the model or the hardware ({phys.statement})") if phys.beyond else ""
    if PLAUSIBLE in verdicts:
        c = next(c for c, _ in combos if c.verdict == PLAUSIBLE)
        return PLAUSIBLE, f"{claim:.3g}x is reached by {' + '.join(c.moves)}{note}"
    if WEAK in verdicts:
        c = next(c for c, _ in combos if c.verdict == WEAK)
        return WEAK, (f"{claim:.3g}x needs a weak baseline ({'; '.join(c.weak_baseline)}) "
                      f"with {' + '.join(c.moves)}{note}")
    if MODEL_SWAP in verdicts:
        c = next(c for c, _ in combos if c.verdict == MODEL_SWAP)
        return MODEL_SWAP, (f"no system optimization within range reaches {claim:.3g}x; "
                            f"{' + '.join(c.moves)} does, by serving another model "
                            f"({', '.join(c.changes_output)}): {OUTPUT_CAVEAT}{note}")
    if phys.beyond:
        return BEYOND, phys.statement
    if combos:
        c = combos[0][0]
        return IMPLAUSIBLE, (f"only levers stretched beyond their plausible ranges reach "
                             f"{claim:.3g}x (best: {' + '.join(c.moves)}, stretch {c.stretch:.2g})")
    return IMPLAUSIBLE, f"no combination of levers reaches {claim:.3g}x"


def _decompose(f0: Scenario, used, metric: str) -> tuple[list[Step], dict[str, float]]:
    """Ordered and Shapley factors of one combination against the stated baseline."""
    target, _ = fill(apply_moves(f0, used))
    try:
        att = attribute(f0, revise(target, name=f"{f0.label} + combination"), metric)
    except PerfModelError:
        return [], {}
    return att.factors, att.shapley
