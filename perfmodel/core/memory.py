"""Device memory: weights + KV cache + activation peak + runtime reserve, per GPU,
against the engine's usable share of device memory.

KV per token = L * 2 * K * H * bytes (scaling-book, inference chapter); MLA caches
(kv_lora_rank + qk_rope_head_dim) per layer; sliding-window layers hold at most the
window. Paged engines round each sequence up to whole blocks (vLLM paper, Kwon et al. 2023).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.engines import ENGINES
from perfmodel.core.ops import (ACT_BYTES, LOGIT_BYTES, kv_bytes_per_token_layer,
                                linear_state_bytes_per_layer, weight_bpe)
from perfmodel.core.parallel import TP_REPLICATED, kv_replication, validate_deployment
from perfmodel.core.params import all_matrices
from perfmodel.core.specs import Deployment, EngineProfile, HardwareSpec, ModelSpec, Precision
from perfmodel.core.units import GB

RUNTIME_RESERVE_BYTES = 1.0 * GB   # CUDA context (~0.5 GB) + cuBLAS/graph workspaces
COLLECTIVE_RESERVE_BYTES = 0.5 * GB  # NCCL buffers when the model spans GPUs
MAX_BATCH_SEARCH = 1 << 20         # upper end of the max-batch search


class MemoryEstimate(BaseModel):
    """Per-GPU memory of one configuration, in bytes."""

    model_config = ConfigDict(frozen=True)

    weight_bytes: float = Field(description="Weights held by one GPU.")
    weight_bytes_by_group: dict[str, float] = Field(description="Weights per group, per GPU.")
    kv_bytes_per_token: float = Field(description="KV bytes one token adds, all layers, per GPU.")
    kv_cache_bytes: float = Field(description="KV cache for batch x context (block-rounded).")
    activation_bytes: float = Field(description="Peak transient activations.")
    reserve_bytes: float = Field(description="Runtime reserve: CUDA context, workspaces, NCCL.")
    total_bytes: float = Field(description="Sum of the parts.")
    capacity_bytes: float = Field(description="Device memory x the engine's usable share.")
    device_bytes: float = Field(description="Device memory of one GPU.")
    fits: bool = Field(description="total_bytes <= capacity_bytes.")
    max_batch: int = Field(description="Largest batch that fits at this context (0: none).")
    max_context: int = Field(description="Longest context that fits at this batch (0: none).")
    num_gpus: int = Field(description="GPUs the model is spread over (tp x dp x pp).")


def weight_bytes_by_group(m: ModelSpec, p: Precision, dep: Deployment) -> dict[str, float]:
    """Every matrix at its storage precision, split over tp x pp GPUs (the TP_REPLICATED ones
    over pp only: every TP rank holds them whole); routed experts over tp x dp x pp (attention
    DP replicates everything else in each dp group)."""
    groups: dict[str, float] = {}
    for mat in all_matrices(m):
        tp = 1 if mat.name in TP_REPLICATED else dep.tp
        groups[mat.group] = (groups.get(mat.group, 0.0)
                             + mat.elements * weight_bpe(m, p, mat.group) / tp)
    if m.tied_embeddings:
        groups.setdefault("lm_head", 0.0)
    return {k: v / dep.pp / (dep.dp if k == "experts" else 1) for k, v in groups.items()}


def reserve_bytes(dep: Deployment):
    """Runtime reserve per GPU: CUDA context and workspaces, plus NCCL buffers when the model
    spans GPUs. The one definition estimate_memory and batching's vectorized check share."""
    return RUNTIME_RESERVE_BYTES + (COLLECTIVE_RESERVE_BYTES if dep.num_gpus > 1 else 0.0)


def kv_cache_bytes(m: ModelSpec, p: Precision, *, batch: int, context: int,
                   dep: Deployment | None = None, block_tokens: int = 1) -> float:
    """B sequences x S tokens: full-attention layers hold S (rounded to blocks), windowed
    layers min(S, window); per GPU with TP (kv heads replicated when K < tp) and PP."""
    dep = dep or Deployment()
    s_round = np.ceil(np.asarray(context, dtype=float) / block_tokens) * block_tokens
    full = m.num_full_attention_layers
    per_seq = (full * s_round                                           # full-attention layers
               + m.sliding_window_layers * np.minimum(s_round, m.sliding_window or 0))  # windowed
    return (batch * per_seq * kv_bytes_per_token_layer(m, p)
            * kv_replication(m, dep.tp) / dep.tp / dep.pp / dep.dp   # a dp group holds B/dp
            + linear_state_bytes(m, p, batch=batch, dep=dep))


def held_context(m: ModelSpec, engine: EngineProfile, *, batch, context):
    """Tokens of KV each of B sequences holds in memory at context S (arrays broadcast).

    'request' (paged and growing caches): S. 'max_context' (static caches: gpt-fast
    `setup_caches(max_batch_size, max_seq_length)`, HF `StaticCache(max_cache_len)`): every
    sequence holds max(S, L) with L = min(kv_prealloc_tokens, model max context).
    'pool' (llama.cpp: one KV buffer of n_ctx tokens allocated at start and split among the
    slots, tools/server): B sequences hold max(B*S, L) tokens in all, i.e. max(S, L/B) each."""
    S = np.asarray(context, dtype=float)
    if engine.kv_prealloc not in ("max_context", "pool"):
        return S
    L = float(min(engine.kv_prealloc_tokens or m.max_context, m.max_context))
    if engine.kv_prealloc == "pool":
        return np.maximum(S, L / np.maximum(np.asarray(batch, dtype=float), 1.0))
    return np.maximum(S, L)


