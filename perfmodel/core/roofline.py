"""Op costs -> time under a chip, its efficiencies and an engine.

Per op (DESIGN.md):  t = max(flops / (peak[dtype] * e_gemm(M)), bytes / (bw * e_mem))
                         + kernels * kernel_s
Per step: the GPU works through the ops while the CPU issues their kernels; the slower of
the two sets the pace, then the engine's per-step CPU overhead is added:
    step = max(sum(t_op) + t_comm, kernels * launch_s + graph_launch_s) + cpu_overhead
Everything broadcasts over numpy arrays of B, T, S.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.core.errors import PerfModelError
from perfmodel.core.ops import Op, OpCost, ops, total
from perfmodel.core.parallel import comm_times, shard
from perfmodel.core.specs import (Deployment, Efficiency, EngineProfile, HardwareSpec, ModelSpec,
                             Precision)

DEQUANT_TILE_ROWS = 64.0       # weight-only kernels dequantize once per tile of M rows (Marlin)
VECTOR_EFFICIENCY = 0.5        # non-tensor-core arithmetic reaches about half its peak
FUSED_ELEMENTWISE_BYTES = 0.5  # fused norms/activations move about half the bytes


@dataclass(frozen=True)
class OpTime:
    """Time of one op and which roof bounds it."""

    name: str
    kind: str
    time_s: object
    compute_s: object
    memory_s: object
    flops: object
    bytes: object


@dataclass(frozen=True)
class StepEstimate:
    """One forward step: time, work, bound, per-op breakdown."""

    time_s: object
    gpu_s: object
    cpu_s: object
    flops: object
    bytes: object
    compute_dtype: str
    bound: object
    ops: list[OpTime] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    flops_at_peak_s: object = 0.0
    """Sum over ops of FLOPs / the peak of the unit that runs them (matmuls: the compute
    dtype's peak; attention: the 16-bit peak; elementwise: the fp32 vector peak). MFU is this
    over the step time: each op's time is at least its term, so MFU <= 1 whatever the dtypes."""


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
              attention: str | None = None, all_logits: bool = False) -> StepEstimate:
    """Time of one forward step of B sequences x T new tokens over S cached tokens."""
    dep = dep or Deployment()
    dtype, warnings = resolve_compute(hw, p, engine)
    op_list = shard(ops(m, p, B, T, S, attention=attention or engine.attention,
                        all_logits=all_logits), m, dep)
    peak = hw.peak_flops_per_s[dtype]
    half_peak = hw.peak_flops_per_s.get("bf16") or hw.peak_flops_per_s.get("fp16") or peak
    fp32_peak = hw.peak_flops_per_s.get("fp32", half_peak / 8.0)
    vector_peak = fp32_peak * VECTOR_EFFICIENCY
    bw = hw.memory_bandwidth_bytes_per_s * eff.mem_bw
    weight_only = p.weights.bits < 16 and p.activations.bits >= 16
    kscale = _kernel_scale(op_list, m, engine)

    times: list[OpTime] = []
    gpu = 0.0
    compute_sum = memory_sum = 0.0
    kernels = 0.0
    moved_sum = 0.0
    at_peak = 0.0
    for op in op_list:
        c = op.cost
        k = c.kernels * (kscale if op.per_layer else 1.0)
        kernels = kernels + k
        if op.kind == "gemm":
            compute = c.flops / (peak * eff.gemm(np.maximum(op.rows, 1.0)))
            wbytes = c.weight_bytes / (engine.quant_kernel_efficiency if op.quantized else 1.0)
            memory = (wbytes + c.act_bytes) / bw
            at_peak = at_peak + c.flops / peak
            if op.quantized and weight_only:
                tiles = np.maximum(1.0, op.rows / DEQUANT_TILE_ROWS)   # smooth in M
                compute = compute + (op.weight_elements * engine.dequant_flops_per_weight
                                     * tiles / vector_peak)
        elif op.kind == "attention":
            compute = c.flops / (half_peak * eff.attn_compute)
            memory = (c.kv_read_bytes + c.kv_write_bytes) / (bw * eff.attn_mem) + c.act_bytes / bw
            at_peak = at_peak + c.flops / half_peak
        else:
            act = c.act_bytes * (_elementwise_traffic(engine) if op.kind == "elementwise" else 1.0)
            compute = c.flops / vector_peak
            at_peak = at_peak + c.flops / fp32_peak
            memory = (c.weight_bytes + act) / bw
        # bytes this op actually moves (fused or upcast elementwise chains differ from the list)
        moved = c.bytes if op.kind != "elementwise" else c.weight_bytes + act
        moved_sum = moved_sum + moved
        t = np.maximum(compute, memory) + k * eff.kernel_s
        compute_sum = compute_sum + np.where(compute >= memory, t, 0.0)
        memory_sum = memory_sum + np.where(compute >= memory, 0.0, t)
        gpu = gpu + t
        times.append(OpTime(op.name, op.kind, t, compute, memory, c.flops, moved))

    comm_sum = 0.0
    for name, t in comm_times(m, hw, eff, dep, B * T):
        gpu = gpu + t
        comm_sum = comm_sum + t
        times.append(OpTime(name, "comm", t, 0.0, 0.0, 0.0, 0.0))

    cpu = kernels * engine.launch_s + engine.graph_launch_s
    step = np.maximum(gpu, cpu) + engine.cpu_overhead_per_step_s
    work = total(op_list)
    bound = _bound(compute_sum, memory_sum, comm_sum, cpu, gpu)
    return StepEstimate(time_s=step, gpu_s=gpu, cpu_s=cpu + engine.cpu_overhead_per_step_s,
                        flops=work.flops, bytes=moved_sum, compute_dtype=dtype, bound=bound,
                        ops=times, warnings=warnings, flops_at_peak_s=at_peak)


