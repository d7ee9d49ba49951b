"""Predictions vs measured data -> the accuracy table (DESIGN.md, "Truth").

    from perfmodel.analysis.validation.run import validate
    rep = validate()                      # data/public_measurements.csv + calibrate/data/raw-*.json
    rep.summary["decode_tok_s_per_user"].median_ape   #   + data/serving/aic_silicon_sample.csv
    rep.serving.summary.ttft_median_ape               # measured serving points (serving_run.py)

Each row is mapped to a scenario by general rules (perfmodel/analysis/validation/mapping.py), predicted
with datasheet defaults and, where a calibrated profile for that GPU exists, with the profile
too; rows that cannot be mapped or predicted are listed with the reason. Rows whose notes mark
them low-confidence are kept out of the summaries and reported separately.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from perfmodel.core.errors import PerfModelError, SpecFileError
from perfmodel.core.profile import Profile, load_profile
from perfmodel.analysis.validation import intervals as iv
from perfmodel.analysis.validation.diagnose import diagnose
from perfmodel.analysis.validation.mapping import Target, map_rows
from perfmodel.analysis.validation.own import OWN_KIND, read_raw
from perfmodel.analysis.validation.predictors import NotModelled, predict_target
from perfmodel.analysis.validation.serving_predict import get_predictor
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING, validate_serving
from perfmodel.analysis.validation.results import (GroupSummary, MetricSummary, RowResult, TargetCheck,
                                          UnmappedRow, ValidationReport)
from perfmodel.analysis.validation.table import METRICS, Measurement, read_table

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TABLE = ROOT / "data" / "public_measurements.csv"
OWN_DATA_DIR = ROOT / "calibrate" / "data"
PROFILE_DIR = ROOT / "calibrate" / "profiles"
WITHIN = 0.25
WORST_N = 8
# issue targets: (name, metric or None for all, source, limit on the median APE)
TARGETS = (("per-user decode tok/s, public, datasheet", "decode_tok_s_per_user", "public", 0.15),
           ("aggregate output tok/s, public, datasheet", "output_tok_s_total", "public", 0.25),
           ("TTFT, public, datasheet", "ttft_ms", "public", 0.25),
           ("TPOT, public, datasheet", "tpot_ms", "public", 0.25))
OWN_TARGET = 0.10
COVERAGE_BAND = (0.75, 0.85)


def default_data() -> list[Path]:
    """The repo's public table, then every raw result in calibrate/data/."""
    return [DEFAULT_TABLE] + sorted(OWN_DATA_DIR.glob("raw-*.json"))


def default_profiles() -> list[Path]:
    return sorted(PROFILE_DIR.glob("*.yaml"))


def load_rows(paths: list[str | Path], *, skip_bad: bool = False,
              skipped: list[str] | None = None) -> list[Measurement]:
    """Rows of every table (.csv) or raw result (.json). With skip_bad (auto-discovered
    files) a file that is not a measurement is noted in `skipped` instead of failing."""
    rows: list[Measurement] = []
    for p in paths:
        try:
            rows += read_raw(p) if str(p).lower().endswith(".json") else read_table(p)
        except PerfModelError as exc:
            if not skip_bad:
                raise
            if skipped is not None:
                skipped.append(f"{_rel(p)} (skipped: {exc})")
    return rows


def _source(m: Measurement) -> str:
    return "own" if m.source_kind == OWN_KIND else "public"


def _summary(rows: list[RowResult], calibrated: bool = False) -> MetricSummary | None:
    if not rows:
        return None
    ape = np.array([r.calibrated_ape if calibrated else r.ape for r in rows], dtype=float)
    pred = [r.calibrated_predicted if calibrated else r.predicted for r in rows]
    logs = np.abs([math.log(r.measured / p) for r, p in zip(rows, pred)])
    cov = [r.calibrated_covered if calibrated else r.covered for r in rows]
    cov = [c for c in cov if c is not None]
    return MetricSummary(n=len(rows), median_ape=float(np.median(ape)),
                         median_abs_log_ratio=float(np.median(logs)),
                         within_25pct=float(np.mean(ape <= WITHIN)),
                         interval_coverage=float(np.mean(cov)) if cov else None)


def _by_metric(rows: list[RowResult], calibrated: bool = False) -> dict[str, MetricSummary]:
    out = {}
    for metric in METRICS:
        s = _summary([r for r in rows if r.metric == metric], calibrated)
        if s is not None:
            out[metric] = s
    return out


def _points(prof: Profile) -> float:
    try:
        return float(prof.meta.get("points") or 0)
    except (TypeError, ValueError):
        return 0.0


