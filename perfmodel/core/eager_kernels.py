"""Kernels a graph engine issues from Python per layer block of an eager prompt step (issue
13/14: host issue of MoE/MLA prompt steps), counted from the engines' model code.

Convention: one count per Python-level launch (a torch op, a custom op, a Triton launch); the
kernels a single C++ custom op launches internally are not counted (their launch is
microseconds of C++, not a Python dispatch). Counted on the 16-bit path: the activation-quant
casts before fp8 GEMMs are left out as the engines' dense counts leave them out (the
eager_launch_s calibration, SGLang PR #13094, was taken on that count); SGLang's fused-MoE
quant casts stay in EngineProfile.moe_act_quant_kernels. A block is one half of a layer with
its norm and TP all-reduce; attention + mlp is the dense layer and equals the engine's
kernels_per_layer (12 SGLang, 8 TensorRT-LLM), so dense models keep their count.

SGLang (0.5.x, python/sglang/srt/models/):
- attention 7 (llama.py LlamaDecoderLayer): input_layernorm (fused_add_rmsnorm), qkv_proj,
  rotary_emb, RadixAttention (set_kv_buffer + the prefill kernel: 2), o_proj, all-reduce.
- mlp 5 (LlamaMLP): post_attention_layernorm, gate_up_proj, SiluAndMul, down_proj, all-reduce.
- mla_attention 13 (deepseek_v2.py forward_normal_prepare + forward_normal_core, the MHA
  prefill path): input_layernorm, fused_qkv_a_proj_with_mqa, q_a_layernorm, q_b_proj,
  kv_a_layernorm, rotary_emb, `q[..., qk_nope_head_dim:] = q_pe`, _set_mla_kv_buffer,
  kv_b_proj, _concat_and_cast_mha_k, attn_mha, o_proj, all-reduce.
- moe 9 (DeepseekV2MoE.forward_normal; layers/moe/fused_moe_triton fused_experts_impl):
  post_attention_layernorm, gate, topk (biased_grouped_topk's moe_fused_gate, or
  topk_softmax), moe_align_block_size (one op: its sorted-id padding fill was folded into it,
  PR #13587), fused_moe_kernel (w13), silu_and_mul, fused_moe_kernel (w2), moe_sum_reduce
  (routed_scaling_factor folded into top-k on CUDA), all-reduce.
- shared_expert 4: gate_up_proj, SiluAndMul, down_proj, `final_hidden_states +=
  shared_output`. SGLang fuses a single shared expert into the routed fused MoE for
  DeepSeek-V3/GLM-4.5 under pure TP on SM >= 80 (determine_num_fused_shared_experts; off with
  EP > 1, DeepEP, or the FlashInfer TRT-LLM/CuteDSL MoE runners): not modelled, an over-count
  of 4 per MoE layer on those rows.
- shared_expert_gate 3 (qwen2_moe.py: `F.sigmoid(self.shared_expert_gate(h)) * shared_output`).

TensorRT-LLM (PyTorch backend, tensorrt_llm/_torch/):
- attention 4 (models/modeling_llama.py, modules/attention.py): qkv_proj, the trtllm attention
  op (RoPE and KV append fused in), o_proj, AllReduce(RESIDUAL_RMS_NORM) (norm fused).
- mlp 4 (modules/gated_mlp.py): gate_up_proj, swiglu, down_proj, AllReduce(RESIDUAL_RMS_NORM).
- mla_attention 10 (modules/attention.py MLA.forward_impl + forward_context_default):
  kv_a_proj_with_mqa (fused q_a/kv_a), q_a_layernorm, kv_a_layernorm, q_b_proj,
  `torch.concat([compressed_kv, k_pe])` (latent cache), kv_b_proj, the k_nope copy
  (maybe_compiled_copy_; k_pe's RoPE is fused into the attention op), mha.forward, o_proj,
  AllReduce(RESIDUAL_RMS_NORM).
- moe 4 (models/modeling_deepseekv3.py Deepseekv3MoE.forward): gate GEMM, routing
  (DeepSeekV3 noaux_tc op / top-k), torch.ops.trtllm.fused_moe (permute, both grouped GEMMs,
  activation and finalize launched inside the one C++ op), AllReduce(RESIDUAL_RMS_NORM).
- shared_expert 4: GatedMLP gate_up_proj, swiglu, down_proj, `shared_output + routed_output`.
- shared_expert_gate 3: the same sigmoid-gate form as SGLang (assumed, not read).

vLLM keeps the op-list rule (eager_blocks None): a plain-torch MoE layer written as vLLM runs
it launched 1.72-1.75x the kernels of the dense layer on the H200, against 1.69x by the op
list (calibrate/data/moe-layer-h200-sxm-20261202b.json, docs/moe_ttft.md).
"""

