"""Public entry points by name: resolve ids to specs, run the model, return typed results.

    from perfmodel.api import predict_request, memory
    r = predict_request(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", batch=8)
    r.tpot_s, r.decode_tok_s_per_user, r.memory.fits
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.memory import MemoryEstimate, estimate_memory
from perfmodel.core.predict import request_times
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import roofline_floor_s
from perfmodel.core.units import GB
from perfmodel.serving.curve import check_slo
from perfmodel.serving.disagg import PoolLayout, simulate_disagg
from perfmodel.serving.disagg_transfer import pool_link
from perfmodel.serving.simulate import ServePoint, simulate_points
from perfmodel.serving.workload import DEFAULT_PROMPTS_PER_SLOT, serve_workloads


class OpBreakdown(BaseModel):
    """One op's share of the reported step."""

    model_config = ConfigDict(frozen=True)
    name: str
    kind: str
    time_s: float
    share: float = Field(description="Fraction of the step's GPU time.")
    bound: str = Field(description="compute, memory, or communication.")
    flops: float
    bytes: float


def op_breakdown(op_times) -> list[OpBreakdown]:
    """Each op's time, share of the step's GPU time and bound (roofline.OpTime list; scalar
    times, as in a single-configuration step)."""
    gpu_total = sum(float(o.time_s) for o in op_times) or 1.0
    return [OpBreakdown(name=o.name, kind=o.kind, time_s=float(o.time_s),
                        share=float(o.time_s) / gpu_total,
                        bound="communication" if o.kind == "comm" else
                        ("compute" if float(o.compute_s) >= float(o.memory_s) else "memory"),
                        flops=float(o.flops), bytes=float(o.bytes)) for o in op_times]


class RequestEstimate(BaseModel):
    """Predicted request metrics for one configuration (seconds, tokens/s, bytes)."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    compute_dtype: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    context_tokens: int
    new_tokens: int
    tp: int
    pp: int
    ep: int
    dp: int = 1
    prefill_s: float = Field(description="Prefill of the prompt for the whole batch.")
    ttft_s: float = Field(description="Arrival to first token: overhead + prefill.")
    decode_step_s: float = Field(description="One step adding new_tokens per sequence at context.")
    tpot_s: float = Field(description="(E2E - TTFT) / (output - 1).")
    e2e_s: float = Field(description="Arrival to last token.")
    decode_tok_s_per_user: float = Field(description="1 / TPOT.")
    output_tok_s_total: float = Field(description="batch / TPOT.")
    prefill_tok_s: float = Field(description="Prompt tokens per second during prefill.")
    mbu: float = Field(description="Bytes moved per step / (step time x peak bandwidth).")
    mfu: float = Field(description="FLOPs per step / (step time x peak FLOP/s of the compute dtype).")
    bound: str = Field(description="What bounds the reported step.")
    roofline_floor_s: float = Field(description="max(bytes/peak bw, FLOPs/peak) of the step.")
    fits: bool
    memory: MemoryEstimate
    ops: list[OpBreakdown]
    warnings: list[str]
    assumptions: list[str]


def predict_request(model, gpu, *, weights: str = "bf16", kv: str | None = None,
                    activations: str | None = None, engine: str = "vllm", batch: int = 1,
                    prompt: int = 512, output: int = 128, context: int | None = None,
                    new_tokens: int = 1, tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1,
                    attention: str | None = None, profile=None,
                    hardware_dir: str | None = None) -> RequestEstimate:
    """Predict one configuration. Raises PerfModelError on bad input; never returns NaN."""
    for name, v in (("batch", batch), ("prompt", prompt), ("output", output),
                    ("new_tokens", new_tokens), ("tp", tp), ("pp", pp), ("ep", ep), ("dp", dp)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise PerfModelError(f"{name} must be a positive integer, got {v!r}")
    if context is not None and (not isinstance(context, (int, np.integer)) or context < 0):
        raise PerfModelError(f"context must be a non-negative integer, got {context!r}")
    sc, warnings, assumptions = resolve(model, gpu, weights=weights, kv=kv, activations=activations,
                                        engine=engine, tp=tp, pp=pp, ep=ep, dp=dp,
                                        attention=attention, profile=profile,
                                        hardware_dir=hardware_dir)
    m = sc.model
    ctx = prompt if context is None else context
    if prompt + output > m.max_context:
        raise PerfModelError(f"prompt {prompt} + output {output} tokens exceed the "
                             f"{m.max_context}-token context of {m.id}")
    if ctx + new_tokens > m.max_context:
        raise PerfModelError(f"context {ctx} + {new_tokens} new tokens exceed the "
                             f"{m.max_context}-token context of {m.id}")
    rt = request_times(sc, batch, prompt, output, context=ctx, new_tokens=new_tokens)
    mem = estimate_memory(m, sc.hw, sc.precision, batch=batch, context=prompt + output,
                          engine=sc.engine, dep=sc.dep, attention=sc.attention)
    warnings = warnings + list(rt.step.warnings)
    if not mem.fits:
        warnings.append(f"does not fit: needs {mem.total_bytes / GB:.1f} GB per GPU, "
                        f"{mem.capacity_bytes / GB:.1f} GB usable; max batch {mem.max_batch} "
                        f"at this context")
    floor = roofline_floor_s(m, sc.hw, sc.precision, batch, new_tokens, ctx, sc.dep)
    breakdown = op_breakdown(rt.step.ops)
    values = dict(
        prefill_s=rt.prefill_s, ttft_s=rt.ttft_s, decode_step_s=rt.decode_step_s, tpot_s=rt.tpot_s,
        e2e_s=rt.e2e_s, decode_tok_s_per_user=rt.decode_tok_s_per_user,
        output_tok_s_total=rt.output_tok_s_total, prefill_tok_s=rt.prefill_tok_s,
        mbu=rt.mbu, mfu=rt.mfu, roofline_floor_s=floor)
    values = {k: float(v) for k, v in values.items()}
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:  # a defect, not bad input: refuse to print it
        raise ArithmeticError(f"non-finite result for {', '.join(bad)}")
    return RequestEstimate(
        model=m.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        compute_dtype=rt.step.compute_dtype, batch=batch, prompt_tokens=prompt,
        output_tokens=output, context_tokens=ctx, new_tokens=new_tokens, tp=tp, pp=pp, ep=ep,
        dp=dp, bound=str(rt.step.bound), fits=mem.fits, memory=mem, ops=breakdown,
        warnings=warnings, assumptions=assumptions, **values)


def memory(model, gpu, *, weights: str = "bf16", kv: str | None = None, batch: int = 1,
           context: int = 4096, tp: int = 1, pp: int = 1, engine: str = "vllm",
           hardware_dir: str | None = None) -> MemoryEstimate:
    """Memory of one configuration per GPU."""
    for name, v in (("batch", batch), ("context", context), ("tp", tp), ("pp", pp)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise PerfModelError(f"{name} must be a positive integer, got {v!r}")
    sc, _, _ = resolve(model, gpu, weights=weights, kv=kv, engine=engine, tp=tp, pp=pp,
                       hardware_dir=hardware_dir)
    if context > sc.model.max_context:
        raise PerfModelError(f"context {context} exceeds the {sc.model.max_context}-token "
                             f"context of {sc.model.id}")
    return estimate_memory(sc.model, sc.hw, sc.precision, batch=batch, context=context,
                           engine=sc.engine, dep=sc.dep)


class ServeReport(BaseModel):
    """A simulated serving benchmark (perfmodel.serving.simulate), one point per level."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    tp: int
    pp: int
    ep: int
    arrival: str = Field(description="closed, poisson, gamma or trace")
    prompt_tokens: int | None
    output_tokens: int | None
    range_ratio: float
    prefix_hit: float
    scheduler: str = Field(description="the engine's scheduler limits and their source")
    points: list[ServePoint]
    warnings: list[str]
    assumptions: list[str]


