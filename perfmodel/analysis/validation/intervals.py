"""Prediction intervals from the residuals of the validation table.

A residual is r = ln(measured / predicted). Rows are grouped by kind = (metric, engine
family, calibrated or not). An 80% interval for a new prediction p of a kind is
[p * exp(q_lo), p * exp(q_hi)], where q_lo and q_hi are the split-conformal order statistics
of the kind's residuals (Vovk et al. 2005; Lei et al. 2018, "Distribution-free predictive
inference for regression", sec. 2.2): with n residuals sorted, q_hi is the
ceil((n+1)(1+level)/2)-th and q_lo the floor((n+1)(1-level)/2)-th (clamped to 1..n).
A kind with fewer than MIN_RESIDUALS rows borrows the pool of its metric (all families), then
the pool of every metric. Coverage reported by `validate` is leave-one-out: each row is
checked against an interval fitted without it, so it is honest for this table.

The fitted factors are committed in perfmodel/analysis/validation/intervals.yaml (`perfmodel validate
--fit-intervals` rewrites it) and read by interval_for(), which the CLI and UI use to show
[lo, hi] beside a point value.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.core.files import load_mapping
from perfmodel.core.errors import PerfModelError, SpecFileError, pydantic_message

LEVEL = 0.8
MIN_RESIDUALS = 6
ANY = "*"
INTERVALS_PATH = Path(__file__).resolve().parent / "intervals.yaml"

ENGINE_FAMILY = {
    "hf-eager": "eager", "torch-eager": "eager",
    "torch-graph": "compiled", "torch-compile": "compiled", "llama-cpp": "compiled",
    "vllm": "serving", "sglang": "serving", "trtllm": "serving", "trtllm-trt": "serving",
    "tgi": "serving", "lmdeploy": "serving", "lmdeploy-pytorch": "serving",
}
"""eager: kernels issued one by one from Python; compiled: graph-captured or compiled
single-stream runtimes; serving: schedulers with batching and paged KV."""


def engine_family(engine: str) -> str:
    """Family of an engine preset id ('*' for an unknown id)."""
    return ENGINE_FAMILY.get(engine, ANY)


class IntervalKind(BaseModel):
    """Fitted factors of one kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    metric: str
    engine_family: str
    calibrated: bool
    n: int = Field(ge=0, description="Residuals of exactly this kind.")
    pooled_n: int = Field(ge=1, description="Residuals the factors were taken from.")
    pooled_from: str = Field(description="'kind', 'metric' or 'all'.")
    lo_factor: float = Field(gt=0, description="Lower bound / point value.")
    hi_factor: float = Field(gt=0, description="Upper bound / point value.")


class IntervalTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str = Field(default="perfmodel-intervals", pattern="^perfmodel-intervals$")
    level: float = Field(gt=0, lt=1)
    method: str
    fitted_on: list[str]
    kinds: list[IntervalKind]


def conformal_bounds(residuals, level: float = LEVEL) -> tuple[float, float]:
    """(q_lo, q_hi) split-conformal order statistics of log residuals (module docstring)."""
    r = np.sort(np.asarray(residuals, dtype=float))
    n = r.size
    if n == 0:
        raise PerfModelError("no residuals to fit an interval from")
    tol = 1e-9   # (n+1)(1-level)/2 is an integer more often than binary floats say
    hi = min(n, max(1, math.ceil((n + 1) * (1 + level) / 2 - tol)))
    lo = min(n, max(1, math.floor((n + 1) * (1 - level) / 2 + tol)))
    return float(r[lo - 1]), float(r[hi - 1])


def _pool(residuals: dict[tuple[str, str, bool], list[float]], metric: str, family: str,
          calibrated: bool) -> tuple[list[float], str]:
    """The residuals a kind's interval is taken from, with the back-off level: the kind,
    else its metric over every family, else every residual ('*' matches anything)."""
    def gather(m: str, f: str) -> list[float]:
        return [x for (mm, ff, c), v in residuals.items() if c == calibrated
                and m in (ANY, mm) and f in (ANY, ff) for x in v]

    for m, f in ((metric, family), (metric, ANY), (ANY, ANY)):
        pool = gather(m, f)
        if len(pool) >= MIN_RESIDUALS or m == ANY:
            return pool, "all" if m == ANY else ("metric" if f == ANY else "kind")
    raise AssertionError("unreachable: the last level always returns")