from __future__ import annotations

from pydantic import Field

from perfmodel.core.spec_base import Spec


class EagerBlockKernels(Spec):
    """Kernels an engine issues from Python per layer block of an eager prompt step, counted
    from its model code on the 16-bit path (module docstring): a block is the layer's
    attention or FFN half with its norm and TP all-reduce; attention + mlp is a dense layer."""

    attention: float = Field(gt=0, description="GQA/MHA softmax attention block.")
    mlp: float = Field(gt=0, description="Dense gated-MLP block.")
    mla_attention: float = Field(gt=0, description="MLA attention block, decompressed "
                                 "(prefill) form.")
    moe: float = Field(gt=0, description="MoE block without shared experts: router, top-k, "
                       "alignment/permute, the grouped GEMMs and activation, combine.")
    shared_expert: float = Field(ge=0, description="Added per shared expert (its MLP and "
                                 "the add into the routed output).")
    shared_expert_gate: float = Field(ge=0, description="Added by a sigmoid gate on the "
                                      "shared expert (Qwen2/3-MoE): gate GEMM, sigmoid, mul.")


# Launches that cost more host time than the dense layer's typical one, in its units
# (calibrate/bench_launch_kinds.py on the H200 host, calibrate/data/launch-kinds-h200-sxm-
# 20261202{,-rep}.json, means of the two runs' medians): an nn.Linear module call 23.9 / 17.8 us
# (20.8), a Python torch.library custom op 29.6 / 28.4 us (29.0), the vLLM/SGLang-style Triton
# fused-MoE GEMM launch through its Python wrapper 54.7 / 38.4 us (46.6).
PY_CUSTOM_OP_LAUNCHES = 29.0 / 20.8
TRITON_FUSED_MOE_LAUNCHES = 46.6 / 20.8
# Assumption: one AutoTuner.choose_one cache look-up (shape bucketing, profile key, dict hit)
# costs about one launch; not measured.
AUTOTUNE_LOOKUP_LAUNCHES = 1.0
# TensorRT-LLM's torch.ops.trtllm.fused_moe (custom_ops/torch_custom_ops.py): a Python custom op
# that looks up the GEMM1 and GEMM2 tactics (two AutoTuner.choose_one) and calls the C++ runner
# (run_moe, one launch for the call and the kernels it issues from C++).
TRTLLM_FUSED_MOE_LAUNCHES = PY_CUSTOM_OP_LAUNCHES + 2 * AUTOTUNE_LOOKUP_LAUNCHES + 1.0

SGLANG_EAGER_BLOCKS = EagerBlockKernels(
    attention=7, mlp=5, mla_attention=13,
    moe=7 + 2 * TRITON_FUSED_MOE_LAUNCHES,          # 9 launches, the two fused_moe_kernel weighed
    shared_expert=4, shared_expert_gate=3)
TRTLLM_EAGER_BLOCKS = EagerBlockKernels(
    attention=4, mlp=4, mla_attention=10,
    moe=3 + TRTLLM_FUSED_MOE_LAUNCHES,              # gate, routing, all-reduce + fused_moe
    shared_expert=4, shared_expert_gate=3)
