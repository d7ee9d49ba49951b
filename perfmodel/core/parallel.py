"""Tensor, pipeline and expert parallelism: how ops are split and what the collectives cost.

TP splits weights, heads and KV over p GPUs (KV heads are replicated when K < p; MLA's latent
down-projections and the DSA indexer run whole on every rank: TP_REPLICATED) and adds
two all-reduces of B*T*D activations per layer (Megatron-LM, Shoeybi et al. 2019).
All-reduce: ring bytes 2(p-1)/p * bytes / link_bw under the faster of NCCL's protocols (LL: tree
latency, half the bandwidth; Simple: full bandwidth, a larger fixed latency), or bytes over the
switch's reduction rate (NVLink SHARP) where the engine runs the message on it (allreduce_s);
across scale-up domains (tp > the NVLink domain) hierarchical: intra reduce-scatter,
inter-domain all-reduce of a 1/g shard, intra all-gather (group_allreduce_s).
EP spreads routed experts; with TP attention the MoE layer keeps its all-reduce (every rank
holds every token: comm_times); under attention DP it becomes a dispatch and
a combine all-to-all of k*M*D activations, peers written concurrently (alltoall_s). The busiest
EP rank sets the pace of the expert GEMMs and of the all-to-all (core/expert_load.py).
Under attention DP an engine's one-sided exchange kernels are never faster than measured
(core/moe_exchange.py: TensorRT-LLM tech blog 18, GB200 NVL72), every step of the layout.
PP splits layers into stages; hand-offs cross the inter-node link where a stage boundary is
a domain boundary; fill and bubble are handled in predict.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perfmodel.core.errors import PerfModelError
from perfmodel.core.expert_load import expert_load_ratios
from perfmodel.core.moe_exchange import exchange_s
from perfmodel.core.ops import ACT_BYTES, LINEAR_ATTENTION_OP, Op, ops
from perfmodel.core.specs import (Deployment, Efficiency, HardwareSpec, LinkSpec, ModelSpec,
                                  Precision)

DEFAULT_DOMAIN_GPUS = 8   # an HGX/DGX board, when neither deployment nor hardware says
A2A_LATENCY_HOPS = 2      # concurrent all-to-all: data hop + arrival flag (DeepEP, see alltoall_s)
NO_NVLS = (0.0, 0.0)      # (above, up to) bytes on NVLink SHARP: never (allreduce_s)
LL_BANDWIDTH_FRACTION = 0.5   # NCCL's LL protocol stores 4 bytes of data with a 4-byte flag in
                              # each 8-byte write: half the link's bandwidth (NCCL's LL/LL128/
                              # Simple protocols: src/device/prims_ll.h; "Demystifying NCCL",
                              # arXiv 2507.04786). LL128 (120 of 128 bytes) is not modelled.
QK_NORM_SUM_BYTES = 4.0   # a per-token sum of squares is all-reduced in fp32 (vLLM
                          # MiniMaxText01RMSNormTP upcasts before the reduction)
TP_REPLICATED = frozenset({"q_a_proj", "kv_a_proj", "indexer_wq", "indexer_wk",
                           "indexer_weights", "indexer", "router", "router_upcast", "shared_gate",
                           "moe_routing"})
"""Ops every TP rank runs whole: MLA's down-projections to the q and kv latents (every rank
needs the whole latents), the DSA indexer (every rank must pick the same top-k tokens), and
the MoE router with its top-k (every rank routes every token: vLLM's and SGLang's MoE blocks
build the gate and Qwen's shared-expert gate as ReplicatedLinear; DeepSeek's Gate is a full
parameter on every rank).
DeepSeek-V3.2-Exp inference/model.py builds wq_a, wkv_a and the Indexer's wq_b, wk and
weights_proj as plain Linear (wq_b, wkv_b, wo of MLA are Column/RowParallelLinear); SGLang
(fused_qkv_a_proj_with_mqa) and vLLM (MergedReplicatedLinear) replicate the down-projections,
and SGLang's indexer is not split over TP without DP attention (its DeepSeek-V3.2/GLM-5 roadmap,
sgl-project/sglang#15025: 'Support TP for Indexer when DP is not enabled', open)."""


