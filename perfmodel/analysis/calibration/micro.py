"""Direct estimates from the microbenchmarks (bandwidth, GEMM, attention, launch).

Each estimate is a value with its source and point count, or None when the section is
absent (the parameter then starts from perfmodel's default and the fit says so).
- mem_bw_fraction: best streaming read (else copy) of the largest buffer / datasheet bandwidth;
  a reduction reads like a decode GEMV reads weights.
- kernel_s: device time per kernel replayed from a CUDA graph (else eager with the queue
  pre-filled); no device timing on a CPU.
- launch_s: host enqueue time per eager launch (an engine parameter).
- gemm_max, gemm_half_m per dtype: least squares on log time of the model's GEMM time
  t(M) = max(2MNK / (peak * gemm_max * M / (M + half_m)), bytes / (bw * mem_bw_fraction))
         + fixed_s,
  fixed_s a per-GEMM fixed cost fitted alongside (a GEMV's is several times a trivial
  kernel's; leaving it out would bend the curve to explain it).
  The Efficiency has one curve: the bf16 one (the inference dtype); the others go to meta.
- attn_mem: decode attention (SDPA default dispatch, one query token) on points whose KV
  read takes >= ATTN_MIN_S (smaller ones measure launch latency, not bandwidth), least squares
  on log time of t = kv_bytes / (bw * mem_bw_fraction * attn_mem) + kernel_s. Decode attention is
  memory-bound, so attn_compute is not measured here.
- quant_kernel_efficiency (an engine field): streaming rate of fp8 GEMMs at M <= 16 over
  that of bf16 ones, each the slope of time vs bytes over the layer shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.analysis.calibration import solve
from perfmodel.core.specs import Efficiency, HardwareSpec
from perfmodel.core.units import US

GEMM_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8", "int8": "int8"}
ATTN_KIND = "sdpa_gqa"
ATTN_MIN_S = 50 * US
GEMV_MAX_M = 16          # GEMMs this short are memory-bound on every GPU we know


@dataclass(frozen=True)
class Estimate:
    value: float
    source: str
    points: int


@dataclass
class MicroEstimates:
    """Direct estimates by Efficiency/engine field name, and per-dtype GEMM curves."""

    eff: dict[str, Estimate] = field(default_factory=dict)
    launch_s: Estimate | None = None
    quant_kernel_efficiency: Estimate | None = None
    gemm_by_dtype: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _records(raw: dict, section: str) -> list[dict]:
    return list((raw.get(section) or {}).get("records") or [])


def estimate(raw: dict, hw: HardwareSpec, default: Efficiency) -> MicroEstimates:
    """All direct estimates this raw result supports."""
    out = MicroEstimates()
    _bandwidth(raw, hw, out)
    _launch(raw, out)
    mem_bw_fraction = (out.eff["mem_bw_fraction"].value if "mem_bw_fraction" in out.eff
                       else default.mem_bw_fraction)
    kernel_s = out.eff["kernel_s"].value if "kernel_s" in out.eff else default.kernel_s
    _gemm(raw, hw, default, mem_bw_fraction, kernel_s, out)
    _attention(raw, hw, mem_bw_fraction, kernel_s, out)
    return out


def _bandwidth(raw: dict, hw: HardwareSpec, out: MicroEstimates) -> None:
    recs = _records(raw, "bandwidth")
    if not recs:
        out.notes.append("no bandwidth records: mem_bw_fraction starts from the default")
        return
    for kind in ("read", "copy"):
        these = [r for r in recs if r["kind"] == kind]
        if these:
            big = max(r["buffer_bytes"] for r in these)
            best = max(r["bytes"] / r["seconds"] for r in these if r["buffer_bytes"] == big)
            frac = min(best / hw.memory_bandwidth_bytes_per_s, 0.99)
            out.eff["mem_bw_fraction"] = Estimate(frac, f"bandwidth {kind} of {big:.3g} B buffers",
                                                  len(these))
            return


def _launch(raw: dict, out: MicroEstimates) -> None:
    recs = _records(raw, "launch")
    for mode, timing in (("graph", "device"), ("eager", "device")):
        hit = [r for r in recs if r["mode"] == mode and r["timing"] == timing]
        if hit:
            out.eff["kernel_s"] = Estimate(float(np.median([r["seconds_per_kernel"] for r in hit])),
                                           f"launch {mode} {timing} time per kernel", len(hit))
            break
    host = [r for r in recs if r["mode"] == "eager"]
    if host:
        out.launch_s = Estimate(float(np.median([r["host_seconds_per_launch"] for r in host])),
                                "launch eager host time per launch", len(host))
    else:
        out.notes.append("no launch records: kernel_s and launch_s start from defaults/presets")


def _gemm_curve(recs: list[dict], peak: float, bw: float, kernel_s: float,
                start: tuple[float, float]) -> dict[str, float]:
    m = np.array([r["M"] for r in recs], dtype=float)
    flops = np.array([r["flops"] for r in recs], dtype=float)
    nbytes = np.array([r["bytes"] for r in recs], dtype=float)
    meas = np.array([r["seconds"] for r in recs], dtype=float)

    def predict(v):
        e = Efficiency.model_construct(gemm_max=v["gemm_max"], gemm_half_m=v["gemm_half_m"]).gemm(m)
        return np.maximum(flops / (peak * e), nbytes / bw) + v["fixed_s"]

    params = [solve.Param("gemm_max", min(start[0], 0.95), "frac", 20.0, "default"),
              solve.Param("gemm_half_m", start[1], "pos", 20.0, "default"),
              solve.Param("fixed_s", max(kernel_s, 1e-7), "pos", 20.0, "kernel_s")]
    sol = solve.fit(predict, meas, params)
    pred = predict(sol.values)
    err = np.abs(pred / meas - 1.0)
    big = m >= np.max(m) / 4
    return {"gemm_max": sol.values["gemm_max"], "gemm_half_m": sol.values["gemm_half_m"],
            "fixed_s": sol.values["fixed_s"],
            "curve_fitted": float("gemm_max" in sol.fitted and "gemm_half_m" in sol.fitted),
            "points": len(recs), "median_abs_err": float(np.median(err)),
            "max_abs_err": float(np.max(err)),
            "large_m_flops_fraction": float(np.median(flops[big] / meas[big]) / peak)}


def _gemm(raw, hw, default, mem_bw_fraction, kernel_s, out) -> None:
    recs = _records(raw, "gemm")
    bw = hw.memory_bandwidth_bytes_per_s * mem_bw_fraction
    for dtype, peak_key in GEMM_DTYPES.items():
        these = [r for r in recs if r["dtype"] == dtype]
        if len(these) < 3 or peak_key not in hw.peak_flops_per_s:
            continue
        out.gemm_by_dtype[dtype] = _gemm_curve(these, hw.peak_flops_per_s[peak_key], bw,
                                               kernel_s, (default.gemm_max, default.gemm_half_m))
    for dtype, curve in out.gemm_by_dtype.items():
        bw_small = _gemv_bandwidth([r for r in recs if r["dtype"] == dtype])
        if bw_small:
            curve["gemv_bytes_per_s"] = bw_small
    ref = "bf16" if "bf16" in out.gemm_by_dtype else "fp16" if "fp16" in out.gemm_by_dtype else None
    low = out.gemm_by_dtype.get("fp8_e4m3", {}).get("gemv_bytes_per_s")
    high = (out.gemm_by_dtype.get(ref) or {}).get("gemv_bytes_per_s") if ref else None
    if low and high:
        out.quant_kernel_efficiency = Estimate(
            min(low / high, 1.0), f"fp8 vs {ref} GEMM streaming rate at M <= {GEMV_MAX_M}",
            sum(1 for r in recs if r["dtype"] in ("fp8_e4m3", ref) and r["M"] <= GEMV_MAX_M))
    if ref is None:
        out.notes.append("no bf16/fp16 GEMM records: gemm_max and gemm_half_m start from defaults")
        return
    fitted = {d: bool(c.pop("curve_fitted")) for d, c in out.gemm_by_dtype.items()}
    c = out.gemm_by_dtype[ref]
    if not fitted[ref]:
        out.notes.append(f"the {ref} GEMM records are all memory-bound (largest M "
                         f"{max(r['M'] for r in recs if r['dtype'] == ref)}): gemm_max and "
                         "gemm_half_m start from defaults")
        return
    out.eff["gemm_max"] = Estimate(c["gemm_max"], f"{ref} GEMM curve over M", int(c["points"]))
    out.eff["gemm_half_m"] = Estimate(c["gemm_half_m"], f"{ref} GEMM curve over M", int(c["points"]))


def _gemv_bandwidth(recs: list[dict]) -> float | None:
    """Streaming rate of small-M (memory-bound) GEMMs: the slope of t = a + bytes / rate
    over the layer shapes (a: the per-kernel fixed cost), or None without two shapes."""
    small = [r for r in recs if r["M"] <= GEMV_MAX_M]
    x = np.array([r["bytes"] for r in small], dtype=float)
    if len(small) < 2 or np.ptp(x) < 0.2 * np.max(x):
        return None
    y = np.array([r["seconds"] for r in small], dtype=float)
    slope = np.polyfit(x, y, 1)[0]
    return float(1.0 / slope) if slope > 0 else None


def _attention(raw, hw, mem_bw_fraction, kernel_s, out) -> None:
    bw = hw.memory_bandwidth_bytes_per_s * mem_bw_fraction
    recs = [r for r in _records(raw, "attention")
            if r["kind"] == ATTN_KIND and r["kv_bytes"] / bw >= ATTN_MIN_S]
    if len(recs) < 2:
        out.notes.append(f"fewer than 2 {ATTN_KIND} attention records read >= "
                         f"{ATTN_MIN_S / US:.0f} us of KV: attn_mem starts from the default")
        return
    kv = np.array([r["kv_bytes"] for r in recs], dtype=float)
    meas = np.array([r["seconds"] for r in recs], dtype=float)

    def predict(v):
        return kv / (bw * v["attn_mem"]) + kernel_s

    sol = solve.fit(predict, meas, [solve.Param("attn_mem", 0.85, "frac", 20.0, "default")])
    if "attn_mem" not in sol.fitted:
        out.notes.append(f"the {ATTN_KIND} attention records do not pin attn_mem: it starts "
                         "from the default")
        return
    value = min(sol.values["attn_mem"], 1.0)
    out.eff["attn_mem"] = Estimate(value, f"{ATTN_KIND} decode attention, KV read >= "
                                          f"{ATTN_MIN_S / US:.0f} us", len(recs))
