"""Op costs -> time under a chip, its efficiencies and an engine.

Per op (DESIGN.md):  t = max(flops / (peak[dtype] * e_gemm(M)), bytes / (bw * e_mem))
                         + kernels * kernel_s
Per step: the GPU works through the ops while the CPU issues their kernels and does its
per-sequence work (host = B * host_per_seq_s); the slower of the two sets the pace, then the
engine's per-step CPU overhead is added (host_step_s):
    step = max(sum(t_op) + t_comm, kernels * launch_s + graph_launch_s + host) + cpu_overhead
(an engine without overlap scheduling adds host after the max instead; a prompt step that
an engine without eager_issue_overlap runs outside its CUDA graphs adds its issue time to the
GPU time instead of hiding it: step = max(gpu + issue, host) + cpu_overhead).
Everything broadcasts over numpy arrays of B, T, S.

A matmul runs on the faster of two kernel paths (_gemm_compute_s):
- tiled GEMM on the matrix units: flops / (peak[dtype] * e_gemm(M)); weights stored narrower
  than the compute dtype are dequantized on the vector units once per tile of
  DEQUANT_TILE_ROWS rows, overlapped with the MMA (Marlin/Machete: max) or, for engines whose
  kernels dequantize first and multiply after (engine.dequant_overlap False), in series (sum);
- GEMV on the vector units (few rows: llama.cpp mul_mv/mmvq, the GEMV kernels of vLLM and
  TRT-LLM): each weight is dequantized once and used by all M rows, so the work is
  (2*M + dequant FLOPs per weight) * elements / vector peak and stays bytes-bound at small M,
  where a tensor-core tile would pay for e_gemm(1)'s padded rows (on a chip whose 16-bit
  rate equals its fp32 rate, such as Apple GPUs, that padding made decode compute-bound).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.core.act_quant import act_quant_bytes, act_quant_s
from perfmodel.core.efficiency import sustained_clock_fraction
from perfmodel.core.errors import PerfModelError
from perfmodel.core.grouped_gemm import (expert_depth_factor, grouped_gemm_efficiency,
                                          shard_depth_factor)
from perfmodel.core.host_cost import (_kernel_scale, _step_issue_s, eager_step,  # noqa: F401
                                     host_step_s, issue_s, piecewise_prompt_s, prompt_issue_s,
                                     prompt_series)
from perfmodel.core.ops import FloatArray, Op, OpCost, total
from perfmodel.core.ops_linear import LINEAR_ATTENTION_OP, linear_attention_efficiency
from perfmodel.core.parallel import comm_times, rank_ops
from perfmodel.core.sparse_mla import sparse_prefill_heads
from perfmodel.core.specs import (Deployment, Efficiency, EngineProfile, HardwareSpec, ModelSpec,
                             NumberFormat, Precision)
from perfmodel.core.weight_stream import weight_stream_fraction

W8A8_DTYPES = ("fp8", "int8")   # matmul dtypes that quantize activations each step
DEQUANT_TILE_ROWS = 64.0       # weight-only kernels dequantize once per tile of M rows (Marlin)
VECTOR_EFFICIENCY = 0.5        # non-tensor-core arithmetic reaches about half its peak
HALF_TO_FP32_VECTOR = 8.0       # assumption for a card whose datasheet lists no fp32 peak: its
                                # fp32 vector rate is 1/8 of its 16-bit peak (consumer cards 1-2x,
                                # datacenter tensor-core cards ~15x: a conservative middle)
FUSED_ELEMENTWISE_BYTES = 0.5  # fused norms/activations move about half the bytes
# bits of a compute dtype: weights stored narrower than it are dequantized in the kernel
DTYPE_BITS = {"fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8,
              "fp4": 4, "int4": 4}


@dataclass(frozen=True)
class OpTime:
    """Time of one op and which roof bounds it."""

    name: str
    kind: str
    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    flops: FloatArray
    bytes: FloatArray


@dataclass(frozen=True)
class StepEstimate:
    """One forward step: time, work, bound, per-op breakdown."""

    time_s: FloatArray
    gpu_s: FloatArray
    cpu_s: FloatArray
    flops: FloatArray
    bytes: FloatArray
    compute_dtype: str
    bound: str | np.ndarray
    ops: list[OpTime] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    flops_at_peak_s: FloatArray = 0.0
    """Sum over ops of FLOPs / the peak of the unit that runs them (matmuls: the faster of
    their dtype's peak and the vector peak; attention: the 16-bit peak; elementwise: the fp32
    peak). MFU is this over the step time: each op's time is at least its term, so MFU <= 1
    whatever the dtypes."""
    host_s: FloatArray = 0.0
    """Per-sequence host work of the step (included in cpu_s): sequences x host_per_seq_s."""
    kernels: FloatArray = 0.0
    """GPU kernels the step launches (the engine's count for the model's layers)."""
    eager: bool | np.ndarray = False
    """Whether the step runs outside the engine's CUDA graphs (bool, or a mask over the
    queries): its kernels are issued one by one (issue_s, host_step_s)."""


def resolve_compute(hw: HardwareSpec, p: Precision, engine: EngineProfile) -> tuple[str, list[str]]:
    """The dtype the matmuls run in, and why, following DESIGN.md:
    W16A16 -> 16-bit peak; W8A8 -> int8/fp8 peak where the chip has it; weight-only
    W4A16/W8A16 -> 16-bit peak plus dequantization; no fp8 units -> fallback, with a warning."""
    warnings: list[str] = []
    a = p.activations.name
    half = "bf16" if hw.has("bf16") else "fp16" if hw.has("fp16") else "fp32"
    if not hw.has(half):
        raise PerfModelError(f"{hw.id} lists no bf16, fp16 or fp32 peak: the model needs one "
                             "for attention, elementwise work and fallbacks")
    if a == "int4":
        raise PerfModelError("int4 activations are not supported; use bf16, fp16, fp8 or int8")
    if p.activations.bits < p.weights.bits:
        raise PerfModelError(f"activations {a} are narrower than weights {p.weights.name}: "
                             "quantize the weights at least as far as the activations")
    if a in ("fp8", "int8", "fp4"):
        if a == "fp8" and not engine.supports_fp8:
            warnings.append(f"engine {engine.id} has no fp8 kernels: matmuls run in {half}")
            return half, warnings
        if hw.has(a):
            return a, warnings
        fallback = half
        warnings.append(f"{hw.name} has no {a} tensor cores: matmuls fall back to {fallback} "
                        f"(weights still stored in {p.weights.label})")
        return fallback, warnings
    if a == "fp32":
        return ("fp32" if hw.has("fp32") else half), warnings
    if not hw.has(a):
        warnings.append(f"{hw.name} has no {a} peak listed: using {half}")
        return half, warnings
    return a, warnings


def step_time(m: ModelSpec, hw: HardwareSpec, p: Precision, engine: EngineProfile,
              eff: Efficiency, B, T, S, *, dep: Deployment | None = None,
              attention: str | None = None, all_logits: bool = False,
              prefill=False) -> StepEstimate:
    """Time of one forward step of B sequences x T new tokens over S cached tokens.
    `prefill` (a bool, or a bool mask over vectorized queries): the step carries prompt tokens
    (B x T of them), which a graph engine runs eagerly above engine.prefill_graph_max_tokens;
    a decode step runs eagerly above the engine's largest captured batch (issue_s)."""
    dep = dep or Deployment()
    dtype, warnings = resolve_compute(hw, p, engine)
    per_module = _module_dtypes(hw, p, engine, warnings)
    op_list = rank_ops(m, p, B, T, S, dep, attention=attention or engine.attention,
                       all_logits=all_logits,
                       sparse_heads=sparse_prefill_heads(m, hw, engine, dep))
    # SM-bound rates at the clock the card holds under sustained load (core/efficiency.py);
    # flops_at_peak_s stays on the datasheet peaks
    clock = sustained_clock_fraction(hw, eff)
    peaks = {k: v * clock for k, v in hw.peak_flops_per_s.items()}
    peak = peaks[dtype]
    half_peak = peaks.get("bf16") or peaks.get("fp16") or peak
    fp32_peak = peaks.get("fp32", half_peak / HALF_TO_FP32_VECTOR)
    vector_peak = fp32_peak * VECTOR_EFFICIENCY
    bw = hw.memory_bandwidth_bytes_per_s * eff.mem_bw_fraction
    # weight-only formats, and fp8/fp4 weights on a fallback path, are dequantized in-kernel
    dequant = p.weights.bits < DTYPE_BITS.get(dtype, 16)
    kscale = _kernel_scale(m, engine, attention or engine.attention)
    expert_depth = expert_depth_factor(m, dep)     # thin expert shards: core/grouped_gemm.py

    attn_compute = eff.attn_compute
    if engine.prefill_attention == "fa2" and eff.attn_compute_fa2 is not None:
        attn_compute = np.where(prefill, eff.attn_compute_fa2, eff.attn_compute)

    times: list[OpTime] = []
    gpu = 0.0
    compute_sum = memory_sum = 0.0
    kernels = 0.0
    moved_sum = 0.0
    at_peak = 0.0
    gemm_eff: dict[str, Efficiency] = {}    # weight group -> its GEMM curve (gemm_kind)
    shard_k: dict[str, float] = {}           # weight group -> its kind's shard K_half
    for op in op_list:
        c = op.cost
        k = c.kernels * (kscale if op.per_layer else 1.0)
        k_quant_s = quant_bytes = 0.0
        kernels = kernels + k
        if op.kind == "gemm":
            op_dtype, op_dequant = per_module.get(op.group, (dtype, dequant))
            if op.group == "router":
                op_dtype, op_dequant = router_dtype(m, hw, op_dtype, engine.fp32_matmul), False
            experts = op.name == "experts" and m.moe is not None
            if experts and op_dtype in W8A8_DTYPES:   # quantize casts inside the fused MoE
                k = k + engine.moe_act_quant_kernels * m.num_moe_layers
                kernels = kernels + engine.moe_act_quant_kernels * m.num_moe_layers
            if op.group not in gemm_eff:
                kind = gemm_kind(op_dtype, p.for_group(op.group).weights)
                kind = "fp32_router" if op.group == "router" and kind == "fp32" else kind
                gemm_eff[op.group] = eff.for_gemm(kind)
                shard_k[op.group] = eff.shard_half_k(kind)
            dense_depth = (1.0 if op.quantized and op_dequant   # row-parallel TP shards
                           else shard_depth_factor(shard_k[op.group], op.reduce_k, op.k_split))
            compute = _gemm_compute_s(op, peaks[op_dtype], vector_peak, gemm_eff[op.group],
                                      engine, op.quantized and op_dequant,
                                      depth=expert_depth if experts else dense_depth,
                                      top_k=m.moe.experts_per_token if experts else 0,
                                      num_experts=m.moe.num_experts if experts else 0)
            wbytes = c.weight_bytes / weight_stream_fraction(engine, op.quantized, op_dtype,
                                                             experts=experts)
            if experts:   # the fused MoE kernel's own streaming rate (core/grouped_gemm.py)
                wbytes = wbytes / engine.moe_stream_fraction
            memory = (wbytes + c.act_bytes) / bw
            if op_dtype in W8A8_DTYPES:   # its own kernel before the GEMM: core/act_quant.py
                quant_out = p.for_group(op.group).activations.bytes_per_element
                k_quant_s = act_quant_s(op.quant_elements, bw, quant_out)
                quant_bytes = act_quant_bytes(op.quant_elements, quant_out)
            at_peak = at_peak + c.flops / max(hw.peak_flops_per_s[op_dtype], vector_peak / clock)
        elif op.kind == "attention":
            # softmax attention: the engine's prompt kernels on this chip (attn_compute above)
            e_attn = (attn_compute if op.name != LINEAR_ATTENTION_OP else   # chunked GDN
                      linear_attention_efficiency(m, dep, op.rows, T, eff.attn_compute,
                                                  eff.linear_attn_chunk_max))
            compute = c.flops / (half_peak * e_attn)
            at_peak = at_peak + c.flops / (half_peak / clock)
            memory = (c.kv_read_bytes + c.kv_write_bytes) / (bw * eff.attn_mem) + c.act_bytes / bw
        else:
            act = c.act_bytes * (_elementwise_traffic(engine) if op.kind == "elementwise" else 1.0)
            compute = c.flops / vector_peak
            at_peak = at_peak + c.flops / (fp32_peak / clock)
            memory = (c.weight_bytes + act) / bw
        # bytes this op actually moves (fused or upcast elementwise chains differ from the list)
        moved = (c.bytes if op.kind != "elementwise" else c.weight_bytes + act) + quant_bytes
        moved_sum = moved_sum + moved
        t = np.maximum(compute, memory) + k * eff.kernel_s + k_quant_s
        compute_sum = compute_sum + np.where(compute >= memory, t, 0.0)
        memory_sum = memory_sum + np.where(compute >= memory, 0.0, t)
        gpu = gpu + t
        times.append(OpTime(op.name, op.kind, t, compute, memory, c.flops, moved))

    comm_sum = 0.0
    experts_s = next((x.time_s for x in times if x.name == "experts"), 0.0)
    for name, t in comm_times(m, hw, eff, dep, B * T, nvls=engine.allreduce_nvls_window,
                              one_sided_a2a=engine.moe_a2a_kernels == "one_sided"):
        if name == "ep_alltoall" and engine.moe_comm_overlap:
            # two-batch overlap hides up to the given share, never more than the expert GEMMs
            t = t - np.minimum(t * engine.moe_comm_overlap, experts_s)
        gpu = gpu + t
        comm_sum = comm_sum + t
        times.append(OpTime(name, "comm", t, 0.0, 0.0, 0.0, 0.0))

    if dtype in W8A8_DTYPES and engine.act_quant_kernels_per_layer:
        # activation quantize casts, one small elementwise kernel each (engine field)
        extra = engine.act_quant_kernels_per_layer * m.num_layers
        kernels = kernels + extra
        gpu = gpu + extra * eff.kernel_s
    cpu, eager = _step_issue_s(engine, hw, dep, kernels, B, T, prefill,
                               prompt_extra_s=prompt_issue_s(m, engine, attention or engine.attention),
                               piecewise_s=piecewise_prompt_s(m, engine))
    # B running sequences; with attention DP each of the dp ranks schedules its B/dp
    # sequences in its own process (SGLang/TRT-LLM attention DP, vLLM DP engine cores)
    host = np.asarray(B, dtype=float) / dep.dp * engine.host_per_seq_s
    # the series rule is measured on prompt steps (engines.py); eager decode keeps the max
    step = host_step_s(engine, gpu, cpu, host, eager=prompt_series(engine, eager, prefill, T))
    work = total(op_list)
    bound = _bound(compute_sum, memory_sum, comm_sum, cpu + host, gpu)
    return StepEstimate(time_s=step, gpu_s=gpu,
                        cpu_s=cpu + host + engine.cpu_overhead_per_step_s, host_s=host,
                        flops=work.flops, bytes=moved_sum, compute_dtype=dtype, bound=bound,
                        ops=times, warnings=warnings, flops_at_peak_s=at_peak, kernels=kernels,
                        eager=eager)