ROW_PARALLEL_OPS = frozenset({"o_proj", "mlp_down"})
"""Dense linears split along their input (K) over the TP ranks, each rank's partial sums
all-reduced after them (Megatron-LM RowParallelLinear; vLLM RowParallelLinear for o_proj and
down_proj, TensorRT-LLM TensorParallelMode.ROW): a rank reduces over K/tp
(core/grouped_gemm.py shard_depth_factor). Their column-parallel neighbours keep K."""


MOE_ROW_OPS = frozenset({"moe_permute", "moe_combine"})
"""Ops over the routed (token, expert) rows, which an expert shard runs for every row routed to
it: under TP every rank holds a slice of every expert, so it gathers all k*M rows and sums all
k of each token's partial outputs before the all-reduce (vLLM fused_moe: moe_align_block_size
and the GEMM's row gather, then ops.moe_sum over its (M, k, D) output; TRT-LLM's MoE plugin:
expandInputRows and finalizeMoeRouting on every rank); under EP each rank gets the rows of its
E/ep experts. A rank's share is 1 / min(tp, ep) of the op (calibrate/MOE_PREFILL_NOTES.md)."""


def validate_deployment(m: ModelSpec, dep: Deployment) -> None:
    """TP must divide the heads; EP must divide the experts and tile the tp x dp GPUs."""
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
        if (dep.tp * dep.dp) % dep.ep:
            raise PerfModelError(f"ep={dep.ep} does not divide the tp x dp = {dep.tp * dep.dp} "
                                 "GPUs of a stage: experts are spread over tp x dp GPUs "
                                 "(use --dp for attention data parallelism)")


def kv_replication(m: ModelSpec, tp: int) -> float:
    """Per-GPU KV share relative to an even split: K < tp forces copies of kv heads."""
    if m.mla is not None:
        return float(tp)  # the MLA latent is shared by all heads: every GPU keeps it whole
    return max(1.0, tp / m.num_kv_heads)


def rank_ops(m: ModelSpec, p: Precision, B, T, S, dep: Deployment, *, attention: str,
             all_logits: bool = False, sparse_heads: float | None = None) -> list[Op]:
    """One GPU's ops of a step of B sequences (all stages' layers; PP is handled by predict).

    Attention DP: each of the dp groups runs everything but the routed experts for its B/dp
    sequences (shared experts and dense layers are replicated per group, as TRT-LLM's
    attention DP and SGLang's DP attention run them); the routed experts see all B*T tokens,
    spread over the tp x dp GPUs."""
    B = np.asarray(B, dtype=float)
    tokens = B * T
    if dep.dp == 1:
        return shard(ops(m, p, B, T, S, attention=attention, all_logits=all_logits,
                         sparse_heads=sparse_heads), m, dep, tokens=tokens)
    local = ops(m, p, B / dep.dp, T, S, attention=attention, all_logits=all_logits,
                sparse_heads=sparse_heads)
    routed = {op.name: op for op in ops(m, p, B, T, S, attention=attention) if op.name == "experts"}
    merged = [routed.get(op.name, op) for op in local]
    out = shard(merged, m, dep, tokens=tokens)
    return [replace(op, cost=replace(op.cost * (1.0 / dep.dp), kernels=op.cost.kernels),
                    weight_elements=op.weight_elements / dep.dp,
                    quant_elements=op.quant_elements / dep.dp) if op.name in routed else op
            for op in out]


