"""The weight matrices of a model: one list of shapes that both the parameter count
(memory) and the op list (time) read, so the two never drift.

Shapes follow the Hugging Face implementations (LlamaForCausalLM, Qwen2, Mixtral,
DeepseekV3). A [M, in] x [in, out] matmul costs 2*M*in*out FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from perfmodel.core.specs import ModelSpec

Group = Literal["attention", "mlp", "experts", "shared_experts", "router", "embedding",
                "lm_head", "norm"]


@dataclass(frozen=True)
class Matrix:
    """A weight matrix used `count` times per model (e.g. once per layer)."""

    name: str
    group: Group
    d_in: int
    d_out: int
    count: int  # how many of these exist in the model (layers x copies)

    @property
    def elements(self) -> float:
        return float(self.d_in) * self.d_out * self.count


def attention_matrices(m: ModelSpec) -> list[Matrix]:
    """q, k, v, o (or MLA's low-rank projections) for all L layers."""
    mats = linear_attention_matrices(m) + indexer_matrices(m)
    L = m.num_layers - m.num_linear_attention_layers          # softmax-attention layers
    D, N, K, H = m.d_model, m.num_heads, m.num_kv_heads, m.head_dim
    gate = 2 if m.attention_output_gate else 1   # q and, with an output gate, its gate
    if m.mla is None:
        return mats + [
                Matrix("q_proj", "attention", D, gate * N * H, L),
                Matrix("k_proj", "attention", D, K * H, L),
                Matrix("v_proj", "attention", D, K * H, L),
                Matrix("o_proj", "attention", N * H, D, L)] + (
                # biases as a 1 x (N+2K)H "matrix"
                [Matrix("qkv_bias", "attention", 1, (N + 2 * K) * H, L)] if m.qkv_bias else [])
    a = m.mla
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    if a.q_lora_rank:
        mats += [Matrix("q_a_proj", "attention", D, a.q_lora_rank, L),
                 Matrix("q_b_proj", "attention", a.q_lora_rank, N * qk, L),
                 Matrix("q_a_norm", "norm", 1, a.q_lora_rank, L)]
    else:
        mats.append(Matrix("q_proj", "attention", D, N * qk, L))
    mats += [Matrix("kv_a_proj", "attention", D, a.kv_lora_rank + a.qk_rope_head_dim, L),
             Matrix("kv_a_norm", "norm", 1, a.kv_lora_rank, L),
             Matrix("kv_b_proj", "attention", a.kv_lora_rank, N * (a.qk_nope_head_dim + a.v_head_dim), L),
             Matrix("o_proj", "attention", N * a.v_head_dim, m.d_model, L)]
    return mats


def linear_attention_matrices(m: ModelSpec) -> list[Matrix]:
    """Gated DeltaNet layers (HF Qwen3NextGatedDeltaNet): in_proj_qkvz D -> 2*Hk*dk + 2*Hv*dv
    (q, k, v and the output gate z), in_proj_ba D -> 2*Hv (beta and decay), out_proj
    Hv*dv -> D; the depthwise conv (conv_dim x kernel) and per-head A/dt are counted as norms."""
    la = m.linear_attention
    if la is None:
        return []
    n, D = la.num_layers, m.d_model
    key_dim, value_dim = la.num_key_heads * la.key_head_dim, la.num_value_heads * la.value_head_dim
    conv_dim = 2 * key_dim + value_dim
    return [Matrix("linear_in_proj", "attention", D, 2 * key_dim + 2 * value_dim + 2 * la.num_value_heads, n),
            Matrix("linear_out_proj", "attention", value_dim, D, n),
            Matrix("linear_conv", "norm", 1, conv_dim * la.conv_kernel + 2 * la.num_value_heads, n)]


def indexer_matrices(m: ModelSpec) -> list[Matrix]:
    """DSA indexer per layer (DeepSeek-V3.2 Indexer): wq_b q_lora_rank -> heads*dim, wk D -> dim,
    weights_proj D -> heads (the per-head score weights)."""
    sa = m.sparse_attention
    if sa is None:
        return []
    L, D = m.num_layers, m.d_model
    q_in = m.mla.q_lora_rank if m.mla is not None and m.mla.q_lora_rank else D
    return [Matrix("indexer_wq", "attention", q_in, sa.index_n_heads * sa.index_head_dim, L),
            Matrix("indexer_wk", "attention", D, sa.index_head_dim, L),
            Matrix("indexer_weights", "attention", D, sa.index_n_heads, L)]


def ffn_matrices(m: ModelSpec) -> list[Matrix]:
    """Dense MLPs, routed experts (all of them), shared experts and routers."""
    D = m.d_model
    up = 2 if m.gated_mlp else 1  # gate + up, or up only
    mats = []
    dense_layers = m.num_dense_ffn_layers
    if dense_layers:
        mats += [Matrix("mlp_up", "mlp", D, up * m.ffn_dim, dense_layers),
                 Matrix("mlp_down", "mlp", m.ffn_dim, D, dense_layers)]
    if m.moe is not None:
        e, n = m.moe, m.num_moe_layers
        mats += [Matrix("router", "router", D, e.num_experts, n),
                 Matrix("expert_up", "experts", D, up * e.expert_ffn_dim, n * e.num_experts),
                 Matrix("expert_down", "experts", e.expert_ffn_dim, D, n * e.num_experts)]
        if e.num_shared_experts:
            fs = e.shared_expert_ffn_dim or e.expert_ffn_dim
            mats += [Matrix("shared_up", "shared_experts", D, up * fs, n * e.num_shared_experts),
                     Matrix("shared_down", "shared_experts", fs, D, n * e.num_shared_experts)]
        if e.shared_expert_gate:   # sigmoid(x W_g) scales the shared output: a D -> 1 GEMV
            mats.append(Matrix("shared_gate", "router", D, 1, n))
    return mats


def all_matrices(m: ModelSpec) -> list[Matrix]:
    """Every weight of the model, embeddings and norms included."""
    mats = [Matrix("embed_tokens", "embedding", m.vocab_size, m.d_model, 1)]
    mats += attention_matrices(m) + ffn_matrices(m)
    mats.append(Matrix("norms", "norm", 1, m.d_model, 2 * m.num_layers + 1))
    if not m.tied_embeddings:
        mats.append(Matrix("lm_head", "lm_head", m.d_model, m.vocab_size, 1))
    return mats


@dataclass(frozen=True)
class ParamCount:
    """Parameters in elements: total stored, and used per token (MoE: k of E experts)."""

    total: float
    active: float
    by_group: dict[str, float]


def count_params(m: ModelSpec) -> ParamCount:
    """Total = sum of all matrices; active replaces the routed experts by k/E of them.

    Embedding rows are looked up, not multiplied, but count as active (the convention of
    the published 'active parameters' figures, e.g. DeepSeek-V3's 37B)."""
    by_group: dict[str, float] = {}
    for mat in all_matrices(m):
        by_group[mat.group] = by_group.get(mat.group, 0.0) + mat.elements
    total = sum(by_group.values())
    active = total
    if m.moe is not None:
        routed = by_group.get("experts", 0.0)
        active = total - routed + routed * m.moe.experts_per_token / m.moe.num_experts
    return ParamCount(total=total, active=active, by_group=by_group)
