"""Measured serving points vs predictions -> the serving part of `perfmodel validate`.

    from perfmodel.analysis.validation.serving_run import validate_serving
    rep = validate_serving()                  # data/serving/aic_silicon_sample.csv
    rep.summary.ttft_median_ape, rep.summary.tpot_median_ape

Rows are mapped by the general rules of serving_map.py and predicted per configuration by
the chosen predictor (serving_predict.py), datasheet-only and, where a calibrated profile for
the row's GPU exists, with it too. Every row is either scored or listed with its reason.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.profile import Profile
from perfmodel.analysis.validation.checks import TargetCheck
from perfmodel.analysis.validation.serving_map import ServingTarget, map_serving_rows
from perfmodel.analysis.validation.serving_predict import PredictedPoint, get_predictor, predict_targets
from perfmodel.analysis.validation.serving_results import (ReasonCount, ServingGroup, ServingReport,
                                                           ServingRowResult, ServingSummary,
                                                           ServingUnmappedRow)
from perfmodel.analysis.validation.serving_table import ServingMeasurement, read_serving

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SERVING = ROOT / "data" / "serving" / "aic_silicon_sample.csv"
WITHIN = 0.25
# concurrency bands of the by-concurrency breakdown: the error of a steady-state model grows
# with load (issue 13), so the report shows it band by band (upper ends, powers of 4)
CONCURRENCY_BANDS = (4, 16, 64, 256)
# issue 13 (aggregated rows) and issue 14 (MoE, disaggregated rows), datasheet-only:
# (name, rows, metric, kind, limit); kind 'median' is an upper limit on the median error,
# 'within' a lower limit on the share within 25%, 'answered' a lower limit on the share predicted
TARGETS = (("aggregated rows: TTFT median error", "agg", "ttft", "median", 0.20),
           ("aggregated rows: TPOT median error", "agg", "tpot", "median", 0.10),
           ("aggregated rows: TTFT within 25%", "agg", "ttft", "within", 0.80),
           ("aggregated rows: TPOT within 25%", "agg", "tpot", "within", 0.80),
           ("MoE aggregated rows: TTFT median error", "moe", "ttft", "median", 0.20),
           ("MoE aggregated rows: TPOT median error", "moe", "tpot", "median", 0.12),
           ("disaggregated rows: answered", "disagg", None, "answered", 0.90),
           ("disaggregated rows: TPOT median error", "disagg", "tpot", "median", 0.15))


def summarize(rows: list[ServingRowResult], calibrated: bool = False) -> ServingSummary | None:
    """Median errors, shares within 25% and median predicted/measured ratios."""
    if not rows:
        return None
    if calibrated:
        pt = np.array([r.calibrated_ttft_s for r in rows], dtype=float)
        pp = np.array([r.calibrated_tpot_s for r in rows], dtype=float)
    else:
        pt = np.array([r.predicted_ttft_s for r in rows], dtype=float)
        pp = np.array([r.predicted_tpot_s for r in rows], dtype=float)
    mt = np.array([r.measured_ttft_s for r in rows], dtype=float)
    mp = np.array([r.measured_tpot_s for r in rows], dtype=float)
    et, ep = np.abs(pt - mt) / mt, np.abs(pp - mp) / mp
    return ServingSummary(n=len(rows), ttft_median_ape=float(np.median(et)),
                          tpot_median_ape=float(np.median(ep)),
                          ttft_within_25pct=float(np.mean(et <= WITHIN)),
                          tpot_within_25pct=float(np.mean(ep <= WITHIN)),
                          ttft_median_ratio=float(np.median(pt / mt)),
                          tpot_median_ratio=float(np.median(pp / mp)))


def _row(t: ServingTarget, p: PredictedPoint, cal: PredictedPoint | None,
         profile_name: str | None) -> ServingRowResult:
    m = t.measurement
    mt, mp = m.ttft_s, m.tpot_s
    cal_fields = {}
    if cal is not None:
        cal_fields = dict(calibrated_profile=profile_name, calibrated_ttft_s=cal.ttft_s,
                          calibrated_tpot_s=cal.tpot_s,
                          calibrated_ttft_ape=abs(cal.ttft_s - mt) / mt,
                          calibrated_tpot_ape=abs(cal.tpot_s - mp) / mp)
    return ServingRowResult(
        dataset=m.dataset, row=m.row, label=m.label, row_id=m.get("id"),
        mode=m.get("mode").lower(), model=t.model,
        gpu=t.gpu, engine=t.engine, engine_version=m.get("backend_version"), moe=t.moe,
        num_gpus=t.num_gpus, parallel=f"tp{t.tp} pp{t.pp} ep{t.ep} dp{t.attention_dp}",
        precision=f"W:{t.weights} A:{t.activations} KV:{t.kv}", prompt_tokens=t.prompt,
        output_tokens=t.output, concurrency=t.concurrency, measured_ttft_s=mt,
        measured_tpot_s=mp, predicted_ttft_s=p.ttft_s, predicted_tpot_s=p.tpot_s,
        ttft_ape=abs(p.ttft_s - mt) / mt, tpot_ape=abs(p.tpot_s - mp) / mp, fits=p.fits,
        assumptions=t.assumptions, **cal_fields)


def reason_class(reason: str) -> str:
    """A reason with its numbers replaced by '#', so rows refused for the same cause count
    together ('needs 9216 KV tokens; the pool holds 5623' and '... 5619'); numbers inside
    ids (qwen3.5-397b) stay. Every row keeps its full reason."""
    return re.sub(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w.])", "#", reason)   # not inside ids


def _unmapped(m: ServingMeasurement, reason: str) -> ServingUnmappedRow:
    return ServingUnmappedRow(dataset=m.dataset, row=m.row, label=m.label, row_id=m.get("id"),
                              mode=m.get("mode"), model_path=m.get("model_path"),
                              system=m.get("system"), backend=m.get("backend"), reason=reason)


def concurrency_band(c: int) -> tuple[int, str]:
    """(order, label) of the band of CONCURRENCY_BANDS holding concurrency c."""
    lo = 1
    for i, hi in enumerate(CONCURRENCY_BANDS):
        if c <= hi:
            return i, f"C {lo}-{hi}"
        lo = hi + 1
    return len(CONCURRENCY_BANDS), f"C >= {lo}"


def _groups(rows: list[ServingRowResult]) -> list[ServingGroup]:
    keys = {"engine": lambda r: r.engine, "gpu": lambda r: r.gpu, "model": lambda r: r.model,
            "concurrency": lambda r: concurrency_band(r.concurrency),
            "engine x gpu x model": lambda r: f"{r.engine} / {r.gpu} / {r.model}"}
    out = []
    for by, key in keys.items():
        for k in sorted({key(r) for r in rows}):
            s = summarize([r for r in rows if key(r) == k])
            out.append(ServingGroup(by=by, key=k[1] if isinstance(k, tuple) else k,
                                    **s.model_dump()))
    return out


def _targets(agg, moe, disagg, n_disagg: int, n_disagg_done: int) -> list[TargetCheck]:
    sets = {"agg": agg, "moe": moe, "disagg": disagg}
    checks = []
    for name, which, metric, kind, limit in TARGETS:
        s = sets[which]
        text = f"{'<=' if kind == 'median' else '>='} {limit:.0%}"
        if kind == "answered":
            value, n = (n_disagg_done / n_disagg if n_disagg else None), n_disagg
        elif s is None:
            value, n = None, 0
        else:
            value, n = getattr(s, f"{metric}_median_ape" if kind == "median"
                               else f"{metric}_within_25pct"), s.n
        met = None if value is None else (value <= limit if kind == "median" else value >= limit)
        checks.append(TargetCheck(name=name, limit=text, value=value, n=n, met=met))
    return checks


def validate_serving(data: list[str | Path] | None = None,
                     profiles: dict[str, tuple[str, Profile]] | None = None,
                     predictor: str | None = None, baseline: str | None = None) -> ServingReport:
    """Map, predict and score every serving row (module docstring). `profiles` maps a GPU
    id to (profile name, Profile); `predictor` names one of serving_predict.predictors();
    `baseline` another predictor whose datasheet errors on the same aggregated rows are
    reported beside (skipped when it is the predictor itself)."""
    paths = [DEFAULT_SERVING] if data is None else list(data)
    pred = get_predictor(predictor)
    measured = [r for p in paths for r in read_serving(p)]
    targets, unmapped = map_serving_rows(measured, pred.capabilities)
    skipped = [_unmapped(u.measurement, u.reason) for u in unmapped]
    points, reasons = predict_targets(targets, pred)
    profs = profiles or {}
    cal: list[PredictedPoint | None] = [None] * len(targets)
    for gpu, (_, prof) in profs.items():
        idx = [i for i, t in enumerate(targets) if t.gpu == gpu and points[i] is not None]
        got, _ = predict_targets([targets[i] for i in idx], pred, prof)
        for i, g in zip(idx, got):
            cal[i] = g
    rows = []
    for i, t in enumerate(targets):
        if points[i] is None:
            skipped.append(_unmapped(t.measurement, reasons[i] or "no prediction"))
            continue
        rows.append(_row(t, points[i], cal[i], profs.get(t.gpu, ("", None))[0] or None))
    rows.sort(key=lambda r: (r.dataset, r.row))
    skipped.sort(key=lambda u: (u.dataset, u.row))
    by_mode = Counter(r.get("mode").lower() for r in measured)
    agg = [r for r in rows if r.mode == "agg"]
    dis = [r for r in rows if r.mode == "disagg"]
    with_cal = [r for r in agg if r.calibrated_ttft_s is not None]
    s_agg, s_moe, s_dis = summarize(agg), summarize([r for r in agg if r.moe]), summarize(dis)
    base = {}
    if baseline is not None and get_predictor(baseline).name != pred.name:
        other = validate_serving(paths, None, baseline)
        mine = {r.label for r in agg}
        base = dict(baseline_description=other.predictor_description,
                    baseline_summary=summarize([r for r in other.rows if r.label in mine]))
    return ServingReport(**base,
        data=[_rel(p) for p in paths], predictor=pred.name,
        predictor_description=pred.description, statistic=pred.statistic,
        n_rows=len(measured), n_agg=by_mode.get("agg", 0), n_disagg=by_mode.get("disagg", 0),
        summary=s_agg, summary_moe=s_moe, summary_disagg=s_dis,
        summary_calibrated=summarize(with_cal, calibrated=True),
        summary_calibrated_baseline=summarize(with_cal), groups=_groups(agg),
        targets=_targets(s_agg, s_moe, s_dis, by_mode.get("disagg", 0), len(dis)),
        unmapped_reasons=[ReasonCount(reason=k, n=v) for k, v in
                          Counter(reason_class(u.reason) for u in skipped).most_common()],
        profiles=sorted(name for name, _ in profs.values()), rows=rows, unmapped=skipped)


def _rel(p: str | Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


class MeasuredPoint(BaseModel):
    """A measured serving point of one configuration (for charts beside a prediction)."""

    model_config = ConfigDict(frozen=True)
    label: str
    concurrency: int
    ttft_s: float = Field(description="Measured mean TTFT.")
    tpot_s: float = Field(description="Measured mean TPOT.")
    engine_version: str
    assumptions: list[str]


def measured_points(model: str, gpu: str, engine: str, weights: str, *, tp: int = 1, pp: int = 1,
                    ep: int = 1, dp: int = 1, prompt: int, output: int,
                    data: list[str | Path] | None = None) -> list[MeasuredPoint]:
    """The aggregated rows that map to exactly this configuration (ids as the catalog,
    hardware_db and engine presets spell them; KV precision is not matched: the files do
    not state it; dp: the attention data-parallel groups), sorted by concurrency."""
    paths = [DEFAULT_SERVING] if data is None else list(data)
    targets, _ = map_serving_rows([r for p in paths for r in read_serving(p)])
    want = (model, gpu, engine, weights, tp, pp, ep, prompt, output)
    out = [MeasuredPoint(label=t.measurement.label, concurrency=t.concurrency,
                         ttft_s=t.measurement.ttft_s, tpot_s=t.measurement.tpot_s,
                         engine_version=t.measurement.get("backend_version"),
                         assumptions=t.assumptions)
           for t in targets if (t.model, t.gpu, t.engine, t.weights, t.tp, t.pp, t.ep, t.prompt,
                                t.output) == want and t.attention_dp == dp]
    return sorted(out, key=lambda m: (m.concurrency, m.label))