def shard(op_list: list[Op], m: ModelSpec, dep: Deployment, tokens=1.0) -> list[Op]:
    """Per-GPU costs under TP (PP is handled by predict). Under EP the routed experts are
    those of the busiest rank: `tokens` = B*T rows routed this step set its excess rows and
    experts touched (core/expert_load.py); the other ops are the mean rank's share."""
    if dep.tp == 1 and dep.ep == 1:
        return op_list
    tp = dep.tp
    rep = kv_replication(m, tp)
    load, touched = busiest_rank_ratios(m, dep, tokens)
    out = []
    for op in op_list:
        if op.name in TP_REPLICATED:
            out.append(op)    # the whole op on every rank
            continue
        c = op.cost
        kernels = c.kernels
        op_rep = 1.0 if op.name == LINEAR_ATTENTION_OP else rep   # recurrent state: split by heads
        cost = c * (1.0 / (min(tp, max(dep.ep, 1)) if op.name in MOE_ROW_OPS else tp))
        cost = replace(cost, kernels=kernels,
                       kv_read_bytes=c.kv_read_bytes * op_rep / tp,
                       kv_write_bytes=c.kv_write_bytes * op_rep / tp)
        elements = op.weight_elements / tp
        quant = op.quant_elements / tp    # like act_bytes: the rank's share of the inputs
        if op.name == "experts" and dep.ep > 1:
            cost = replace(cost, flops=cost.flops * load, act_bytes=cost.act_bytes * load,
                           weight_bytes=cost.weight_bytes * touched)
            elements = elements * touched
            quant = quant * load
        split = float(tp) if op.name in ROW_PARALLEL_OPS else op.k_split
        out.append(replace(op, cost=cost, weight_elements=elements, quant_elements=quant,
                           k_split=split))
    return out


def busiest_rank_ratios(m: ModelSpec, dep: Deployment, tokens):
    """(rows, experts touched) of the busiest EP rank relative to the mean rank; (1, 1)
    without EP (every TP rank holds a slice of every expert and works in lockstep)."""
    if m.moe is None or dep.ep <= 1:
        one = np.ones_like(np.asarray(tokens, dtype=float))
        return one, one
    return expert_load_ratios(m.moe.num_experts, m.moe.experts_per_token, dep.ep, tokens)


def domain_gpus(hw: HardwareSpec, dep: Deployment) -> int:
    """GPUs in one scale-up domain: the deployment's override, else the hardware's
    scale_up_gpus (72 on GB200 NVL72), else its gpus_per_node, else 8 (an HGX board)."""
    return dep.gpus_per_node or hw.scale_up_gpus or hw.gpus_per_node or DEFAULT_DOMAIN_GPUS


def link_for(hw: HardwareSpec, dep: Deployment) -> LinkSpec:
    """The slowest link the tensor-parallel group's collectives cross (checks both exist)."""
    if hw.intra_node_link is None:
        raise PerfModelError(f"{hw.id} has no intra-node link in hardware_db: "
                             "cannot model multi-GPU communication")
    g = domain_gpus(hw, dep)
    if dep.tp * dep.dp > g or dep.ep > g:
        return _inter_link(hw, g, f"tp={dep.tp} x dp={dep.dp} (ep={dep.ep})")
    return hw.intra_node_link


def _inter_link(hw: HardwareSpec, g: int, what: str) -> LinkSpec:
    if hw.inter_node_link is None:
        raise PerfModelError(f"{what} spans more than one scale-up domain of {g} GPUs, but "
                             f"{hw.id} has no inter-node link in hardware_db")
    return hw.inter_node_link


