"""Expert-parallel load imbalance: how much more work the busiest EP rank gets than the mean.

Under expert parallelism the E routed experts are split into `ep` groups of G = E/ep, one per
rank, and a MoE layer ends when the busiest rank ends. With n tokens each routed to k
distinct experts uniformly at random (the balanced router DeepSeek-V3 and Qwen3 are trained
towards; a lower bound: real routers also have popular experts), one token puts a multivariate
hypergeometric count c_r (k draws, ep colours of G) on rank r, so

    load_r    = sum_t c_r,t                     routed token rows rank r computes
    touched_r = G * (1 - prod_t (1 - c_r,t / G)) experts of rank r read at least once
                (exact conditional expectation given the counts)

and the busiest rank carries E[max_r load_r] and E[max_r touched_r]. The ratios to the mean
(n*k/ep rows, E*(1-(1-k/E)^n)/ep experts) are what this module returns: both >= 1, both -> 1
as n grows (law of large numbers).

How: a seeded simulation of SIM_TOKENS tokens x SIM_TRIALS trials per (E, k, ep), taking
prefix sums over tokens so every n <= SIM_TOKENS shares the same draws (common random numbers:
the maximum load is exactly non-decreasing in n). Beyond SIM_TOKENS, the normal limit
E[max] = mu + z * sigma, mu = n*k/ep, sigma^2 = n * k * (1/ep) * (1 - 1/ep) * (E-k)/(E-1)
(hypergeometric variance), with z taken from the simulation at SIM_TOKENS so the two join
continuously (z tends to the expected maximum of ep standard normals: 0.56 for 2, 1.03 for 4,
1.42 for 8; Tippett 1925).

Worked numbers (DeepSeek-V3: E=256, k=8, EP8): one token puts 8 expert rows on 8 ranks, mean 1;
the busiest rank gets about 2.4 of them (exact small-case values in tests/test_moe_physics.py);
at 16 tokens the normal limit gives 1 + 1.42*sqrt(0.85/16) ~ 1.33x the mean. These match the
issue's "about 2.5x at B=1, about 1.3x at B=16".

Expert popularity is not modelled (docs/expert_skew.md). Measured on real text it is large and
per model: DeepSeek-R1 at EP32, 1024 rows per rank, a machine-translation set, the busiest rank
carries 2.56x the mean, per-expert std/mean 1.28 (NVIDIA/TensorRT-LLM
docs/source/blogs/tech_blog/blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md, Table 1;
uniform routing gives 1.06 there); Kimi K3 at EP16 on GSM8K 1.069x (vllm-project/vllm PR
#50647). On random token ids, the input of the serving rows, one figure: Qwen3.6-35B-A3B, B300
vLLM tp4 ep4, prompt-sized steps, 1.35x (ai-dynamo/aiconfigurator collector/layerwise/
fpm_ground_truth/EXPERT_ROUTING_CAPTURE.md), per-expert std/mean ~2.9 under a lognormal. Applied
to the Qwen3.5 rows it moves TTFT by under a point, and the EP rows' gaps are several times what
any imbalance could make (docs/expert_skew.md); not encoded (it needs core/parallel.py wiring).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SIM_TOKENS = 512     # tokens simulated per (E, k, ep); beyond: the normal limit
SIM_TRIALS = 256     # routing draws averaged
SIM_SEED = 20240226  # fixed: the model is deterministic


@lru_cache(maxsize=64)
def _tables(num_experts: int, k: int, ep: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(load ratio, touched ratio) for n = 0..SIM_TOKENS tokens, and z at SIM_TOKENS."""
    g = num_experts // ep
    rng = np.random.default_rng(SIM_SEED)
    counts = rng.multivariate_hypergeometric([g] * ep, k, size=(SIM_TRIALS, SIM_TOKENS))
    load = np.cumsum(counts, axis=1)                               # (trials, n, ep)
    with np.errstate(divide="ignore"):
        log_free = np.cumsum(np.log1p(-counts / g), axis=1)        # log prod(1 - c/G)
    touched = g * (1.0 - np.exp(log_free))
    n = np.arange(1, SIM_TOKENS + 1, dtype=float)
    mean_load = n * k / ep
    mean_touched = touched.mean(axis=(0, 2))
    load_ratio = load.max(axis=2).mean(axis=0) / mean_load
    touched_ratio = touched.max(axis=2).mean(axis=0) / mean_touched
    sigma = np.sqrt(_variance_per_token(num_experts, k, ep) * SIM_TOKENS)
    z = (load_ratio[-1] - 1.0) * mean_load[-1] / sigma if sigma > 0 else 0.0
    one = np.ones(1)
    return (np.concatenate([one, load_ratio]), np.concatenate([one, touched_ratio]), float(z))


def _variance_per_token(num_experts: int, k: int, ep: int) -> float:
    """Variance of one token's rows on one rank: hypergeometric k draws of E, G = E/ep marked."""
    if num_experts <= 1:
        return 0.0
    return k * (1.0 / ep) * (1.0 - 1.0 / ep) * (num_experts - k) / (num_experts - 1)


def expert_load_ratios(num_experts: int, k: int, ep: int, tokens):
    """(E[max rank load] / mean load, E[max rank experts touched] / mean touched) for `tokens`
    routed tokens (a number or numpy array; fractions interpolate). ep=1 gives (1, 1)."""
    n = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    if ep <= 1:
        ones = np.ones_like(n)
        return ones, ones
    load_tab, touched_tab, z = _tables(int(num_experts), int(k), int(ep))
    grid = np.arange(SIM_TOKENS + 1, dtype=float)
    load = np.interp(n, grid, load_tab)
    touched = np.interp(n, grid, touched_tab)
    big = n > SIM_TOKENS
    if np.any(big):
        sigma = np.sqrt(_variance_per_token(num_experts, k, ep) * n)
        load = np.where(big, 1.0 + z * sigma / (n * k / ep), load)
        # the touched excess shrinks at the same 1/sqrt(n) rate as the load excess
        touched = np.where(big, 1.0 + (touched_tab[-1] - 1.0) * np.sqrt(SIM_TOKENS / n), touched)
    return load, touched
