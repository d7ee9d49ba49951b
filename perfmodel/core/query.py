"""One request vocabulary: the frozen Query every front end builds and `api.resolve` /
`api.evaluate` read.

A Query holds ids (what runs, on what, in which formats, by which engine, split how) and
a workload (batch or concurrency/rate/trace, prompt and output lengths, the reported
step's context and new tokens, and the length distribution's extremes). It is validated
once, here: integers are integers and positive, seconds and rates are positive and finite,
and unknown fields are errors. Ids are resolved later, in one place (core/resolve.py via
api.resolve), because only then is the model's context known.

Every field's description carries its unit and help; the CLI (perfmodel/cli/common.py
`add_query_args`) and the web sidebar generate their flags and labels from them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.profile import Profile
from perfmodel.core.specs import HardwareSpec, ModelSpec


def _integer(v: Any) -> Any:
    """An integer (Python or numpy, never a bool or a float with a fraction)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"must be an integer, got {v!r}")
    return int(v)


def _seconds_or_rate(v: Any) -> Any:
    """A finite real number (the bounds come from the Field)."""
    try:
        finite = math.isfinite(float(v))
    except (OverflowError, TypeError, ValueError):   # 10**400 has no float
        finite = False
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not finite:
        raise ValueError(f"must be a finite number, got {v!r:.40}")
    return float(v)


MAX_COUNT = 10**15
"""Largest batch, token count or degree accepted: far above any deployment, and small enough
that every product the model forms stays a finite float (issue 17: a 400-digit batch raised
OverflowError)."""
Count = Annotated[int, BeforeValidator(_integer), Field(gt=0, le=MAX_COUNT)]
"""A positive integer count (tokens, sequences, GPUs)."""
NonNegCount = Annotated[int, BeforeValidator(_integer), Field(ge=0, le=MAX_COUNT)]
PositiveReal = Annotated[float, BeforeValidator(_seconds_or_rate), Field(gt=0)]
Ratio = Annotated[float, BeforeValidator(_seconds_or_rate), Field(gt=0, le=1)]
"""A fraction in (0, 1]."""
Share = Annotated[float, BeforeValidator(_seconds_or_rate), Field(ge=0, lt=1)]
"""A fraction in [0, 1)."""
TraceRows = tuple[tuple[float, int, int], ...]
"""(arrival_s, prompt_tokens, output_tokens) rows of a request trace."""

ARRAY_FIELDS = ("batch", "prompt_tokens", "output_tokens", "context_tokens")
"""Workload fields api.evaluate accepts as numpy arrays (one vectorized call)."""


