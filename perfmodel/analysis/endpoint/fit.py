"""Fit an engine's overheads to a `perfmodel bench-endpoint` run (`perfmodel calibrate engine`).

Each level with a measured TTFT p50 and TPOT p50 is modelled as perfmodel/analysis/endpoint/predict.py
does it: a batch of B = min(concurrency, requests) sequences with the level's mean prompt and
mean output length. The engine preset's two per-call constants enter the model additively
(roofline.py, predict.py):

    TPOT(c, r)  = TPOT0 + c            c = cpu_overhead_per_step_s (every decode step)
    TTFT(c, r)  = TTFT0 + c + r        r = per_request_overhead_s; the prefill is one step

where TPOT0 and TTFT0 are the model's values with both set to 0. (c, r) minimise

    sum over levels  (log TPOT(c, r) - log TPOT_p50)^2 + (log TTFT(c, r) - log TTFT_p50)^2

on a log grid with 0 allowed, refined three times. With fit_launch, launch_s (the host cost of
one kernel; it only matters where the host, not the GPU, bounds a step: eager engines) is
searched the same way around that inner fit, each candidate re-running the model. The errors
reported before and after are recomputed through perfmodel.api.evaluate, not the
additive shortcut. Caveat: a server that queues requests (one slot) puts waiting time into TTFT
at concurrency > 1, which the fit then reads as overhead; fit on concurrency 1 for such servers.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.api import evaluate, make_query, resolve
from perfmodel.analysis.calibration.stats import ratio_errors
from perfmodel.core.files import DATA_MAX_BYTES, load_mapping, validate_spec
from perfmodel.core.errors import PerfModelError, SpecFileError
from perfmodel.analysis.endpoint.run import SCHEMA, BenchmarkRun
from perfmodel.core.predict import Scenario
from perfmodel.core.profile import Profile

FRAMEWORK_ENGINE = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm",
                    "trtllm": "trtllm", "llama.cpp": "llama-cpp", "llama-cpp": "llama-cpp",
                    "llama-cpp-python": "llama-cpp", "ollama": "llama-cpp",
                    "tgi": "tgi", "text-generation-inference": "tgi", "lmdeploy": "lmdeploy",
                    "lmdeploy-pytorch": "lmdeploy-pytorch"}
GRID = np.concatenate(([0.0], np.geomspace(1e-7, 10.0, 161)))   # seconds
LAUNCH_GRID = np.concatenate(([0.0], np.geomspace(1e-7, 1e-3, 25)))


class FitTarget(BaseModel):
    """The modelled deployment the run is compared with; `sources` says where each id came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    model: str
    gpu: str
    engine: str
    weights: str = "bf16"
    kv: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)


class LevelFit(BaseModel):
    """One level: its workload, the measured p50s and the model before and after the fit (s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    concurrency: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    ttft_before_s: float
    tpot_before_s: float
    ttft_after_s: float
    tpot_after_s: float


class EngineFit(BaseModel):
    """Fitted engine parameters, the preset's values, and log errors before/after."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    target: FitTarget
    gpu_id: str = Field(description="hardware_db id of the resolved GPU.")
    params: dict[str, float] = Field(description="Fitted EngineProfile fields (seconds).")
    preset: dict[str, float] = Field(description="The same fields before the fit.")
    error_before: dict[str, float] = Field(description="ratio_errors over TTFT and TPOT p50.")
    error_after: dict[str, float]
    points: int = Field(description="Measured p50 values used (TTFT and TPOT per level).")
    levels: list[LevelFit]
    warnings: list[str] = []


def load_run(path: str | Path) -> BenchmarkRun:
    """A BenchmarkRun from its JSON; errors name the file and the missing or bad field."""
    p = Path(path)
    data = load_mapping(p, what="bench-endpoint run", fmt="json", max_bytes=DATA_MAX_BYTES)
    if data.get("schema_version") != SCHEMA:
        got = data.get("schema_version", "no schema_version field")
        raise SpecFileError(f"{p}: schema_version: expected {SCHEMA!r} (a perfmodel "
                            f"bench-endpoint --out file), got {got!r}")
    return validate_spec(data, BenchmarkRun, where=str(p))


