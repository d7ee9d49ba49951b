"""Sensitivity of one metric to the scenario's main inputs (the Calculator's tornado chart).

Each variation is a second call of perfmodel.api.predict_request with one input changed:
the accelerator's datasheet bandwidth or peaks scaled, the batch halved/doubled, the
weight or KV precision one step narrower/wider, or the engine's CPU overheads (per-step,
per-request, per-kernel launch) halved/doubled through a calibrated-profile override.
No metric is derived here; a variation perfmodel rejects is reported with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from perfmodel import api
from perfmodel.core.engines import load_engine
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.profile import Profile, apply_engine, load_profile
from perfmodel.webapp.data import CACHE, api_kwargs
from perfmodel.webapp.state import UIScenario, target

SPEC_STEP = 0.2                     # datasheet figures varied by +-20 %
OVERHEAD_FACTOR = 2.0               # engine overheads halved / doubled
WEIGHT_LADDER = ("int4", "fp8", "bf16", "fp32")
KV_LADDER = ("int4", "fp8", "bf16", "fp32")
OVERHEAD_FIELDS = ("cpu_overhead_per_step_s", "per_request_overhead_s", "launch_s", "graph_launch_s")


@dataclass(frozen=True)
class Variation:
    """The metric with one input lowered and raised (None: perfmodel rejected it)."""

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


def _value(scn: UIScenario, metric: str, **override) -> tuple[float | None, str]:
    kw = {**api_kwargs(scn), "batch": scn.batch, "prompt": scn.prompt, "output": scn.output}
    kw.update(override)
    try:
        return float(getattr(api.predict_request(**kw), metric)), ""
    except PerfModelError as exc:
        return None, str(exc).splitlines()[0]


def _neighbours(ladder: tuple[str, ...], current: str) -> tuple[str | None, str | None]:
    base = current.split("-g")[0]
    if base not in ladder:
        return None, None
    i = ladder.index(base)
    return (ladder[i - 1] if i > 0 else None), (ladder[i + 1] if i + 1 < len(ladder) else None)


def _pair(scn, metric, name, lo_label, hi_label, lo_kw, hi_kw) -> Variation:
    lo, n1 = _value(scn, metric, **lo_kw) if lo_kw is not None else (None, "")
    hi, n2 = _value(scn, metric, **hi_kw) if hi_kw is not None else (None, "")
    return Variation(name, lo_label, hi_label, lo, hi, note="; ".join(n for n in (n1, n2) if n))


@st.cache_data(**CACHE)
def sensitivity(key: str, metric: str) -> Sensitivity:
    """The metric at the scenario and with each input moved down and up."""
    scn = UIScenario.from_key(key)
    base, note = _value(scn, metric)
    if base is None:
        raise PerfModelError(note)
    hw = load_gpu(target(scn.gpu, "gpu"))
    out: list[Variation] = []

    def scaled_hw(field: str, k: float):
        if field == "bw":
            return hw.model_copy(update={"memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s * k})
        return hw.model_copy(update={"peak_flops_per_s": {d: v * k for d, v in hw.peak_flops_per_s.items()}})

    lo, hi = 1 - SPEC_STEP, 1 + SPEC_STEP
    out.append(_pair(scn, metric, "Memory bandwidth", f"x{lo:g}", f"x{hi:g}",
                     {"gpu": scaled_hw("bw", lo)}, {"gpu": scaled_hw("bw", hi)}))
    out.append(_pair(scn, metric, "Peak compute", f"x{lo:g}", f"x{hi:g}",
                     {"gpu": scaled_hw("flops", lo)}, {"gpu": scaled_hw("flops", hi)}))
    half = max(1, scn.batch // 2)
    out.append(_pair(scn, metric, "Batch", f"{half}", f"{scn.batch * 2}",
                     {"batch": half} if half != scn.batch else None, {"batch": scn.batch * 2}))
    narrow, wide = _neighbours(WEIGHT_LADDER, scn.weights)
    out.append(_pair(scn, metric, "Weight precision", narrow or "-", wide or "-",
                     {"weights": narrow} if narrow else None, {"weights": wide} if wide else None))
    narrow, wide = _neighbours(KV_LADDER, scn.kv)
    out.append(_pair(scn, metric, "KV-cache precision", narrow or "-", wide or "-",
                     {"kv": narrow} if narrow else None, {"kv": wide} if wide else None))
    out.append(_overheads(scn, metric))
    return Sensitivity(metric=metric, base=base, variations=out)


def _overheads(scn: UIScenario, metric: str) -> Variation:
    """Engine CPU overheads scaled through a profile override (keeps a loaded profile's fit)."""
    kw = api_kwargs(scn)
    prof = load_profile(kw["profile"]) if kw["profile"] else None
    engine = apply_engine(load_engine(scn.engine), prof)

    def profile(k: float) -> Profile:
        engines = dict(prof.engines) if prof else {}
        engines[engine.id] = {**engines.get(engine.id, {}),
                              **{f: getattr(engine, f) * k for f in OVERHEAD_FIELDS}}
        return Profile(gpu=prof.gpu if prof else None, efficiency=prof.efficiency if prof else None,
                       engines=engines, meta=prof.meta if prof else {})

    f = OVERHEAD_FACTOR
    return _pair(scn, metric, "Engine CPU overheads", f"x{1 / f:g}", f"x{f:g}",
                 {"profile": profile(1 / f)}, {"profile": profile(f)})