def allreduce_s(nbytes, p: int, link: LinkSpec, eff: Efficiency, nvls: tuple = NO_NVLS):
    """All-reduce of nbytes over p GPUs: the fastest protocol NCCL's own cost model would pick
    (NVIDIA/nccl src/graph/tuning.cc: time = latency + bytes / bandwidth per algorithm and
    protocol, the minimum wins), with the ring's 2(p-1)/p * bytes over link bw * eff.link:
      LL      2*ceil(log2 p) * link.latency_s + ring bytes / (bw * LL_BANDWIDTH_FRACTION)
              (the small messages of decode: tree / recursive-doubling latency, NCCL docs; for
              p = 2 both schedules take 2 hops, which the 2 x H200 measurement fits:
              calibrate/NCCL_NOTES.md; the engines' one-shot kernels are of the same order)
      Simple  simple_base_latency_s + 2(p-1) * simple_step_latency_s + ring bytes / bw
      NVLS    nvls_latency_s + bytes / nvls_allreduce_bytes_per_s   (the switch reduces: each
              GPU sends its message up once and reads the sum back once, whatever p)
    A link without the Simple figures keeps one protocol: the LL latency at full bandwidth.
    NVLS only where the link records it and the engine runs messages of this size on it:
    `nvls` = (above, up to) bytes, EngineProfile.allreduce_nvls_window (up to None: no
    limit, 0: never). Above the window: NCCL's ring; below it the engine's one/two-shot
    kernels, taken to be no slower than the multicast path at the switch-over size (the
    engines pick the faster kernel there; time stays non-decreasing in bytes).
    8 x H100, NCCL 2.2x, 2-4 GiB (NVIDIA/nccl#1455): ring busbw 365-370 GB/s at 2 to 8 GPUs;
    NVLS the same up to 4 GPUs, 480 GB/s busbw (algbw 273 GB/s) at 8, so NVLS gains only at
    large p, where the ring's 2(p-1)/p grows; the minimum reproduces that crossover."""
    if p <= 1:
        return 0.0 * nbytes
    scalar = isinstance(nbytes, (float, int, np.floating))   # the simulator's steps: no arrays
    lower, upper = (min, max) if scalar else (np.minimum, np.maximum)
    ring = 2 * (p - 1) / p * nbytes / (link.bandwidth_bytes_per_s * eff.link_fraction)
    t = ring + allreduce_hops(p) * link.latency_s
    if link.simple_base_latency_s is not None and link.simple_step_latency_s is not None:
        simple = link.simple_base_latency_s + 2 * (p - 1) * link.simple_step_latency_s
        t = lower(t + ring * (1 / LL_BANDWIDTH_FRACTION - 1), ring + simple)
    rate = link.nvls_allreduce_bytes_per_s
    lo, hi = nvls
    if rate is None or hi == 0:
        return t
    hi = np.inf if hi is None else hi
    on_switch = lower(t, link.nvls_latency_s + upper(nbytes, lo) / rate)
    if scalar:
        return on_switch if nbytes <= hi else t
    return np.where(np.asarray(nbytes) <= hi, on_switch, t)


def allreduce_hops(p: int) -> int:
    """Latency steps of a small all-reduce over p GPUs: 2*ceil(log2 p) (tree / doubling)."""
    return 2 * math.ceil(math.log2(p)) if p > 1 else 0


def hierarchical_hops(p: int, g: int) -> tuple[int, int]:
    """(intra-domain, inter-domain) latency steps of an all-reduce over p GPUs in domains of
    g: reduce-scatter and all-gather inside each domain (ceil(log2 g) each), an all-reduce
    across the p/g domains (2*ceil(log2(p/g))). p <= g is a flat all-reduce."""
    if p <= g:
        return allreduce_hops(p), 0
    return allreduce_hops(g), allreduce_hops(math.ceil(p / g))


