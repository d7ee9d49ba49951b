"""Request-level metrics from the step model: TTFT, TPOT, E2E, throughput, MBU, MFU.

TTFT = engine per-request overhead + prefill(B, T=prompt, S=0).
E2E  = TTFT + sum over the O-1 later tokens of step(B, 1, S), S growing from prompt+1;
       the sum is integrated with the trapezoid rule on DECODE_NODES contexts (step(S) is
       piecewise linear in S, so the error is far below 1%), never the worst case.
TPOT = (E2E - TTFT) / (O - 1); per-user tok/s = 1/TPOT.
Aggregate (core/metrics.py has the one definition of each name):
  output_tok_s_total = B * O / E2E   all users' output tokens per second of wall time
                                     (prefill included), what a benchmark's tokens / wall
                                     time measures;
  decode_tok_s_total = B / TPOT      all users' tokens per second while decoding.
MBU: one GPU's bytes per reported step / (step time x peak bandwidth).
MFU: one GPU's FLOPs per reported step, each at the peak of the unit that runs it (matmuls:
     the compute dtype; attention: 16-bit; elementwise: fp32), over the step time
     (roofline.StepEstimate.flops_at_peak_s); <= 1 by construction.
Pipeline parallelism: decode keeps m = min(B, pp) micro-batches busy, so a token of each
sequence costs one full pass at batch B/m plus the stage hand-offs; a prefill of B prompts
fills and drains the pipeline (step(fill=True)).
All functions broadcast over numpy arrays of B, prompt, output and context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.core.errors import require_finite
from perfmodel.core.ops import FloatArray
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

    prefill_s: FloatArray
    ttft_s: FloatArray
    decode_step_s: FloatArray
    tpot_s: FloatArray
    e2e_s: FloatArray
    decode_tok_s_per_user: FloatArray
    output_tok_s_total: FloatArray
    decode_tok_s_total: FloatArray
    prefill_tok_s: FloatArray
    mbu: FloatArray
    mfu: FloatArray
    step: StepEstimate
    prefill: StepEstimate


def step(sc: Scenario, B, T, S, *, all_logits: bool = False, fill: bool = False,
         prefill: bool = False) -> StepEstimate:
    """One step at batch B under the scenario, pipeline stages included.

    Pipeline (pp = p stages of equal work, one full pass = the time of all L layers):
    steady state (decode, fill=False): m = min(B, p) micro-batches stay in flight across
    steps, so each sequence gets a token every full pass at B/m. A one-off step (a batch of
    prompts, fill=True) fills and drains the pipeline: m micro-batches take (m + p - 1) stage
    times, full(B/m) * (m + p - 1) / p, of which the bubble is (p-1)/(m+p-1)
    (GPipe, Huang et al. 2019); m is min(B, p) or B (one prompt per micro-batch), the faster.

    flops and bytes are one tensor-parallel rank's share summed over all pp stages (the
    work of the whole step); divide by pp for one GPU's share."""
    B = np.asarray(B, dtype=float)
    p = sc.dep.pp
    micro = np.minimum(B, p)                              # micro-batches in flight
    est = _pass(sc, B, micro, T, S, all_logits, prefill)
    if p == 1 or not fill:
        return est
    filled = _filled(est, micro, p)
    many = np.maximum(B, 1.0)
    alt = _filled(_pass(sc, B, many, T, S, all_logits, prefill), many, p)
    pick = alt.time_s < filled.time_s
    return StepEstimate(time_s=np.where(pick, alt.time_s, filled.time_s),
                        gpu_s=np.where(pick, alt.gpu_s, filled.gpu_s), cpu_s=filled.cpu_s,
                        flops=filled.flops, bytes=filled.bytes, compute_dtype=est.compute_dtype,
                        bound=filled.bound, ops=filled.ops, warnings=filled.warnings)


def pp_bubble_fraction(p: int, m) -> object:
    """Idle share of a fill-and-drain pipeline of p stages and m micro-batches: (p-1)/(m+p-1)."""
    return (p - 1) / (np.asarray(m, dtype=float) + p - 1)


def _pass(sc: Scenario, B, micro, T, S, all_logits: bool, prefill: bool = False) -> StepEstimate:
    """One full pass of B/micro sequences through all stages, hand-offs included."""
    est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, B / micro, T, S,
                    dep=sc.dep, attention=sc.attention, all_logits=all_logits, prefill=prefill)
    if sc.dep.pp == 1:
        return est
    hop = p2p_s(sc.hw, sc.eff, sc.dep, B / micro * np.asarray(T, dtype=float), sc.model)
    return StepEstimate(time_s=est.time_s + hop, gpu_s=est.gpu_s + hop, cpu_s=est.cpu_s,
                        flops=est.flops * micro, bytes=est.bytes * micro,
                        compute_dtype=est.compute_dtype, bound=est.bound, ops=est.ops,
                        warnings=est.warnings, flops_at_peak_s=est.flops_at_peak_s * micro)


def _filled(est: StepEstimate, m, p: int) -> StepEstimate:
    """m micro-batches through p stages: (m + p - 1) stage times of full/p each."""
    stretch = (m + p - 1) / p
    return StepEstimate(time_s=est.time_s * stretch, gpu_s=est.gpu_s * stretch, cpu_s=est.cpu_s,
                        flops=est.flops, bytes=est.bytes, compute_dtype=est.compute_dtype,
                        bound=est.bound, ops=est.ops, warnings=est.warnings,
                        flops_at_peak_s=est.flops_at_peak_s)


def request_times(sc: Scenario, B, prompt, output, *, context=None, new_tokens=1) -> RequestTimes:
    """TTFT, the reported decode step, TPOT, E2E and throughputs (see module docstring).

    Raises OutOfRangeError (a PerfModelError) rather than return a NaN/inf time or a rate
    that is not positive (extreme but schema-valid hardware or profile files)."""
    validate_deployment(sc.model, sc.dep)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        rt = _request_times(sc, B, prompt, output, context=context, new_tokens=new_tokens)
    what = f"{sc.model.id} on {sc.hw.id}"
    require_finite(what, positive=True, ttft_s=rt.ttft_s, decode_step_s=rt.decode_step_s,
                   tpot_s=rt.tpot_s, e2e_s=rt.e2e_s, prefill_s=rt.prefill_s,
                   decode_tok_s_per_user=rt.decode_tok_s_per_user,
                   output_tok_s_total=rt.output_tok_s_total,
                   decode_tok_s_total=rt.decode_tok_s_total, prefill_tok_s=rt.prefill_tok_s)
    require_finite(what, mbu=rt.mbu, mfu=rt.mfu)
    return rt


def _request_times(sc: Scenario, B, prompt, output, *, context, new_tokens) -> RequestTimes:
    B, prompt, output = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, prompt, output)))
    ctx = prompt if context is None else np.asarray(context, dtype=float)
    pre = step(sc, B, prompt, 0.0, fill=True, prefill=True)
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
        e2e_s=e2e, decode_tok_s_per_user=1.0 / tpot, output_tok_s_total=B * output / e2e,
        decode_tok_s_total=B / tpot,
        prefill_tok_s=B * prompt / pre.time_s,
        mbu=reported.bytes / (reported.time_s * peak_bw),
        mfu=reported.flops_at_peak_s / (reported.time_s * sc.dep.pp),
        step=reported, prefill=pre)