class Query(BaseModel):
    """One question to the model: ids + workload, frozen and validated once."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              arbitrary_types_allowed=True)

    # ------------------------------------------------------------------ ids
    model: str | ModelSpec = Field(
        title="Model", description="Model: catalog id, HF repo id, or path to config.json.")
    gpu: str | HardwareSpec = Field(
        title="GPU", description="Accelerator: hardware_db id (see `perfmodel gpus`) or a YAML path.")
    weights: str = Field(
        title="Weights", default="bf16", min_length=1,
        description="Weight precision: fp32, bf16, fp16, fp8, int8, int4[-gN], fp4.")
    kv: str | None = Field(title="KV cache", default=None,
                           description="KV-cache precision (default bf16).")
    activations: str | None = Field(
        title="Activations", default=None,
        description="Matmul input precision (default: from the weights).")
    engine: str = Field(title="Engine", default="vllm", min_length=1,
                        description="Engine preset id.")
    tp: Count = Field(title="TP", default=1, description="Tensor-parallel GPUs. Multi-node is tp x dp x pp "
                      "GPUs laid over the card's scale-up domains (hardware YAML scale_up_gpus: "
                      "8 on HGX, 72 on NVL72); groups beyond one use its inter_node_link.")
    pp: Count = Field(title="PP", default=1, description="Pipeline stages.")
    ep: Count = Field(title="EP", default=1,
                      description="Expert-parallel degree, over the tp x dp GPUs of a stage.")
    dp: Count = Field(title="DP", default=1,
                      description="Attention data-parallel groups of tp GPUs "
                      "(SGLang --enable-dp-attention, TRT-LLM attention_dp).")
    nodes: Count | None = Field(
        title="Nodes", default=None,
        description="Servers the tp x dp x pp GPUs are laid over, evenly (hardware YAML "
        "gpus_per_node per server, scale_up_gpus per NVLink domain); decides which "
        "collectives cross the inter-node link (default: as many as the GPUs fill).")
    attention: Literal["naive", "flash", "paged"] | None = Field(
        default=None, description="Override the engine's attention kernel.")
    profile: str | Path | Profile | None = Field(
        title="Calibration profile", default=None,
        description="Calibrated profile YAML: fitted efficiencies and engine overheads.")
    hardware_dir: str | None = Field(
        default=None, description="Extra folder of hardware YAML files.")

    # ------------------------------------------------------------------ workload
    batch: Count = Field(title="Batch (sequences)", default=1,
                         description="B: sequences decoded together.")
    prompt_tokens: Count = Field(title="Prompt (tokens)", default=512,
                                 description="Input tokens per request.")
    output_tokens: Count = Field(title="Output (tokens)", default=128,
                                 description="Generated tokens per request.")
    context_tokens: NonNegCount | None = Field(
        default=None, description="KV length (tokens) of the reported decode step (default: prompt).")
    new_tokens: Count = Field(
        default=1, description="Tokens per sequence in the reported step (speculative verification).")
    concurrency: Count | None = Field(
        default=None, description="Requests kept in flight (closed loop); serving workloads.")
    rate_rps: PositiveReal | None = Field(
        default=None, description="Poisson arrival rate in requests per second; serving workloads.")
    trace: str | TraceRows | None = Field(
        default=None, description="Request trace: CSV path with columns arrival_s, "
        "prompt_tokens, output_tokens (or those rows; open loop), or a bench-endpoint --out "
        "record (JSON: each level replayed as a closed loop); serving workloads.")
    num_requests: Count | None = Field(
        default=None, description="Requests per serving level (closed loop default 10 x "
        "concurrency, open loop 1000).")
    range_ratio: Ratio = Field(
        default=1.0, description="Simulated lengths uniform in [ratio x L, L] (vLLM "
        "--random-range-ratio; 1: fixed).")
    prefix_hit: Share = Field(
        default=0.0, description="Share of each prompt already in the prefix cache (simulation).")
    burstiness: PositiveReal = Field(
        default=1.0, description="Open loop: gamma shape of the arrival gaps (1: Poisson).")
    seed: NonNegCount = Field(default=0, description="Seed of simulated lengths and arrivals.")
    max_num_seqs: Count | None = Field(
        default=None, description="Override the engine's max running sequences (simulation).")
    max_num_batched_tokens: Count | None = Field(
        default=None, description="Override the engine's token budget per step (simulation).")
    longest_prompt_tokens: Count | None = Field(
        default=None, description="Longest prompt of the length distribution (tokens).")
    longest_output_tokens: Count | None = Field(
        default=None, description="Longest output of the length distribution (tokens).")
    ttft_slo_s: PositiveReal | None = Field(
        default=None, description="TTFT target in seconds (goodput, sizing).")
    tpot_slo_s: PositiveReal | None = Field(
        default=None, description="TPOT target in seconds (goodput, sizing).")

    @property
    def context(self) -> int:
        """KV length of the reported decode step: context_tokens, else the prompt."""
        return self.prompt_tokens if self.context_tokens is None else self.context_tokens

    @property
    def has_serving_workload(self) -> bool:
        return self.concurrency is not None or self.rate_rps is not None or self.trace is not None

    def with_(self, **changes) -> "Query":
        """A copy with fields changed, validated again (PerfModelError on bad input)."""
        return make_query(**{**{k: getattr(self, k) for k in type(self).model_fields}, **changes})


def make_query(**fields) -> Query:
    """Query(**fields), a bad field reported as one PerfModelError line."""
    try:
        return Query(**fields)
    except ValidationError as exc:
        raise PerfModelError(pydantic_message(exc)) from None


def field_help(name: str) -> str:
    """The description of one Query field (CLI help, web help texts)."""
    return Query.model_fields[name].description or ""


def field_label(name: str) -> str:
    """The short title of one Query field (web widget labels), else its name."""
    return Query.model_fields[name].title or name.replace("_", " ")
