"""Sensitivity of one metric to a Query's main inputs (the Calculator's tornado chart).

Each variation is a second api.evaluate of the Query with one input changed: the
accelerator's datasheet bandwidth or peaks scaled, the batch halved/doubled, the weight or
KV precision one step narrower/wider, or the engine's CPU overheads (per-step, per-request,
per-kernel launch) halved/doubled through a calibrated-profile override. A variation the
model rejects is reported with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfmodel import api
from perfmodel.core.engines import load_engine
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.profile import Profile, apply_engine, load_profile
from perfmodel.core.query import Query

SPEC_STEP = 0.2                     # assumption: datasheet figures varied by +-20 % (vendor spread)
OVERHEAD_FACTOR = 2.0               # assumption: engine overheads halved / doubled
WEIGHT_LADDER = ("int4", "fp8", "bf16", "fp32")
KV_LADDER = ("int4", "fp8", "bf16", "fp32")
OVERHEAD_FIELDS = ("cpu_overhead_per_step_s", "per_request_overhead_s", "launch_s", "graph_launch_s",
                   "eager_launch_s")


@dataclass(frozen=True)
class Variation:
    """The metric with one input lowered and raised (None: the model rejected it)."""

    name: str
    low_label: str
    high_label: str
    low: float | None
    high: float | None
    note: str = ""


@dataclass(frozen=True)
class Sensitivity:
    metric: str
    base: float
    variations: list[Variation]


def _value(q: Query, metric: str, **override) -> tuple[float | None, str]:
    try:
        return float(getattr(api.evaluate(q.with_(**override)), metric)), ""
    except PerfModelError as exc:
        return None, str(exc).splitlines()[0]


def _neighbours(ladder: tuple[str, ...], current: str | None) -> tuple[str | None, str | None]:
    base = (current or "bf16").split("-g")[0]
    if base not in ladder:
        return None, None
    i = ladder.index(base)
    return (ladder[i - 1] if i > 0 else None), (ladder[i + 1] if i + 1 < len(ladder) else None)


def _pair(q, metric, name, lo_label, hi_label, lo_kw, hi_kw) -> Variation:
    lo, n1 = _value(q, metric, **lo_kw) if lo_kw is not None else (None, "")
    hi, n2 = _value(q, metric, **hi_kw) if hi_kw is not None else (None, "")
    return Variation(name, lo_label, hi_label, lo, hi, note="; ".join(n for n in (n1, n2) if n))


def sensitivity(q: Query, metric: str) -> Sensitivity:
    """The metric at the Query and with each input moved down and up."""
    if metric not in api.METRIC_FIELDS:
        raise PerfModelError(f"unknown metric {metric!r}; use one of {', '.join(api.METRIC_FIELDS)}")
    base, note = _value(q, metric)
    if base is None:
        raise PerfModelError(note)
    hw = q.gpu if not isinstance(q.gpu, str) else load_gpu(q.gpu, q.hardware_dir)
    lo, hi = 1 - SPEC_STEP, 1 + SPEC_STEP

    def bw(k: float):
        return hw.model_copy(update={"memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s * k})

    def flops(k: float):
        return hw.model_copy(update={"peak_flops_per_s": {d: v * k for d, v in hw.peak_flops_per_s.items()}})

    out = [_pair(q, metric, "Memory bandwidth", f"x{lo:g}", f"x{hi:g}", {"gpu": bw(lo)}, {"gpu": bw(hi)}),
           _pair(q, metric, "Peak compute", f"x{lo:g}", f"x{hi:g}", {"gpu": flops(lo)}, {"gpu": flops(hi)})]
    half = max(1, q.batch // 2)
    out.append(_pair(q, metric, "Batch", f"{half}", f"{q.batch * 2}",
                     {"batch": half} if half != q.batch else None, {"batch": q.batch * 2}))
    narrow, wide = _neighbours(WEIGHT_LADDER, q.weights)
    out.append(_pair(q, metric, "Weight precision", narrow or "-", wide or "-",
                     {"weights": narrow} if narrow else None, {"weights": wide} if wide else None))
    narrow, wide = _neighbours(KV_LADDER, q.kv)
    out.append(_pair(q, metric, "KV-cache precision", narrow or "-", wide or "-",
                     {"kv": narrow} if narrow else None, {"kv": wide} if wide else None))
    out.append(_overheads(q, metric))
    return Sensitivity(metric=metric, base=base, variations=out)


def _overheads(q: Query, metric: str) -> Variation:
    """Engine CPU overheads scaled through a profile override (keeps a loaded profile's fit)."""
    prof = load_profile(q.profile) if isinstance(q.profile, (str, Path)) else q.profile
    engine = apply_engine(load_engine(q.engine), prof)

    def profile(k: float) -> Profile:
        engines = dict(prof.engines) if prof else {}
        engines[engine.id] = {**engines.get(engine.id, {}),
                              **{f: getattr(engine, f) * k for f in OVERHEAD_FIELDS}}
        return Profile(gpu=prof.gpu if prof else None, efficiency=prof.efficiency if prof else None,
                       engines=engines, meta=prof.meta if prof else {})

    f = OVERHEAD_FACTOR
    return _pair(q, metric, "Engine CPU overheads", f"x{1 / f:g}", f"x{f:g}",
                 {"profile": profile(1 / f)}, {"profile": profile(f)})