def fit_target(run: BenchmarkRun, *, model: str | None = None, gpu: str | None = None,
               engine: str | None = None, weights: str | None = None,
               kv: str | None = None) -> FitTarget:
    """Ids from the arguments, else the run's predict block, else its record (model, framework)."""
    pred, rec = run.predict, run.record
    src: dict[str, str] = {}

    def pick(name, flag, from_predict, from_record=None, default=None):
        for value, where in ((flag, "flag"), (from_predict, "predict"), (from_record, "record"),
                             (default, "default")):
            if value:
                src[name] = where
                return value
        return None
    fw = FRAMEWORK_ENGINE.get((rec.framework or "").strip().lower())
    out = {"model": pick("model", model, pred and pred.model, rec.model),
           "gpu": pick("gpu", gpu, pred and pred.gpu),
           "engine": pick("engine", engine, pred and pred.engine, fw),
           "weights": pick("weights", weights, pred and pred.weights, None, "bf16"),
           "kv": pick("kv", kv, pred and pred.kv)}
    if out["gpu"] is None:
        raise PerfModelError(f"the run names no hardware id (predict.gpu is unset; record.gpu_name "
                             f"is {rec.gpu_name!r}): pass --gpu, e.g. h100-sxm or a YAML path")
    if out["engine"] is None:
        raise PerfModelError(f"the run names no engine preset (predict.engine is unset; "
                             f"record.framework is {rec.framework!r}): pass --engine")
    return FitTarget(**out, sources=src)


def _workloads(run: BenchmarkRun, max_context: int):
    """(level, batch, prompt, output) per level with a TTFT or TPOT p50, as predict_level does."""
    rows, warnings = [], []
    cfg = run.config
    for lv in run.levels:
        s = lv.stats
        if s.ok == 0 or (s.ttft_p50_s is None and s.tpot_p50_s is None):
            warnings.append(f"concurrency {lv.concurrency}: no successful request, skipped")
            continue
        prompt = (round((s.prompt_tokens_min + s.prompt_tokens_max) / 2)
                  if s.prompt_tokens_min is not None and s.prompt_tokens_max is not None
                  else cfg.prompt_tokens)
        prompt, output = max(1, prompt), max(1, round(s.output_tokens_total / s.ok))
        if prompt + output > max_context:
            warnings.append(f"concurrency {lv.concurrency}: {prompt}+{output} tokens exceed the "
                            f"model's {max_context}-token context, skipped")
            continue
        rows.append((lv, min(lv.concurrency, cfg.requests), prompt, output))
    return rows, warnings


def _times(sc: Scenario, rows, **engine_update):
    """(TTFT, TPOT) per row from api.evaluate on the scenario with the engine's parameters
    changed (ids cannot name a fitted engine, so the Query gives the workload only)."""
    eng = sc.engine.model_copy(update=engine_update)
    B, P, O = (np.array([r[i] for r in rows], dtype=int) for i in (1, 2, 3))
    q = make_query(model=sc.model, gpu=sc.hw, engine=sc.engine.id, tp=sc.dep.tp, pp=sc.dep.pp)
    ev = evaluate(q, scenario=replace(sc, engine=eng), batch=B, prompt_tokens=P,
                  output_tokens=O, context_tokens=P)
    return ev.ttft_s.astype(float), ev.tpot_s.astype(float)


def _fit_cr(t0, f0, mt, mf):
    """(c, r, cost) minimising the log objective of the module docstring on refined grids."""
    lt, lf = np.log(mt), np.log(mf)
    cs = rs = GRID
    best = (0.0, 0.0, np.inf)
    for _ in range(4):
        C, R = np.meshgrid(cs, rs, indexing="ij")
        cost = (((np.log(t0[None, None, :] + C[..., None]) - lt) ** 2).sum(-1)
                + ((np.log(f0[None, None, :] + (C + R)[..., None]) - lf) ** 2).sum(-1))
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        if cost[i, j] < best[2]:
            best = (float(C[i, j]), float(R[i, j]), float(cost[i, j]))
        cs, rs = (_around(v, cs) for v in best[:2])
    return best


def _around(v: float, grid: np.ndarray) -> np.ndarray:
    """A finer grid around v (kept with 0 as a candidate)."""
    pos = grid[grid > 0]
    step = (pos[1] / pos[0]) if pos.size > 1 else 10.0
    if v <= 0:
        return np.concatenate(([0.0], np.geomspace(pos[0] / step, pos[0] * step, 21)))
    return np.concatenate(([0.0], np.geomspace(v / step, v * step, 21)))


