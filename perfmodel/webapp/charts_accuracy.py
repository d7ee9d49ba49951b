"""Pure figure builders for the Accuracy page: predicted vs measured, log-log."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from perfmodel.webapp.charts import LAYOUT, log_axis

WITHIN = 0.25      # the +-25% guide lines


def predicted_vs_measured(rows: Sequence, metric: str, unit: str = "",
                          level: float = 0.8) -> go.Figure:
    """One point per validation row at (predicted, measured) on log-log axes, with the
    row's prediction interval as a vertical bar (where the measurement should fall), the
    y = x line and +-25% guides; calibrated predictions, where present, as a second trace.
    Rows carry predicted, measured, interval_lo, interval_hi, label, gpu, engine,
    calibrated_predicted."""
    rows = [r for r in rows if r.predicted > 0 and r.measured > 0]
    fig = go.Figure()
    if not rows:
        fig.update_layout(title=f"{metric}: no rows", **LAYOUT)
        return fig
    pred = np.array([r.predicted for r in rows])
    meas = np.array([r.measured for r in rows])
    lo = np.array([r.interval_lo for r in rows])
    hi = np.array([r.interval_hi for r in rows])
    inside = (meas >= lo) & (meas <= hi)
    seg_x = np.column_stack([pred, pred, np.full(len(rows), np.nan)]).ravel()
    seg_y = np.column_stack([lo, hi, np.full(len(rows), np.nan)]).ravel()
    fig.add_trace(go.Scatter(x=seg_x, y=seg_y, mode="lines", name=f"{level:.0%} interval",
                             line=dict(color="#9ecae1", width=6), hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=pred, y=meas, mode="markers", name="datasheet prediction (red: outside its interval)",
        marker=dict(size=9, color=np.where(inside, "#1f77b4", "#d62728")),
        text=[f"{r.label}: {r.gpu} {r.engine}" for r in rows],
        hovertemplate="%{text}<br>predicted %{x:.4g}, measured %{y:.4g}<extra></extra>"))
    cal = [(r.calibrated_predicted, r.measured) for r in rows if r.calibrated_predicted]
    if cal:
        fig.add_trace(go.Scatter(x=[c[0] for c in cal], y=[c[1] for c in cal], mode="markers",
                                 name="calibrated prediction",
                                 marker=dict(symbol="diamond-open", size=10, color="#2ca02c")))
    span = np.concatenate([pred, meas, lo, hi])
    a, b = span.min() / 1.5, span.max() * 1.5
    fig.add_trace(go.Scatter(x=[a, b], y=[a, b], mode="lines", name="measured = predicted",
                             line=dict(color="#333")))
    for k, name in ((1 + WITHIN, f"+-{WITHIN:.0%}"), (1 - WITHIN, None)):
        fig.add_trace(go.Scatter(x=[a, b], y=[a * k, b * k], mode="lines", name=name or "",
                                 showlegend=name is not None, legendgroup="band",
                                 line=dict(color="#999", dash="dot")))
    unit_txt = f" ({unit})" if unit else ""
    fig.update_layout(
        title=f"{metric}: {int(inside.sum())}/{len(rows)} inside their {level:.0%} interval (bars)",
        xaxis=log_axis([a, b], title=f"predicted{unit_txt}"),
        yaxis=log_axis([a, b], title=f"measured{unit_txt}"), **{**LAYOUT, "height": 480})
    return fig