def group_allreduce_s(nbytes, p: int, hw: HardwareSpec, dep: Deployment, eff: Efficiency,
                      nvls: tuple = NO_NVLS):
    """All-reduce over p GPUs as NCCL runs it across scale-up domains of g GPUs: hierarchical
    (NCCL's CollNet/NVLS-tree and the 2D algorithm of Jia et al. 2018): intra-domain
    reduce-scatter, inter-domain all-reduce of each GPU's 1/g shard, intra-domain all-gather:
        2(g-1)/g * B / bw_intra + 2(n-1)/n * (B/g) / bw_inter + hops (hierarchical_hops),
    n = p/g domains. Within one domain: the flat all-reduce (allreduce_s, NVLS where the
    engine uses it: the `nvls` window); the hierarchical path keeps the ring."""
    g = domain_gpus(hw, dep)
    intra = hw.intra_node_link
    if p <= g:
        return allreduce_s(nbytes, p, intra, eff, nvls)
    inter = _inter_link(hw, g, f"an all-reduce over {p} GPUs")
    n = math.ceil(p / g)
    intra_hops, inter_hops = hierarchical_hops(p, g)
    return (2 * (g - 1) / g * nbytes / (intra.bandwidth_bytes_per_s * eff.link_fraction)
            + 2 * (n - 1) / n * nbytes / g / (inter.bandwidth_bytes_per_s * eff.link_fraction)
            + intra_hops * intra.latency_s + inter_hops * inter.latency_s)


def alltoall_s(nbytes, p: int, hw: HardwareSpec, dep: Deployment, eff: Efficiency):
    """All-to-all where each GPU holds nbytes spread evenly over p GPUs and keeps 1/p.

    The p-1 peers are written concurrently (NCCL's grouped send/recv, DeepEP's kernels), so
    the latency is A2A_LATENCY_HOPS one-hop latencies (the data, then the arrival flag), not
    p-1 serial hops: DeepEP's README measures low-latency dispatch at 77 us for EP8 and
    194 us for EP256 (128 tokens, H800 + CX7 RDMA): 32x the peers, 2.5x the time. Peers in
    the GPU's scale-up domain take (g-1)/p of the bytes over NVLink, the others (p-g)/p over
    the inter-node link at the same time; the slower of the two sets the pace."""
    if p <= 1:
        return 0.0 * nbytes
    g = min(domain_gpus(hw, dep), p)
    intra = hw.intra_node_link
    t = (g - 1) / p * nbytes / (intra.bandwidth_bytes_per_s * eff.link_fraction)
    lat = intra.latency_s
    if p > g:
        inter = _inter_link(hw, g, f"ep={p}")
        t = np.maximum(t, (p - g) / p * nbytes / (inter.bandwidth_bytes_per_s * eff.link_fraction))
        lat = max(lat, inter.latency_s)
    return t + A2A_LATENCY_HOPS * lat


