"""Pure figure builders for the Calibration page: fitted vs measured step times.

`points` are perfmodel.analysis.calibration FitPoint objects (name, phase, measured_s, fitted_s,
datasheet_s, held_out)."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from perfmodel.core.units import MS
from perfmodel.webapp.charts import LAYOUT, log_axis


def fitted_vs_measured(points: Sequence) -> go.Figure:
    """Log-log: measured step time (x) against the calibrated fit (filled: fitted on, open:
    held out) and the datasheet-only prediction (grey crosses), with y = x."""
    fig = go.Figure()
    for held, name, symbol in ((False, "calibrated, fit points", "circle"),
                               (True, "calibrated, held-out points", "circle-open")):
        sel = [p for p in points if p.held_out == held]
        if sel:
            fig.add_trace(go.Scatter(
                x=[p.measured_s / MS for p in sel], y=[p.fitted_s / MS for p in sel], mode="markers",
                name=name, marker=dict(symbol=symbol, size=9, color="#1f77b4", line=dict(width=2)),
                text=[p.name for p in sel],
                hovertemplate="%{text}: measured %{x:.3g} ms, fitted %{y:.3g} ms<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=[p.measured_s / MS for p in points], y=[p.datasheet_s / MS for p in points], mode="markers",
        name="datasheet only", marker=dict(symbol="x", size=7, color="#999"),
        text=[p.name for p in points],
        hovertemplate="%{text}: measured %{x:.3g} ms, datasheet %{y:.3g} ms<extra></extra>"))
    vals = [v / MS for p in points for v in (p.measured_s, p.fitted_s, p.datasheet_s)]
    lo, hi = (min(vals) / 1.3, max(vals) * 1.3) if vals else (1.0, 10.0)
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                             line=dict(color="#333")))
    fig.update_layout(title="Step time: predicted vs measured",
                      xaxis=log_axis([lo, hi], title="measured (ms)"),
                      yaxis=log_axis([lo, hi], title="predicted (ms)"), **{**LAYOUT, "height": 460})
    return fig


def residuals(points: Sequence) -> go.Figure:
    """Per point, predicted / measured - 1 in %: calibrated (blue; open: held out) and
    datasheet only (grey), points in the order given."""
    names = [p.name for p in points]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=names, y=[100 * (p.datasheet_s / p.measured_s - 1) for p in points], mode="markers",
        name="datasheet only", marker=dict(symbol="x", color="#999", size=7),
        hovertemplate="%{x}: %{y:+.1f}%<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=names, y=[100 * (p.fitted_s / p.measured_s - 1) for p in points], mode="markers",
        name="calibrated (open: held out)",
        marker=dict(symbol=["circle-open" if p.held_out else "circle" for p in points], size=9,
                    color="#1f77b4", line=dict(width=2)),
        hovertemplate="%{x}: %{y:+.1f}%<extra></extra>"))
    fig.add_hline(y=0, line_color="#333")
    fig.update_layout(title="Residuals", yaxis_title="predicted / measured - 1 (%)",
                      xaxis=dict(tickangle=-45, tickfont=dict(size=9)), **{**LAYOUT, "height": 460})
    return fig
