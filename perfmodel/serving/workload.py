"""What a serving benchmark sends: a frozen, validated `ServeWorkload` and the requests it makes.

Three shapes, as the load generators run them:
- closed loop (vLLM `bench serve --max-concurrency C`, InferenceMAX, genai-perf, the seeds'
  recipe): N requests, the first C released at t=0, each later one sent the moment an
  earlier one finishes;
- open loop: arrivals at a rate, Poisson (exponential gaps) or gamma with a burstiness
  shape (vLLM `bench serve --request-rate R --burstiness k`: gaps ~ Gamma(k, 1/(k R)));
- trace replay: (arrival_s, prompt_tokens, output_tokens) rows from a CSV (open loop at
  those arrivals), or a `bench-endpoint --out` record (serving/trace_record.py: each level
  a closed loop at its concurrency over its own requests' lengths).

Lengths: fixed, or uniform integers in [ceil(r L), L] for a range ratio r (vLLM
benchmark_serving.py up to v0.8 and InferenceMAX's copy of it: randint(int(L r), L + 1)),
or taken from the trace. A prefix-cache hit rate h means the first floor(h P) prompt
tokens of every request are already cached (SGLang radix cache, vLLM automatic prefix
caching) and skip prefill compute.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.files import DATA_MAX_BYTES, read_text
from perfmodel.serving.trace_record import Replay, is_record_text, parse_record

DEFAULT_PROMPTS_PER_SLOT = 10   # InferenceMAX: --num-prompts = 10 x max concurrency (assumption)
DEFAULT_OPEN_LOOP_REQUESTS = 1000  # vLLM bench serve --num-prompts default
MAX_REQUESTS = 200_000          # beyond this a simulation takes minutes (about 50 us a request)


@dataclass(frozen=True)
class Requests:
    """The requests of one run: send times (closed loop: None, sent on completion),
    prompt and output tokens, cached prompt tokens (arrays of length N)."""

    send_s: np.ndarray | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_tokens: np.ndarray
    concurrency: int | None


class ServeWorkload(BaseModel):
    """One benchmark run: how requests arrive and how long they are. Validated once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arrival: Literal["closed", "poisson", "gamma", "trace"] = Field(
        description="closed loop at a concurrency, open loop at a rate, or a replayed trace")
    prompt_tokens: int | None = Field(default=None, gt=0, description="L_in: prompt length (not for traces)")
    output_tokens: int | None = Field(default=None, gt=0, description="L_out: output length (not for traces)")
    concurrency: int | None = Field(default=None, gt=0, description="closed loop: requests in flight")
    num_requests: int | None = Field(
        default=None, gt=0, le=MAX_REQUESTS,
        description=f"requests sent (closed loop default {DEFAULT_PROMPTS_PER_SLOT} x concurrency)")
    rate_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="open loop: mean arrivals per second")
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=False, description="gamma shape k (1: Poisson)")
    range_ratio: float = Field(default=1.0, gt=0, le=1, description="lengths uniform in [ceil(r L), L]")
    prefix_hit: float = Field(default=0.0, ge=0, lt=1, description="share of each prompt already cached")
    trace: tuple[tuple[float, int, int], ...] | None = Field(
        default=None, description="(arrival_s, prompt_tokens, output_tokens) rows")
    lengths: tuple[tuple[int, int], ...] | None = Field(
        default=None, description="closed loop, a mixed load: (prompt_tokens, output_tokens) "
        "of each request, cycled over the run (see mixed_lengths)")
    seed: int = Field(default=0, ge=0, description="random lengths and arrivals")

    @model_validator(mode="after")
    def _check(self) -> "ServeWorkload":
        if self.arrival == "trace":
            if not self.trace:
                raise ValueError("a trace workload needs at least one (arrival_s, prompt, output) row")
            for i, (a, p, o) in enumerate(self.trace):
                if not (math.isfinite(a) and a >= 0 and p > 0 and o > 0):
                    raise ValueError(f"trace row {i + 1}: arrival_s must be >= 0 and token counts "
                                     f"> 0, got ({a}, {p}, {o})")
            return self
        if self.lengths is not None:
            if self.arrival != "closed" or not self.lengths:
                raise ValueError("lengths describe the requests of a closed loop: give at least "
                                 "one (prompt, output) pair with a concurrency")
            if any(p <= 0 or o <= 0 for p, o in self.lengths):
                raise ValueError("lengths: token counts must be > 0")
        if self.prompt_tokens is None or self.output_tokens is None:
            raise ValueError("prompt_tokens and output_tokens are required")
        if self.arrival == "closed" and self.concurrency is None:
            raise ValueError("a closed-loop workload needs a concurrency")
        if self.n_requests > MAX_REQUESTS:
            raise ValueError(f"{self.n_requests} requests: at most {MAX_REQUESTS} per level "
                             "(set num_requests)")
        if self.arrival in ("poisson", "gamma") and self.rate_rps is None:
            raise ValueError(f"a {self.arrival} workload needs rate_rps > 0")
        if self.arrival in ("poisson", "gamma") and self.num_requests is None:
            raise ValueError("an open-loop workload needs num_requests")
        return self

    @classmethod
    def make(cls, **kwargs) -> "ServeWorkload":
        """Build one, turning a validation failure into one PerfModelError line."""
        try:
            return cls(**kwargs)
        except ValidationError as exc:
            raise PerfModelError(f"workload: {pydantic_message(exc)}") from None

    @property
    def n_requests(self) -> int:
        if self.arrival == "trace":
            return len(self.trace or ())
        if self.num_requests is not None:
            return self.num_requests
        return DEFAULT_PROMPTS_PER_SLOT * int(self.concurrency or 1)

    @property
    def longest_prompt(self) -> int:
        if self.lengths:
            return max(p for p, _ in self.lengths)
        return max(p for _, p, _ in self.trace) if self.trace else int(self.prompt_tokens or 0)

    @property
    def longest_output(self) -> int:
        if self.lengths:
            return max(o for _, o in self.lengths)
        return max(o for _, _, o in self.trace) if self.trace else int(self.output_tokens or 0)

    def requests(self) -> Requests:
        """The run's requests, reproducible for the seed."""
        rng = np.random.default_rng(self.seed)
        n = self.n_requests
        if self.arrival == "trace":
            rows = np.asarray(self.trace, dtype=float)
            order = np.argsort(rows[:, 0], kind="stable")
            rows = rows[order]
            send, prompt, output = rows[:, 0] - rows[0, 0], rows[:, 1], rows[:, 2]
        elif self.lengths:
            pairs = np.asarray(self.lengths, dtype=float)[np.arange(n) % len(self.lengths)]
            send, prompt, output = None, pairs[:, 0], pairs[:, 1]
        else:
            prompt = _lengths(rng, int(self.prompt_tokens), self.range_ratio, n)
            output = _lengths(rng, int(self.output_tokens), self.range_ratio, n)
            send = None
            if self.arrival != "closed":
                shape = 1.0 if self.arrival == "poisson" else self.burstiness
                gaps = rng.gamma(shape, 1.0 / (shape * float(self.rate_rps)), size=n)
                send = np.cumsum(gaps) - gaps[0]
        cached = np.floor(self.prefix_hit * prompt)
        cached = np.minimum(cached, prompt - 1)     # the last prompt token is always computed
        return Requests(send_s=send, prompt_tokens=prompt.astype(float),
                        output_tokens=output.astype(float), cached_tokens=cached.astype(float),
                        concurrency=self.concurrency if self.arrival == "closed" else None)


