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

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.serving.knee import KNEE_MIN_GAIN, Knee, KneePoint
from perfmodel.serving.knee import find_knee as knee_of

TokenSource = Literal["usage", "chunks"]

MIN_WALL_S = 1e-6  # below a microsecond the clock cannot time a level: rates are reported as 0


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
    """The knee of measured levels by the one rule (perfmodel/serving/knee.py), on E2E p50
    and output tok/s. `levels` holds (concurrency, LevelStats) pairs or objects with
    .concurrency and .stats; concurrencies must be distinct positive integers
    (PerfModelError otherwise). None when every step still scales."""
    pts = [(lv.concurrency, lv.stats) if hasattr(lv, "stats") else tuple(lv) for lv in levels]
    cs = [c for c, _ in pts]
    if any(not (isinstance(c, (int, np.integer)) and c > 0) for c in cs) or len(set(cs)) != len(cs):
        raise PerfModelError(f"find_knee needs distinct positive integer concurrencies, got {cs}")
    return knee_of([KneePoint(concurrency=int(c), output_tok_s_total=s.output_tok_s,
                              e2e_s=s.e2e_p50_s, ttft_s=s.ttft_p50_s, tpot_s=s.tpot_p50_s,
                              ok=s.ok > 0) for c, s in pts], min_gain)