def _profiles(paths: list[str | Path] | None) -> dict[str, tuple[str, Profile]]:
    """gpu id -> (name, profile). Given paths: the first profile for a GPU wins. Found in
    calibrate/profiles/: the one fitted on the most points (meta.points) wins."""
    out: dict[str, tuple[str, Profile]] = {}
    loaded: list[tuple[str, Profile]] = []
    for p in (default_profiles() if paths is None else paths):
        try:
            prof = load_profile(p)
        except PerfModelError:
            raise
        except ValueError as exc:   # e.g. a NUL byte in the path
            raise SpecFileError(f"{p!r}: cannot read profile ({exc})") from None
        loaded.append((Path(p).name, prof))
    if paths is None:
        loaded.sort(key=lambda np_: (-_points(np_[1]), np_[0]))
    for name, prof in loaded:
        if prof.gpu and prof.gpu not in out:
            out[prof.gpu] = (name, prof)
    return out


def _kind(t: Target, calibrated: bool) -> tuple[str, str, bool]:
    return (t.measurement.metric, iv.engine_family(t.engine), calibrated)


def _workload(t: Target) -> str:
    load = {"batch": f"batch {t.batch}", "rate": f"{t.rate_per_s or 0:g} req/s",
            "max_throughput": "max throughput", "capacity": "capacity"}[t.load]
    return f"{load}, {t.prompt} in / {t.output} out"


def validate(data: list[str | Path] | None = None,
             profiles: list[str | Path] | None = None,
             serving: list[str | Path] | None = None,
             serving_predictor: str | None = None, strict: bool = False) -> ValidationReport:
    """Map, predict and score every row (see module docstring). `serving`: measured serving
    tables (serving_run.py); by default data/serving/aic_silicon_sample.csv when `data` is
    also the default, none otherwise; [] skips them. `strict`: a row whose GPU variant is not
    stated stays unmapped instead of taking the likeliest variant."""
    paths = default_data() if data is None else list(data)
    if serving is None:
        serving = [DEFAULT_SERVING] if data is None else []
    if serving_predictor is not None:
        get_predictor(serving_predictor)     # a bad name fails even without serving data
    bad_files: list[str] = []
    rows = load_rows(paths, skip_bad=data is None, skipped=bad_files)
    profs = _profiles(profiles)
    targets, unmapped = map_rows(rows, strict=strict)
    preds: list[tuple[Target, object, object]] = []
    skipped = [UnmappedRow(**_unmapped(u.measurement, u.reason)) for u in unmapped]
    for t in targets:
        try:
            p = predict_target(t)
            cal = predict_target(t, profs[t.gpu][1]) if t.gpu in profs else None
        except NotModelled as exc:
            skipped.append(UnmappedRow(**_unmapped(t.measurement, str(exc))))
            continue
        except PerfModelError as exc:   # mapped, but the model rejects the configuration
            skipped.append(UnmappedRow(**_unmapped(t.measurement, f"the model refuses: {exc}")))
            continue
        preds.append((t, p, cal))

    residuals: dict[tuple[str, str, bool], list[float]] = {}
    index: dict[tuple[int, bool], tuple[tuple, int]] = {}
    for i, (t, p, cal) in enumerate(preds):
        if t.measurement.low_confidence:
            continue
        for flag, pr in ((False, p), (True, cal)):
            if pr is None:
                continue
            key = _kind(t, flag)
            residuals.setdefault(key, []).append(math.log(t.measurement.measured) - math.log(pr.value))
            index[(i, flag)] = (key, len(residuals[key]) - 1)

    results = [_row_result(i, t, p, cal, residuals, index, profs) for i, (t, p, cal) in enumerate(preds)]
    results.sort(key=lambda r: (r.dataset, r.row))
    skipped.sort(key=lambda u: (u.dataset, u.row))
    scored = [r for r in results if not r.low_confidence]
    with_cal = [r for r in scored if r.calibrated_predicted is not None]
    return ValidationReport(
        summary=_by_metric(scored),
        summary_by_source={src: _by_metric([r for r in scored if _src(r) == src])
                           for src in ("public", "own") if any(_src(r) == src for r in scored)},
        summary_calibrated=_by_metric(with_cal, calibrated=True),
        summary_calibrated_baseline=_by_metric(with_cal),
        groups=_groups(scored), coverage=_coverage(scored), targets=_targets(scored),
        worst={src: [r.label for r in sorted((r for r in scored if _src(r) == src),
                                             key=lambda r: -abs(r.log_ratio))[:WORST_N]]
               for src in ("public", "own") if any(_src(r) == src for r in scored)},
        rows=results, unmapped=skipped,
        data=[_rel(p) for p in paths if not any(b.startswith(_rel(p) + " ") for b in bad_files)]
        + bad_files,
        profiles=[name for name, _ in profs.values()], interval_level=iv.LEVEL,
        serving=validate_serving(serving, profs, serving_predictor, baseline="steady")
        if serving else None)


def fit_intervals(report: ValidationReport) -> iv.IntervalTable:
    """Interval factors from the report's scored rows (datasheet and calibrated kinds)."""
    residuals: dict[tuple[str, str, bool], list[float]] = {}
    for r in report.rows:
        if r.low_confidence:
            continue
        residuals.setdefault((r.metric, r.engine_family, False), []).append(r.log_ratio)
        if r.calibrated_predicted is not None:
            residuals.setdefault((r.metric, r.engine_family, True), []).append(
                math.log(r.measured / r.calibrated_predicted))
    return iv.fit(residuals, fitted_on=report.data)


