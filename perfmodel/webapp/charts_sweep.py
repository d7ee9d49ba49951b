"""Pure figure builders for the Sweep page: curves of perfmodel results over one input.

Inputs are arrays in base units (seconds, tokens/s, bytes) as perfmodel returns them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from perfmodel.core.memory import MemoryEstimate
from perfmodel.core.units import GB, MS
from perfmodel.webapp.charts import LAYOUT, PART_COLORS, log_axis


def latency_throughput(x, output_tok_s_total, tpot_s, fits, knee_x=None,
                       x_name: str = "batch") -> go.Figure:
    """Aggregate output tok/s (x) against TPOT in ms (y), one point per batch or
    concurrency, labelled with it; points that do not fit in memory in grey; the knee
    (where throughput stops growing while latency does) as a star."""
    x = np.asarray(x, dtype=float)
    thr = np.asarray(output_tok_s_total, dtype=float)
    lat = np.asarray(tpot_s, dtype=float) / MS
    fits = np.asarray(fits, dtype=bool)
    fig = go.Figure()
    for mask, name, color in ((fits, "fits in memory", "#1f77b4"),
                              (~fits, "does not fit", "#bbbbbb")):
        if not mask.any():
            continue
        fig.add_trace(go.Scatter(
            x=thr[mask], y=lat[mask], mode="lines+markers+text", name=name,
            text=[f"{int(v)}" for v in x[mask]], textposition="top left",
            line=dict(color=color), marker=dict(color=color, size=8),
            hovertemplate=f"{x_name} %{{text}}: %{{x:.4g}} tok/s, TPOT %{{y:.3g}} ms<extra></extra>"))
    if knee_x is not None and np.any(x == knee_x):
        i = int(np.flatnonzero(x == knee_x)[0])
        fig.add_trace(go.Scatter(
            x=[thr[i]], y=[lat[i]], mode="markers", name=f"knee ({x_name} {int(knee_x)})",
            marker=dict(symbol="star", size=18, color="#d62728"),
            hovertemplate=f"knee at {x_name} {int(knee_x)}<extra></extra>"))
    fig.update_layout(title=f"Latency vs throughput over {x_name}",
                      xaxis=log_axis(thr, title="aggregate output tok/s"),
                      yaxis=dict(title="TPOT (ms per output token)"), **LAYOUT)
    return fig


def throughput_vs_context(prompt_tokens, decode_tok_s_per_user, output_tok_s_total, ttft_s,
                          fits) -> go.Figure:
    """Per-user decode tok/s (left axis, aggregate in the hover) and TTFT in ms (right
    axis) against prompt length; prompt lengths that do not fit at this batch shaded."""
    p = np.asarray(prompt_tokens, dtype=float)
    fits = np.asarray(fits, dtype=bool)
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=p, y=np.asarray(decode_tok_s_per_user, dtype=float), mode="lines+markers",
        name="decode tok/s per user", customdata=np.asarray(output_tok_s_total, dtype=float),
        hovertemplate="prompt %{x:.0f}: %{y:.4g} tok/s per user, %{customdata:.4g} tok/s "
                      "aggregate<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=p, y=np.asarray(ttft_s, dtype=float) / MS, mode="lines+markers", name="TTFT (ms)",
        yaxis="y2", line=dict(dash="dot"),
        hovertemplate="prompt %{x:.0f}: TTFT %{y:.4g} ms<extra></extra>"))
    if (~fits).any():
        fig.add_vrect(x0=p[~fits].min(), x1=p.max(), fillcolor="#d62728", opacity=0.08, line_width=0,
                      annotation_text="does not fit", annotation_position="top left")
    fig.update_layout(title="Decode speed and TTFT vs prompt length",
                      xaxis=log_axis(p, title="prompt length (tokens)"),
                      yaxis=dict(title="decode tok/s per user", rangemode="tozero"),
                      yaxis2=log_axis(np.asarray(ttft_s, dtype=float) / MS, title="TTFT (ms, log)",
                                       overlaying="y", side="right"),
                      **LAYOUT)
    return fig


def memory_vs_context(contexts: Sequence[int], mems: Sequence[MemoryEstimate]) -> go.Figure:
    """Stacked areas (GB per GPU) of weights, KV cache, activations and reserve against
    context, with the engine's usable capacity as a horizontal line."""
    c = np.asarray(contexts, dtype=float)
    parts = {"weights": [m.weight_bytes for m in mems], "KV cache": [m.kv_cache_bytes for m in mems],
             "activations": [m.activation_bytes for m in mems],
             "runtime reserve": [m.reserve_bytes for m in mems]}
    fig = go.Figure()
    for name, vals in parts.items():
        fig.add_trace(go.Scatter(x=c, y=np.asarray(vals) / GB, name=name, stackgroup="mem",
                                 mode="lines", line=dict(color=PART_COLORS.get(name)),
                                 hovertemplate=f"{name}: %{{y:.2f}} GB at %{{x:.0f}} tokens<extra></extra>"))
    cap = mems[0].capacity_bytes / GB if mems else 0.0
    fig.add_trace(go.Scatter(x=[c.min(), c.max()] if c.size else [], y=[cap, cap], mode="lines",
                             name=f"usable capacity {cap:.1f} GB",
                             line=dict(color="#d62728", dash="dash")))
    fig.update_layout(title="Memory per GPU vs context", xaxis=log_axis(c, title="context (tokens)"),
                      yaxis=dict(title="GB per GPU"), **LAYOUT)
    return fig
