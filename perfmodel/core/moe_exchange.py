"""The measured MoE dispatch + combine time of an attention-DP x EP step (a floor under the
ep all-to-all of core/parallel.comm_times).

With attention data parallelism (dp > 1) and expert parallelism (ep > 1) every MoE layer of
every step (prefill, decode, mixed; aggregated servers and disaggregated pools alike) sends
each rank's tokens to the ranks owning their experts (dispatch) and pulls the expert outputs
back (combine): TensorRT-LLM's NVLinkOneSided AlltoAll (its default inside one NVLink domain
under attention DP), SGLang's DeepEP low-latency kernels. core/parallel.alltoall_s prices
each call as bytes over the link plus A2A_LATENCY_HOPS one-hop link latencies (2 x 3 us on
NVLink 5); the kernels measure much slower at small batches, where their flag barriers
(every rank writes an epoch into every peer's flag slot and polls its own, at the tail of
dispatch and the head of combine) and their launch dominate:

    TensorRT-LLM tech blog 18 ("Optimizing MoE Communication with One-Sided AlltoAll Over
    NVLink", GB200 NVL72, DeepSeek-V3 shape: hidden 7168, top-8, 256 experts, BF16 payloads
    as the core's ACT_BYTES), dispatch + combine per layer at EP 8: 49.9 us at 1 token per
    rank, flat to 32 tokens (50.9 us), then 69.8 us at 128, 181.2 at 512, 634.4 at 2048;
    at EP 32: 51.2, 55.7, 78.9, 212.1, 743.2 us.

comm_times charges, per MoE layer of a dp > 1, ep > 1 step of M token rows (all dp ranks)
of an engine running such kernels (EngineProfile.moe_a2a_kernels == 'one_sided': TensorRT-LLM,
SGLang; engines.py),

    max(a2a(M), exchange_s(load x M / (tp x dp), ep))

with a2a(M) the core's dispatch + combine (bytes over the link x link efficiency at the
busiest rank, A2A_LATENCY_HOPS latencies) and `exchange_s` the blog's table interpolated on
log2 tokens and log2 EP, clamped to its range (1-2048 tokens per rank, EP 8-64). The blog's
runs route perfectly evenly (its reproduction command: bench_moe_comm.py --perfect_router);
the core's routing is uniform at random and the busiest EP rank receives `load` times the
mean (core/expert_load.py), so the table is read at the busiest rank's share. Worked number,
DeepSeek-V3 (58 MoE layers) on GB200 at tp1 x dp32, EP 32, one token per rank (the busiest
rank ~2.5): measured ~51.0 us against the core's 2 calls x 2 hops x 3 us = 12 us plus < 1 us
of bytes, so about 58 x 51 us = 3.0 ms of exchange per step instead of 0.7 ms.

Scope (stated): the table measures NVLink-domain one-sided kernels. Across scale-up domains
(ep larger than the domain) the engines run DeepEP's RDMA kernels, which DeepEP's README
measures slower than these (77 us dispatch alone at EP 8, 128 tokens, H800 + CX7): the core's
inter-node estimate is kept where it is larger, and the NVLink measurement stands as a lower
bound where it is not. Other NVLink generations (H100/H200 NVLink 4, B200 NVLink 5 boards of
8) are assumed to take the same time at small batches, where latency and barriers dominate;
at large batches the core's bytes over the slower link take over through the max. SGLang's
DeepEP low-latency kernels over NVLink are assumed to take the same time (no NVLink
measurement of theirs was found). Without attention DP (tp attention, ep > 1), and on engines
whose exchange is NCCL collectives (vLLM's default allgather_reducescatter backend), the
core's estimate stands alone.
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.core.units import US

EXCHANGE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""Tokens per rank of the blog's sweep (its 'Batch Size' column)."""
EXCHANGE_US = {   # EP size: dispatch + combine (us) at EXCHANGE_TOKENS, tech blog 18 tables
    8: (49.9, 49.5, 49.5, 49.0, 51.1, 50.9, 56.4, 69.8, 103.8, 181.2, 341.9, 634.4),
    16: (49.6, 50.5, 50.1, 50.7, 51.4, 54.4, 59.7, 74.5, 111.8, 195.3, 369.4, 691.7),
    32: (51.2, 51.0, 51.0, 51.6, 52.3, 55.7, 62.6, 78.9, 121.2, 212.1, 395.0, 743.2),
    64: (60.4, 57.0, 62.1, 53.7, 55.6, 59.2, 66.5, 86.1, 128.2, 222.4, 408.6, 771.3),
}
"""(EP size -> microseconds) of TensorRT-LLM's NVLinkOneSided AlltoAll on GB200 NVL72
(TensorRT-LLM tech blog 18, tables 'ep_size=8/16/32/64': dispatch + combine columns)."""
_LOG_TOKENS = np.log2(np.asarray(EXCHANGE_TOKENS, dtype=float))
_EPS = tuple(sorted(EXCHANGE_US))


def exchange_s(tokens_per_rank, ep: int):
    """Measured dispatch + combine seconds of one MoE layer at `tokens_per_rank` and EP
    `ep`: the blog's table interpolated on log2 tokens and log2 EP, clamped to its range
    (1-2048 tokens, EP 8-64); 0 without EP. Same shape as `tokens_per_rank`."""
    t = np.log2(np.clip(np.asarray(tokens_per_rank, dtype=float), 1.0, EXCHANGE_TOKENS[-1]))
    if ep < 2:
        return 0.0 * t
    e = float(np.clip(math.log2(ep), math.log2(_EPS[0]), math.log2(_EPS[-1])))
    lo = max(k for k in _EPS if math.log2(k) <= e)
    hi = min(k for k in _EPS if math.log2(k) >= e)
    y_lo = np.interp(t, _LOG_TOKENS, EXCHANGE_US[lo]) * US
    if hi == lo:
        return y_lo
    y_hi = np.interp(t, _LOG_TOKENS, EXCHANGE_US[hi]) * US
    w = (e - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    return y_lo + w * (y_hi - y_lo)