def fit(residuals: dict[tuple[str, str, bool], list[float]], level: float = LEVEL,
        fitted_on: list[str] | None = None) -> IntervalTable:
    """Factors for every kind present, plus metric-wide and global fall-backs ('*')."""
    kinds: list[IntervalKind] = []
    keys = set(residuals)
    keys |= {(m, ANY, c) for (m, _, c) in residuals} | {(ANY, ANY, c) for (_, _, c) in residuals}
    for metric, family, calibrated in sorted(keys, key=lambda k: (k[2], k[0], k[1])):
        pool, level_name = _pool(residuals, metric, family, calibrated)
        if not pool:
            continue
        lo, hi = conformal_bounds(pool, level)
        kinds.append(IntervalKind(
            metric=metric, engine_family=family, calibrated=calibrated,
            n=len(residuals.get((metric, family, calibrated), [])), pooled_n=len(pool),
            pooled_from=level_name, lo_factor=round(math.exp(lo), 4),
            hi_factor=round(math.exp(hi), 4)))
    return IntervalTable(level=level, fitted_on=fitted_on or [], kinds=kinds,
                         method=(f"split-conformal order statistics of ln(measured/predicted), "
                                 f"back-off to metric then all rows below {MIN_RESIDUALS} "
                                 "residuals"))


def loo_bounds(residuals: dict[tuple[str, str, bool], list[float]], key: tuple[str, str, bool],
               index: int | None = None, level: float = LEVEL) -> tuple[float, float] | None:
    """(q_lo, q_hi) for a kind, fitted without residual `index` of that kind (None: keep
    all); None when there is nothing to fit from."""
    rest = residuals
    if index is not None:
        rest = {k: (v[:index] + v[index + 1:] if k == key else v) for k, v in residuals.items()}
    pool, _ = _pool(rest, *key)
    return conformal_bounds(pool, level) if pool else None


def save(table: IntervalTable, path: str | Path = INTERVALS_PATH) -> None:
    p = Path(path)
    text = ("# Prediction-interval factors fitted by `perfmodel validate --fit-intervals`.\n"
            "# Do not edit by hand: rerun the command after the model or the data change.\n")
    text += yaml.safe_dump(table.model_dump(mode="json"), sort_keys=False)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(p)
    _load.cache_clear()


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> IntervalTable:  # noqa: ARG001 - mtime keys the cache
    data = load_mapping(path, what="intervals", fmt="yaml")
    try:
        return IntervalTable.model_validate(data)
    except ValidationError as exc:
        raise SpecFileError(f"{path}: {pydantic_message(exc)}") from None


def load(path: str | Path = INTERVALS_PATH) -> IntervalTable:
    p = Path(path)
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        raise PerfModelError(f"{p} is missing: run `perfmodel validate --fit-intervals`") from None
    return _load(str(p), mtime)


def interval_for(metric: str, engine_family: str, calibrated: bool = False, *,
                 path: str | Path = INTERVALS_PATH) -> tuple[float, float]:
    """(lo_factor, hi_factor): the interval of a point value v is [v*lo, v*hi].

    Looks up (metric, family, calibrated), then (metric, '*'), then ('*', '*'); a calibrated
    kind with no fit falls back to the datasheet-only factors."""
    table = load(path)
    by_key = {(k.metric, k.engine_family, k.calibrated): k for k in table.kinds}
    for cal in ((True, False) if calibrated else (False,)):
        for key in ((metric, engine_family, cal), (metric, ANY, cal), (ANY, ANY, cal)):
            if key in by_key:
                return by_key[key].lo_factor, by_key[key].hi_factor
    raise PerfModelError(f"no prediction interval fitted for {metric!r} in {Path(path).name}")


# RequestEstimate field -> validation metric (factors are ratios, so the unit does not matter)
REQUEST_METRICS = {"ttft_s": "ttft_ms", "tpot_s": "tpot_ms", "e2e_s": "e2e_latency_s",
                   "decode_tok_s_per_user": "decode_tok_s_per_user",
                   "output_tok_s_total": "output_tok_s_total", "prefill_tok_s": "prefill_tok_s"}


def request_intervals(values: dict[str, float], engine: str, calibrated: bool = False, *,
                      path: str | Path = INTERVALS_PATH) -> dict:
    """{field: {lo, hi, lo_factor, hi_factor}} for the request metrics in `values`, plus the
    level, engine family and whether calibrated factors were asked for. Empty when no
    interval table exists."""
    try:
        table = load(path)
    except PerfModelError:
        return {}
    out: dict = {"level": table.level, "engine_family": engine_family(engine),
                 "calibrated": calibrated}
    for field, metric in REQUEST_METRICS.items():
        if field not in values:
            continue
        lo, hi = interval_for(metric, engine_family(engine), calibrated, path=path)
        v = float(values[field])
        out[field] = {"lo": v * lo, "hi": v * hi, "lo_factor": lo, "hi_factor": hi}
    return out