def _lengths(rng: np.random.Generator, length: int, ratio: float, n: int) -> np.ndarray:
    """Fixed at ratio 1, else uniform integers in [ceil(ratio L), L]."""
    if ratio >= 1.0:
        return np.full(n, float(length))
    low = max(1, math.ceil(ratio * length))
    return rng.integers(low, length + 1, size=n).astype(float)


def mixed_lengths(mean: float, longest: int, n: int, seed: int = 0) -> np.ndarray:
    """n integer lengths in [1, longest] with the given mean, when only the mean and the
    longest of a mixed load are known: the maximum-entropy distribution on that range with
    that mean (a truncated exponential, density ~ exp(-x / s); uniform when the mean is the
    midpoint), taken at the quantiles (i + 1/2) / n and shuffled with the seed."""
    if not (1 <= mean <= longest) or n < 1:
        raise PerfModelError(f"mixed lengths need 1 <= mean ({mean}) <= longest ({longest})")
    lo, hi = 1.0, float(longest)
    u = (np.arange(n) + 0.5) / n
    if hi - lo < 1e-9 or abs(mean - (lo + hi) / 2) < 1e-9:
        x = lo + u * (hi - lo)
    else:                  # density ~ exp(-rate y) on [0, w], y = x - 1 (mirrored above the midpoint)
        w, above = hi - lo, mean > (lo + hi) / 2
        rate = _exp_rate(w - (mean - lo) if above else mean - lo, w)
        y = -np.log1p(u * np.expm1(-rate * w)) / rate
        x = hi - y if above else lo + y
    out = np.clip(np.rint(x), 1, longest)
    return np.random.default_rng(seed).permutation(out)


