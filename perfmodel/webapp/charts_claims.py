"""Pure figure builders for the Claim checker: how lever factors build up a speed-up."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from perfmodel.webapp.charts import LAYOUT, log_axis


def lever_waterfall(steps: Sequence, metric: str, unit: str, title: str = "") -> go.Figure:
    """Waterfall of the metric from the baseline value through each lever (applied one at a
    time, in order) to the improved value. Each bar is labelled with its factor (> 1 is an
    improvement; for latency and cost, baseline / improved). `steps` carry lever, factor,
    value_before and value_after (perfmodel.analysis.claims Step)."""
    if not steps:
        fig = go.Figure()
        fig.update_layout(title=title or "no levers", **LAYOUT)
        return fig
    start, end = steps[0].value_before, steps[-1].value_after
    total = 1.0
    for s in steps:
        total *= s.factor
    x = ["baseline"] + [s.lever for s in steps] + ["result"]
    y = [start] + [s.value_after - s.value_before for s in steps] + [end]
    text = [f"{start:.4g}"] + [f"x{s.factor:.3g}" for s in steps] + [f"{end:.4g} (x{total:.3g})"]
    fig = go.Figure(go.Waterfall(
        x=x, y=y, measure=["absolute"] + ["relative"] * len(steps) + ["total"], text=text,
        textposition="outside", connector=dict(line=dict(color="#999")),
        increasing=dict(marker=dict(color="#2ca02c")), decreasing=dict(marker=dict(color="#d62728")),
        totals=dict(marker=dict(color="#1f77b4")),
        hovertemplate="%{x}: %{text}<extra></extra>"))
    fig.update_layout(title=title or f"{metric}: lever by lever (factor x{total:.3g})",
                      yaxis_title=f"{metric} ({unit})", showlegend=False, **LAYOUT)
    return fig


def shapley_bars(shapley: dict[str, float], title: str = "Shapley factors") -> go.Figure:
    """Each lever's factor averaged over all orders (they multiply to the total), largest first."""
    items = sorted(shapley.items(), key=lambda kv: -kv[1])
    fig = go.Figure(go.Bar(x=[k for k, _ in items], y=[v for _, v in items],
                           text=[f"x{v:.3g}" for _, v in items], textposition="outside",
                           hovertemplate="%{x}: x%{y:.3g}<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="#333")
    fig.update_layout(title=title, yaxis=log_axis([1.0] + [v for _, v in items], title="factor (x, log)"),
                      **LAYOUT)
    return fig