def serve(model, gpu, *, weights: str = "bf16", kv: str | None = None,
          activations: str | None = None, engine: str = "vllm", tp: int = 1, pp: int = 1,
          ep: int = 1, profile=None, prompt_tokens: int | None = 1024,
          output_tokens: int | None = 1024, concurrencies=None, rate_rps=None, trace=None,
          num_requests: int | None = None, range_ratio: float = 1.0, prefix_hit: float = 0.0,
          burstiness: float = 1.0, ttft_slo_s: float | None = None,
          tpot_slo_s: float | None = None, timeline: bool = False, seed: int = 0,
          hardware_dir: str | None = None) -> ServeReport:
    """Simulate a serving benchmark: closed loop at each of `concurrencies`, open loop at each
    of `rate_rps`, or a replayed `trace` ((arrival_s, prompt, output) rows or a CSV path).
    Raises PerfModelError on bad input; a level that cannot run says why (fits=False)."""
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise PerfModelError(f"{name} must be a positive integer, got {v!r}")
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    sc, warnings, assumptions = resolve(model, gpu, weights=weights, kv=kv, activations=activations,
                                        engine=engine, tp=tp, pp=pp, ep=ep, profile=profile,
                                        hardware_dir=hardware_dir)
    wls = serve_workloads(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          concurrencies=concurrencies, rate_rps=rate_rps, trace=trace,
                          num_requests=num_requests, range_ratio=range_ratio,
                          prefix_hit=prefix_hit, burstiness=burstiness, seed=seed)
    longest = wls[0].longest_prompt + wls[0].longest_output
    if longest > sc.model.max_context:
        raise PerfModelError(f"prompt + output of {longest} tokens exceed the "
                             f"{sc.model.max_context}-token context of {sc.model.id}")
    points = simulate_points(sc, wls, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s,
                             timeline=timeline)
    seqs, budget = sc.engine.scheduler.limits(sc.hw, sc.dep.pp)
    sched = (f"{sc.engine.batching} batching, max_num_seqs {seqs or 'KV-limited'}, token budget "
             f"{budget or 'unlimited'}; {sc.engine.scheduler.source or 'no source'}")
    if wls[0].arrival == "closed" and num_requests is None:
        assumptions.append(f"{DEFAULT_PROMPTS_PER_SLOT} x concurrency requests per level "
                           "(InferenceMAX / vLLM bench serve recipe; set num_requests)")
    return ServeReport(
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        tp=tp, pp=pp, ep=ep, arrival=wls[0].arrival, prompt_tokens=wls[0].prompt_tokens,
        output_tokens=wls[0].output_tokens, range_ratio=range_ratio, prefix_hit=prefix_hit,
        scheduler=sched, points=points, warnings=warnings, assumptions=assumptions)