def _exp_rate(m: float, w: float) -> float:
    """Rate r of the exponential truncated to [0, w] whose mean is m (0 < m < w), by bisection
    on mean(r) = 1/r - w / (e^(r w) - 1), which falls from w to 0 as r goes from -inf to inf."""
    def mean(r: float) -> float:
        if abs(r * w) < 1e-6:
            return w / 2 - r * w * w / 12
        if r * w > 700.0:                              # e^(r w) beyond float range: the tail is 0
            return 1.0 / r
        return 1.0 / r - w / math.expm1(r * w)

    lo, hi = -1.0, 1.0
    while mean(lo) < m:
        lo *= 2.0
    while mean(hi) > m:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean(mid) > m else (lo, mid)
    return (lo + hi) / 2


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def _read_text(p: Path) -> str:
    """The trace's text through the one safe reader (core/files.py): a regular file only and
    the data-file size cap, so a device (/dev/zero) or a huge file is a one-line error."""
    return read_text(p, what="trace", max_bytes=DATA_MAX_BYTES)


def load_trace(path: str | Path, *,
               prompt_tokens: int | None = None) -> tuple[tuple[float, int, int], ...] | Replay:
    """A trace file: a bench-endpoint record (JSON) as a Replay (`prompt_tokens`: the prompt
    of its requests without a usage count, trace_record.parse_record), else the CSV's rows."""
    p = Path(path)
    text = _read_text(p)
    if is_record_text(p.name, text):
        return parse_record(p.name, text, prompt_tokens=prompt_tokens)
    return _csv_rows(p, text)


def read_trace(path: str | Path) -> tuple[tuple[float, int, int], ...]:
    """Rows of a CSV with the columns arrival_s, prompt_tokens, output_tokens."""
    p = Path(path)
    return _csv_rows(p, _read_text(p))


def _csv_rows(p: Path, text: str) -> tuple[tuple[float, int, int], ...]:
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise PerfModelError(f"trace {p.name}: missing column(s) {', '.join(missing)} "
                             f"(need {', '.join(TRACE_COLUMNS)})")
    rows = []
    for i, row in enumerate(reader, start=2):
        try:
            a = float(row["arrival_s"])
            pt, ot = float(row["prompt_tokens"]), float(row["output_tokens"])
        except (TypeError, ValueError):
            raise PerfModelError(f"trace {p.name} line {i}: non-numeric field") from None
        if not (math.isfinite(a) and a >= 0):
            raise PerfModelError(f"trace {p.name} line {i}: arrival_s must be a finite number >= 0")
        for name, v in (("prompt_tokens", pt), ("output_tokens", ot)):
            if not (math.isfinite(v) and v >= 1 and v == int(v)):
                raise PerfModelError(f"trace {p.name} line {i}: {name} must be a positive integer")
        rows.append((a, int(pt), int(ot)))
    if not rows:
        raise PerfModelError(f"trace {p.name} has no rows")
    return tuple(rows)


