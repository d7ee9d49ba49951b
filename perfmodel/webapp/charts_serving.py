"""Pure figure builders for the Serving run page: a simulated benchmark's timeline and its
latency and throughput percentiles per concurrency.

Inputs are the simulator's arrays in base units (seconds, tokens, fractions), as
perfmodel.serving.simulate returns them (ServeTimeline, ServePoint); None marks a level
that has no value (it did not run). No Streamlit here, no model arithmetic.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from perfmodel.core.units import MS
from perfmodel.webapp.charts import LAYOUT, log_axis

DECODE_COLOR, PREFILL_COLOR = "#1f77b4", "#ff7f0e"
QUEUE_COLOR, KV_COLOR = "#9467bd", "#2ca02c"
# percentile -> line style, so p50/p90/p99 read the same in every panel
DASH = {"p50": "solid", "p90": "dash", "p99": "dot"}


def _f(values) -> np.ndarray:
    """Floats, None -> NaN (plotly leaves a gap)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def run_timeline(start_s: Sequence[float], duration_s: Sequence[float],
                 decode_rows: Sequence[int], prefill_tokens: Sequence[float],
                 waiting: Sequence[int], kv_used_fraction: Sequence[float],
                 title: str = "Simulated run") -> go.Figure:
    """Three panels over the run's time (s), one bar per segment (a step, or a run of
    decode-only steps with the same batch) as wide as it lasted: the batch composition
    (decode rows; prefill tokens on the right axis), the requests waiting to be admitted,
    and the share of the KV cache in use."""
    t0 = _f(start_s)
    dt = _f(duration_s)
    mid = t0 + dt / 2
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[0.45, 0.275, 0.275],
                        specs=[[{"secondary_y": True}], [{}], [{}]],
                        subplot_titles=("batch composition per step", "queue (requests waiting)",
                                        "KV cache in use"))
    fig.add_trace(go.Bar(x=mid, y=_f(decode_rows), width=dt, name="decode rows",
                         marker_color=DECODE_COLOR, opacity=0.75,
                         hovertemplate="t %{x:.3g} s: %{y:.0f} decoding<extra></extra>"),
                  row=1, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=mid, y=_f(prefill_tokens), mode="markers", name="prefill tokens",
                             marker=dict(color=PREFILL_COLOR, size=5),
                             hovertemplate="t %{x:.3g} s: %{y:.0f} prompt tokens<extra></extra>"),
                  row=1, col=1, secondary_y=True)
    fig.add_trace(go.Scatter(x=t0, y=_f(waiting), mode="lines", line_shape="hv",
                             name="waiting", line=dict(color=QUEUE_COLOR),
                             hovertemplate="t %{x:.3g} s: %{y:.0f} waiting<extra></extra>"),
                  row=2, col=1)
    fig.add_trace(go.Scatter(x=t0, y=100 * _f(kv_used_fraction), mode="lines", line_shape="hv",
                             name="KV in use", line=dict(color=KV_COLOR), fill="tozeroy",
                             hovertemplate="t %{x:.3g} s: %{y:.1f}% of KV blocks<extra></extra>"),
                  row=3, col=1)
    fig.update_yaxes(title_text="decode rows", rangemode="tozero", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="prefill tokens", rangemode="tozero", row=1, col=1,
                     secondary_y=True, showgrid=False)
    fig.update_yaxes(title_text="requests", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="% of KV", range=[0, 100], row=3, col=1)
    fig.update_xaxes(title_text="time since the run started (s)", row=3, col=1)
    fig.update_layout(title=title, bargap=0, **{**LAYOUT, "height": 620})
    return fig


MEASURED = dict(symbol="diamond", size=10, color="#222", line=dict(color="#fff", width=1))