def _module_dtypes(hw: HardwareSpec, p: Precision, engine: EngineProfile,
                   warnings: list[str]) -> dict[str, tuple[str, bool]]:
    """Weight group -> (compute dtype, dequantized in-kernel) for groups whose module has its own
    format (gpt-oss: MXFP4 experts next to bf16 attention); other groups use the default."""
    out: dict[str, tuple[str, bool]] = {}
    for group in ("attention", "mlp", "shared_experts", "experts", "lm_head"):
        q = p.for_group(group)
        if q is p or not p.modules or q.weights == p.weights and q.activations == p.activations:
            continue
        dtype, notes = resolve_compute(hw, q, engine)
        warnings += [w for w in notes if w not in warnings]
        out[group] = (dtype, q.weights.bits < DTYPE_BITS.get(dtype, 16))
    return out


def router_dtype(m: ModelSpec, hw: HardwareSpec, default: str, fp32_matmul: str = "fp32") -> str:
    """The compute dtype of an MoE router GEMM: fp32 where the architecture's engines upcast it
    (MoESpec.router_fp32), TF32 instead when the engine lets fp32 matmuls use it
    (EngineProfile.fp32_matmul 'tf32') and the chip lists a TF32 peak, else the 16-bit
    activation dtype; never a W8A8 kernel (vLLM, SGLang and TensorRT-LLM build the gate
    unquantized: ReplicatedLinear(quant_config=None)). A chip listing none of these peaks keeps
    `default`, the step's dtype."""
    fp32 = ("tf32", "fp32") if fp32_matmul == "tf32" else ("fp32",)
    wanted = fp32 if m.moe is not None and m.moe.router_fp32 else ()
    for name in wanted + ("bf16", "fp16"):
        if name in hw.peak_flops_per_s:
            return name
    return default


