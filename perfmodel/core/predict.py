"""Request-level metrics from the step model: TTFT, TPOT, E2E, throughput, MBU, MFU.

TTFT = engine per-request overhead + prefill(B, T=prompt, S=0).
E2E  = TTFT + sum over the O-1 later tokens of step(B, 1, S), S growing from prompt+1;
       the sum is integrated with the trapezoid rule on DECODE_NODES contexts (step(S) is
       piecewise linear in S, so the error is far below 1%), never the worst case.
TPOT = (E2E - TTFT) / (O - 1); per-user tok/s = 1/TPOT; aggregate = B/TPOT.
MBU: one GPU's bytes per reported step / (step time x peak bandwidth).
MFU: one GPU's FLOPs per reported step, each at the peak of the unit that runs it (matmuls:
     the compute dtype; attention: 16-bit; elementwise: fp32), over the step time
     (roofline.StepEstimate.flops_at_peak_s); <= 1 by construction.
Pipeline parallelism: m = min(B, pp) micro-batches keep the stages busy, so a token of
each sequence costs one full pass at batch B/m plus the stage hand-offs.
All functions broadcast over numpy arrays of B, prompt, output and context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.core.errors import require_finite
from perfmodel.core.parallel import p2p_s, validate_deployment
from perfmodel.core.roofline import StepEstimate, step_time
from perfmodel.core.specs import (Deployment, Efficiency, EngineProfile, HardwareSpec, ModelSpec,
                             Precision)

DECODE_NODES = 9


@dataclass(frozen=True)
class Scenario:
    """Everything one prediction needs, already resolved to specs."""

    model: ModelSpec
    hw: HardwareSpec
    precision: Precision
    engine: EngineProfile
    eff: Efficiency
    dep: Deployment
    attention: str | None = None


@dataclass(frozen=True)
class RequestTimes:
    """Arrays (or scalars) of request metrics in seconds and tokens/s."""

    prefill_s: object
    ttft_s: object
    decode_step_s: object
    tpot_s: object
    e2e_s: object
    decode_tok_s_per_user: object
    output_tok_s_total: object
    prefill_tok_s: object
    mbu: object
    mfu: object
    step: StepEstimate
    prefill: StepEstimate


def step(sc: Scenario, B, T, S, *, all_logits: bool = False) -> StepEstimate:
    """One step at batch B under the scenario, pipeline stages included.

    flops and bytes are one tensor-parallel rank's share summed over all pp stages (the
    work of the whole step); divide by pp for one GPU's share."""
    B = np.asarray(B, dtype=float)
    micro = np.minimum(B, sc.dep.pp)                        # micro-batches in flight
    est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, B / micro, T, S,
                    dep=sc.dep, attention=sc.attention, all_logits=all_logits)
    if sc.dep.pp == 1:
        return est
    hop = p2p_s(sc.hw, sc.eff, sc.dep, B / micro * np.asarray(T, dtype=float), sc.model)
    return StepEstimate(time_s=est.time_s + hop, gpu_s=est.gpu_s + hop, cpu_s=est.cpu_s,
                        flops=est.flops * micro, bytes=est.bytes * micro,
                        compute_dtype=est.compute_dtype, bound=est.bound, ops=est.ops,
                        warnings=est.warnings, flops_at_peak_s=est.flops_at_peak_s * micro)


def request_times(sc: Scenario, B, prompt, output, *, context=None, new_tokens=1) -> RequestTimes:
    """TTFT, the reported decode step, TPOT, E2E and throughputs (see module docstring).

    Raises OutOfRangeError (a PerfModelError) rather than return a NaN/inf time or a rate
    that is not positive (extreme but schema-valid hardware or profile files)."""
    validate_deployment(sc.model, sc.dep)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        rt = _request_times(sc, B, prompt, output, context=context, new_tokens=new_tokens)
    require_finite({"ttft_s": rt.ttft_s, "decode_step_s": rt.decode_step_s, "tpot_s": rt.tpot_s,
                    "e2e_s": rt.e2e_s, "prefill_s": rt.prefill_s,
                    "decode_tok_s_per_user": rt.decode_tok_s_per_user,
                    "output_tok_s_total": rt.output_tok_s_total,
                    "prefill_tok_s": rt.prefill_tok_s}, what=f"{sc.model.id} on {sc.hw.id}",
                   positive=True)
    require_finite({"mbu": rt.mbu, "mfu": rt.mfu}, what=f"{sc.model.id} on {sc.hw.id}")
    return rt


def _request_times(sc: Scenario, B, prompt, output, *, context, new_tokens) -> RequestTimes:
    B, prompt, output = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, prompt, output)))
    ctx = prompt if context is None else np.asarray(context, dtype=float)
    pre = step(sc, B, prompt, 0.0)
    ttft = sc.engine.per_request_overhead_s + pre.time_s

    # trapezoid over the decode contexts prompt+1 .. prompt+output-1
    frac = np.linspace(0.0, 1.0, DECODE_NODES)
    first = prompt[..., None] + 1.0
    last = prompt[..., None] + np.maximum(output[..., None] - 1.0, 1.0)
    grid = first + (last - first) * frac
    dec = step(sc, B[..., None], 1.0, grid)
    w = np.full(DECODE_NODES, 1.0)
    w[0] = w[-1] = 0.5
    shape = np.broadcast_shapes(np.shape(dec.time_s), B[..., None].shape, grid.shape)
    mean_step = (np.broadcast_to(dec.time_s, shape) * w).sum(axis=-1) / w.sum()
    decode_total = mean_step * np.maximum(output - 1.0, 0.0)
    e2e = ttft + decode_total

    reported = step(sc, B, new_tokens, ctx, all_logits=new_tokens > 1)
    tpot = np.where(output > 1.0, mean_step, reported.time_s)
    # per GPU: the step's work is spread over the pp stages (each moves 1/pp of it)
    peak_bw = sc.hw.memory_bandwidth_bytes_per_s * sc.dep.pp
    return RequestTimes(
        prefill_s=pre.time_s, ttft_s=ttft, decode_step_s=reported.time_s, tpot_s=tpot,
        e2e_s=e2e, decode_tok_s_per_user=1.0 / tpot, output_tok_s_total=B / tpot,
        prefill_tok_s=B * prompt / pre.time_s,
        mbu=reported.bytes / (reported.time_s * peak_bw),
        mfu=reported.flops_at_peak_s / (reported.time_s * sc.dep.pp),
        step=reported, prefill=pre)
