"""raw bench result -> calibrated Profile + FitReport (numpy only; no torch).

1. Microbenchmarks give direct estimates (micro.py). mem_bw_fraction, gemm_max, gemm_half_m and
   attn_mem are taken as measured. kernel_s (trivial kernels replayed from a graph) is only
   a lower bound for real kernels, so it is a start value that step 3 refines.
2. Kernel counts of the e2e steps give kernels_per_layer per engine: (kernels - the
   model's non-layer kernels) / layers, the median over the mode's 16-bit records; and
   act_quant_kernels_per_layer: the median fp8 - bf16 count at the same shape / layers. The bench's
   compile mode without CUDA graphs sets torch-compile's graph_launch_s to 0.
3. The e2e points the fit may see (points.py holds ~30% out) fit the remaining parameters
   by least squares on log time through perfmodel's own step_time (solve.py): kernel_s,
   and per engine launch_s, graph_launch_s, cpu_overhead_per_step_s, per_request_overhead_s
   (hf_generate only), elementwise_traffic and quant_kernel_efficiency (fp8 points only,
   starting at the fp8/bf16 GEMV ratio). Efficiencies without a microbenchmark (a CPU run
   has no launch device timing, ...) start at their defaults and are fitted too, except
   attn_compute and link_fraction, which keep their defaults: see NOT_FITTED.
   A parameter too few points depend on keeps its start value, and the report says so.
4. Errors on fit and held-out points, beside the datasheet-only prediction (default
   efficiencies, preset engines) of the same points.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from perfmodel.analysis.calibration import micro as micro_mod
from perfmodel.analysis.calibration import points as pts
from perfmodel.analysis.calibration import solve
from perfmodel.analysis.calibration.raw import check_raw, hardware_for, host_key, model_from_shape
from perfmodel.analysis.calibration.report import FitParam, FitPoint, FitReport, summarize
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError
from perfmodel.core.ops import ops
from perfmodel.core.profile import HOST_FIELDS, Profile
from perfmodel.core.roofline import FUSED_ELEMENTWISE_BYTES
from perfmodel.core.specs import Efficiency, EngineProfile, HardwareSpec, Precision

PRIOR_MEASURED = 0.15    # log-units prior width around a microbenchmark estimate (~15%)
PRIOR_KERNEL = 1.0        # kernel_s: trivial kernels only bound real ones from below
PRIOR_GUESS = 1.0         # around a default or preset (a factor e either way)
EFF_FIELDS = ("mem_bw_fraction", "gemm_max", "gemm_half_m", "attn_compute", "attn_mem", "kernel_s",
              "link_fraction")
ENGINE_FIELDS = ("launch_s", "graph_launch_s", "cpu_overhead_per_step_s", "per_request_overhead_s",
                 "elementwise_traffic", "quant_kernel_efficiency")
PRIOR_WIDE = {"elementwise_traffic": 2.0}   # unfused chains may move several times the op count
SHARED_ENGINES = ("torch-eager", "torch-graph")
SHARED_FIELDS = ("elementwise_traffic", "quant_kernel_efficiency")
NOT_FITTED = {
    "attn_compute": "kept its default: the attention records are decode steps (memory-bound), and in "
                    "the e2e prefill points attention time trades off against elementwise traffic, "
                    "so a fitted value would describe this bench's SDPA path, not the card",
    "link_fraction": "kept its default: the bench runs on one device (no collectives)",
}


def fit_profile(raw: dict, gpu: HardwareSpec | str | None = None, *,
                hardware_dir: str | None = None,
                base: Profile | None = None) -> tuple[Profile, FitReport]:
    """Fit a profile to one calibrate/bench.py raw result (a parsed JSON dict).

    gpu: the card (a HardwareSpec or hardware_db id); None picks it from the raw env (a CPU
    run gets a spec built from its own measurements). base: a profile of the same card whose
    link fit (efficiency.link_fraction, link_latency_s; calibrate/fit_link.py) is carried over, since
    this single-device bench cannot measure links. Raises PerfModelError on bad input."""
    check_raw(raw)
    hw, how = hardware_for(raw, gpu, hardware_dir)
    model = model_from_shape(raw["e2e"]["model"])
    default = default_efficiency(hw)
    if base is not None and base.gpu not in (None, hw.id):
        raise PerfModelError(f"base profile was fitted on {base.gpu}, not {hw.id}")
    link = base.efficiency.link_fraction if base is not None and base.efficiency is not None else None
    micro = micro_mod.estimate(raw, hw, default)
    points, notes = pts.e2e_points(raw)
    notes = [f"card: {hw.id} ({how})"] + micro.notes + notes
    if len(points) < 2:
        raise PerfModelError(f"raw JSON: {len(points)} usable e2e point(s); the fit needs at least 2")
    engines_used = sorted({p.engine for p in points})
    start_eng, eng_params, measured = _engine_start(raw, model, points, micro, notes)
    params = _eff_params(default, micro, link) + eng_params
    fit_pts = [p for p in points if not p.held_out]

    cache: dict = {}      # same model and card throughout: groups are memoized (points.predict)

    def predict_on(sel):
        def f(values: dict[str, float]) -> np.ndarray:
            eff, engines = _apply(values, default, start_eng)
            return pts.predict(sel, model, hw, eff, engines, cache)
        return f

    sol = solve.fit(predict_on(fit_pts), np.array([p.measured_s for p in fit_pts]), params)
    eff, engines = _apply(sol.values, default, start_eng)
    eff = eff.model_copy(update={"source": _source(raw, hw)})
    fitted = pts.predict(points, model, hw, eff, engines)
    datasheet = pts.predict(points, model, hw, default, {e: ENGINES[e] for e in engines_used})
    _check_finite(points, fitted, datasheet, eff, engines)
    rows = [FitPoint(name=p.name, mode=p.mode, engine=p.engine, dtype=p.dtype, phase=p.phase,
                     batch=p.B, new_tokens=p.T, context=p.S, measured_s=p.measured_s,
                     fitted_s=float(f), datasheet_s=float(d), held_out=p.held_out)
            for p, f, d in zip(points, fitted, datasheet)]
    report = FitReport(gpu=hw.id, device=str(raw["env"]["device"]), points=rows,
                       params=_param_rows(params, sol, default, measured, engines_used),
                       fit=summarize(rows, False), held_out=summarize(rows, True),
                       gemm_by_dtype=micro.gemm_by_dtype, notes=notes)
    prof = _profile(raw, hw, eff, engines, report)
    if base is not None and base.link_latency_s is not None:
        prof = prof.model_copy(update={"link_latency_s": base.link_latency_s})
    if base is not None and base.hosts:   # other hosts' fits stay; this run's host is replaced
        prof = prof.model_copy(update={"hosts": {**base.hosts, **prof.hosts}})
    return prof, report


def _check_finite(points, fitted, datasheet, eff, engines) -> None:
    """No NaN or inf leaves the fit: a point the model cannot price is an input error."""
    for p, f, d in zip(points, fitted, datasheet):
        if not (np.isfinite(f) and np.isfinite(d) and f > 0 and d > 0):
            raise PerfModelError(f"raw JSON: the model gives no finite time for e2e point "
                                 f"'{p.name}'; check its batch/context/shape fields")
    values = [v for v in eff.model_dump(exclude={"source", "gemm_by_dtype",
                                                 "shard_depth_half_k"}).values()
              if v is not None]   # optional per-chip rates (Efficiency.attn_compute_fa2, ...)
    for eng in engines.values():
        values += [getattr(eng, f) or 0.0 for f in ("kernels_per_layer", "act_quant_kernels_per_layer")
                   + ENGINE_FIELDS]
    if not all(np.isfinite(v) for v in values):
        raise PerfModelError("raw JSON: the fit did not converge to finite parameters; "
                             "check the records' seconds")


# ------------------------------------------------------------------------ parameters

def _param(name, start, kind, prior_log, source, **kw) -> solve.Param:
    """A Param whose prior width is given in log(theta) units."""
    sigma = prior_log / (1.0 - min(start, 0.999)) if kind == "frac" else prior_log
    return solve.Param(name, start, kind, sigma, source, **kw)


def _eff_params(default: Efficiency, micro: micro_mod.MicroEstimates,
                link: float | None) -> list[solve.Param]:
    """Efficiencies: measured ones fixed, kernel_s refined, the others from defaults."""
    out = []
    for f in EFF_FIELDS:
        est = micro.eff.get(f)
        kind = "pos" if f in ("gemm_half_m", "kernel_s") else "frac"
        if f == "link_fraction" and link is not None:
            out.append(_param("efficiency.link_fraction", link, kind, PRIOR_GUESS,
                              "base profile's link fit (calibrate/fit_link.py)", fixed=True,
                              note="measured"))
        elif f in NOT_FITTED:
            out.append(_param(f"efficiency.{f}", getattr(default, f), kind, PRIOR_GUESS, "default",
                              fixed=True, note=NOT_FITTED[f]))
        elif est is not None:
            src = f"{est.source} ({est.points} records)"
            out.append(_param(f"efficiency.{f}", est.value, kind, PRIOR_KERNEL, src,
                              fixed=f != "kernel_s", note="measured" if f != "kernel_s" else ""))
        else:
            out.append(_param(f"efficiency.{f}", getattr(default, f), kind, PRIOR_GUESS, "default"))
    return out


def _non_layer_kernels(model) -> float:
    """Kernels perfmodel counts outside the layers (embedding, final norm, lm_head, sampling)."""
    return sum(float(np.max(op.cost.kernels)) for op in ops(model, Precision.of("bf16"), 1, 1, 1)
               if not op.per_layer)


def _kernel_counts(recs, mode) -> tuple[list[float], list[float]]:
    """Kernel counts of a mode's 16-bit steps, and (fp8 count - bf16 count) of the steps
    measured in both dtypes at the same phase, batch, context and length: W8A8 launches
    activation casts that 16-bit steps do not (EngineProfile.act_quant_kernels_per_layer)."""
    key = lambda r: (r["phase"], r["batch"], r["context"], r["new_tokens"])  # noqa: E731
    mine = [r for r in recs if r["mode"] == mode and r.get("kernels")]
    half = {key(r): float(r["kernels"]) for r in mine if r["dtype"] in ("bf16", "fp16")}
    fp8 = {key(r): float(r["kernels"]) for r in mine if r["dtype"] == "fp8_e4m3"}
    counts = list(half.values()) if half else [float(r["kernels"]) for r in mine]
    return counts, [fp8[k] - half[k] for k in fp8 if k in half]


def _engine_start(raw, model, points, micro, notes):
    """Start engines (presets + measured kernel counts + what the bench's modes imply),
    their free parameters, and the measured fields."""
    recs = raw["e2e"]["records"]
    graphless = pts.compile_kind(raw) == "graphless"
    start: dict[str, EngineProfile] = {}
    params: list[solve.Param] = []
    measured: dict[str, tuple[float, str]] = {}
    base = _non_layer_kernels(model)
    for eid in sorted({p.engine for p in points}):
        eng = ENGINES[eid]
        mine = [p for p in points if p.engine == eid]
        mode = mine[0].mode
        upd: dict[str, float] = {}
        src: dict[str, str] = {}
        counts, quant = _kernel_counts(recs, mode)
        if counts:
            upd["kernels_per_layer"] = max((float(np.median(counts)) - base) / model.num_layers, 0.1)
            measured[f"{eid}.kernels_per_layer"] = (upd["kernels_per_layer"],
                                                    f"median kernel count of {len(counts)} 16-bit {mode} steps")
        else:
            notes.append(f"{eid}.kernels_per_layer kept its preset {eng.kernels_per_layer:g}: "
                         f"no kernel count for {mode} steps")
        if quant:
            upd["act_quant_kernels_per_layer"] = max(float(np.median(quant)) / model.num_layers, 0.0)
            measured[f"{eid}.act_quant_kernels_per_layer"] = (
                upd["act_quant_kernels_per_layer"],
                f"median fp8 - bf16 kernel count of {len(quant)} {mode} steps at the same shape")
        if mode == "compile" and graphless:
            upd["graph_launch_s"] = 0.0
            measured[f"{eid}.graph_launch_s"] = (0.0, "compiled without CUDA graphs")
            notes.append(f"{eid}: the bench compiled the step without CUDA graphs (e2e.modes), so "
                         "its kernels are launched from the host: launch_s is fitted, graph_launch_s = 0")
        host_launched = eng.graph_launch_s == 0 or "graph_launch_s" in upd
        if mode in ("eager", "compile") and host_launched and micro.launch_s:
            upd["launch_s"] = micro.launch_s.value
            src["launch_s"] = micro.launch_s.source
        if any(p.dtype == "fp8_e4m3" for p in mine) and micro.quant_kernel_efficiency:
            upd["quant_kernel_efficiency"] = micro.quant_kernel_efficiency.value
            src["quant_kernel_efficiency"] = micro.quant_kernel_efficiency.source
        upd["elementwise_traffic"] = FUSED_ELEMENTWISE_BYTES if eng.fused_elementwise else 1.0
        src["elementwise_traffic"] = "preset: op-list bytes, x0.5 when fused"
        eng = eng.model_copy(update=upd)
        start[eid] = eng
        for f in ENGINE_FIELDS:
            v = getattr(eng, f)
            if v is None or v <= 0 or (f == "per_request_overhead_s" and not any(p.request for p in mine)):
                continue   # 0 by construction (no host launches inside a graph), or unused
            if f == "quant_kernel_efficiency" and "quant_kernel_efficiency" not in upd:
                continue   # no low-bit points
            kind = "frac" if f == "quant_kernel_efficiency" else "pos"
            prior = PRIOR_MEASURED if f == "quant_kernel_efficiency" else PRIOR_WIDE.get(f, PRIOR_GUESS)
            params.append(_param(f"{eid}.{f}", v, kind, prior, src.get(f, f"{eid} preset")))
    return start, _share(params), measured


def _share(params: list[solve.Param]) -> list[solve.Param]:
    """The bench's eager and graph modes run the same kernels (graph mode replays a capture
    of the eager step), so their GPU-side engine fields are one parameter."""
    names = {p.name: p for p in params}
    for f in SHARED_FIELDS:
        pair = [names.get(f"{eid}.{f}") for eid in SHARED_ENGINES]
        if all(pair):
            params = [p for p in params if p not in pair]
            params.append(replace(pair[1], name=f"{'+'.join(SHARED_ENGINES)}.{f}",
                                  source=pair[1].source + "; shared: eager and graph modes run "
                                                          "the same kernels"))
    return params


def _apply(values: dict[str, float], default: Efficiency, start: dict[str, EngineProfile]):
    # one fitted GEMM curve for every dtype, as before per-dtype defaults existed (the other
    # dtypes' fits go to meta.gemm_by_dtype): the datasheet curves do not mix into a fit, nor
    # does the datasheet's row-parallel shard law (its K_half was measured against them)
    eff = default.model_copy(update={**{f: values[f"efficiency.{f}"] for f in EFF_FIELDS
                                        if f"efficiency.{f}" in values}, "gemm_by_dtype": {},
                                     "shard_depth_half_k": ()})
    upd: dict[str, dict[str, float]] = {eid: {} for eid in start}
    for name, v in values.items():
        owner, field = name.split(".", 1)
        for eid in owner.split("+"):
            if eid in upd:
                upd[eid][field] = v
    return eff, {eid: eng.model_copy(update=upd[eid]) for eid, eng in start.items()}


def _param_rows(params, sol, default, measured, engines_used) -> list[FitParam]:
    rows = []
    for p in params:
        owner, field = p.name.split(".", 1)
        ds = getattr(default, field) if owner == "efficiency" else \
            _preset_value(owner.split("+")[-1], field)
        status = "fitted" if p.name in sol.fitted else "measured" if p.note == "measured" else "kept"
        note = "" if status == "measured" else sol.kept.get(p.name, "")
        rows.append(FitParam(name=p.name, value=sol.values[p.name], start=p.start, datasheet=ds,
                             status=status, source=p.source, note=note))
    for name, (value, why) in measured.items():
        owner, field = name.split(".", 1)
        rows.append(FitParam(name=name, value=value, start=value,
                             datasheet=_preset_value(owner, field), status="measured", source=why))
    return rows


def _preset_value(eid: str, field: str) -> float:
    v = getattr(ENGINES[eid], field)
    if field == "elementwise_traffic" and v is None:
        return FUSED_ELEMENTWISE_BYTES if ENGINES[eid].fused_elementwise else 1.0
    return v


# ------------------------------------------------------------------------ profile

def _source(raw: dict, hw: HardwareSpec) -> str:
    env = raw["env"]
    return (f"calibrated: perfmodel calibrate fit on {env.get('gpu_name') or env.get('cpu_name')} "
            f"({hw.id}), torch {env.get('torch_version')}, {env.get('date_utc')}")


def _calibrated(p: FitParam) -> bool:
    """Whether the profile should carry this engine field: it was measured or fitted, or
    its start came from a measurement. Fields left at their preset are not frozen in, so
    a later, better preset still applies."""
    return p.status != "kept" or "preset" not in p.source


def _text(v) -> str | None:
    return None if v is None else str(v)


def _profile(raw, hw, eff, engines, report: FitReport) -> Profile:
    env = raw["env"]
    smi = env.get("nvidia_smi_after") or env.get("nvidia_smi_before")
    smi = smi if isinstance(smi, dict) else {}
    eng_over, host_over = {}, {}
    for eid, eng in engines.items():
        EngineProfile(**eng.model_dump())          # validates the fitted values
        over = {}
        for p in report.params:
            owner, field = p.name.split(".", 1)
            if eid in owner.split("+") and _calibrated(p):
                over[field] = getattr(eng, field)
        on_host = {f: over.pop(f) for f in HOST_FIELDS if f in over}
        if over:
            eng_over[eid] = over
        if on_host:
            host_over[eid] = on_host
    micro_counts = {s: len(raw[s]["records"]) for s in ("bandwidth", "gemm", "attention", "launch")
                    if s in raw}
    meta = {
        "card": _text(env.get("gpu_name") or env.get("cpu_name")), "device": _text(env.get("device")),
        "driver": _text(smi.get("driver_version")), "torch": _text(env.get("torch_version")),
        "cuda": _text(env.get("cuda_version")), "date": _text(env.get("date_utc")),
        "points": report.fit.points + sum(micro_counts.values()),
        "points_detail": {"e2e_fit": report.fit.points, "e2e_held_out": report.held_out.points,
                          **micro_counts},
        "fit_error": {name: s.model_dump() for name, s in (("fit", report.fit),
                                                            ("held_out", report.held_out))},
        "kept_defaults": [p.name for p in report.kept()],
        "gemm_by_dtype": report.gemm_by_dtype,
    }
    if env.get("device") == "cpu":
        meta["hardware"] = hw.model_dump(mode="json", exclude_none=True)
    host = host_key(env)
    meta["host"] = {"key": host, "cpu": env.get("cpu"), "cpu_count": env.get("cpu_count")}
    return Profile(gpu=hw.id, efficiency=Efficiency(**eff.model_dump()), engines=eng_over,
                   host=host, hosts={host: host_over} if host_over else {}, meta=meta)
