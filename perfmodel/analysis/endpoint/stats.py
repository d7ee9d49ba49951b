"""Per-request measurements, their summary per concurrency level, and the knee of the curve.

Metric definitions (DESIGN.md):
  TTFT  request sent -> first non-empty content chunk.
  E2E   request sent -> last byte of the stream.
  TPOT  (E2E - TTFT) / (output tokens - 1), per request; undefined for 1 output token.
  ITL   gap between consecutive non-empty content chunks (pooled over a level's requests).
  output tok/s  successful requests' output tokens / level wall time.
  requests/s    successful requests / level wall time.
Level wall time runs from the first request sent to the last request finished (ok or not).
Percentiles interpolate linearly between order statistics (numpy's default): the p-th
percentile of n sorted values is at rank p/100 * (n - 1).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError

TokenSource = Literal["usage", "chunks"]

MIN_WALL_S = 1e-6  # below a microsecond the clock cannot time a level: rates are reported as 0
KNEE_MIN_GAIN = 0.10  # throughput must grow >= 10 % per doubling of concurrency to be "scaling"


class RequestSample(BaseModel):
    """One request as the client saw it. Times are seconds from the level's start."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0, description="Request number within its level")
    ok: bool
    error_kind: str | None = Field(None, description="connect, timeout, deadline, http_503, protocol, ...")
    error: str | None = Field(None, description="Short error text (API key redacted)")
    start_s: float = Field(ge=0, description="When the request was sent")
    end_s: float = Field(ge=0, description="When it finished or failed")
    ttft_s: float | None = Field(None, ge=0, description="Sent -> first non-empty content chunk")
    output_tokens: int = Field(0, ge=0, description="From server usage, else number of content chunks")
    prompt_tokens: int | None = Field(None, ge=0, description="From server usage; None when not reported")
    tokens_source: TokenSource = "chunks"
    finish_reason: str | None = Field(None, description="Last finish_reason the stream sent")
    itl_s: tuple[float, ...] = Field((), exclude=True, description="Gaps between content chunks")
    text: str = Field("", exclude=True, description="Generated text (kept only for sampled outputs)")

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1); None with fewer than 2 tokens."""
        if not self.ok or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


class LevelStats(BaseModel):
    """Summary of one concurrency level. Latency fields are None when no request succeeded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_sent: int
    ok: int
    failed: int
    errors: dict[str, int] = Field(description="Failed requests by error kind")
    finish_reasons: dict[str, int] = Field(description="Successful requests by finish_reason")
    wall_s: float = Field(description="First request sent -> last request finished")
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    itl_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p90_s: float | None
    e2e_mean_s: float | None
    output_tokens_total: int
    prompt_tokens_min: int | None
    prompt_tokens_max: int | None
    output_tok_s: float = Field(description="Successful output tokens / wall_s")
    requests_s: float = Field(description="Successful requests / wall_s")
    tokens_source: Literal["usage", "chunks", "mixed"] | None


class Knee(BaseModel):
    """Where adding concurrency stops paying: see find_knee."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int | None = Field(description="The knee level; None when throughput still scales")
    min_gain_per_doubling: float
    reason: str


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear-interpolation percentile (numpy default); None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), p))


def summarize(samples: Sequence[RequestSample]) -> LevelStats:
    """Percentiles, throughput and error counts of one level's requests."""
    ok = [s for s in samples if s.ok]
    ttft = [s.ttft_s for s in ok if s.ttft_s is not None]
    tpot = [t for t in (s.tpot_s for s in ok) if t is not None]
    e2e = [s.e2e_s for s in ok]
    itl = [g for s in ok for g in s.itl_s]
    prompt = [s.prompt_tokens for s in ok if s.prompt_tokens is not None]
    wall_s = (max(s.end_s for s in samples) - min(s.start_s for s in samples)) if samples else 0.0
    out_total = sum(s.output_tokens for s in ok)
    sources = {s.tokens_source for s in ok}
    per_s = (lambda n: n / wall_s) if wall_s > MIN_WALL_S else (lambda n: 0.0)
    return LevelStats(
        requests_sent=len(samples), ok=len(ok), failed=len(samples) - len(ok),
        errors=dict(sorted(Counter(s.error_kind or "unknown" for s in samples if not s.ok).items())),
        finish_reasons=dict(sorted(Counter(s.finish_reason or "none" for s in ok).items())),
        wall_s=wall_s,
        ttft_p50_s=percentile(ttft, 50), ttft_p90_s=percentile(ttft, 90), ttft_p99_s=percentile(ttft, 99),
        tpot_p50_s=percentile(tpot, 50), tpot_p90_s=percentile(tpot, 90),
        itl_p50_s=percentile(itl, 50), itl_p90_s=percentile(itl, 90), itl_p99_s=percentile(itl, 99),
        e2e_p50_s=percentile(e2e, 50), e2e_p90_s=percentile(e2e, 90),
        e2e_mean_s=(sum(e2e) / len(e2e)) if e2e else None,
        output_tokens_total=out_total,
        prompt_tokens_min=min(prompt) if prompt else None,
        prompt_tokens_max=max(prompt) if prompt else None,
        output_tok_s=per_s(out_total), requests_s=per_s(len(ok)),
        tokens_source=(None if not sources else sources.pop() if len(sources) == 1 else "mixed"),
    )


