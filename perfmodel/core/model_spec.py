"""What is run: the model's architecture (ModelSpec) and its parts (MoESpec, MLASpec,
LinearAttentionSpec, SparseAttentionSpec), read from the catalog or a Hugging Face config.json.
Re-exported by core/specs.py, the one import point of the typed inputs.

All quantities are in base units (bytes, seconds, FLOP/s, bytes/s). See DESIGN.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from perfmodel.core.precision import Precision
from perfmodel.core.spec_base import Spec


class MoESpec(Spec):
    """Mixture-of-experts feed-forward."""

    num_experts: int = Field(gt=0, description="E: routed experts per MoE layer.")
    experts_per_token: int = Field(gt=0, description="k: routed experts each token uses.")
    expert_ffn_dim: int = Field(gt=0, description="Hidden size of one routed expert.")
    num_shared_experts: int = Field(default=0, ge=0, description="Experts every token uses.")
    shared_expert_ffn_dim: int | None = Field(
        default=None, gt=0, description="Hidden size of one shared expert (default: expert_ffn_dim).")
    num_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers with a dense FFN of ffn_dim instead of MoE.")
    shared_expert_gate: bool = Field(
        default=False, description="A sigmoid gate, Linear(D, 1), scales the shared experts' "
        "output (Qwen2-MoE, Qwen3-Next, Qwen3.5 shared_expert_gate).")
    router_fp32: bool = Field(
        default=False, description="The router GEMM runs in fp32: fp32 gate weights, the hidden "
        "states upcast to fp32 first (vLLM minimax_m2.py: gate params_dtype=torch.float32, "
        "self.gate(hidden_states.to(torch.float32)); glm4_moe.py: nn.Linear(dtype=torch.float32), "
        "the same upcast). Otherwise it runs in the activations' 16-bit dtype; a router is never "
        "quantized (the engines build it with quant_config=None).")

    @model_validator(mode="after")
    def _check(self) -> "MoESpec":
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"experts_per_token={self.experts_per_token} exceeds "
                             f"num_experts={self.num_experts}")
        return self


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): a compressed KV latent is cached."""

    kv_lora_rank: int = Field(gt=0, description="Latent KV dimension cached per token per layer.")
    q_lora_rank: int | None = Field(default=None, gt=0, description="Query low-rank dim (None: full).")
    qk_nope_head_dim: int = Field(gt=0, description="Per-head non-rotary query/key dim.")
    qk_rope_head_dim: int = Field(gt=0, description="Decoupled rotary key dim, cached per token per layer.")
    v_head_dim: int = Field(gt=0, description="Per-head value dim.")


class LinearAttentionSpec(Spec):
    """Linear-attention layers with a constant-size recurrent state instead of a KV cache
    (Gated DeltaNet: Qwen3-Next, Qwen3.5; Yang et al. 2024, arXiv:2412.06464). HF config keys
    linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim,
    linear_conv_kernel_dim; the other layers are full attention."""

    num_layers: int = Field(gt=0, description="How many layers are linear attention.")
    num_key_heads: int = Field(gt=0, description="Query/key heads of the linear layers.")
    num_value_heads: int = Field(gt=0, description="Value heads; each keeps a key_dim x value_dim state.")
    key_head_dim: int = Field(gt=0, description="Per-head query/key dim.")
    value_head_dim: int = Field(gt=0, description="Per-head value dim.")
    conv_kernel: int = Field(default=4, gt=0, description="Causal depthwise conv width on q/k/v.")


class SparseAttentionSpec(Spec):
    """Top-k token selection by a lightweight indexer (DeepSeek Sparse Attention, DeepSeek-V3.2
    tech report; GLM-5): every query attends to at most index_topk cached tokens, while the
    indexer scores all of them with index_n_heads small heads and caches one index key per token."""

    index_topk: int = Field(gt=0, description="Tokens each query attends to (at most).")
    index_n_heads: int = Field(gt=0, description="Indexer heads.")
    index_head_dim: int = Field(gt=0, description="Indexer head dim (one cached key per token per layer).")


