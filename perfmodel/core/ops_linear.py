"""Linear-attention (Gated DeltaNet) layers: the op, its recurrent state, and what its chunked
prompt kernels cost (Qwen3-Next, Qwen3.5; Yang et al. 2024, arXiv:2412.06464).

Decode (one new token) runs the recurrent form: per value head the decay, S^T k, the rank-1
delta update and S^T q, ~3 matrix-vector products of the dk x dv state, 6*dk*dv FLOPs per
token, the state read and written once per sequence (memory-bound).

A prompt runs the chunked form (flash-linear-attention `chunk_gated_delta_rule`, which SGLang's
and vLLM's fla/ folders vendor), chunks of C = 64 tokens, per token and value head:
  kkt   (beta K K^T in the chunk)                2*C*dk
  solve (I + A)^-1, lower-triangular C x C        (2/3)*C^2
  w, u  (A (beta g K), A (beta V))               2*C*dk + 2*C*dv
  h     (v_new = u - w h; h += K^T v_new)         4*dk*dv
  o     (q h + masked q k^T v_new)               2*dk*dv + 2*C*dk + 2*C*dv
  = 6*dk*dv + 2*C*(3*dk + 2*dv) + (2/3)*C^2      (183k for dk = dv = 128: 1.86x the recurrent)
Its kernels are small-tile Triton kernels with a sequential scan over chunks. Measured on one
H200 (calibrate/bench_gdn_prefill.py -> calibrate/data/gdn-prefill-h200-sxm-20261202.json;
fla 0.6.0, torch 2.11; Qwen3.5's linear layers at tp 4 and 8, 1 x 1k ... 16 x 1k prompts):
the conv + gating + chunk rule + gated norm of one layer take 87.7 us + 3.42 ns per token and
local value head (relative least squares over 16 points, within +-15% but single 4k-16k prompts
at 8 heads, 0.71-0.84: the scan's latency). In this model's form, an efficiency on the
half-precision peak of x / (x + x_half) * e_max over x = tokens x local value heads:
e_max = 183k FLOP / (3.42 ns * 989.4 TFLOP/s) = 0.054, x_half = 87.7 us / 3.42 ns = 25,645.
Other GPUs: the same fraction of their own half-precision peak, but datacenter Blackwell, where
published B200 timings of the same kernels equal the H200's (core/efficiency.py,
BLACKWELL_GDN_CHUNK_EFF_MAX).

The same run measures the host side: enqueueing one layer's chunked path (fla's Python
wrappers around 16 Triton launches, plus the gating's 7 torch ops) takes 1.43 ms on the H200
host (median over the 16 points of a loop of layers, layer_issue_s; 1.44-2.45 ms op by op),
against 16-27 us per plain torch launch in the same run (median 19 us): about 75 plain
launches' worth, where the op list counts 4. An engine that issues
its prompt steps eagerly (outside CUDA graphs) pays it per linear layer per prompt step
(core/host_cost.py); decode steps replay graphs.
"""

from __future__ import annotations

import numpy as np

from perfmodel.core.op_types import Op, OpCost
from perfmodel.core.ops_gemm import ACT_BYTES
from perfmodel.core.specs import Deployment, ModelSpec, Precision

LINEAR_ATTENTION_OP = "linear_attention"   # its state is split by heads over TP, never replicated
GDN_CHUNK_TOKENS = 64                      # chunk_gated_delta_rule's BT
GDN_CHUNK_EFF_MAX = 0.054                  # module docstring: fit to the H200 run
GDN_CHUNK_HALF_TOKEN_HEADS = 25_645.0      # module docstring: fit to the H200 run
GDN_PREFILL_ISSUE_S = 1.43e-3              # host time to enqueue one layer's chunked path
LINEAR_ATTENTION_KERNELS = 4.0             # conv update, gating, recurrence, gated RMSNorm


def linear_state_bytes_per_layer(m: ModelSpec, p: Precision) -> float:
    """Constant per-sequence state of one linear-attention layer: Hv value heads x
    (key_dim x value_dim) recurrent matrix, plus the conv window (kernel-1) x conv_dim,
    in the KV format (vLLM keeps the state in the model dtype by default: an assumption)."""
    la = m.linear_attention
    if la is None:
        return 0.0
    conv_dim = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
    return ((la.num_value_heads * la.key_head_dim * la.value_head_dim   # recurrent state S
             + (la.conv_kernel - 1) * conv_dim)                         # causal conv window
            * p.kv.bytes_per_element)


def chunked(T):
    """Whether a step of T new tokens per sequence runs the chunked kernels (a full chunk or
    more: prompts; decode and short speculative verifies run the recurrent ones)."""
    return np.asarray(T, dtype=float) >= GDN_CHUNK_TOKENS


def flops_per_token_head(m: ModelSpec, T):
    """FLOPs per token and value head: 6*dk*dv recurrent, the chunked count for prompts."""
    la = m.linear_attention
    dk, dv, C = la.key_head_dim, la.value_head_dim, GDN_CHUNK_TOKENS
    rec = 6.0 * dk * dv
    chunk = rec + 2.0 * C * (3 * dk + 2 * dv) + 2.0 / 3.0 * C * C
    return np.where(chunked(T), chunk, rec)


def linear_attention(m: ModelSpec, p: Precision, B, T) -> list[Op]:
    """Gated DeltaNet core per layer (module docstring): FLOPs per token and value head by
    form, the state read once and written once per sequence per step (the chunked kernel keeps
    chunk states on chip), the q|k|v|z activations; LINEAR_ATTENTION_KERNELS kernels per layer,
    as vLLM's and SGLang's Qwen3-Next GatedDeltaNet decode runs them (the chunked prompt path's
    launches are priced on the host side: GDN_PREFILL_ISSUE_S)."""
    la = m.linear_attention
    if la is None:
        return []
    n = la.num_layers
    state = linear_state_bytes_per_layer(m, p)
    flops = B * T * la.num_value_heads * flops_per_token_head(m, T) * n
    width = 2 * la.num_key_heads * la.key_head_dim + 2 * la.num_value_heads * la.value_head_dim
    return [Op(LINEAR_ATTENTION_OP, "attention",
               OpCost(flops=flops, act_bytes=B * T * width * ACT_BYTES * n,
                      kv_read_bytes=B * state * n * np.ones_like(T),
                      kv_write_bytes=B * state * n * np.ones_like(T),
                      kernels=LINEAR_ATTENTION_KERNELS * n),
               rows=B * T)]


def linear_attention_efficiency(m: ModelSpec, dep: Deployment, rows, T, attn_compute: float,
                                chunk_max: float | None = None):
    """Compute efficiency of the linear-attention op on the half-precision peak: the chunked
    kernels' curve over x = rows x local value heads for prompt steps (ceiling `chunk_max`, the
    chip's Efficiency.linear_attn_chunk_max, else the H200 fit's GDN_CHUNK_EFF_MAX), the
    engine's attention efficiency otherwise (module docstring)."""
    e_max = GDN_CHUNK_EFF_MAX if chunk_max is None else chunk_max
    x = np.asarray(rows, dtype=float) * m.linear_attention.num_value_heads / dep.tp
    curve = e_max * x / (x + GDN_CHUNK_HALF_TOKEN_HEADS)
    return np.where(chunked(T), np.maximum(curve, 1e-6), attn_compute)


def prefill_issue_s(m: ModelSpec) -> float:
    """Host time to enqueue the chunked linear-attention path of one eager prompt step, all
    linear layers (module docstring)."""
    return 0.0 if m.linear_attention is None else m.linear_attention.num_layers * GDN_PREFILL_ISSUE_S