def latency_percentiles(concurrency: Sequence[int], ttft: dict[str, Sequence[float | None]],
                        tpot: dict[str, Sequence[float | None]], fits: Sequence[bool],
                        measured: Sequence | None = None) -> go.Figure:
    """TTFT (left) and TPOT (right) in ms against concurrency, one line per percentile
    ('p50', 'p90', 'p99' -> seconds per level); levels that do not fit are marked with x.
    `measured`: points with concurrency, ttft_s, tpot_s (measured means), drawn as diamonds."""
    c = np.asarray(concurrency, dtype=float)
    ok = np.asarray(fits, dtype=bool)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"), horizontal_spacing=0.1)
    for col, (name, series) in enumerate((("TTFT", ttft), ("TPOT", tpot)), start=1):
        for pct, values in series.items():
            ms = _f(values) / MS
            fig.add_trace(go.Scatter(
                x=c, y=ms, mode="lines+markers", name=f"{name} {pct}",
                line=dict(dash=DASH.get(pct, "solid")),
                marker=dict(symbol=np.where(ok, "circle", "x").tolist(), size=8),
                hovertemplate=f"C=%{{x:.0f}}: {name} {pct} %{{y:.4g}} ms<extra></extra>"),
                row=1, col=col)
        if measured:
            fig.add_trace(go.Scatter(
                x=[m.concurrency for m in measured],
                y=[getattr(m, f"{name.lower()}_s") / MS for m in measured], mode="markers",
                name=f"{name} measured mean", marker=MEASURED,
                text=[m.label for m in measured],
                hovertemplate=f"%{{text}}: C=%{{x:.0f}}, {name} %{{y:.4g}} ms<extra></extra>"),
                row=1, col=col)
        fig.update_xaxes(**log_axis(c, title_text="concurrency"), row=1, col=col)
        fig.update_yaxes(type="log", title_text=f"{name} (ms)", row=1, col=col)
    fig.update_layout(title="Latency percentiles per concurrency (x: does not fit)", **LAYOUT)
    return fig


def throughput(concurrency: Sequence[int], output_tok_s_total: Sequence[float | None],
               request_rate_rps: Sequence[float | None], fits: Sequence[bool]) -> go.Figure:
    """Aggregate output tok/s (left axis) and completed requests per second (right axis)
    against concurrency; levels that do not fit are marked with x."""
    c = np.asarray(concurrency, dtype=float)
    ok = np.asarray(fits, dtype=bool)
    sym = np.where(ok, "circle", "x").tolist()
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=c, y=_f(output_tok_s_total), mode="lines+markers",
                             name="output tok/s (all users)", marker=dict(symbol=sym, size=8),
                             hovertemplate="C=%{x:.0f}: %{y:.4g} tok/s<extra></extra>"))
    fig.add_trace(go.Scatter(x=c, y=_f(request_rate_rps), mode="lines+markers", yaxis="y2",
                             name="requests/s", line=dict(dash="dot"),
                             marker=dict(symbol=sym, size=8),
                             hovertemplate="C=%{x:.0f}: %{y:.3g} req/s<extra></extra>"))
    fig.update_layout(title="Throughput per concurrency",
                      xaxis=log_axis(c, title="concurrency"),
                      yaxis=dict(title="output tok/s", rangemode="tozero"),
                      yaxis2=dict(title="requests/s", overlaying="y", side="right",
                                  rangemode="tozero", showgrid=False), **LAYOUT)
    return fig


ENGINE_COLORS = {"vllm": "#1f77b4", "sglang": "#ff7f0e", "trtllm": "#2ca02c"}


def ratio_vs_concurrency(rows: Sequence, metric: str) -> go.Figure:
    """Predicted / measured of the serving validation rows ('ttft' or 'tpot') against the
    measured concurrency, one colour per engine, log-log, with the 1 line and +-25% band:
    where the model's error grows with load. Rows carry concurrency, engine, label, gpu,
    model, measured_<metric>_s and predicted_<metric>_s."""
    fig = go.Figure()
    rows = [r for r in rows if getattr(r, f"measured_{metric}_s") > 0]
    c_all = [r.concurrency for r in rows] or [1]
    for eng in sorted({r.engine for r in rows}):
        sel = [r for r in rows if r.engine == eng]
        ratio = np.array([getattr(r, f"predicted_{metric}_s") / getattr(r, f"measured_{metric}_s")
                          for r in sel])
        fig.add_trace(go.Scatter(
            x=[r.concurrency for r in sel], y=ratio, mode="markers", name=eng,
            marker=dict(size=6, opacity=0.6, color=ENGINE_COLORS.get(eng)),
            text=[f"{r.label}: {r.model} on {r.gpu}" for r in sel],
            hovertemplate="%{text}<br>C=%{x}: predicted/measured %{y:.3g}<extra></extra>"))
    lo, hi = min(c_all) / 1.5, max(c_all) * 1.5
    for y, name, dash in ((1.0, "predicted = measured", "solid"), (1.25, "+-25%", "dot"),
                          (0.75, None, "dot")):
        fig.add_trace(go.Scatter(x=[lo, hi], y=[y, y], mode="lines", name=name or "",
                                 showlegend=name is not None, legendgroup=name or "+-25%",
                                 line=dict(color="#666", dash=dash), hoverinfo="skip"))
    fig.update_layout(title=f"{metric.upper()}: predicted / measured against concurrency",
                      xaxis=log_axis(c_all, title="concurrency"),
                      yaxis=dict(type="log", title="predicted / measured"), **LAYOUT)
    return fig