def _src(r: RowResult) -> str:
    return "own" if r.source_kind == OWN_KIND else "public"


def _rel(p: str | Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


def _unmapped(m: Measurement, reason: str) -> dict:
    return dict(dataset=m.dataset, row=m.row, label=m.label, metric=m.metric, gpu=m.gpu,
                model=m.model, framework=m.framework, value=m.value, reason=reason)


def _interval(residuals, index, i: int, flag: bool, t: Target, value: float):
    """Leave-one-out interval and coverage of prediction (i, flag); low-confidence rows are
    not among the residuals, so theirs uses every residual of the kind."""
    key, j = index.get((i, flag), (_kind(t, flag), None))
    bounds = iv.loo_bounds(residuals, key, j)
    if bounds is None:
        return value, value, False
    lo, hi = value * math.exp(bounds[0]), value * math.exp(bounds[1])
    return lo, hi, bool(lo <= t.measurement.measured <= hi)


def _row_result(i, t: Target, p, cal, residuals, index, profs) -> RowResult:
    m = t.measurement
    lo, hi, covered = _interval(residuals, index, i, False, t, p.value)
    cal_fields = {}
    if cal is not None:
        cal_fields = dict(calibrated_profile=profs[t.gpu][0], calibrated_predicted=cal.value,
                          calibrated_ape=abs(cal.value - m.measured) / m.measured,
                          calibrated_covered=_interval(residuals, index, i, True, t, cal.value)[2])
    ape = abs(p.value - m.measured) / m.measured
    return RowResult(
        dataset=m.dataset, row=m.row, label=m.label, source_kind=m.source_kind, source=m.source,
        metric=m.metric, model=t.model, gpu=t.gpu, engine=t.engine,
        engine_family=iv.engine_family(t.engine), num_gpus=t.tp * t.pp,
        precision=f"W:{t.weights.label} A:{t.activations} KV:{t.kv}", workload=_workload(t),
        measured=m.measured, predicted=p.value, ape=ape, log_ratio=math.log(m.measured / p.value),
        within_25pct=ape <= WITHIN, interval_lo=lo, interval_hi=hi, covered=covered,
        low_confidence=m.low_confidence, bound=p.bound, fits=p.fits, warnings=p.warnings,
        assumptions=t.assumptions, diagnosis=diagnose(t, p.value, p.bound, p.fits), **cal_fields)


def _groups(rows: list[RowResult]) -> list[GroupSummary]:
    keys = sorted({(r.metric, r.gpu, r.engine) for r in rows},
                  key=lambda k: (METRICS.index(k[0]), k[1], k[2]))
    out = []
    for metric, gpu, engine in keys:
        s = _summary([r for r in rows if (r.metric, r.gpu, r.engine) == (metric, gpu, engine)])
        out.append(GroupSummary(metric=metric, gpu=gpu, engine=engine, **s.model_dump()))
    return out


def _coverage(rows: list[RowResult]) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for src in ("public", "own", "all"):
        sel = [r for r in rows if src == "all" or _src(r) == src]
        if sel:
            out[f"{src}_datasheet"] = float(np.mean([r.covered for r in sel]))
            out[f"{src}_n"] = len(sel)
        cal = [r.calibrated_covered for r in sel if r.calibrated_covered is not None]
        if cal:
            out[f"{src}_calibrated"] = float(np.mean(cal))
            out[f"{src}_calibrated_n"] = len(cal)
    return out


def _targets(rows: list[RowResult]) -> list[TargetCheck]:
    checks = []
    for name, metric, src, limit in TARGETS:
        s = _summary([r for r in rows if r.metric == metric and _src(r) == src])
        checks.append(TargetCheck(name=f"{name}: median error", limit=f"<= {limit:.0%}",
                                  value=s.median_ape if s else None, n=s.n if s else 0,
                                  met=(s.median_ape <= limit) if s else None))
    pub = [r.covered for r in rows if _src(r) == "public"]
    lo, hi = COVERAGE_BAND
    cov = float(np.mean(pub)) if pub else None
    checks.append(TargetCheck(name=f"{iv.LEVEL:.0%} intervals, public: leave-one-out coverage",
                              limit=f"{lo:.0%}-{hi:.0%}", value=cov, n=len(pub),
                              met=(lo <= cov <= hi) if pub else None))
    own = [r.calibrated_ape for r in rows if _src(r) == "own" and r.calibrated_ape is not None]
    checks.append(TargetCheck(name="own measurements with their GPU's profile: median error",
                              limit=f"<= {OWN_TARGET:.0%}", n=len(own),
                              value=float(np.median(own)) if own else None,
                              met=(float(np.median(own)) <= OWN_TARGET) if own else None))
    return checks