def gemm_kind(dtype: str, weights: NumberFormat) -> str:
    """The matmul kind whose GEMM curve prices an op (Efficiency.gemm_by_dtype): its compute
    dtype, or fp8_block for fp8 weights with block scales (fp8-b128: DeepSeek-V3-style 128x128
    weight blocks, run with 1x128 activation groups by DeepGEMM, CUTLASS and Triton w8a8)."""
    if dtype == "fp8" and weights.name == "fp8" and weights.group_size:
        return "fp8_block"
    return dtype


def _gemm_compute_s(op: Op, peak: float, vector_peak: float, eff: Efficiency,
                    engine: EngineProfile, dequant: bool, depth: float = 1.0, top_k: int = 0,
                    num_experts: int = 0):
    """Compute time of a matmul op: the faster of the tiled GEMM and the GEMV path
    (module docstring). `dequant`: weights narrower than the compute dtype; `depth`: the
    tiled path's time multiplier from shallow reductions; `top_k` > 0: a grouped expert GEMM,
    whose rows are padded per expert to whole tiles of a size set by the batch's tokens against
    the `num_experts` (both in core/grouped_gemm.py)."""
    rows = np.maximum(op.rows, 1.0)
    e = grouped_gemm_efficiency(eff, rows, top_k, num_experts) if top_k else eff.gemm(rows)
    mma = op.cost.flops * depth / (peak * e)                   # matrix units, padded tiles
    per_weight = engine.dequant_flops_per_weight if dequant else 0.0
    tiled = mma
    if dequant:
        tiles = np.maximum(1.0, rows / DEQUANT_TILE_ROWS)      # smooth in M
        dq = op.weight_elements * per_weight * tiles / vector_peak
        tiled = np.maximum(mma, dq) if engine.dequant_overlap else mma + dq
    gemv = (op.cost.flops + op.weight_elements * per_weight) / vector_peak
    return np.minimum(tiled, gemv)


