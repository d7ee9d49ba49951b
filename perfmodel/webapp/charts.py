"""Pure figure builders for the Calculator: perfmodel results in, plotly figures out.

No Streamlit here and no model arithmetic: the functions only place perfmodel's numbers
(base units) on axes, converting to display units with perfmodel.core.units.
"""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from perfmodel.api import OpBreakdown
from perfmodel.core.memory import MemoryEstimate
from perfmodel.core.specs import HardwareSpec
from perfmodel.core.units import GB, GIGA, KB, MILLION, MS, TERA

BOUND_COLORS = {"memory": "#1f77b4", "compute": "#d62728", "communication": "#9467bd",
                "overhead": "#7f7f7f"}
PART_COLORS = {"KV cache": "#ff7f0e", "activations": "#2ca02c", "runtime reserve": "#7f7f7f"}
LAYOUT = dict(template="plotly_white", margin=dict(l=10, r=10, t=40, b=10), height=380,
              legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
LOG_AXIS = dict(type="log", dtick=1)   # one tick per decade, no minor labels


def log_axis(values, **kw) -> dict:
    """A log axis labelled at 1-2-5 steps over the values' range (readable over one decade
    or six), with SI suffixes (2k, 50k)."""
    vals = [float(v) for v in values if v is not None and float(v) > 0]
    if not vals:
        return {**LOG_AXIS, **kw}
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    steps = (1, 2, 5) if hi - lo <= 3 else (1,)
    ticks = [m * 10.0 ** e for e in range(lo, hi + 1) for m in steps]
    ticks = [t for t in ticks if min(vals) / 2.5 <= t <= max(vals) * 2.5]
    return dict(type="log", tickvals=ticks, ticktext=[_si(t) for t in ticks], **kw)


def _si(v: float) -> str:
    for scale, suffix in ((GIGA, "G"), (MILLION, "M"), (KB, "k")):   # KB = 10^3
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"
LABELLED_OPS = 6    # the roofline names the slowest ops; the rest show on hover


def memory_bar(mem: MemoryEstimate, title: str = "Memory per GPU") -> go.Figure:
    """One stacked horizontal bar (GB per GPU): weights by group, KV cache, activations,
    runtime reserve; dashed lines at the engine's usable capacity and the device memory."""
    parts = [(f"weights: {g}", b) for g, b in mem.weight_bytes_by_group.items() if b > 0]
    extra = mem.weight_bytes - sum(mem.weight_bytes_by_group.values())
    if extra > 0:
        parts.append(("weights: draft/extra", extra))
    parts += [("KV cache", mem.kv_cache_bytes), ("activations", mem.activation_bytes),
              ("runtime reserve", mem.reserve_bytes)]
    fig = go.Figure()
    for name, b in parts:
        fig.add_trace(go.Bar(
            x=[b / GB], y=["per GPU"], orientation="h", name=name, marker_color=PART_COLORS.get(name),
            hovertemplate=f"{name}: %{{x:.2f}} GB<extra></extra>"))
    for x, label, color in ((mem.capacity_bytes / GB, "usable", "#d62728"),
                            (mem.device_bytes / GB, "device", "#444")):
        fig.add_vline(x=x, line_dash="dash", line_color=color,
                      annotation_text=f"{label} {x:.1f} GB", annotation_position="top")
    verdict = "fits" if mem.fits else "does NOT fit"
    fig.update_layout(barmode="stack", title=f"{title}: {mem.total_bytes / GB:.1f} GB, {verdict}",
                      xaxis_title="GB per GPU (decimal GB)",
                      **{**LAYOUT, "height": 300, "legend": {**LAYOUT["legend"], "y": -0.45}})
    return fig


def op_breakdown(ops: Sequence[OpBreakdown], title: str = "Time per op") -> go.Figure:
    """Horizontal bars of each op's time in ms (summed over layers), coloured by its bound."""
    rows = sorted((o for o in ops if o.time_s > 0), key=lambda o: o.time_s)
    fig = go.Figure()
    for bound in ("memory", "compute", "communication"):
        sel = [o for o in rows if o.bound == bound]
        if not sel:
            continue
        fig.add_trace(go.Bar(
            x=[o.time_s / MS for o in sel], y=[o.name for o in sel], orientation="h",
            name=f"{bound}-bound", marker_color=BOUND_COLORS[bound],
            customdata=[[100 * o.share, o.kind] for o in sel],
            hovertemplate="%{y}: %{x:.3g} ms (%{customdata[0]:.1f}% of GPU time, "
                          "%{customdata[1]})<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="time per step (ms, all layers)",
                      yaxis=dict(categoryorder="array", categoryarray=[o.name for o in rows]),
                      **{**LAYOUT, "height": max(300, 22 * len(rows) + 120)})
    return fig


def roofline(hw: HardwareSpec, ops: Sequence[OpBreakdown], compute_dtype: str,
             title: str = "Roofline") -> go.Figure:
    """Log-log roofline: attainable FLOP/s = min(peak[dtype], intensity x bandwidth) for each
    dtype the chip lists (datasheet roofs), the ridge point of the compute dtype at
    peak/bandwidth, and this step's ops at (FLOPs/bytes, FLOPs/time)."""
    bw = hw.memory_bandwidth_bytes_per_s
    pts = [o for o in ops if o.flops > 0 and o.bytes > 0 and o.time_s > 0]
    times = sorted((o.time_s for o in pts), reverse=True)
    slow = times[min(LABELLED_OPS, len(times)) - 1] if times else 0.0
    intensities = [o.flops / o.bytes for o in pts]
    ridges = [p / bw for p in hw.peak_flops_per_s.values()]
    lo = min(intensities + ridges) / 4
    hi = max(intensities + ridges) * 4
    fig = go.Figure()
    for dtype, peak in sorted(hw.peak_flops_per_s.items(), key=lambda kv: -kv[1]):
        main = dtype == compute_dtype
        fig.add_trace(go.Scatter(
            x=[lo, peak / bw, hi], y=[lo * bw / TERA, peak / TERA, peak / TERA], mode="lines",
            name=f"{dtype} roof ({peak / TERA:.0f} TFLOP/s)",
            line=dict(width=3 if main else 1, dash=None if main else "dot"),
            hovertemplate=f"{dtype}: %{{y:.4g}} TFLOP/s at %{{x:.3g}} FLOP/byte<extra></extra>"))
    peak = hw.peak_flops_per_s[compute_dtype]
    fig.add_trace(go.Scatter(
        x=[peak / bw], y=[peak / TERA], mode="markers", name=f"ridge {peak / bw:.0f} FLOP/byte",
        marker=dict(symbol="diamond", size=11, color="black"),
        hovertemplate="ridge: peak / bandwidth = %{x:.4g} FLOP/byte<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=intensities, y=[o.flops / o.time_s / TERA for o in pts], mode="markers+text",
        name="ops of this step", text=[o.name if o.time_s >= slow else "" for o in pts],
        hovertext=[o.name for o in pts], textposition="top center",
        textfont=dict(size=9),
        marker=dict(size=9, color=[BOUND_COLORS.get(o.bound, "#333") for o in pts]),
        customdata=[[o.bound, o.time_s / MS] for o in pts],
        hovertemplate="%{hovertext}: %{x:.3g} FLOP/byte, %{y:.3g} TFLOP/s achieved, "
                      "%{customdata[1]:.3g} ms, %{customdata[0]}-bound<extra></extra>"))
    fig.update_layout(title=f"{title}: {hw.name}, {bw / TERA:.2f} TB/s",
                      xaxis=dict(**LOG_AXIS, title="arithmetic intensity (FLOP/byte)"),
                      yaxis=dict(**LOG_AXIS, title="achieved / attainable TFLOP/s"),
                      **{**LAYOUT, "height": 460,
                         "legend": dict(orientation="v", x=1.02, y=1, xanchor="left", yanchor="top",
                                        font=dict(size=10))})
    return fig


def tornado(base: float, variations: Sequence, metric_label: str, unit: str,
            scale: float = 1.0) -> go.Figure:
    """Tornado chart: % change of the metric when each input is lowered (one trace) and
    raised (the other), largest swing on top. `base` and each variation's low/high are in
    the metric's base unit (None: perfmodel rejected that variation); `scale` converts to
    `unit` for the hover text. Variations carry name, low, high, low_label, high_label."""

    def pct(v):
        return None if v is None or base == 0 else 100.0 * (v / base - 1.0)

    rows = sorted(variations, key=lambda v: max(abs(pct(v.low) or 0), abs(pct(v.high) or 0)))
    names = [v.name for v in rows]
    fig = go.Figure()
    for side, color in (("low", "#1f77b4"), ("high", "#ff7f0e")):
        vals = [getattr(v, side) for v in rows]
        labels = [getattr(v, f"{side}_label") for v in rows]
        fig.add_trace(go.Bar(
            y=names, x=[pct(v) for v in vals], orientation="h", marker_color=color,
            name="input lowered" if side == "low" else "input raised",
            text=[f"{lab}" if val is not None else "" for lab, val in zip(labels, vals)],
            textposition="outside",
            customdata=[[lab, (val / scale) if val is not None else float("nan")]
                        for lab, val in zip(labels, vals)],
            hovertemplate="%{y} %{customdata[0]}: %{x:+.1f}% "
                          f"(%{{customdata[1]:.4g}} {unit})<extra></extra>"))
    fig.add_vline(x=0, line_color="#333")
    fig.update_layout(
        barmode="overlay", title=f"Sensitivity of {metric_label} ({base / scale:.4g} {unit} here)",
        xaxis_title=f"change of {metric_label} (%)",
        yaxis=dict(categoryorder="array", categoryarray=names), **LAYOUT)
    return fig
