"""Inverse solving: for one free assumption, the value that makes a claim true, or the
statement that no value in its range does.

Free assumptions and their ranges:
- acceptance: per-token acceptance alpha of speculative decoding, [0, 0.99] (the improved
  side gets the scenario's speculative settings, or a draft model as levers.py picks one);
- batch: sequences decoded together (or concurrency), 1 .. the largest that fits;
- weight_bits: the weight format, among 16, 8 and 4 bits (fp4 where the chip has it);
- mem_bw_utilization: achieved share of peak memory bandwidth, [0.05, 1].
The claim factor is oriented (> 1 is better; see attribute.py). Continuous assumptions are
solved by bisection, which assumes the factor is monotone in the assumption over the range
(true of these four in the time model); the batch by bisection on integers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.analysis.claims.levers import default_speculative
from perfmodel.analysis.claims.metrics import evaluate_filled
from perfmodel.analysis.claims.scenario import Scenario, fill, hardware, oriented, revise
from perfmodel.core.errors import PerfModelError
from perfmodel.core.specs import parse_format

ASSUMPTIONS = ("acceptance", "batch", "weight_bits", "mem_bw_utilization")
ACCEPTANCE_RANGE = (0.0, 0.99)
MEM_BW_RANGE = (0.05, 1.0)
MAX_BATCH = 4096
BISECTIONS = 40


class Inverse(BaseModel):
    """The value of one assumption that makes a claim true (None: no value does)."""

    model_config = ConfigDict(frozen=True)
    assumption: str
    side: str
    value: float | None
    factor: float | None
    statement: str


def solve(claim: float, metric: str, baseline: Scenario, improved: Scenario | None = None, *,
          assumption: str = "acceptance", side: str = "improved") -> Inverse:
    """The value of `assumption` on `side` ('improved' or 'baseline') with factor = claim."""
    if assumption not in ASSUMPTIONS:
        raise PerfModelError(f"unknown assumption {assumption!r}; use one of {', '.join(ASSUMPTIONS)}")
    if side not in ("improved", "baseline"):
        raise PerfModelError("side must be 'improved' or 'baseline'")
    a, _ = fill(baseline)
    b, _ = fill(improved if improved is not None else baseline)
    free = b if side == "improved" else a
    if assumption == "acceptance" and free.speculative is None:
        spec = default_speculative(free)
        if spec is None:
            return Inverse(assumption=assumption, side=side, value=None, factor=None,
                           statement="no speculative decoding possible on this scenario")
        free, _ = fill(revise(free, speculative=spec))
    ref = evaluate_filled(b if side == "baseline" else a).value(metric)

    def factor(x) -> float | None:
        try:
            ev = evaluate_filled(_set(free, assumption, x))
        except PerfModelError:
            return None
        if not ev.fits:
            return None
        v = ev.value(metric)
        return oriented(metric, v, ref) if side == "improved" else oriented(metric, ref, v)

    if assumption == "weight_bits":
        return _discrete(free, factor, claim, side)
    if assumption == "batch":
        return _batch(free, factor, claim, side)
    lo, hi = ACCEPTANCE_RANGE if assumption == "acceptance" else MEM_BW_RANGE
    return _bisect(assumption, side, factor, claim, lo, hi)


def _set(f: Scenario, assumption: str, x) -> Scenario:
    if assumption == "acceptance":
        return revise(f, speculative=dict(f.speculative.model_dump(), acceptance=float(x)))
    if assumption == "mem_bw_utilization":
        return revise(f, mem_bw_utilization=float(x))
    if assumption == "batch":
        key = "concurrency" if f.concurrency is not None else "batch"
        return revise(f, **{key: int(x)})
    act = x if x in ("fp8", "fp4") else ("bf16" if f.activations in ("fp8", "fp4") else f.activations)
    return revise(f, weights=x, activations=act)


def _bisect(name: str, side: str, factor, claim: float, lo: float, hi: float) -> Inverse:
    f_lo, f_hi = factor(lo), factor(hi)
    if f_lo is None or f_hi is None:
        return Inverse(assumption=name, side=side, value=None, factor=None,
                       statement=f"{name} cannot be varied over [{lo}, {hi}] on this scenario")
    rising = f_hi >= f_lo
    best = max(f_lo, f_hi)
    if best < claim:
        at = hi if rising else lo
        return Inverse(assumption=name, side=side, value=None, factor=best,
                       statement=f"no {name} in [{lo}, {hi}] reaches {claim:.3g}x: at most "
                                 f"{best:.3g}x (at {at})")
    if min(f_lo, f_hi) >= claim:
        at = lo if rising else hi
        return Inverse(assumption=name, side=side, value=at, factor=min(f_lo, f_hi),
                       statement=f"every {name} in [{lo}, {hi}] reaches {claim:.3g}x")
    a, b = lo, hi   # factor(a) < claim <= factor(b) when rising
    if not rising:
        a, b = hi, lo
    for _ in range(BISECTIONS):
        mid = 0.5 * (a + b)
        fm = factor(mid)
        if fm is not None and fm >= claim:
            b = mid
        else:
            a = mid
    op = ">=" if rising else "<="
    return Inverse(assumption=name, side=side, value=b, factor=factor(b),
                   statement=f"{name} {op} {b:.3g} on the {side} side makes the claim "
                             f"{claim:.3g}x true")


def _discrete(f: Scenario, factor, claim: float, side: str) -> Inverse:
    hw = hardware(f.gpu)
    formats = ["bf16" if hw.has("bf16") else "fp16", "fp8" if hw.has("fp8") else "int8", "int4"]
    if hw.has("fp4"):
        formats.append("fp4")
    results = [(fmt, factor(fmt)) for fmt in formats]
    ok = [(fmt, v) for fmt, v in results if v is not None and v >= claim]
    shown = ", ".join(f"{fmt} {v:.3g}x" if v is not None else f"{fmt} n/a" for fmt, v in results)
    if not ok:
        return Inverse(assumption="weight_bits", side=side, value=None,
                       factor=max((v for _, v in results if v is not None), default=None),
                       statement=f"no weight format reaches {claim:.3g}x ({shown})")
    fmt, v = ok[0]
    return Inverse(assumption="weight_bits", side=side, value=parse_format(fmt).bits, factor=v,
                   statement=f"weights in {fmt} or narrower reach {claim:.3g}x ({shown})")


def _batch(f: Scenario, factor, claim: float, side: str) -> Inverse:
    """Integer bisection between 1 and the largest batch that fits."""
    ev = evaluate_filled(f)
    top = max(1, min(ev.max_batch, MAX_BATCH))
    f1, ft = factor(1), factor(top)
    if f1 is None or ft is None:
        return Inverse(assumption="batch", side=side, value=None, factor=None,
                       statement="batch cannot be varied on this scenario")
    rising = ft >= f1
    if max(f1, ft) < claim:
        return Inverse(assumption="batch", side=side, value=None, factor=max(f1, ft),
                       statement=f"no batch in [1, {top}] (the largest that fits) reaches "
                                 f"{claim:.3g}x: at most {max(f1, ft):.3g}x")
    lo, hi = (1, top) if rising else (top, 1)
    if factor(lo) >= claim:
        hi = lo
    while abs(hi - lo) > 1:
        mid = (lo + hi) // 2
        if factor(mid) >= claim:
            hi = mid
        else:
            lo = mid
    op = ">=" if rising else "<="
    return Inverse(assumption="batch", side=side, value=float(hi), factor=factor(hi),
                   statement=f"batch {op} {hi} on the {side} side makes the claim {claim:.3g}x true "
                             f"(largest that fits: {top})")