def _int_list(name: str, values) -> list[int]:
    vals = [values] if isinstance(values, (int, np.integer)) and not isinstance(values, bool) else values
    try:
        vals = list(vals)
    except TypeError:
        raise PerfModelError(f"{name} must be a positive integer or a list of them, got {values!r}") from None
    if not vals or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0 for v in vals):
        raise PerfModelError(f"{name} must be positive integers, got {values!r}")
    return [int(v) for v in vals]


def _rate_list(values) -> list[float]:
    vals = [values] if isinstance(values, (int, float, np.number)) and not isinstance(values, bool) else values
    try:
        vals = list(vals)
    except TypeError:
        raise PerfModelError(f"rate_rps must be a positive number or a list of them, got {values!r}") from None
    try:   # float() of an int past 1e308 raises OverflowError
        ok = vals and all(not isinstance(v, bool) and isinstance(v, (int, float, np.number))
                          and math.isfinite(float(v)) and v > 0 for v in vals)
    except OverflowError:
        ok = False
    if not ok:
        raise PerfModelError(f"rate_rps must be positive finite numbers of requests per second, got {values!r}")
    return [float(v) for v in vals]


def serve_workloads(*, prompt_tokens=None, output_tokens=None, concurrencies=None, rate_rps=None,
                    trace=None, num_requests=None, range_ratio: float = 1.0,
                    prefix_hit: float = 0.0, burstiness: float = 1.0,
                    seed: int = 0) -> list[ServeWorkload]:
    """One workload per level: exactly one of concurrencies, rate_rps (Poisson, or gamma when
    burstiness != 1) or trace (rows, a CSV path, or a bench-endpoint record: its path or
    Replay, one closed-loop workload per replayed level)."""
    given = [n for n, v in (("concurrencies", concurrencies), ("rate_rps", rate_rps),
                            ("trace", trace)) if v is not None]
    if len(given) != 1:
        raise PerfModelError("give exactly one of concurrencies, rate_rps or trace"
                             + (f" (got {', '.join(given)})" if given else ""))
    plain = isinstance(burstiness, (int, float)) and not isinstance(burstiness, bool) \
        and burstiness == 1.0
    if rate_rps is None and not plain:   # the gamma shape of open-loop arrivals, else unused
        raise PerfModelError(f"burstiness shapes open-loop arrivals (rate_rps): with "
                             f"{given[0]} it would be unused (drop burstiness)")
    common = dict(range_ratio=range_ratio, prefix_hit=prefix_hit, seed=seed)
    if trace is not None:
        rows = load_trace(trace) if isinstance(trace, (str, Path)) else trace
        if isinstance(rows, Replay):
            return replay_workloads(rows, prefix_hit=prefix_hit, seed=seed)
        return [ServeWorkload.make(arrival="trace", trace=rows, prefix_hit=prefix_hit, seed=seed)]
    lengths = dict(prompt_tokens=prompt_tokens, output_tokens=output_tokens, num_requests=num_requests)
    if concurrencies is not None:
        return [ServeWorkload.make(arrival="closed", concurrency=c, **lengths, **common)
                for c in _int_list("concurrencies", concurrencies)]
    arrival = "poisson" if burstiness == 1.0 else "gamma"
    n = lengths.pop("num_requests")
    return [ServeWorkload.make(arrival=arrival, rate_rps=r, burstiness=burstiness,
                               num_requests=n if n is not None else DEFAULT_OPEN_LOOP_REQUESTS,
                               **lengths, **common)
            for r in _rate_list(rate_rps)]


def replay_workloads(replay: Replay, *, prefix_hit: float = 0.0, seed: int = 0) -> list[ServeWorkload]:
    """A closed loop per replayed level: its concurrency, its requests' own lengths in send
    order, one request each (serving/trace_record.py); prompt_tokens and output_tokens hold
    the level's rounded means."""
    out = []
    for lv in replay.levels:
        n = len(lv.lengths)
        out.append(ServeWorkload.make(
            arrival="closed", concurrency=lv.concurrency, num_requests=n, lengths=lv.lengths,
            prompt_tokens=max(1, round(sum(p for p, _ in lv.lengths) / n)),
            output_tokens=max(1, round(sum(o for _, o in lv.lengths) / n)),
            prefix_hit=prefix_hit, seed=seed))
    return out
