"""A measurement row -> a scenario to predict (Target), or the reason it cannot be (Unmapped).

Nothing here knows any particular row: names go through the general rules of names.py,
precisions through parse_weights/parse_kv, and the load column through parse_load.
Every row ends up mapped or listed with its reason; none is dropped.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.params import count_params
from perfmodel.core.specs import NumberFormat, parse_format, parse_gguf
from perfmodel.core.units import GIGA
from perfmodel.analysis.validation.names import engine_id, gpu_id, model_alias_notes, model_id
from perfmodel.analysis.validation.table import METRICS, Measurement

PARAMS_TOLERANCE = 0.15   # table's params_b vs the catalog model: same model within 15%


# which lengths each metric needs
_NEEDS = {"decode_tok_s_per_user": "io", "output_tok_s_total": "io", "ttft_ms": "i",
          "tpot_ms": "io", "e2e_latency_s": "io", "prefill_tok_s": "i",
          "speculative_speedup": "io", "max_batch": "io", "memory_gb": "io"}


class Speculation(BaseModel):
    """What the row says about speculative decoding (acceptance is data, not predicted)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["draft", "eagle", "medusa", "mtp", "ngram", "unknown"]
    draft_model: str | None = None
    draft_len: int | None = None
    accepted_tokens: float | None = Field(
        default=None, description="Mean accepted tokens per target step, bonus included.")


class Target(BaseModel):
    """A mapped row: everything a prediction needs."""

    model_config = ConfigDict(frozen=True)
    measurement: Measurement
    model: str
    gpu: str
    engine: str
    weights: NumberFormat
    activations: str
    kv: str
    tp: int = Field(gt=0)
    pp: int = Field(gt=0)
    load: Literal["batch", "max_throughput", "rate", "capacity"]
    batch: int = Field(default=1, gt=0)
    rate_per_s: float | None = None
    pow2: bool = False
    prompt: int = Field(ge=1)
    output: int = Field(ge=0)
    speculation: Speculation | None = None
    assumptions: list[str] = Field(default_factory=list)


class Unmapped(BaseModel):
    """A row that could not be mapped, and why."""

    model_config = ConfigDict(frozen=True)
    measurement: Measurement
    reason: str


def parse_weights(text: str) -> tuple[NumberFormat, str, list[str]]:
    """Weight column -> (weight format, activation format name, assumptions).
    Raises ValueError on an unknown format."""
    notes: list[str] = []
    low = text.lower().strip()
    outer = re.sub(r"\([^)]*\)", " ", low)   # '/' inside parentheses lists alternatives
    if "/" in outer:   # per-group formats ("fp4 FFN / bf16 attention"): the first, bulk part
        first = outer.split("/")[0].strip()
        notes.append(f"mixed weight formats {text!r}: the first ({first}) is used for every matrix")
        low = first
    bpw = re.search(r"(\d+(?:\.\d+)?)\s*bpw", low)
    gguf = re.search(r"\b(q\d_(?:k_[sml]|[01k]))\b", low)
    group = re.search(r"\bg(?:roup ?size ?)?(\d+)\b", low)
    if bpw:
        bits = float(bpw.group(1))
        name = "int4" if bits <= 4.0 + 1.0 else "int8"   # average bits include block scales
        return NumberFormat(name=name, bits=bits), "fp16", notes
    if gguf and parse_gguf(gguf.group(1)) is not None:   # bits per weight from core/specs.py
        return parse_gguf(gguf.group(1)), "fp16", notes
    if "fp4" in low:
        return parse_format("fp4-g16" if "nvfp4" in low else "fp4"), "fp4", notes
    if re.search(r"\bint4\b|4-bit|\bgptq\b|\bawq\b|\bnf4\b|q4f16", low):
        g = group.group(1) if group else ("32" if "q4f16" in low else "128")
        return parse_format(f"int4-g{g}"), "fp16", notes
    if re.search(r"\bint8\b|8-bit", low):
        return parse_format("int8"), ("int8" if "w8a8" in low else "fp16"), notes
    for name in ("fp8", "bf16", "fp16", "fp32"):
        if re.search(rf"\b{name}\b", low):
            return parse_format(name), name, notes
    raise ValueError(f"unknown weight precision {text!r}")


def parse_kv(text: str) -> tuple[str, list[str]]:
    """KV column -> format name. A format named anywhere in the text counts ('unspecified
    (likely fp8)' -> fp8); nothing named -> 16-bit, said so (no engine default is guessed)."""
    low = text.lower()
    for name in ("fp8", "int8", "bf16", "fp16", "fp32"):
        if re.search(rf"\b{name}\b", low):
            return name, []
    return "bf16", [f"KV precision {text!r}: 16-bit assumed"]


def parse_load(text: str) -> dict | str:
    """batch_or_concurrency -> load fields, or a reason string."""
    low = text.lower()
    if "max throughput" in low or re.search(r"request rate inf|saturated", low):
        return {"load": "max_throughput"}
    rate = re.search(r"request rate (\d+(?:\.\d+)?)\s*(?:qps|req/s)", low)
    if rate:
        return {"load": "rate", "rate_per_s": float(rate.group(1))}
    if "capacity" in low:
        return {"load": "capacity", "pow2": "power" in low and "2" in low}
    b = re.search(r"\bbatch(?: size)? (\d{1,%d})\b" % MAX_DIGITS, low)
    if b and int(b.group(1)) > 0:
        return {"load": "batch", "batch": int(b.group(1))}
    return f"batch or concurrency not stated as a number ({text!r})"


