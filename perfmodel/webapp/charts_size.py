"""Pure figure builders for the Compare-GPUs / sizing page (SizedDeployment lists in)."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from perfmodel.webapp.charts import LAYOUT


def deployment_label(d) -> str:
    """'h100-sxm x2 (TP2) fp8 vllm': what a ranked row is."""
    shape = [f"TP{d.tp}" if d.tp > 1 else "", f"PP{d.pp}" if d.pp > 1 else "",
             f"EP{d.ep}" if d.ep > 1 else "", f"DP{d.dp}" if getattr(d, "dp", 1) > 1 else ""]
    shape = " ".join(s for s in shape if s)
    return f"{d.gpu} x{d.count}{f' ({shape})' if shape else ''} {d.precision} {d.engine}"


def throughput_per_gpu(deployments: Sequence, title: str = "Output tok/s per GPU") -> go.Figure:
    """Bars of SLO-meeting output tok/s divided by the deployment's GPU count, in rank order."""
    labels = [deployment_label(d) for d in deployments]
    fig = go.Figure(go.Bar(
        y=labels, x=[d.output_tok_s_total / d.count for d in deployments], name="tok/s per GPU",
        orientation="h", customdata=[[d.output_tok_s_total, d.count] for d in deployments],
        hovertemplate="%{y}: %{x:.4g} tok/s per GPU (%{customdata[0]:.4g} total on "
                      "%{customdata[1]} GPUs)<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="output tok/s per GPU (within targets)",
                      yaxis=dict(autorange="reversed"), **_tall(len(labels)))
    return fig


def cost_per_mtok(deployments: Sequence, title: str = "$ per million output tokens") -> go.Figure:
    """Bars of USD per million output tokens at full use and at the demanded rate; unpriced
    deployments are left out (and named in the title)."""
    priced = [d for d in deployments if d.usd_per_mtok is not None]
    missing = len(deployments) - len(priced)
    labels = [deployment_label(d) for d in priced]
    fig = go.Figure()
    fig.add_trace(go.Bar(y=labels, x=[d.usd_per_mtok for d in priced], name="at full use",
                         orientation="h",
                         hovertemplate="%{y}: $%{x:.4g} per Mtok at full use<extra></extra>"))
    fig.add_trace(go.Bar(y=labels, x=[d.usd_per_mtok_at_rate for d in priced], name="at the demanded rate",
                         orientation="h",
                         hovertemplate="%{y}: $%{x:.4g} per Mtok at the rate<extra></extra>"))
    note = f" ({missing} without a price left out)" if missing else ""
    fig.update_layout(title=title + note, xaxis_title="USD per 1M output tokens", barmode="group",
                      yaxis=dict(autorange="reversed"), **_tall(len(labels)))
    return fig


def _tall(n: int) -> dict:
    return {**LAYOUT, "height": max(320, 26 * n + 140)}
