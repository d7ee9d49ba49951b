"""Definitions shown as tooltips (st.metric help=) and on the Definitions page, and the one
number formatter of the web pages. Wording follows DESIGN.md's metric definitions."""

from __future__ import annotations

import math

from perfmodel.core.units import GIGA, MS

DEFINITIONS: dict[str, tuple[str, str, str]] = {   # id -> (label, unit, definition)
    "ttft_s": ("TTFT", "ms", "Time to first token: request arrival to the first output token "
               "= the engine's per-request overhead + prefill of the whole batch's prompts."),
    "tpot_s": ("TPOT", "ms", "Time per output token: (E2E - TTFT) / (output tokens - 1); the "
               "mean decode step over the growing context (not the worst case)."),
    "itl_s": ("ITL", "ms", "Inter-token latency: the gap between two consecutive output tokens "
              "of one request. Its mean equals TPOT; measured ITL also shows its spread."),
    "e2e_s": ("E2E", "s", "End-to-end latency: request arrival to the last output token "
              "= TTFT + the sum of the decode steps."),
    "decode_tok_s_per_user": ("Decode tok/s per user", "tok/s", "Output tokens per second one "
                              "request sees while decoding = 1 / TPOT."),
    "output_tok_s_total": ("Aggregate output tok/s", "tok/s", "All users' output tokens per "
                           "second = batch / TPOT (decode phase)."),
    "goodput": ("Goodput", "req/s", "Requests per second that meet the TTFT and TPOT targets "
                "(SLOs); requests that miss either do not count."),
    "mbu": ("MBU", "%", "Memory-bandwidth utilisation: bytes moved per decode step / (step time x "
            "the datasheet's peak bandwidth)."),
    "mfu": ("MFU", "%", "Model FLOPs utilisation: FLOPs per decode step / (step time x the "
            "datasheet's dense peak FLOP/s of the compute dtype)."),
    "bound": ("Bound", "", "What limits the decode step: 'memory' (bytes / bandwidth dominates), "
              "'compute' (FLOPs / peak dominates), 'communication' (TP/PP/EP collectives) or "
              "'overhead' (the CPU cannot issue kernels fast enough to keep the GPU busy)."),
    "memory": ("Memory per GPU", "GB", "Weights + KV cache (batch x context, rounded to the "
               "engine's KV blocks) + activation peak + runtime reserve, against the engine's "
               "usable share of device memory (decimal GB, 1 GB = 10^9 bytes)."),
    "prefill_tok_s": ("Prefill tok/s", "tok/s", "Prompt tokens processed per second during prefill."),
    "roofline_floor_s": ("Roofline floor", "ms", "max(bytes / peak bandwidth, FLOPs / fastest peak): "
                         "no implementation can take a decode step in less time."),
    "max_batch": ("Max batch", "sequences", "Largest batch whose weights + KV + activations + "
                  "reserve fit at this prompt + output length."),
    "spec_tokens": ("Tokens per target step", "tokens", "Speculative decoding: mean tokens one "
                    "target step yields, E = (1 - alpha^(gamma+1)) / (1 - alpha) with per-token "
                    "acceptance alpha and gamma draft tokens (Leviathan et al. 2023)."),
    "spec_speedup": ("Speculative speed-up", "x", "E x plain decode step / (verification of gamma+1 "
                     "tokens + drafting + proposer overhead); below 1 past the break-even batch."),
    "usd_per_mtok": ("$ per million tokens", "USD", "GPU price per hour x GPUs / (3600 x output "
                     "tok/s) x 10^6."),
}

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