def comm_times(m: ModelSpec, hw: HardwareSpec, eff: Efficiency, dep: Deployment, M, *,
               nvls: tuple = NO_NVLS, one_sided_a2a: bool = False):
    """(name, seconds) of the collectives of one step over M = B*T token rows (all dp groups).

    Per layer: the attention all-reduce inside a tp group over its M/dp rows (and, for q/k
    norms spanning all heads, one of the per-token q and k sums of squares); the FFN's
    all-reduce likewise on dense layers and, without attention DP, on MoE layers too, with or
    without EP; under attention DP with EP a dispatch and a combine all-to-all of each GPU's
    M/(tp*dp) rows x k over the ep GPUs (with `one_sided_a2a`, the engine's
    EngineProfile.moe_a2a_kernels == 'one_sided', never faster than those kernels' measured
    dispatch + combine: core/moe_exchange.py); with DP but no EP the MoE layer all-reduces all
    M rows over the tp x dp GPUs (gather + reduce-scatter).
    Why EP without attention DP keeps the all-reduce: every rank holds every token after the
    attention all-reduce, so an EP rank runs its experts on the rows routed to them and the
    MoE output (routed + shared) is summed over the tp GPUs as on dense layers; no
    dispatch/combine runs. TensorRT-LLM _torch/models/modeling_deepseekv3.py: the decoder
    layer calls the MoE with final_all_reduce_params enable_allreduce unless POST_MOE_FUSION
    or tp_size == 1, and under POST_MOE_FUSION all-reduces its output fused with the residual
    add and RMSNorm (AllReduceFusionOp.RESIDUAL_RMS_NORM); its all-to-all runs only under
    enable_attention_dp. SGLang's and vLLM's EP MoE without DP attention likewise end in
    tensor_model_parallel_all_reduce.
    nvls: the engine's EngineProfile.allreduce_nvls_window (allreduce_s)."""
    if dep.tp * dep.dp == 1:
        return []
    link_for(hw, dep)
    act = np.asarray(M, dtype=float) * m.d_model * ACT_BYTES      # one B*T*D activation
    local = act / dep.dp                                           # one dp group's rows
    moe_layers = m.num_moe_layers if dep.dp > 1 else 0   # dp == 1: the MLP's all-reduce
    attn_ar = group_allreduce_s(local, dep.tp, hw, dep, eff, nvls) * m.num_layers
    mlp_ar = group_allreduce_s(local, dep.tp, hw, dep, eff, nvls) * (m.num_layers - moe_layers)
    out = [("tp_allreduce_attention", attn_ar), ("tp_allreduce_mlp", mlp_ar)]
    if m.qk_norm_across_heads and dep.tp > 1:   # q and k norms span heads split over the tp GPUs
        sums = np.asarray(M, dtype=float) / dep.dp * 2 * QK_NORM_SUM_BYTES
        softmax_layers = m.num_layers - m.num_linear_attention_layers
        out.append(("tp_allreduce_qk_norm",
                    group_allreduce_s(sums, dep.tp, hw, dep, eff, nvls) * softmax_layers))
    if moe_layers and dep.ep > 1:
        k = m.moe.experts_per_token
        load, _ = busiest_rank_ratios(m, dep, M)   # the busiest rank receives the most rows
        a2a = 2 * alltoall_s(local * k / dep.tp * load, dep.ep, hw, dep, eff)
        if dep.dp > 1 and one_sided_a2a:   # the measured kernels' floor (moe_exchange.py)
            a2a = np.maximum(a2a, exchange_s(np.asarray(M, dtype=float) / (dep.tp * dep.dp) * load,
                                                dep.ep))
        out.append(("ep_alltoall", a2a * moe_layers))
    elif moe_layers:
        out.append(("dp_moe_allreduce",
                    group_allreduce_s(act, dep.tp * dep.dp, hw, dep, eff, nvls) * moe_layers))
    return out


def p2p_s(hw: HardwareSpec, eff: Efficiency, dep: Deployment, M, m: ModelSpec):
    """Pipeline stage hand-offs for one step: pp-1 sends of M*D activations, each over the
    link between the two stages: NVLink while both lie in one scale-up domain, the inter-node
    link where a stage boundary is also a domain boundary (domain // tp stages per domain)."""
    nbytes = np.asarray(M, dtype=float) * m.d_model * ACT_BYTES
    if dep.pp == 1:
        return 0.0 * nbytes
    intra, inter = pipeline_handoffs(hw, dep)
    out = 0.0 * nbytes
    for n, link in ((intra, hw.intra_node_link), (inter, hw.inter_node_link)):
        if n:
            if link is None:
                raise PerfModelError(f"pp={dep.pp} with tp={dep.tp} needs a "
                                     f"{'inter' if link is hw.inter_node_link else 'intra'}-node "
                                     f"link, which {hw.id} lacks in hardware_db")
            out = out + n * (nbytes / (link.bandwidth_bytes_per_s * eff.link_fraction) + link.latency_s)
    return out


def pipeline_handoffs(hw: HardwareSpec, dep: Deployment) -> tuple[int, int]:
    """(intra-domain, inter-domain) stage hand-offs: stages fill domains in order,
    domain // tp stages each (one stage per domain when tp fills it)."""
    per_domain = max(1, domain_gpus(hw, dep) // (dep.tp * dep.dp))
    inter = (dep.pp - 1) // per_domain
    return dep.pp - 1 - inter, inter
