"""Tensor, pipeline and expert parallelism: how ops are split and what the collectives cost.

TP splits weights, heads and KV over p GPUs (KV heads are replicated when K < p) and adds
two all-reduces of B*T*D activations per layer (Megatron-LM, Shoeybi et al. 2019).
All-reduce: 2(p-1)/p * bytes / link_bw + 2*ceil(log2 p) * latency (ring bandwidth, tree latency).
EP spreads routed experts; the MoE layer's all-reduce becomes a dispatch and a combine
all-to-all of k*M*D activations: (p-1)/p * bytes / link_bw + (p-1) * latency each.
PP splits layers into stages; its effect on batching is handled in predict.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perfmodel.core.errors import PerfModelError
from perfmodel.core.ops import ACT_BYTES, Op
from perfmodel.core.specs import Deployment, Efficiency, HardwareSpec, LinkSpec, ModelSpec


def validate_deployment(m: ModelSpec, dep: Deployment) -> None:
    """TP must divide the heads; EP must divide the experts and fit in the TP group."""
    heads = m.num_heads
    if heads % dep.tp:
        raise PerfModelError(f"tp={dep.tp} does not divide num_heads={heads} of {m.id}")
    if dep.pp > m.num_layers:
        raise PerfModelError(f"pp={dep.pp} exceeds the {m.num_layers} layers of {m.id}")
    if dep.ep > 1:
        if m.moe is None:
            raise PerfModelError(f"ep={dep.ep} given but {m.id} has no experts")
        if m.moe.num_experts % dep.ep:
            raise PerfModelError(f"ep={dep.ep} does not divide the {m.moe.num_experts} experts")
        if dep.ep > dep.tp:
            raise PerfModelError(f"ep={dep.ep} exceeds tp={dep.tp}: experts are spread over "
                                 "the GPUs of one tensor-parallel group")


def kv_replication(m: ModelSpec, tp: int) -> float:
    """Per-GPU KV share relative to an even split: K < tp forces copies of kv heads."""
    if m.mla is not None:
        return float(tp)  # the MLA latent is shared by all heads: every GPU keeps it whole
    return max(1.0, tp / m.num_kv_heads)


def shard(op_list: list[Op], m: ModelSpec, dep: Deployment) -> list[Op]:
    """Per-GPU costs under TP (PP is handled by predict; EP keeps the same per-GPU weights)."""
    if dep.tp == 1:
        return op_list
    tp = dep.tp
    rep = kv_replication(m, tp)
    out = []
    for op in op_list:
        c = op.cost
        kernels = c.kernels
        cost = c * (1.0 / tp)
        cost = replace(cost, kernels=kernels,
                       kv_read_bytes=c.kv_read_bytes * rep / tp,
                       kv_write_bytes=c.kv_write_bytes * rep / tp)
        out.append(replace(op, cost=cost, weight_elements=op.weight_elements / tp))
    return out


def link_for(hw: HardwareSpec, dep: Deployment) -> LinkSpec:
    link = hw.inter_node_link if dep.inter_node else hw.intra_node_link
    if link is None:
        where = "inter-node" if dep.inter_node else "intra-node"
        raise PerfModelError(f"{hw.id} has no {where} link in hardware_db: "
                             "cannot model multi-GPU communication")
    return link


def allreduce_s(nbytes, p: int, link: LinkSpec, eff: Efficiency):
    """All-reduce of nbytes over p GPUs: the ring's bandwidth term 2(p-1)/p * bytes / bw and
    the latency of NCCL's tree (or recursive-doubling) schedule for the small messages of
    decode, 2*ceil(log2 p) hops (NCCL docs: tree latency is logarithmic in p; for p = 2 both
    schedules take 2 hops, which the 2 x H200 measurement fits: calibrate/NCCL_NOTES.md)."""
    if p <= 1:
        return 0.0 * nbytes
    bw = link.bandwidth_bytes_per_s * eff.link_fraction
    return 2 * (p - 1) / p * nbytes / bw + allreduce_hops(p) * link.latency_s


def allreduce_hops(p: int) -> int:
    """Latency steps of a small all-reduce over p GPUs: 2*ceil(log2 p) (tree / doubling)."""
    return 2 * math.ceil(math.log2(p)) if p > 1 else 0


def alltoall_s(nbytes, p: int, link: LinkSpec, eff: Efficiency):
    """All-to-all where each GPU holds nbytes and keeps 1/p of them."""
    if p <= 1:
        return 0.0 * nbytes
    bw = link.bandwidth_bytes_per_s * eff.link_fraction
    return (p - 1) / p * nbytes / bw + (p - 1) * link.latency_s


def comm_times(m: ModelSpec, hw: HardwareSpec, eff: Efficiency, dep: Deployment, M):
    """(name, seconds) of the collectives of one step over M = B*T token rows."""
    if dep.tp == 1:
        return []
    link = link_for(hw, dep)
    act = np.asarray(M, dtype=float) * m.d_model * ACT_BYTES      # one B*T*D activation
    moe_layers = m.num_moe_layers if dep.ep > 1 else 0
    attn_ar = allreduce_s(act, dep.tp, link, eff) * m.num_layers
    mlp_ar = allreduce_s(act, dep.tp, link, eff) * (m.num_layers - moe_layers)
    out = [("tp_allreduce_attention", attn_ar), ("tp_allreduce_mlp", mlp_ar)]
    if moe_layers:
        k = m.moe.experts_per_token
        a2a = 2 * alltoall_s(act * k / dep.tp, dep.ep, link, eff) * moe_layers
        out.append(("ep_alltoall", a2a))
    return out


def p2p_s(hw: HardwareSpec, eff: Efficiency, dep: Deployment, M, m: ModelSpec):
    """Pipeline stage hand-offs for one step: (pp-1) sends of M*D activations."""
    if dep.pp == 1:
        return 0.0 * np.asarray(M, dtype=float)
    link = hw.intra_node_link or hw.inter_node_link
    if link is None:
        raise PerfModelError(f"{hw.id} has no link in hardware_db: cannot model pipeline stages")
    nbytes = np.asarray(M, dtype=float) * m.d_model * ACT_BYTES
    return (dep.pp - 1) * (nbytes / (link.bandwidth_bytes_per_s * eff.link_fraction) + link.latency_s)