def linear_state_bytes(m: ModelSpec, p: Precision, *, batch, dep: Deployment | None = None):
    """Constant per-sequence state of the linear-attention layers (no S), split by heads over
    TP, by layers over PP, and a dp group holds B/dp sequences."""
    dep = dep or Deployment()
    return (np.asarray(batch, dtype=float) * m.num_linear_attention_layers
            * linear_state_bytes_per_layer(m, p) / dep.tp / dep.pp / dep.dp)


def activation_bytes(m: ModelSpec, p: Precision, engine: EngineProfile, *, batch: int,
                     context: int, dep: Deployment | None = None,
                     attention: str | None = None) -> float:
    """Peak transient memory of the largest step: one layer's activations for the prefill
    rows (a continuous engine's step carries at most its scheduler's token budget), fp32 logits of the last
    positions, and for a naive attention kernel one layer's B*N*S*S score matrix."""
    dep = dep or Deployment()
    rows = np.asarray(batch, dtype=float) * context
    budget = engine.scheduler.max_num_batched_tokens
    if engine.batching == "continuous" and budget is not None:
        rows = np.minimum(rows, budget)
    ffn = m.moe.expert_ffn_dim * m.moe.experts_per_token if m.moe else m.ffn_dim
    width = (4 * m.d_model                                   # residual, normed input, attn out, mlp out
             + (m.num_heads + 2 * m.num_kv_heads) * m.head_dim  # q, k, v
             + 3 * ffn)                                       # gate, up, activation
    act = rows * width * ACT_BYTES / dep.tp / dep.dp
    logits = batch * m.vocab_size * LOGIT_BYTES / dep.dp
    scores = 0.0
    if (attention or engine.attention) == "naive":
        seq_rows = rows / batch
        scores = batch * (m.num_heads / dep.tp) * seq_rows * context * ACT_BYTES
    return act + logits + scores


def usable_bytes(hw: HardwareSpec, engine: EngineProfile, loaded_bytes):
    """Bytes the engine may use: a share of all device memory (vLLM, SGLang, llama.cpp), or
    (TensorRT-LLM, kv_fraction_of='free') what it loaded plus a share of what is left free
    after weights, reserve and activations (`loaded_bytes`). Broadcasts over arrays."""
    if engine.kv_fraction_of == "free":
        free = np.maximum(hw.memory_bytes - loaded_bytes, 0.0)
        return loaded_bytes + engine.kv_memory_fraction * free
    return hw.memory_bytes * engine.kv_memory_fraction + 0.0 * np.asarray(loaded_bytes, dtype=float)


def estimate_memory(m: ModelSpec, hw: HardwareSpec, p: Precision, *, batch: int, context: int,
                    engine: EngineProfile | None = None, dep: Deployment | None = None,
                    attention: str | None = None, extra_weight_bytes: float = 0.0,
                    extra_kv_bytes_per_token: float = 0.0) -> MemoryEstimate:
    """All parts, total, capacity, fits, max batch at this context, max context at this batch.
    extra_* carry a speculative draft model's weights and KV (per GPU)."""
    engine = engine or ENGINES["vllm"]
    dep = dep or Deployment()
    validate_deployment(m, dep)
    groups = weight_bytes_by_group(m, p, dep)
    weights = sum(groups.values()) + extra_weight_bytes
    reserve = reserve_bytes(dep)
    fixed = weights + reserve                 # what the engine holds before the KV pool

    def capacity_at(act_bytes: float) -> float:
        return float(usable_bytes(hw, engine, fixed + act_bytes))

    def kv(b: int, s: int) -> float:
        held = held_context(m, engine, batch=b, context=s)
        return (kv_cache_bytes(m, p, batch=b, context=held, dep=dep,
                               block_tokens=engine.kv_block_tokens)
                + b * s * extra_kv_bytes_per_token)

    def ok(b: int, s: int) -> bool:
        act_bs = float(activation_bytes(m, p, engine, batch=b, context=s, dep=dep,
                                        attention=attention))
        return fixed + kv(b, s) + act_bs <= capacity_at(act_bs)

    kv_now = float(kv(batch, context))
    act = float(activation_bytes(m, p, engine, batch=batch, context=context, dep=dep,
                                 attention=attention))
    total = weights + kv_now + act + reserve
    capacity = capacity_at(act)
    per_token = (float(kv_cache_bytes(m, p, batch=1, context=1, dep=dep))
                 - float(linear_state_bytes(m, p, batch=1, dep=dep)) + extra_kv_bytes_per_token)
    return MemoryEstimate(
        weight_bytes=weights, weight_bytes_by_group=groups, kv_bytes_per_token=per_token,
        kv_cache_bytes=kv_now, activation_bytes=act, reserve_bytes=reserve, total_bytes=total,
        capacity_bytes=capacity, device_bytes=hw.memory_bytes, fits=total <= capacity,
        max_batch=_largest(lambda b: ok(b, context), MAX_BATCH_SEARCH),
        max_context=_largest(lambda s: ok(batch, s), m.max_context),
        num_gpus=dep.num_gpus)


def _largest(ok, upper: int) -> int:
    """Largest n in [0, upper] with ok(n), for ok monotone non-increasing in n."""
    if not ok(1):
        return 0
    lo, hi = 1, 1
    while hi < upper and ok(min(hi * 2, upper)):
        hi = min(hi * 2, upper)
        lo = hi
    if hi >= upper:
        return upper
    hi = min(hi * 2, upper)
    while hi - lo > 1:       # ok(lo) true, ok(hi) false
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
