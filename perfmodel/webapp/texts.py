"""Definitions shown as tooltips (st.metric help=) and on the Definitions page, and the one
number formatter of the web pages. Wording follows DESIGN.md's metric definitions."""

from __future__ import annotations

import math

from perfmodel.core.metrics import METRICS
from perfmodel.core.units import GIGA, MS

DEFINITIONS = METRICS   # the one table: perfmodel/core/metrics.py

ASSUMPTIONS = [
    "Decoder-only transformer; every op of a step listed once (ops.py) for prefill, decode and "
    "speculative verification.",
    "Per op: time = max(FLOPs / (peak x GEMM efficiency(M)), bytes / (bandwidth x memory "
    "efficiency)) + kernels x per-kernel time; a step takes the slower of the GPU and the CPU "
    "issuing its kernels, plus the engine's per-step overhead.",
    "Peaks are dense datasheet values (no sparsity); efficiencies are mid-range defaults per "
    "vendor and memory type unless a calibrated profile is loaded.",
    "Weight-only quantization (W4A16, W8A16) computes in 16 bits and pays a dequantization cost "
    "that grows with batch; W8A8 uses the chip's fp8/int8 peak where it has one.",
    "Decode steps are summed over the growing context (trapezoid rule), never the worst case.",
    "Tensor parallelism: two all-reduces per layer over the intra-node link (ring cost); "
    "pipeline parallelism: micro-batches and stage hand-offs; expert parallelism: all-to-all.",
    "Memory: decimal GB; the engine may use only its KV memory fraction of the device.",
]


def num(v: float) -> str:
    """A readable number with about three significant digits, no exponent between a thousandth and a billion."""
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= GIGA or (0 < a < MS):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if a >= 1 or a == 0 else f"{v:.3f}"


def help_text(metric: str) -> str:
    label, unit, text = DEFINITIONS[metric]
    return f"{text} Unit: {unit}." if unit else text