class ModelSpec(Spec):
    """A decoder-only transformer's architecture (Hugging Face config values)."""

    id: str = Field(min_length=1, description="Short stable id, e.g. 'llama-3.1-8b'.")
    name: str = Field(min_length=1, description="Display name.")
    hf_repo: str | None = Field(default=None, description="Hugging Face repo id.")
    family: str = Field(default="llama", description="Architecture family (llama, qwen2, mixtral, ...).")
    num_layers: int = Field(gt=0, description="L: transformer blocks.")
    d_model: int = Field(gt=0, description="D: hidden size.")
    num_heads: int = Field(gt=0, description="N: query heads.")
    num_kv_heads: int = Field(gt=0, description="K: key/value heads (N: MHA, 1: MQA, else GQA).")
    head_dim: int = Field(gt=0, description="H: per-head dim of q/k/v.")
    ffn_dim: int = Field(gt=0, description="F: dense MLP hidden size (also dense layers of an MoE).")
    vocab_size: int = Field(gt=0, description="V: vocabulary size.")
    tied_embeddings: bool = Field(default=False, description="lm_head shares the embedding matrix.")
    gated_mlp: bool = Field(default=True, description="SwiGLU/GeGLU (3 matrices) vs plain MLP (2).")
    qkv_bias: bool = Field(default=False, description="q/k/v projections have biases (Qwen2).")
    max_context: int = Field(gt=0, description="Longest supported context in tokens.")
    sliding_window: int | None = Field(default=None, gt=0, description="Window of sliding-window layers.")
    sliding_window_layers: int = Field(default=0, ge=0, description="How many layers use the window.")
    moe: MoESpec | None = Field(default=None, description="MoE FFN, if any.")
    mla: MLASpec | None = Field(default=None, description="Latent attention, if any.")
    checkpoint_weights: str | None = Field(
        default=None, description="Weight formats of the published checkpoint in --weights "
        "syntax (e.g. 'bf16,experts=fp4' for gpt-oss), from its quantization_config.")
    attention_output_gate: bool = Field(
        default=False, description="q_proj also emits a sigmoid gate on the attention output "
        "(Qwen3-Next/Qwen3.5 attn_output_gate): N*H more outputs.")
    qk_norm_across_heads: bool = Field(
        default=False, description="q and k are RMS-normalized over all heads at once (MiniMax-M2 "
        "use_qk_norm with qk_norm_type 'per_layer'), not per head: under TP each GPU holds some "
        "heads, so every layer all-reduces per-token sums of squares (core/parallel.py).")
    linear_attention: LinearAttentionSpec | None = Field(
        default=None, description="Linear-attention (recurrent-state) layers, if any.")
    sparse_attention: SparseAttentionSpec | None = Field(
        default=None, description="Indexer-selected top-k attention (DSA), if any.")
    published_params: float | None = Field(default=None, gt=0, description="Published total parameters.")
    published_active_params: float | None = Field(
        default=None, gt=0, description="Published active parameters per token (MoE).")
    source: str = Field(default="", description="Where the config values come from.")

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if self.mla is None and self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} is not divisible by "
                             f"num_kv_heads={self.num_kv_heads}")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError(f"sliding_window_layers={self.sliding_window_layers} exceeds "
                             f"num_layers={self.num_layers}")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers > 0 needs sliding_window")
        if self.moe and self.moe.num_dense_layers > self.num_layers:
            raise ValueError("moe.num_dense_layers exceeds num_layers")
        if self.checkpoint_weights is not None:
            Precision.of(self.checkpoint_weights)   # ValueError names what is wrong
        if self.num_full_attention_layers < 0:
            raise ValueError(f"linear_attention.num_layers + sliding_window_layers exceed "
                             f"num_layers={self.num_layers}")
        return self

    @property
    def num_linear_attention_layers(self) -> int:
        return 0 if self.linear_attention is None else self.linear_attention.num_layers

    @property
    def num_full_attention_layers(self) -> int:
        """Layers with a KV cache of every token (not windowed, not linear)."""
        return self.num_layers - self.sliding_window_layers - self.num_linear_attention_layers

    @property
    def attention_kind(self) -> Literal["mha", "gqa", "mqa", "mla"]:
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "mqa" if self.num_kv_heads == 1 else "gqa"

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.num_dense_layers

    @property
    def num_dense_ffn_layers(self) -> int:
        return self.num_layers - self.num_moe_layers
