"""Public entry points by name: resolve ids to specs, run the model, return typed results.

    from perfmodel.api import predict_request, memory
    r = predict_request(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8", batch=8)
    r.tpot_s, r.decode_tok_s_per_user, r.memory.fits
"""

from __future__ import annotations


import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError, require_finite
from perfmodel.core.memory import MemoryEstimate, estimate_memory
from perfmodel.core.predict import request_times
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import roofline_floor_s
from perfmodel.core.units import GB


MAX_COUNT = 10**15
"""Largest batch, token count or parallel degree accepted: far above any deployment, and
small enough that every product the model forms stays a finite float."""


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
                    new_tokens: int = 1, tp: int = 1, pp: int = 1, ep: int = 1,
                    attention: str | None = None, profile=None,
                    hardware_dir: str | None = None) -> RequestEstimate:
    """Predict one configuration. Raises PerfModelError on bad input; never returns NaN."""
    for name, v in (("batch", batch), ("prompt", prompt), ("output", output),
                    ("new_tokens", new_tokens), ("tp", tp), ("pp", pp), ("ep", ep)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 < v <= MAX_COUNT:
            raise PerfModelError(f"{name} must be a positive integer up to {MAX_COUNT:.0e}, "
                                 f"got {v!r:.40}")
    if context is not None and (not isinstance(context, (int, np.integer))
                                or isinstance(context, bool) or not 0 <= context <= MAX_COUNT):
        raise PerfModelError(f"context must be a non-negative integer up to {MAX_COUNT:.0e}, "
                             f"got {context!r:.40}")
    sc, warnings, assumptions = resolve(model, gpu, weights=weights, kv=kv, activations=activations,
                                        engine=engine, tp=tp, pp=pp, ep=ep, attention=attention,
                                        profile=profile, hardware_dir=hardware_dir)
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
    require_finite(values, what=f"{m.id} on {sc.hw.id}")
    return RequestEstimate(
        model=m.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        compute_dtype=rt.step.compute_dtype, batch=batch, prompt_tokens=prompt,
        output_tokens=output, context_tokens=ctx, new_tokens=new_tokens, tp=tp, pp=pp, ep=ep,
        bound=str(rt.step.bound), fits=mem.fits, memory=mem, ops=breakdown,
        warnings=warnings, assumptions=assumptions, **values)


def memory(model, gpu, *, weights: str = "bf16", kv: str | None = None, batch: int = 1,
           context: int = 4096, tp: int = 1, pp: int = 1, engine: str = "vllm",
           hardware_dir: str | None = None) -> MemoryEstimate:
    """Memory of one configuration per GPU."""
    for name, v in (("batch", batch), ("context", context), ("tp", tp), ("pp", pp)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 < v <= MAX_COUNT:
            raise PerfModelError(f"{name} must be a positive integer up to {MAX_COUNT:.0e}, "
                                 f"got {v!r:.40}")
    sc, _, _ = resolve(model, gpu, weights=weights, kv=kv, engine=engine, tp=tp, pp=pp,
                       hardware_dir=hardware_dir)
    if context > sc.model.max_context:
        raise PerfModelError(f"context {context} exceeds the {sc.model.max_context}-token "
                             f"context of {sc.model.id}")
    return estimate_memory(sc.model, sc.hw, sc.precision, batch=batch, context=context,
                           engine=sc.engine, dep=sc.dep)
