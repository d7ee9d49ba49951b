"""Pure figure builders for the Speculative-decoding page."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from perfmodel.webapp.charts import LAYOUT, log_axis

SPEEDUP_SCALE = [[0.0, "#b2182b"], [0.5, "#f7f7f7"], [1.0, "#2166ac"]]   # red < 1 < blue


def speedup_heatmap(batches: Sequence[int], gammas: Sequence[int], speedup,
                    fits=None) -> go.Figure:
    """Speed-up (rows: gamma, columns: batch) as a heatmap centred on 1 (white): blue where
    speculation helps, red where it is slower than plain decoding; cells whose batch does
    not fit in memory are marked with a cross in the text."""
    z = np.asarray(speedup, dtype=float)
    fits = np.ones_like(z, dtype=bool) if fits is None else np.asarray(fits, dtype=bool)
    text = [[f"{v:.2f}" + ("" if f else " ✗") for v, f in zip(row, frow)] for row, frow in zip(z, fits)]
    cols = [str(b) for b in batches]
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=[str(g) for g in gammas], zmid=1.0, colorscale=SPEEDUP_SCALE,
        text=text, texttemplate="%{text}", colorbar=dict(title="speed-up"),
        hovertemplate="batch %{x}, gamma %{y}: speed-up %{z:.3f}<extra></extra>"))
    fig.update_layout(title="Speed-up over plain decoding (x: does not fit in memory)",
                      xaxis=dict(title="batch (sequences)", type="category"),
                      yaxis=dict(title="gamma (draft tokens per step)", type="category"),
                      **{**LAYOUT, "height": 420})
    return fig


def speedup_vs_batch(batches: Sequence[int], speedup: Sequence[float], breakeven=None,
                     gamma: int | None = None) -> go.Figure:
    """Speed-up against batch at one gamma, with the break-even line at 1."""
    b = np.asarray(batches, dtype=float)
    fig = go.Figure(go.Scatter(x=b, y=np.asarray(speedup, dtype=float), mode="lines+markers",
                               name=f"gamma {gamma}" if gamma else "speed-up",
                               hovertemplate="batch %{x:.0f}: x%{y:.3f}<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="#d62728",
                  annotation_text="break-even (x1)", annotation_position="bottom left")
    if breakeven is not None:
        fig.add_vline(x=breakeven, line_dash="dot", annotation_text=f"batch {breakeven}")
    fig.update_layout(title="Speed-up vs batch", xaxis=log_axis(b, title="batch"),
                      yaxis=dict(title="speed-up (x)"), **LAYOUT)
    return fig
