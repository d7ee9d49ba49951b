"""The measured MoE dispatch/combine time of an attention-DP x EP decode worker.

With attention data parallelism (dp > 1) and expert parallelism (ep > 1) every MoE layer of
every step sends each rank's tokens to the ranks owning their experts (dispatch) and pulls the
expert outputs back (combine): TensorRT-LLM's NVLinkOneSided AlltoAll (its default inside
one NVLink domain under attention DP), SGLang's DeepEP low-latency kernels on its decode
workers. core/parallel.alltoall_s prices each call as bytes over the link plus
A2A_LATENCY_HOPS one-hop link latencies (2 x 3 us on NVLink 5); the kernels measure much
slower at small batches, where their flag barriers (every rank writes an epoch into every
peer's flag slot and polls its own, at the tail of dispatch and the head of combine) and
their launch dominate:

    TensorRT-LLM tech blog 18 ("Optimizing MoE Communication with One-Sided AlltoAll Over
    NVLink", GB200 NVL72, DeepSeek-V3 shape: hidden 7168, top-8, 256 experts, BF16 payloads
    as the core's ACT_BYTES), dispatch + combine per layer at EP 8: 49.9 us at 1 token per
    rank, flat to 32 tokens (50.9 us), then 69.8 us at 128, 181.2 at 512, 634.4 at 2048;
    at EP 32: 51.2, 55.7, 78.9, 212.1, 743.2 us.

EXCHANGE_S holds the blog's dispatch + combine times (EP 8/16/32/64 x 1..2048 tokens per
rank). A step of M token rows (all dp ranks) pays, beyond the core's all-to-all,

    extra(M) = moe_layers x max(0, measured(load x M / (tp x dp), ep) - a2a(M))

with a2a(M) the core's dispatch + combine of one MoE layer (core/parallel.comm_times'
ep_alltoall over the MoE layers: bytes over the link x link efficiency, the busiest rank,
A2A_LATENCY_HOPS latencies) and `measured` interpolated on log2 tokens and log2 EP, clamped
to the measured range. The blog's runs route perfectly evenly (its reproduction command:
bench_moe_comm.py --perfect_router); the core's routing is uniform at random and the busiest
EP rank receives `load` times the mean (core/expert_load.py), so the table is read at the
busiest rank's share. Where the core already charges more (a slower link, tokens past the
table) nothing is added. Worked number, DeepSeek-V3 (58 MoE layers) on GB200 at tp1 x dp32,
EP 32, one token per rank (the busiest rank ~2.5): measured ~51.0 us, the core's 2 calls x
2 hops x 3 us = 12 us plus < 1 us of bytes, so about 58 x 38.5 us = 2.23 ms per step.

Scope (stated): the same kernels run on an attention-DP x EP prefill worker and on an
aggregated attention-DP x EP server; this term is applied to the disaggregated decode pool
only (serving/disagg.simulate_disagg), the decode-worker cost this module was written for,
while aggregated predictions stay unchanged this round. It belongs in
core/parallel.comm_times for every dp > 1, ep > 1 step (11 aggregated rows of the serving
file have such a layout; applied to the prefill pools too it moved the disaggregated TTFT
median from 59.0% to 59.8%: docs/disagg_decode.md). SGLang's DeepEP low-latency kernels over
NVLink are assumed to take the same time (no NVLink measurement of theirs was found; DeepEP's
README measures them only over RDMA, where they are slower).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfmodel.core.parallel import busiest_rank_ratios, comm_times
from perfmodel.core.predict import Scenario

EXCHANGE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""Tokens per rank of the blog's sweep (its 'Batch Size' column)."""
EXCHANGE_S = {   # EP size: dispatch + combine (s) at EXCHANGE_TOKENS, tech blog 18 tables
    8: (49.9, 49.5, 49.5, 49.0, 51.1, 50.9, 56.4, 69.8, 103.8, 181.2, 341.9, 634.4),
    16: (49.6, 50.5, 50.1, 50.7, 51.4, 54.4, 59.7, 74.5, 111.8, 195.3, 369.4, 691.7),
    32: (51.2, 51.0, 51.0, 51.6, 52.3, 55.7, 62.6, 78.9, 121.2, 212.1, 395.0, 743.2),
    64: (60.4, 57.0, 62.1, 53.7, 55.6, 59.2, 66.5, 86.1, 128.2, 222.4, 408.6, 771.3),
}
"""(EP size -> microseconds) of TensorRT-LLM's NVLinkOneSided AlltoAll on GB200 NVL72
(TensorRT-LLM tech blog 18, tables 'ep_size=8/16/32/64': dispatch + combine columns)."""


