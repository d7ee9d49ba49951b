"""Pure figure builders for the Measure page: measured levels beside the model's prediction.

`levels` are perfmodel.analysis.endpoint LevelResult objects (concurrency, stats, prediction)."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from perfmodel.core.units import MS
from perfmodel.webapp.charts import LAYOUT, log_axis


def _ok(levels: Sequence) -> list:
    return [lv for lv in levels if lv.stats.ok and lv.stats.tpot_p50_s is not None]


def latency_throughput(levels: Sequence) -> go.Figure:
    """Aggregate output tok/s (x) against TPOT p50 in ms (y), measured and predicted, one
    point per concurrency level (labelled)."""
    ok = _ok(levels)
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[lv.stats.output_tok_s for lv in ok], y=[lv.stats.tpot_p50_s / MS for lv in ok],
        mode="lines+markers+text", name="measured (p50)", text=[str(lv.concurrency) for lv in ok],
        textposition="top left",
        hovertemplate="concurrency %{text}: %{x:.4g} tok/s, TPOT %{y:.3g} ms<extra></extra>"))
    pred = [lv for lv in ok if lv.prediction is not None]
    if pred:
        fig.add_trace(go.Scatter(
            x=[lv.prediction.output_tok_s_total for lv in pred],
            y=[lv.prediction.tpot_s / MS for lv in pred], mode="lines+markers+text",
            name="predicted", text=[str(lv.concurrency) for lv in pred], textposition="bottom right",
            line=dict(dash="dash"),
            hovertemplate="concurrency %{text}: %{x:.4g} tok/s, TPOT %{y:.3g} ms<extra></extra>"))
    fig.update_layout(title="Latency vs throughput: measured and predicted",
                      xaxis=log_axis([lv.stats.output_tok_s for lv in ok] + [lv.prediction.output_tok_s_total for lv in pred],
                                     title="aggregate output tok/s"),
                      yaxis=dict(title="TPOT (ms per output token)"), **LAYOUT)
    return fig


def ttft_vs_concurrency(levels: Sequence) -> go.Figure:
    """TTFT p50 (measured, with p90 as the bar top), predicted TTFT (a batch of C) and, where
    the prediction has one, the simulated TTFT p50 of the level's replay (queueing included:
    Prediction.simulated, as `perfmodel serve --trace` replays a run) against concurrency."""
    ok = [lv for lv in levels if lv.stats.ok and lv.stats.ttft_p50_s is not None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[lv.concurrency for lv in ok], y=[lv.stats.ttft_p50_s / MS for lv in ok],
        mode="lines+markers", name="measured p50 (bar to p90)",
        error_y=dict(type="data", symmetric=False, array=[
            max(0.0, ((lv.stats.ttft_p90_s or lv.stats.ttft_p50_s) - lv.stats.ttft_p50_s) / MS) for lv in ok],
            arrayminus=[0.0] * len(ok)),
        hovertemplate="concurrency %{x}: TTFT p50 %{y:.3g} ms<extra></extra>"))
    pred = [lv for lv in ok if lv.prediction is not None]
    if pred:
        fig.add_trace(go.Scatter(x=[lv.concurrency for lv in pred],
                                 y=[lv.prediction.ttft_s / MS for lv in pred], mode="lines+markers",
                                 name="predicted", line=dict(dash="dash"),
                                 hovertemplate="concurrency %{x}: TTFT %{y:.3g} ms<extra></extra>"))
    sim = [lv for lv in pred if "ttft_p50_s" in (getattr(lv.prediction, "simulated", None) or {})]
    if sim:
        fig.add_trace(go.Scatter(x=[lv.concurrency for lv in sim],
                                 y=[lv.prediction.simulated["ttft_p50_s"] / MS for lv in sim],
                                 mode="lines+markers", name="simulated p50 (replay)",
                                 line=dict(dash="dot"),
                                 hovertemplate="concurrency %{x}: TTFT p50 %{y:.3g} ms<extra></extra>"))
    fig.update_layout(title="TTFT vs concurrency", xaxis=log_axis([lv.concurrency for lv in ok], title="concurrency"),
                      yaxis=dict(title="TTFT (ms)"), **LAYOUT)
    return fig