def fit_engine(run: BenchmarkRun, target: FitTarget, *, profile=None, fit_launch: bool = False,
               hardware_dir: str | None = None) -> EngineFit:
    """Fit cpu_overhead_per_step_s and per_request_overhead_s (and launch_s) to the run."""
    sc, warnings, _ = resolve(target.model, target.gpu, weights=target.weights, kv=target.kv,
                              engine=target.engine, profile=profile, hardware_dir=hardware_dir)
    rows, skipped = _workloads(run, sc.model.max_context)
    warnings = warnings + skipped
    mt = np.array([r[0].stats.tpot_p50_s or np.nan for r in rows], dtype=float)
    mf = np.array([r[0].stats.ttft_p50_s or np.nan for r in rows], dtype=float)
    has_t, has_f = np.isfinite(mt) & (mt > 0), np.isfinite(mf) & (mf > 0)
    if not rows or not has_t.any() or not has_f.any():
        raise PerfModelError("the run has no level with a positive ttft_p50_s and one with a "
                             "positive tpot_p50_s (levels[].stats): nothing to fit")
    names = ["cpu_overhead_per_step_s", "per_request_overhead_s"] + (["launch_s"] if fit_launch else [])
    preset = {n: float(getattr(sc.engine, n)) for n in names}

    def inner(launch):
        f0, t0 = _times(sc, rows, cpu_overhead_per_step_s=0.0, per_request_overhead_s=0.0,
                        launch_s=launch)
        c, r, cost = _fit_cr(t0[has_t], f0[has_f], mt[has_t], mf[has_f])
        return cost, {"cpu_overhead_per_step_s": c, "per_request_overhead_s": r, "launch_s": launch}

    if fit_launch:
        cands = LAUNCH_GRID
        best = min((inner(float(v)) for v in cands), key=lambda cp: cp[0])
        for _ in range(2):
            cands = _around(best[1]["launch_s"], cands)
            best = min([best] + [inner(float(v)) for v in cands], key=lambda cp: cp[0])
        params = best[1]
    else:
        params = inner(float(sc.engine.launch_s))[1]
    params = {n: params[n] for n in names}
    fb, tb = _times(sc, rows)
    fa, ta = _times(sc, rows, **params)
    meas = np.concatenate((mt[has_t], mf[has_f]))
    levels = [LevelFit(concurrency=lv.concurrency, batch=b, prompt_tokens=p, output_tokens=o,
                       ttft_p50_s=lv.stats.ttft_p50_s, tpot_p50_s=lv.stats.tpot_p50_s,
                       ttft_before_s=float(fb[i]), tpot_before_s=float(tb[i]),
                       ttft_after_s=float(fa[i]), tpot_after_s=float(ta[i]))
              for i, (lv, b, p, o) in enumerate(rows)]
    return EngineFit(target=target, gpu_id=sc.hw.id, params=params, preset=preset,
                     error_before=ratio_errors(np.concatenate((tb[has_t], fb[has_f])), meas),
                     error_after=ratio_errors(np.concatenate((ta[has_t], fa[has_f])), meas),
                     points=int(meas.size), levels=levels, warnings=warnings)


def engine_profile(fit: EngineFit, *, base: Profile | None = None,
                   source: str | None = None) -> Profile:
    """A profile with the fitted engine parameters, merged into `base` when given."""
    eng = fit.target.engine
    engines = dict(base.engines) if base is not None else {}
    engines[eng] = {**engines.get(eng, {}), **{k: float(f"{v:.4g}") for k, v in fit.params.items()}}
    meta = dict(base.meta) if base is not None else {}
    meta.setdefault("engine_fits", {})
    meta["engine_fits"] = {**meta["engine_fits"], eng: {
        "run": source, "date": datetime.now(timezone.utc).date().isoformat(),
        "model": fit.target.model, "gpu": fit.target.gpu, "weights": fit.target.weights,
        "points": fit.points, "levels": [lv.concurrency for lv in fit.levels],
        "preset": fit.preset, "error_before": fit.error_before, "error_after": fit.error_after}}
    return Profile(gpu=(base.gpu if base is not None and base.gpu else fit.gpu_id),
                   efficiency=base.efficiency if base is not None else None,
                   link_latency_s=base.link_latency_s if base is not None else None,
                   engines=engines, meta=meta)
