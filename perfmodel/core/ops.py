"""One op list for every phase (the FFN block in core/ops_ffn.py, weight-matrix GEMMs and
bytes per element in core/ops_gemm.py).

`ops(model, precision, B, T, S)` returns every op of one forward step of the whole model
(all L layers, one GPU, no parallelism) with FLOPs, weight bytes, activation bytes,
KV read/write bytes and kernel count. Prefill is (B, T=prompt, S=0), decode is
(B, T=1, S), speculative verification is (B, T=gamma+1, S) with all_logits=True.

B, T and S may be numpy arrays (they broadcast), which is how sweeps are vectorized.
Notation as in DESIGN.md: B batch, T new tokens, S cached context, D d_model, F ffn,
N query heads, K kv heads, H head dim, L layers, V vocab, E experts, k experts/token.
References: scaling-book "All about transformer inference" (KV and FLOP accounting);
DeepSeek-V2 paper sec. 2.1 (MLA, absorbed projections); Mixtral paper (top-k routing).
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.core.op_types import FloatArray, Op, OpCost, OpKind, total  # noqa: F401 (re-exported)
from perfmodel.core.ops_ffn import expected_experts, ffn  # noqa: F401 (expected_experts re-exported)
from perfmodel.core.ops_gemm import (  # noqa: F401 (constants and weight_bpe re-exported)
    ACT_BYTES, LOGIT_BYTES, SAMPLING_FLOPS_PER_LOGIT, linears, quantized, weight_bpe)
from perfmodel.core.ops_linear import (  # noqa: F401 (LINEAR_ATTENTION_OP, state re-exported)
    LINEAR_ATTENTION_OP, linear_attention, linear_state_bytes_per_layer)
from perfmodel.core.params import attention_matrices
from perfmodel.core.specs import ModelSpec, Precision


INDEX_KEY_BLOCK = 128      # values per fp32 scale of a cached DSA index key
INDEX_KEY_SCALE_BYTES = 4  # one fp32 scale per block


def index_key_bytes(m: ModelSpec) -> float:
    """Bytes of one cached DSA indexer key, whatever the KV format: index_head_dim fp8 values
    plus an fp32 scale per 128 (DeepSeek-V3.2-Exp inference/model.py Indexer: k_cache in
    float8_e4m3fn, k_scale_cache float32 per block_size 128; SGLang's NSA pool keeps the same
    index_k_with_scale buffer beside a bf16 or fp8 latent). 0 without DSA."""
    if m.sparse_attention is None:
        return 0.0
    d = m.sparse_attention.index_head_dim
    return d * 1.0 + math.ceil(d / INDEX_KEY_BLOCK) * INDEX_KEY_SCALE_BYTES


def kv_bytes_per_token_layer(m: ModelSpec, p: Precision) -> float:
    """Bytes cached per token per softmax-attention layer: 2*K*H*bytes (K and V), or MLA's
    latent (kv_lora_rank + qk_rope_head_dim)*bytes (DeepSeek-V2 sec. 2.1.2), plus a DSA
    indexer key (index_key_bytes: fp8 with its scales in any KV format)."""
    if m.mla is not None:
        return ((m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * p.kv.bytes_per_element
                + index_key_bytes(m))
    return 2 * m.num_kv_heads * m.head_dim * p.kv.bytes_per_element + index_key_bytes(m)


def ops(m: ModelSpec, p: Precision, B, T, S, *, attention: str = "flash",
        all_logits: bool = False, sparse_heads: float | None = None) -> list[Op]:
    """Every op of one forward step: B sequences, T new tokens each, S tokens cached.
    sparse_heads: the heads a DSA model's sparse prompt kernel computes (core/sparse_mla.py),
    None where the engine runs the cheaper MLA form."""
    B, T, S = (np.asarray(x, dtype=float) for x in (B, T, S))
    M = B * T                                        # token rows in this step
    L, D = m.num_layers, m.d_model
    out: list[Op] = [_embedding(m, p, M)]
    out += _norm("input_norm", M, D, L)
    out += linears(m, p, attention_matrices(m), M, "attention")
    if m.qk_norm_across_heads:
        out.append(_qk_norm(m, M))
    out.append(_rotary(m, M) if m.mla is None else _mla_norms_rotary(m, M))
    out += _attention(m, p, B, T, S, attention, sparse_heads)
    out.append(_residual("attn_residual", M, D, L))
    out += _norm("post_attn_norm", M, D, L)
    out += ffn(m, p, M)
    out.append(_residual("mlp_residual", M, D, L))
    out += _lm_head(m, p, B, M if all_logits else B)
    return out


def _embedding(m: ModelSpec, p: Precision, M) -> Op:
    """Gather M rows of the embedding table: reads M*D weights, writes M*D activations."""
    bpe = weight_bpe(m, p, "embedding")
    return Op("embedding", "embedding",
              OpCost(weight_bytes=M * m.d_model * bpe, act_bytes=M * m.d_model * ACT_BYTES,
                     kernels=1.0), rows=M, per_layer=False)


def _norm(name: str, M, D: int, L: int) -> list[Op]:
    """RMSNorm: ~4 FLOPs per element; reads and writes M*D activations."""
    return [Op(name, "elementwise",
               OpCost(flops=4.0 * M * D * L, act_bytes=2 * M * D * ACT_BYTES * L,
                      kernels=float(L)), rows=M)]


def _residual(name: str, M, D: int, L: int) -> Op:
    """x + f(x): reads two, writes one M*D tensor."""
    return Op(name, "elementwise",
              OpCost(flops=M * D * L, act_bytes=3 * M * D * ACT_BYTES * L, kernels=float(L)), rows=M)


def _rotary(m: ModelSpec, M) -> Op:
    """Rotary embedding of q and k in the softmax-attention layers (linear-attention layers
    have no positions to rotate: Qwen3-Next/Qwen3.5 Gated DeltaNet): ~3 FLOPs per element,
    read + write."""
    width = (m.num_heads + m.num_kv_heads) * m.head_dim
    L = m.num_layers - m.num_linear_attention_layers
    return Op("rotary", "elementwise",
              OpCost(flops=3.0 * M * width * L, act_bytes=2 * M * width * ACT_BYTES * L,
                     kernels=float(L)), rows=M)


def _qk_norm(m: ModelSpec, M) -> Op:
    """RMSNorm of q and of k, each over all its heads at once (MiniMax-M2, qk_norm_type
    'per_layer'): ~4 FLOPs per element, read + write of the (N+K)*H outputs, two kernels per
    softmax layer (sums of squares, then the scaling), the TP all-reduce of the sums between
    them (core/parallel.py; SGLang PR #14416 fused q and k into these three steps)."""
    width = (m.num_heads + m.num_kv_heads) * m.head_dim
    L = m.num_layers - m.num_linear_attention_layers
    return Op("qk_norm", "elementwise",
              OpCost(flops=4.0 * M * width * L, act_bytes=2 * M * width * ACT_BYTES * L,
                     kernels=2.0 * L), rows=M)


def _mla_norms_rotary(m: ModelSpec, M) -> Op:
    """MLA's extra elementwise kernels per layer (DeepSeek-V3 modeling code, MLA forward):
    RMSNorm of the q latent (when q is low-rank) and of the kv latent, and rotary on the
    decoupled rope dims of the N query heads and the one shared key."""
    a, L = m.mla, m.num_layers
    norm_width = a.kv_lora_rank + (a.q_lora_rank or 0)
    rope_width = (m.num_heads + 1) * a.qk_rope_head_dim
    return Op("mla_norms_rotary", "elementwise",
              OpCost(flops=(4.0 * norm_width + 3.0 * rope_width) * M * L,
                     act_bytes=2 * M * (norm_width + rope_width) * ACT_BYTES * L,
                     kernels=(2.0 if a.q_lora_rank else 1.0) * L + L), rows=M)


def _attention(m: ModelSpec, p: Precision, B, T, S, kernel: str,
               sparse_heads: float | None = None) -> list[Op]:
    """Attention core per layer kind (full / sliding window / linear).

    Each new token i (0..T-1) attends to S + i + 1 positions (causal), at most W in a
    sliding-window layer, so the query-key pairs per sequence are sum_i min(S+i+1, W):
    with n = clip(W - S, 0, T) tokens below the window, n*S + n(n+1)/2 + (T-n)*W
    (full attention: n = T, T*S + T*(T+1)/2); FLOPs 4*B*pairs*N*H (QK^T and PV).
    KV read: B*(S+T) cached tokens * bytes per token per layer; KV write: B*T tokens.
    DSA (sparse_attention): each query attends to at most index_topk tokens, like a window,
    while the indexer op scores all of them; with sparse_heads, a prompt step past index_topk
    runs the sparse MQA kernel instead (_dsa_sparse_prompt). Linear-attention layers have
    their own op.
    """
    windowed = m.sliding_window_layers
    groups = [(m.num_full_attention_layers, None), (windowed, m.sliding_window)]
    kv_tok = kv_bytes_per_token_layer(m, p)
    index_tok = 0.0
    result = linear_attention(m, p, B, T)
    if m.sparse_attention is not None:
        result.append(_indexer(m, p, B, T, S, m.num_full_attention_layers))
        index_tok = index_key_bytes(m)
    for n_layers, window in groups:
        if n_layers == 0:
            continue
        ctx = S if window is None else np.minimum(S, window)   # cached tokens visible
        pairs = _causal_pairs(T, S, window)                     # query-key pairs per sequence
        if m.sparse_attention is not None:   # DSA: each query attends to its top-k tokens
            pairs = np.minimum(pairs, T * m.sparse_attention.index_topk)
            ctx = np.minimum(ctx, m.sparse_attention.index_topk)
        flops = B * pairs * 4.0 * m.num_heads * m.head_dim * n_layers
        kv_read = B * (ctx + T) * (kv_tok - index_tok) * n_layers   # the indexer reads its keys
        kv_write = B * T * kv_tok * n_layers
        act = B * T * 2 * m.num_heads * m.head_dim * ACT_BYTES * n_layers   # q in, o out
        if m.mla is not None:
            flops, extra_act = _mla_core(m, B, T, ctx, pairs)
            if sparse_heads is not None and m.sparse_attention is not None:
                flops, extra_act = _dsa_sparse_prompt(m, B, T, S, sparse_heads, flops, extra_act)
            flops, act = flops * n_layers, act + extra_act * n_layers
        kernels = 1.0 * n_layers
        if kernel == "naive":
            # scores materialized (write, softmax read+write, read for PV) in 16 bits,
            # K/V expanded from K to N heads (repeat_kv) and the cache grown by a copy.
            act = act + 4 * B * pairs * m.num_heads * ACT_BYTES * n_layers
            expand = m.num_heads / m.num_kv_heads if m.mla is None else 1.0
            kv_read = kv_read * (2 + 2 * expand)   # cat copy (read+write) + expand write/read
            kernels = 6.0 * n_layers
        name = "attention" if window is None else f"attention_window{window}"
        result.append(Op(name, "attention",
                         OpCost(flops=flops, act_bytes=act, kv_read_bytes=kv_read,
                                kv_write_bytes=kv_write, kernels=kernels),
                         rows=B * T, window=window))
    return result


def mla_flops_per_pair(m: ModelSpec) -> tuple[float, float]:
    """(absorbed, decompressed) attention FLOPs per query-key pair of one MLA layer.

    Absorbed (DeepSeek-V2 sec. 2.1.2, FlashMLA): W_UK is folded into q and W_UV applied after,
    so QK^T runs over the latent plus the rope dims and PV over the latent:
        2N(d_c + d_R) + 2N d_c.
    Decompressed (plain multi-head attention on K = W_UK c, V = W_UV c):
        2N(d_nope + d_R) + 2N d_v."""
    a, N = m.mla, m.num_heads
    absorbed = 2.0 * N * (a.kv_lora_rank + a.qk_rope_head_dim) + 2.0 * N * a.kv_lora_rank
    decompressed = 2.0 * N * (a.qk_nope_head_dim + a.qk_rope_head_dim) + 2.0 * N * a.v_head_dim
    return absorbed, decompressed


def _mla_core(m: ModelSpec, B, T, ctx, pairs):
    """(FLOPs, extra activation bytes) of one MLA layer's attention, in the cheaper form.

    Both forms pay the kv_b up-projection of the T new positions (the kv_b_proj op: in the
    absorbed form it is the W_UK/W_UV absorption of q and o, the same 2*M*d_c*N*(d_nope+d_v)).
    The decompressed form also up-projects the ctx cached latents, 2*B*ctx*d_c*N*(d_nope+d_v),
    and writes and reads the expanded K and V. Engines pick the form by phase (SGLang
    deepseek_v2.py: MLA absorbed for decode and target-verify, MHA for prefill/extend;
    TRT-LLM likewise for context vs generation); choosing the cheaper FLOP count per step
    reproduces that: at T=1 the decompression of S latents dwarfs the 3.4x per-pair saving,
    for a long prompt the per-pair saving wins."""
    a, N = m.mla, m.num_heads
    absorbed, decompressed = mla_flops_per_pair(m)
    up = 2.0 * B * ctx * a.kv_lora_rank * N * (a.qk_nope_head_dim + a.v_head_dim)
    f_abs = B * pairs * absorbed
    f_dec = B * pairs * decompressed + up
    expanded = 2 * B * (ctx + T) * N * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
    use_dec = f_dec < f_abs
    return np.where(use_dec, f_dec, f_abs), np.where(use_dec, expanded * ACT_BYTES, 0.0)


def _dsa_sparse_prompt(m: ModelSpec, B, T, S, heads: float, flops, extra_act):
    """(FLOPs, extra activation bytes) of one DSA layer's attention where the engine runs the
    sparse MQA prompt kernel (core/sparse_mla.py): in a step with prompt tokens (T > 1) whose
    sequences pass index_topk (S + T > topk), every query attends to index_topk latent keys in
    the absorbed form, B*T*topk pairs at mla_flops_per_pair's absorbed FLOPs per head, for
    `heads` heads (padded); no expanded K/V. Elsewhere the given (cheaper-form) values."""
    topk = m.sparse_attention.index_topk
    absorbed_per_head = mla_flops_per_pair(m)[0] / m.num_heads
    sparse = (T > 1) & (S + T > topk)
    f_sparse = B * T * topk * absorbed_per_head * heads
    return np.where(sparse, f_sparse, flops), np.where(sparse, 0.0, extra_act)


def _causal_pairs(T, S, window: int | None):
    """sum over i in 0..T-1 of min(S + i + 1, W) (W = infinity without a window)."""
    if window is None:
        return T * S + T * (T + 1) / 2
    n = np.clip(window - S, 0.0, T)          # new tokens that see fewer than W positions
    return n * S + n * (n + 1) / 2 + (T - n) * window


INDEXER_KERNELS = 11.0
"""Kernels per layer of the DSA indexer besides its three projections (DeepSeek-V3.2-Exp
inference/model.py, Indexer.forward): rotary, Hadamard rotation and fp8 quantization of q and
of k (6), the k LayerNorm, the index-key cache store, the head-weight scaling, the fp8 logits
(fp8_index) and the top-k selection."""


def _indexer(m: ModelSpec, p: Precision, B, T, S, n_layers: int) -> Op:
    """DSA lightning indexer: every query scores all S+i+1 visible tokens with index_n_heads
    heads of index_head_dim (2*heads*dim FLOPs per pair) and reads every cached index key;
    INDEXER_KERNELS kernels per layer."""
    sa = m.sparse_attention
    pairs = T * S + T * (T + 1) / 2
    key_bytes = index_key_bytes(m)
    return Op("indexer", "attention",
              OpCost(flops=B * pairs * 2.0 * sa.index_n_heads * sa.index_head_dim * n_layers,
                     act_bytes=B * T * sa.index_n_heads * sa.index_head_dim * ACT_BYTES * n_layers,
                     kv_read_bytes=B * (S + T) * key_bytes * n_layers,
                     kernels=INDEXER_KERNELS * n_layers),
              rows=B * T)


def _lm_head(m: ModelSpec, p: Precision, B, rows) -> list[Op]:
    """Final norm, lm_head on `rows` positions (V*D weights, 2*rows*D*V FLOPs), sampling."""
    D, V = m.d_model, m.vocab_size
    bpe = weight_bpe(m, p, "lm_head")
    return [
        Op("final_norm", "elementwise",
           OpCost(flops=4.0 * rows * D, act_bytes=2 * rows * D * ACT_BYTES, kernels=1.0),
           rows=rows, per_layer=False),
        Op("lm_head", "gemm",
           OpCost(flops=2.0 * rows * D * V, weight_bytes=D * V * bpe * np.ones_like(rows),
                  act_bytes=rows * (D * ACT_BYTES + V * LOGIT_BYTES), kernels=1.0),
           rows=rows, per_layer=False, group="lm_head",
           quantized=p.module("embedding") is not None and quantized(p, "lm_head")),
        Op("sampling", "sampling",
           OpCost(flops=SAMPLING_FLOPS_PER_LOGIT * rows * V, act_bytes=2 * rows * V * LOGIT_BYTES,
                  kernels=4.0),
           rows=rows, per_layer=False),
    ]