class DisaggReport(BaseModel):
    """A simulated disaggregated serving benchmark (perfmodel.serving.disagg): P prefill workers
    and D decode workers, the KV cache moved between them; the point keys are api.serve's."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    prefill: PoolLayout
    decode: PoolLayout
    num_gpus: int = Field(description="GPUs of both pools")
    kv_link: str = Field(description="the link moving the KV cache: scale-up or scale-out, and its name")
    arrival: str = Field(description="closed, poisson, gamma or trace")
    prompt_tokens: int | None
    output_tokens: int | None
    points: list[ServePoint]
    warnings: list[str]
    assumptions: list[str]


def _layout(name: str, value) -> PoolLayout:
    if isinstance(value, PoolLayout):
        return value
    if not isinstance(value, dict):
        raise PerfModelError(f"{name} must be a PoolLayout or a dict of workers, tp, pp, ep, dp")
    try:
        return PoolLayout(**value)
    except (ValidationError, TypeError) as exc:
        msg = pydantic_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise PerfModelError(f"{name} layout: {msg}") from None


def serve_disagg(model, gpu, *, prefill, decode, weights: str = "bf16", kv: str | None = None,
                 activations: str | None = None, engine: str = "vllm", profile=None,
                 prompt_tokens: int | None = 1024, output_tokens: int | None = 1024,
                 concurrencies=None, rate_rps=None, trace=None, num_requests: int | None = None,
                 range_ratio: float = 1.0, prefix_hit: float = 0.0, burstiness: float = 1.0,
                 layerwise_transfer: bool = False, ttft_slo_s: float | None = None,
                 tpot_slo_s: float | None = None, seed: int = 0,
                 hardware_dir: str | None = None) -> DisaggReport:
    """Simulate disaggregated serving: `prefill` and `decode` are PoolLayouts (or dicts of
    workers, tp, pp, ep, dp). Loads as api.serve. Raises PerfModelError on bad input,
    naming the constraint (a layout that does not divide, KV that does not fit, no link)."""
    pl, dl = _layout("prefill", prefill), _layout("decode", decode)
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    common = dict(weights=weights, kv=kv, activations=activations, engine=engine,
                  profile=profile, hardware_dir=hardware_dir)
    pre, warnings, assumptions = resolve(model, gpu, tp=pl.tp, pp=pl.pp, ep=pl.ep, dp=pl.dp, **common)
    dec, w2, _ = resolve(pre.model, pre.hw, tp=dl.tp, pp=dl.pp, ep=dl.ep, dp=dl.dp, **common)
    warnings += [w for w in w2 if w not in warnings]
    wls = serve_workloads(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          concurrencies=concurrencies, rate_rps=rate_rps, trace=trace,
                          num_requests=num_requests, range_ratio=range_ratio,
                          prefix_hit=prefix_hit, burstiness=burstiness, seed=seed)
    longest = wls[0].longest_prompt + wls[0].longest_output
    if longest > pre.model.max_context:
        raise PerfModelError(f"prompt + output of {longest} tokens exceed the "
                             f"{pre.model.max_context}-token context of {pre.model.id}")
    points, kind = simulate_disagg(pre, dec, pl, dl, wls, layerwise=layerwise_transfer,
                                   ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    link = pool_link(pre, pl.num_gpus + dl.num_gpus)[0]
    assumptions += [
        "requests go round robin to the prefill workers, then (in KV arrival order) to the "
        "decode workers",
        "TTFT = prefill queue + prefill + KV transfer (the prefill worker's first token is "
        "streamed once the KV reaches the decode worker)",
        ("KV transfer layer-wise, overlapped with prefill (Mooncake): only the last layer's "
         "share is exposed" if layerwise_transfer else
         "KV transfer starts after the prefill completes (vLLM NIXL, SGLang PD, TRT-LLM "
         "cache transceiver defaults); one transfer at a time per prefill worker")]
    if wls[0].arrival == "closed":
        assumptions.append("closed loop: send times found by fixed-point iteration over both pools")
    return DisaggReport(
        model=pre.model.id, gpu=pre.hw.id, engine=pre.engine.id, precision=pre.precision.label,
        prefill=pl, decode=dl, num_gpus=pl.num_gpus + dl.num_gpus,
        kv_link=f"{kind}: {link.name}", arrival=wls[0].arrival,
        prompt_tokens=wls[0].prompt_tokens, output_tokens=wls[0].output_tokens, points=points,
        warnings=warnings, assumptions=assumptions)
