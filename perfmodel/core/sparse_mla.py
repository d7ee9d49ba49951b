"""The sparse MLA prompt kernel of DeepSeek Sparse Attention models (DeepSeek-V3.2, GLM-5) as
SGLang runs it (EngineProfile.dsa_sparse_prefill).

SGLang's NSA backend (sgl-project/sglang python/sglang/srt/layers/attention/nsa_backend.py):
- `set_nsa_prefill_impl`: a prompt (extend) step runs plain MHA (`MHA_ONE_SHOT`, FlashAttention
  varlen on SM90, TRT-LLM ragged MHA on SM100) only while the batch's longest sequence is
  at most index_topk (`max_kv_len <= self.nsa_index_topk`; PR #11892, merged 2025-10, docs
  PR #12868: "default threshold: 2048 tokens"); above it, the absorbed (MQA) sparse kernel.
  The default prompt kernel is `flashmla_sparse` (server_args.py `_set_default_nsa_backends`:
  bf16 KV; fp8 KV's `flashmla_auto` picks it on Blackwell for a fresh prompt, whose cached
  tokens are fewer than 512 x its new ones).
- `_forward_flashmla_sparse`: "FlashMLA sparse kernel requires num_heads to be a multiple of
  64 (Hopper) or 128 (Blackwell)": the query is zero-padded to that many heads
  (`required_padding = 128 if self.device_sm_major >= 10 else 64`) before
  `flash_mla_sparse_fwd`, so a TP rank holding 8 of GLM-5's 64 heads computes 64 (SM90) or 128.
- FlashMLA's sparse prefill kernel (deepseek-ai/FlashMLA csrc/kernels/sm90/prefill/sparse/
  phase1.cuh) runs one CTA per query token and head block over all `topk / B_TOPK` index
  blocks, masking invalid (-1) entries to -inf rather than skipping them: every query pays
  index_topk keys, however few tokens precede it. README: MQA mode, d_qk 576 / d_v 512.
  FlashInfer had no sparse absorbed-MLA prompt kernel for GLM-5's shape by 2026-05
  (flashinfer-ai/flashinfer issue #3429): FlashMLA's is the one SGLang's images of 2026-03/04 had.

So the attention FLOPs of such a step are B*T*index_topk pairs at the absorbed form's
2(d_c + d_R) + 2 d_c per head (core/ops.py mla_flops_per_pair), times the padded heads.
"""

from __future__ import annotations

import math

from perfmodel.core.specs import Deployment, EngineProfile, HardwareSpec, ModelSpec

FLASHMLA_SPARSE_HEAD_BLOCK_SM90 = 64
"""Query heads the sparse prompt kernel computes at once below compute capability 10
(SGLang nsa_backend.py `_forward_flashmla_sparse`: required_padding 64 on Hopper)."""
FLASHMLA_SPARSE_HEAD_BLOCK_SM100 = 128
"""... from compute capability 10 (Blackwell: required_padding 128)."""


def sparse_head_block(hw: HardwareSpec) -> int | None:
    """Head block of the FlashMLA sparse prompt kernel on this chip; None off NVIDIA (SGLang
    runs other kernels there). Compute capability 10 or more is told by the fp4 tensor-core
    peak, which NVIDIA chips have from Blackwell on."""
    if hw.vendor != "nvidia":
        return None
    return FLASHMLA_SPARSE_HEAD_BLOCK_SM100 if hw.has("fp4") else FLASHMLA_SPARSE_HEAD_BLOCK_SM90


def sparse_prefill_heads(m: ModelSpec, hw: HardwareSpec, engine: EngineProfile,
                         dep: Deployment) -> float | None:
    """Query heads the sparse prompt kernel computes, counted like ModelSpec.num_heads (the
    model's N scaled by the padding of one attention rank's share), or None where the engine
    does not run that kernel (no DSA, another engine, another vendor).

    One rank holds h = N / tp heads (Deployment: each of the dp attention groups is tp GPUs
    that split the heads); the kernel computes ceil(h / block) * block of them."""
    block = sparse_head_block(hw)
    if not engine.dsa_sparse_prefill or m.sparse_attention is None or m.mla is None \
            or block is None:
        return None
    per_rank = m.num_heads / dep.tp
    padded = math.ceil(per_rank / block) * block
    return m.num_heads * padded / per_rank
