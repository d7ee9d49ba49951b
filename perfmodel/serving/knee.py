"""The knee of a latency-throughput curve: one rule, one Knee, for predicted curves
(serving.curve, the web Sweep page) and measured ones (analysis.endpoint).

Rule (KNEE_RULE): over the points in ascending concurrency, the knee is the first C_i after
which going to C_{i+1}

    gain = (tok/s(C_{i+1}) / tok/s(C_i)) ** (1 / log2(C_{i+1} / C_i))  <  1 + min_gain
    and  E2E(C_{i+1}) > E2E(C_i)

i.e. aggregate output throughput grows less than `min_gain` per doubling of concurrency
while requests get slower: past C_i extra concurrency mostly buys queueing. The gain is
normalised per doubling so grids 1,2,4,8 and 1,4,16 (or a last step to a limit of 100) are
judged alike. A next point with no successful request counts as "no gain, slower". When
every step still scales, the knee is the concurrency limit if the curve reaches a known
limit (a prediction knows its memory/engine limit), and otherwise not reached (None).
"""

from __future__ import annotations

import math
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError

KNEE_MIN_GAIN = 0.10   # assumption: a doubling of concurrency must add >= 10 % throughput to pay
KNEE_RULE = ("knee: the first concurrency C after which doubling C raises aggregate output "
             "tok/s by less than 10% (normalised per doubling) while E2E latency grows; if "
             "throughput keeps rising the knee is the concurrency limit (memory or engine) "
             "when the curve reaches it, otherwise not reached")


class KneePoint(BaseModel):
    """One point of a curve as the knee rule reads it (measured: p50 latencies)."""

    model_config = ConfigDict(frozen=True)
    concurrency: int
    output_tok_s_total: float = Field(description="All users' output tokens per second.")
    e2e_s: float | None = Field(description="E2E latency (p50 when measured); None: no success.")
    ttft_s: float | None = None
    tpot_s: float | None = None
    ok: bool = Field(default=True, description="At least one request succeeded.")


class Knee(BaseModel):
    """Where adding concurrency stops paying (see KNEE_RULE)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    concurrency: int | None = Field(description="The knee; None: not reached or nothing fits.")
    min_gain_per_doubling: float = KNEE_MIN_GAIN
    reason: str
    output_tok_s_total: float | None = Field(default=None, description="Throughput at the knee.")
    e2e_s: float | None = Field(default=None, description="E2E latency at the knee.")
    ttft_s: float | None = Field(default=None, description="TTFT at the knee (predictions).")
    tpot_s: float | None = Field(default=None, description="TPOT at the knee (predictions).")
    rule: str = KNEE_RULE


def _at(p: KneePoint, reason: str, min_gain: float) -> Knee:
    return Knee(concurrency=p.concurrency, min_gain_per_doubling=min_gain, reason=reason,
                output_tok_s_total=p.output_tok_s_total, e2e_s=p.e2e_s, ttft_s=p.ttft_s,
                tpot_s=p.tpot_s)


def _gain_per_doubling(a: KneePoint, b: KneePoint) -> float:
    ratio = b.output_tok_s_total / a.output_tok_s_total
    # in logs so close concurrencies (1000 -> 1001) cannot overflow
    log_gain = math.log(ratio) / math.log2(b.concurrency / a.concurrency) if ratio > 0 else -math.inf
    return math.exp(min(log_gain, 700.0))


def find_knee(points: Sequence[KneePoint], min_gain: float = KNEE_MIN_GAIN, *,
              limit: int | None = None, limited_by: str = "limit") -> Knee:
    """The knee by KNEE_RULE. `limit`: the largest concurrency the deployment holds, when
    known (predictions); `limited_by` names what sets it. Concurrencies must be distinct
    positive integers (PerfModelError otherwise)."""
    pts = sorted(points, key=lambda p: p.concurrency)
    cs = [p.concurrency for p in pts]
    if any(c <= 0 for c in cs) or len(set(cs)) != len(cs):
        raise PerfModelError(f"find_knee needs distinct positive integer concurrencies, got {cs}")
    for a, b in zip(pts, pts[1:]):
        if a.output_tok_s_total <= 0 or a.e2e_s is None or not a.ok:
            continue
        if not b.ok or b.e2e_s is None:
            return _at(a, f"no request succeeded at concurrency {b.concurrency}", min_gain)
        gain = _gain_per_doubling(a, b)
        if gain < 1.0 + min_gain and b.e2e_s > a.e2e_s:
            return _at(a, f"diminishing returns: {a.concurrency}->{b.concurrency}: output tok/s "
                          f"x{gain:.3f} per doubling (< {1 + min_gain:.2f}) while E2E grew "
                          f"x{b.e2e_s / a.e2e_s:.3f}", min_gain)
    usable = [p for p in pts if p.ok and p.output_tok_s_total > 0 and p.e2e_s is not None]
    if limit is not None and usable and usable[-1].concurrency >= limit:
        return _at(usable[-1], limited_by, min_gain)
    if not usable:
        reason = "nothing fits" if limit is not None else "fewer than two levels with successful requests"
    elif len(usable) < 2 and limit is None:
        reason = "fewer than two levels with successful requests"
    else:
        reason = (f"end of grid: throughput still grows by at least {min_gain:.0%} per doubling, "
                  "or latency does not grow, at every step")
    return Knee(concurrency=None, min_gain_per_doubling=min_gain, reason=reason)
