"""The GEMM ops of the weight matrices and the bytes every op list kernel reads or writes
(core/ops.py builds the whole step from these; core/ops_ffn.py the FFN block)."""

from __future__ import annotations

import numpy as np

from perfmodel.core.op_types import Op, OpCost
from perfmodel.core.specs import ModelSpec, Precision

ACT_BYTES = 2.0          # activations between kernels are 16-bit (bf16/fp16)
LOGIT_BYTES = 4.0        # logits are upcast to fp32 for sampling
FP32_BYTES = 4.0         # fp32 routers (MoESpec.router_fp32): weights and upcast input
HIGH_PRECISION_BYTES = 2.0  # embeddings, norms, routers and lm_head stay 16-bit when weights are quantized
GLU_FLOPS_PER_OUTPUT = 4.0  # assumption: SiLU(gate) * up per output element = exp, add, divide, multiply
SAMPLING_FLOPS_PER_LOGIT = 5.0  # assumption: softmax (max, subtract, exp, sum, divide) per logit


def weight_bpe(m: ModelSpec, p: Precision, group: str) -> float:
    """Bytes per weight element: matmul weights at their module's precision; embeddings,
    norms and routers at 16 bits unless weights are fp32 (the usual GPTQ/AWQ/FP8 recipe)
    or the embedding module names its own format."""
    if group in ("attention", "mlp", "experts", "shared_experts"):
        return p.for_group(group).weights.bytes_per_element
    if group in ("embedding", "lm_head") and p.module("embedding") is not None:
        return p.for_group(group).weights.bytes_per_element
    if group == "router" and m.moe is not None and m.moe.router_fp32:
        return FP32_BYTES
    return max(HIGH_PRECISION_BYTES, p.weights.bytes_per_element if p.weights.bits > 16 else 0.0)


def quantized(p: Precision, group: str) -> bool:
    """Weights of this group stored below 16 bits (routers and norms stay 16-bit)."""
    return group not in ("router", "norm") and p.for_group(group).weights.bits < 16


# matrices that read the same input as the one before them (fused qkv / q_a+kv_a GEMMs):
# a W8A8 engine quantizes that input once (core/act_quant.py)
SHARED_INPUT = ("k_proj", "v_proj", "kv_a_proj", "indexer_wk", "indexer_weights")


def linears(m: ModelSpec, p: Precision, mats, M, group_name: str) -> list[Op]:
    """One GEMM op per weight matrix: 2*M*in*out FLOPs, weights read once per step; its
    M x in input is what a W8A8 kernel quantizes (once per shared input)."""
    result = []
    for mat in mats:
        if mat.group == "norm" or mat.d_in == 1:
            continue  # biases and latent norms are folded into neighbours
        bpe = weight_bpe(m, p, mat.group)
        elems = float(mat.d_in) * mat.d_out * mat.count
        result.append(Op(mat.name, "gemm",
                         OpCost(flops=2.0 * M * elems,
                                weight_bytes=elems * bpe * np.ones_like(M),
                                act_bytes=M * (mat.d_in + mat.d_out) * ACT_BYTES * mat.count,
                                kernels=float(mat.count)),
                         rows=M, quantized=quantized(p, mat.group),
                         weight_elements=elems * np.ones_like(M), group=mat.group,
                         quant_elements=(0.0 if mat.name in SHARED_INPUT
                                         else M * mat.d_in * mat.count),
                         reduce_k=float(mat.d_in)))
    return result