def find_knee(levels: Sequence, min_gain: float = KNEE_MIN_GAIN) -> Knee:
    """The knee: the first concurrency C_i (ascending) after which going to C_{i+1}

        gain = (tok/s(C_{i+1}) / tok/s(C_i)) ** (1 / log2(C_{i+1} / C_i))  <  1 + min_gain
        and  E2E p50(C_{i+1}) > E2E p50(C_i)

    i.e. throughput grows less than `min_gain` per doubling of concurrency while requests
    get slower: past C_i extra concurrency mostly buys queueing. The gain is normalised per
    doubling so levels 1,2,4,8 and 1,4,16 are judged alike. A next level with no successful
    request counts as "no gain, slower". Levels whose own throughput is 0 are skipped.
    None when every step still scales (the sweep did not reach the knee).
    `levels` holds (concurrency, LevelStats) pairs or objects with .concurrency and .stats;
    concurrencies must be distinct positive integers (PerfModelError otherwise).
    """
    pts = sorted(((lv.concurrency, lv.stats) if hasattr(lv, "stats") else tuple(lv) for lv in levels),
                 key=lambda cs: cs[0])
    cs = [c for c, _ in pts]
    if any(not (isinstance(c, (int, np.integer)) and c > 0) for c in cs) or len(set(cs)) != len(cs):
        raise PerfModelError(f"find_knee needs distinct positive integer concurrencies, got {cs}")
    for (c0, s0), (c1, s1) in zip(pts, pts[1:]):
        if s0.output_tok_s <= 0 or s0.e2e_p50_s is None:
            continue
        if s1.ok == 0 or s1.e2e_p50_s is None:
            return Knee(concurrency=c0, min_gain_per_doubling=min_gain,
                        reason=f"no request succeeded at concurrency {c1}")
        ratio = s1.output_tok_s / s0.output_tok_s
        # per-doubling gain, in logs so close concurrencies (1000 -> 1001) cannot overflow
        log_gain = math.log(ratio) / math.log2(c1 / c0) if ratio > 0 else -math.inf
        gain = math.exp(min(log_gain, 700.0))
        slower = s1.e2e_p50_s > s0.e2e_p50_s
        if gain < 1.0 + min_gain and slower:
            return Knee(concurrency=c0, min_gain_per_doubling=min_gain,
                        reason=(f"{c0}->{c1}: output tok/s x{gain:.3f} per doubling "
                                f"(< {1 + min_gain:.2f}) while E2E p50 grew "
                                f"x{s1.e2e_p50_s / s0.e2e_p50_s:.3f}"))
    usable = sum(1 for _, st in pts if st.output_tok_s > 0 and st.e2e_p50_s is not None)
    reason = (f"throughput still grows by at least {min_gain:.0%} per doubling, or latency "
              "does not grow, at every step" if usable >= 2
              else "fewer than two levels with successful requests")
    return Knee(concurrency=None, min_gain_per_doubling=min_gain, reason=reason)
