"""The FFN block of the op list: the dense MLP, the shared and routed experts and the
kernels around them (routing, permute, combine; fp32 routers), per core/ops.py's notation."""

from __future__ import annotations

import numpy as np

from perfmodel.core.op_types import Op, OpCost
from perfmodel.core.ops_gemm import (ACT_BYTES, FP32_BYTES, GLU_FLOPS_PER_OUTPUT, LOGIT_BYTES,
                                     linears, quantized, weight_bpe)
from perfmodel.core.params import ffn_matrices
from perfmodel.core.specs import ModelSpec, Precision


def expected_experts(num_experts: int, k: int, tokens):
    """Distinct experts touched by `tokens` tokens each routed to k of E uniformly:
    E * (1 - (1 - k/E)^tokens)."""
    return num_experts * (1.0 - (1.0 - k / num_experts) ** np.asarray(tokens, dtype=float))


def ffn(m: ModelSpec, p: Precision, M) -> list[Op]:
    """Dense MLP and MoE: dense layers and shared experts see all M rows; routed experts
    see k*M rows spread over the experts the batch touches."""
    mats = ffn_matrices(m)
    dense = [x for x in mats if x.group in ("mlp", "shared_experts", "router")]
    result = [x for op in linears(m, p, dense, M, "mlp") for x in _fp32_router(m, op, M)]
    act_width = 2 * m.ffn_dim if m.num_dense_ffn_layers else 0
    if m.moe is not None:
        e, n = m.moe, m.num_moe_layers
        touched = expected_experts(e.num_experts, e.experts_per_token, M)   # per layer
        up = 2 if m.gated_mlp else 1
        expert_elems = (up + 1) * m.d_model * e.expert_ffn_dim           # one expert's weights
        bpe = weight_bpe(m, p, "experts")
        routed_rows = M * e.experts_per_token
        result.append(Op("experts", "gemm",
                         OpCost(flops=2.0 * routed_rows * expert_elems * n,
                                weight_bytes=touched * expert_elems * bpe * n,
                                act_bytes=routed_rows * (2 * m.d_model + (up + 1) * e.expert_ffn_dim)
                                * ACT_BYTES * n,
                                kernels=3.0 * n),
                         rows=routed_rows / np.maximum(touched, 1.0),
                         quantized=quantized(p, "experts"),
                         weight_elements=touched * expert_elems * n, group="experts",
                         # the fused MoE quantizes the permuted rows: k*M x D in, k*M x F between
                         quant_elements=routed_rows * (m.d_model + e.expert_ffn_dim) * n))
        result += _routing(m, M)
        act_width = e.expert_ffn_dim * e.experts_per_token * 2
    if act_width:
        result.append(Op("mlp_activation", "elementwise",
                         OpCost(flops=GLU_FLOPS_PER_OUTPUT * M * (act_width / 2) * m.num_layers,
                                # reads gate and up (act_width), writes their product (act_width / 2)
                                act_bytes=M * (act_width + act_width / 2) * ACT_BYTES * m.num_layers,
                                kernels=float(m.num_layers)), rows=M))
    return result


def _fp32_router(m: ModelSpec, op: Op, M) -> list[Op]:
    """An fp32 router (MoESpec.router_fp32): its own kernel first upcasts the M x D input
    (reads 16-bit, writes fp32), then the GEMM reads that fp32 copy and writes fp32 logits."""
    if op.name != "router" or m.moe is None or not m.moe.router_fp32:
        return [op]
    n, D, E = m.num_moe_layers, m.d_model, m.moe.num_experts
    cost = OpCost(flops=op.cost.flops, weight_bytes=op.cost.weight_bytes,
                  act_bytes=M * (D + E) * FP32_BYTES * n, kernels=op.cost.kernels)
    upcast = OpCost(act_bytes=M * D * (ACT_BYTES + FP32_BYTES) * n, kernels=1.0 * n)
    return [Op(op.name, op.kind, cost, rows=op.rows, weight_elements=op.weight_elements,
               group=op.group, quant_elements=op.quant_elements),
            Op("router_upcast", "elementwise", upcast, rows=M)]


def _routing(m: ModelSpec, M) -> list[Op]:
    """The kernels around the expert GEMMs of each MoE layer, as vLLM's fused_moe and
    TensorRT-LLM's MoE plugin run them: top-k over the E router logits plus the sort of
    token rows by expert (topk_softmax + moe_align_block_size; TRT-LLM's routing kernel),
    the permute that gathers each token's row once per chosen expert (expandInputRows), and
    the unpermute that sums the k weighted expert outputs back into one row (moe_sum;
    finalizeMoeRouting). Bytes: logits in fp32, rows in 16 bits."""
    e, n = m.moe, m.num_moe_layers
    k, D = e.experts_per_token, m.d_model
    route = OpCost(flops=5.0 * M * e.num_experts * n,
                   act_bytes=M * (e.num_experts + 2 * k) * LOGIT_BYTES * n,   # logits in, ids+weights out
                   kernels=2.0 * n)
    permute = OpCost(act_bytes=M * (1 + k) * D * ACT_BYTES * n, kernels=1.0 * n)
    combine = OpCost(flops=2.0 * M * k * D * n, act_bytes=M * (k + 1) * D * ACT_BYTES * n,
                     kernels=1.0 * n)
    return [Op("moe_routing", "elementwise", route, rows=M),
            Op("moe_permute", "elementwise", permute, rows=M),
            Op("moe_combine", "elementwise", combine, rows=M)]