MAX_DIGITS = 12
"""Counts in a table cell (tokens, batch, GPUs) have at most 12 digits: a longer number is
not a measurement, and past 308 digits it is not even a float."""


def _int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"\d{1,%d}" % MAX_DIGITS, text.strip()) else None


def _speculation(r: Measurement, draft_text: str | None) -> Speculation | None:
    low = " ".join((r.model, r.framework, r.batch_or_concurrency)).lower()
    if not (draft_text or re.search(r"specul|\bmtp|eagle|medusa|n-?gram|draft", low)):
        return None
    kind = next((k for k, pat in (("mtp", r"\bmtp"), ("eagle", r"eagle"), ("medusa", r"medusa"),
                                  ("ngram", r"n-?gram|lookup")) if re.search(pat, low)), None)
    draft_model = None
    if kind is None and draft_text:
        m, _ = model_id(draft_text)
        draft_model, kind = (m.id if m else None), "draft"
    n = re.search(r"draft length (\d+)|\bmtp ?(\d+)", low)
    return Speculation(kind=kind or "unknown", draft_model=draft_model,
                       draft_len=int(n.group(1) or n.group(2)) if n else None,
                       accepted_tokens=accepted_tokens(r.notes))


_ACCEPTED = re.compile(
    r"(?:mean accepted (?:tokens(?:/| per )step|length)|acceptance length|\bAL\b)"
    r"\s*[:=~]?\s*~?\s*(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?", re.IGNORECASE)


def accepted_tokens(notes: str) -> float | None:
    """Mean accepted tokens per step stated in the notes ('mean accepted tokens/step 1.9',
    'acceptance length 3.1', 'AL ~3.0-3.2' -> midpoint); the last statement wins."""
    hits = _ACCEPTED.findall(notes)
    if not hits:
        return None
    a, b = hits[-1]
    return (float(a) + float(b)) / 2 if b else float(a)


def map_row(r: Measurement, strict: bool = False) -> Target | Unmapped:
    """One row -> Target or Unmapped(reason). `strict` refuses a GPU whose variant the row
    does not state instead of assuming the likeliest one (names.GPU_DEFAULTS)."""
    def no(reason: str) -> Unmapped:
        return Unmapped(measurement=r, reason=reason)

    if r.metric not in METRICS:
        return no(f"unknown metric {r.metric!r}")
    if r.measured is None:
        return no(f"value {r.value!r} is not a plausible positive number")
    gpu, why, notes = gpu_id(r.gpu, strict=strict)
    if gpu is None:
        return no(why)
    parts = r.model.split("+", 1)
    model, why = model_id(parts[0])
    if model is None:
        return no(why)
    try:
        published = float(r.params_b) * GIGA if r.params_b.strip() else None
    except ValueError:
        published = None
    if published:
        have = model.published_params or count_params(model).total
        if abs(have / published - 1) > PARAMS_TOLERANCE:
            return no(f"params_b {r.params_b} does not match {model.id} ({have / GIGA:.1f}B)")
    engine, why, eng_notes = engine_id(r.framework)
    if engine is None:
        return no(why)
    try:
        weights, acts, w_notes = parse_weights(r.weight_precision)
    except ValueError as exc:
        return no(str(exc))
    kv, kv_notes = parse_kv(r.kv_precision)
    n_gpus, tp = _int(r.num_gpus), _int(r.tensor_parallel)
    if not n_gpus or not tp:
        return no(f"num_gpus {r.num_gpus!r} / tensor_parallel {r.tensor_parallel!r} not integers")
    if n_gpus != tp:
        return no(f"{n_gpus} GPUs at tensor_parallel {tp}: pipeline or data parallel not stated")
    load = parse_load(r.batch_or_concurrency)
    if isinstance(load, str):
        return no(load)
    prompt, output = _int(r.input_len), _int(r.output_len)
    need = _NEEDS[r.metric]
    if prompt is None and "i" in need:
        return no(f"input length not stated as a number ({r.input_len!r})")
    if output is None and "o" in need:
        return no(f"output length not stated as a number ({r.output_len!r})")
    extra = []
    if prompt is not None and prompt < 1:
        extra.append("empty prompt: one token (BOS) prefilled")
    return Target(
        measurement=r, model=model.id, gpu=gpu, engine=engine, weights=weights,
        activations=acts, kv=kv, tp=tp, pp=1, prompt=max(prompt or 1, 1), output=output or 0,
        speculation=_speculation(r, parts[1] if len(parts) > 1 else None),
        assumptions=notes + model_alias_notes(parts[0]) + eng_notes + w_notes + kv_notes + extra,
        **load)


def map_rows(rows: list[Measurement], strict: bool = False) -> tuple[list[Target], list[Unmapped]]:
    mapped: list[Target] = []
    unmapped: list[Unmapped] = []
    for r in rows:
        try:
            t = map_row(r, strict=strict)
        except PerfModelError as exc:   # a name rule reached a bad catalog entry
            t = Unmapped(measurement=r, reason=str(exc))
        (mapped if isinstance(t, Target) else unmapped).append(t)
    return mapped, unmapped