def exchange_s(tokens_per_rank, ep: int):
    """Measured dispatch + combine seconds of one MoE layer at `tokens_per_rank` and EP
    `ep`: the blog's table interpolated on log2 tokens and log2 EP, clamped to its range
    (1-2048 tokens, EP 8-64); 0 without EP."""
    t = np.log2(np.clip(np.asarray(tokens_per_rank, dtype=float), 1.0, EXCHANGE_TOKENS[-1]))
    xs = np.log2(np.asarray(EXCHANGE_TOKENS, dtype=float))
    if ep < 2:
        return 0.0 * t
    eps = sorted(EXCHANGE_S)
    e = float(np.clip(math.log2(ep), math.log2(eps[0]), math.log2(eps[-1])))
    lo = max(k for k in eps if math.log2(k) <= e)
    hi = min(k for k in eps if math.log2(k) >= e)
    y_lo = np.interp(t, xs, EXCHANGE_S[lo]) * 1e-6
    if hi == lo:
        return y_lo
    y_hi = np.interp(t, xs, EXCHANGE_S[hi]) * 1e-6
    w = (e - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    return y_lo + w * (y_hi - y_lo)


ROW_POINTS = 48        # geometric grid of a step's token rows (as serving/stepcost.py)
MAX_ROWS = 1 << 20     # beyond: the last grid value (the bytes dominate long before)


def exchange_extra_s(sc: Scenario, rows) -> np.ndarray | float:
    """Seconds a step of `rows` token rows (all dp ranks) pays beyond the core's all-to-all
    (module doc); 0 unless the layout is attention-DP x EP on a MoE model."""
    dep, m = sc.dep, sc.model
    M = np.maximum(np.asarray(rows, dtype=float), 1.0)
    if m.moe is None or dep.dp < 2 or dep.ep < 2 or not m.num_moe_layers:
        out = np.zeros_like(M)
    else:
        a2a = dict(comm_times(m, sc.hw, sc.eff, dep, M)).get("ep_alltoall", 0.0 * M)
        per_layer = np.asarray(a2a, dtype=float) / m.num_moe_layers
        load, _ = busiest_rank_ratios(m, dep, M)     # the blog routed perfectly evenly
        measured = exchange_s(M / (dep.tp * dep.dp) * np.asarray(load, dtype=float), dep.ep)
        out = m.num_moe_layers * np.maximum(0.0, measured - per_layer)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class ExchangeCost:
    """A pool's step cost with extra(M) added to every step that runs a forward, M its token
    rows (interpolated on `rows`/`extra`, from exchange_extra_s); the scheduler sees only
    step_s and decode_run_s."""

    base: object
    rows: tuple
    extra: tuple

    def extra_s(self, M: float) -> float:
        return float(np.interp(M, self.rows, self.extra))

    def step_s(self, d, sum_ctx, chunks=(), chunk_ctx=(), finishing: int = 0) -> float:
        t = self.base.step_s(d, sum_ctx, chunks, chunk_ctx, finishing)
        if not (d or len(chunks)):
            return t
        return t + self.extra_s(d + float(sum(chunks)))

    def decode_run_s(self, d: int, mean_ctx0: float, steps: int):
        return self.base.decode_run_s(d, mean_ctx0, steps) + self.extra_s(d)


def with_exchange(cost, sc: Scenario):
    """`cost` with the worker's exchange floor, or `cost` itself where it has none."""
    grid = np.unique(np.round(np.geomspace(1.0, MAX_ROWS, ROW_POINTS)))
    extra = exchange_extra_s(sc, grid)
    if not np.any(extra > 0):
        return cost
    return ExchangeCost(cost, tuple(grid.tolist()), tuple(extra.tolist()))
