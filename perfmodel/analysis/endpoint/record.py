"""The experiment record that seed 003 asks for with every load test (its section 9):
date, model, framework and version, quantization, GPU model and count, concurrency, total
requests, input length range, max output tokens, total time, total output tokens, mean
latency, peak memory, and sampled outputs for a quality spot check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.endpoint.client import ServerInfo
from perfmodel.analysis.endpoint.config import EndpointConfig
from perfmodel.analysis.endpoint.gpu import GpuSnapshot

if TYPE_CHECKING:
    from perfmodel.analysis.endpoint.run import LevelResult

# /models `owned_by` values that identify a framework; anything else is kept only as evidence
OWNED_BY_FRAMEWORK = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp",
                      "llama.cpp": "llama.cpp", "library": "Ollama", "ollama": "Ollama",
                      "tensorrt_llm": "TensorRT-LLM", "trtllm": "TensorRT-LLM", "tgi": "TGI"}

TOKEN_NOTE = ("Prompt lengths are approximate (one word of a fixed list per requested token) "
              "unless input_tokens_source is 'usage'; output tokens come from the server's usage "
              "when it reports it (stream_options.include_usage), else one token per streamed "
              "content chunk.")


class SampledOutput(BaseModel):
    """A generated text kept for a quality spot check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    index: int
    prompt_head: str
    text: str


class ExperimentRecord(BaseModel):
    """One line per field of the seed's list; None where the fact is unknown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    date: str = Field(description="Sweep start, ISO 8601 UTC")
    endpoint: str
    model: str
    served_models: list[str]
    framework: str | None
    framework_version: str | None
    framework_source: Literal["flag", "owned_by"] | None
    owned_by: str | None = Field(description="/models owned_by of the model, as the server said it")
    server_header: str | None = Field(description="HTTP Server header of /models")
    quantization: str | None
    gpu_name: str | None
    gpu_count: int | None
    gpu_source: Literal["flag", "nvidia-smi (this host)"] | None
    api: Literal["completions", "chat"]
    concurrency: list[int]
    requests_per_level: int
    total_requests: int = Field(description="Requests sent over all levels")
    total_ok: int
    input_tokens_min: int
    input_tokens_max: int
    input_tokens_source: Literal["usage", "estimated"]
    max_output_tokens: int
    total_time_s: float
    total_output_tokens: int
    mean_latency_s: float | None = Field(description="Mean E2E of successful requests")
    peak_memory_bytes: float | None = Field(description="nvidia-smi on this host, summed over GPUs")
    sampled_outputs: list[SampledOutput]
    token_count_note: str = TOKEN_NOTE


def _framework(cfg: EndpointConfig, info: ServerInfo):
    if cfg.framework:
        return cfg.framework, "flag"
    guess = OWNED_BY_FRAMEWORK.get((info.owned_by or "").lower())
    return (guess, "owned_by") if guess else (None, None)


def _gpu(cfg: EndpointConfig, gpus: GpuSnapshot | None):
    if cfg.gpu_name or cfg.gpu_count:
        return cfg.gpu_name, cfg.gpu_count, "flag"
    if gpus is not None:
        names = sorted(set(gpus.names))
        return " + ".join(names), len(gpus.names), "nvidia-smi (this host)"
    return None, None, None


def build_record(cfg: EndpointConfig, info: ServerInfo, *, date: str,
                 levels: Sequence["LevelResult"], total_time_s: float,
                 gpus: GpuSnapshot | None) -> ExperimentRecord:
    framework, framework_source = _framework(cfg, info)
    gpu_name, gpu_count, gpu_source = _gpu(cfg, gpus)
    ok = [r for lv in levels for r in lv.requests if r.ok]
    reported = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    peaks = [lv.gpu_peak_memory_bytes for lv in levels if lv.gpu_peak_memory_bytes is not None]
    return ExperimentRecord(
        date=date, endpoint=cfg.url, model=cfg.model, served_models=info.model_ids,
        framework=framework, framework_version=cfg.framework_version,
        framework_source=framework_source, owned_by=info.owned_by, server_header=info.server_header,
        quantization=cfg.quantization, gpu_name=gpu_name, gpu_count=gpu_count, gpu_source=gpu_source,
        api=cfg.api, concurrency=[lv.concurrency for lv in levels],
        requests_per_level=cfg.requests,
        total_requests=sum(lv.stats.requests_sent for lv in levels), total_ok=len(ok),
        input_tokens_min=min(reported) if reported else cfg.prompt_tokens,
        input_tokens_max=max(reported) if reported else cfg.prompt_tokens,
        input_tokens_source="usage" if reported else "estimated",
        max_output_tokens=cfg.max_tokens, total_time_s=total_time_s,
        total_output_tokens=sum(r.output_tokens for r in ok),
        mean_latency_s=(sum(r.e2e_s for r in ok) / len(ok)) if ok else None,
        peak_memory_bytes=max(peaks) if peaks else None,
        sampled_outputs=[s for lv in levels for s in lv.sampled_outputs])