def _elementwise_traffic(engine: EngineProfile) -> float:
    """Elementwise bytes relative to the op list's count: calibrated, else by fusion."""
    if engine.elementwise_traffic is not None:
        return engine.elementwise_traffic
    return FUSED_ELEMENTWISE_BYTES if engine.fused_elementwise else 1.0


def _bound(compute, memory, comm, cpu, gpu):
    """Label of the largest share: 'overhead' when the CPU cannot keep the GPU fed."""
    labels = np.array(["compute", "memory", "communication", "overhead"])
    stacked = np.stack(np.broadcast_arrays(np.asarray(compute, float), np.asarray(memory, float),
                                           np.asarray(comm, float),
                                           np.where(np.asarray(cpu) > np.asarray(gpu),
                                                    np.inf, 0.0)))
    idx = np.argmax(stacked, axis=0)
    out = labels[idx]
    return str(out) if out.ndim == 0 else out


def roofline_floor_s(m: ModelSpec, hw: HardwareSpec, p: Precision, B, T, S,
                     dep: Deployment | None = None) -> FloatArray:
    """The unbeatable floor: max(bytes / peak bandwidth, all FLOPs / peak compute), at the
    peak of the model's compute dtype (its activations' format where the chip has it, else
    the chip's 16-bit rate: a bf16 model cannot use fp8 units) and with elementwise
    intermediates assumed fused away.

    Pipeline parallelism (pp stages): the step's work is spread over pp GPUs, and one
    sequence still passes through every stage in order, so the floor is
    max(floor(B) / pp, floor(1 sequence))."""
    dep = dep or Deployment()
    floor = _work_floor_s(m, hw, p, B, T, S, dep)
    if dep.pp == 1:
        return floor
    return np.maximum(floor / dep.pp, _work_floor_s(m, hw, p, 1, T, S, dep))


def _work_floor_s(m: ModelSpec, hw: HardwareSpec, p: Precision, B, T, S, dep: Deployment):
    """max(bytes / peak bandwidth, FLOPs / compute-dtype peak) of one TP rank's op list."""
    op_list = rank_ops(m, p, B, T, S, dep, attention="flash")
    work: OpCost = total(op_list)
    # perfect fusion: elementwise intermediates never reach memory
    fusable = sum((op.cost.act_bytes for op in op_list if op.kind == "elementwise"), 0.0)
    peaks = hw.peak_flops_per_s
    half = peaks.get("bf16") or peaks.get("fp16") or max(peaks.values())
    peak = max(peaks.get(p.activations.name, 0.0), half)
    return np.maximum((work.bytes - fusable) / hw.memory_bandwidth_bytes_per_s,
                      work.flops / peak)