def _elementwise_traffic(engine: EngineProfile) -> float:
    """Elementwise bytes relative to the op list's count: calibrated, else by fusion."""
    if engine.elementwise_traffic is not None:
        return engine.elementwise_traffic
    return FUSED_ELEMENTWISE_BYTES if engine.fused_elementwise else 1.0


def _kernel_scale(op_list: list[Op], m: ModelSpec, engine: EngineProfile) -> float:
    """Scale the op list's unfused per-layer kernel count to the engine's kernels per layer."""
    base = sum(float(np.max(op.cost.kernels)) for op in op_list if op.per_layer and op.kind != "comm")
    return engine.kernels_per_layer * m.num_layers / base if base else 1.0


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
                     dep: Deployment | None = None) -> object:
    """The unbeatable floor: max(bytes / peak bandwidth, all FLOPs / peak compute), with the
    fastest dtype the chip has and elementwise intermediates assumed fused away.

    Pipeline parallelism (pp stages): the step's work is spread over pp GPUs, and one
    sequence still passes through every stage in order, so the floor is
    max(floor(B) / pp, floor(1 sequence))."""
    dep = dep or Deployment()
    floor = _work_floor_s(m, hw, p, B, T, S, dep)
    if dep.pp == 1:
        return floor
    return np.maximum(floor / dep.pp, _work_floor_s(m, hw, p, 1, T, S, dep))


def _work_floor_s(m: ModelSpec, hw: HardwareSpec, p: Precision, B, T, S, dep: Deployment):
    """max(bytes / peak bandwidth, FLOPs / fastest peak) of one TP rank's whole op list."""
    op_list = shard(ops(m, p, B, T, S, attention="flash"), m, dep)
    work: OpCost = total(op_list)
    # perfect fusion: elementwise intermediates never reach memory
    fusable = sum((op.cost.act_bytes for op in op_list if op.kind == "elementwise"), 0.0)
    fastest = max(hw.peak_flops_per_s.values())
    return np.maximum((work.bytes - fusable) / hw.memory_bandwidth_bytes_per_s,
                      work.flops / fastest)
