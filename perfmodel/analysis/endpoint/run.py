"""The sweep: probe the server, run each concurrency level, keep the experiment record.

Each level is a closed loop: `concurrency` workers each send their next request as soon as
their previous one ends, until `requests` were sent or the sweep's wall-time budget
(`max_seconds`) is spent. A request still running at that moment is cancelled and recorded
with error kind "deadline"; requests not yet sent are not sent (LevelResult.requests_sent).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.endpoint.client import (PROBE_TIMEOUT_S, ServerInfo, auth_headers, build_prompt,
                                       probe_server, stream_request)
from perfmodel.analysis.endpoint.config import EndpointConfig
from perfmodel.analysis.endpoint.gpu import PeakMemory, query_gpus
from perfmodel.analysis.endpoint.predict import Prediction, PredictSpec, check_spec, with_predictions
from perfmodel.analysis.endpoint.record import ExperimentRecord, SampledOutput, build_record
from perfmodel.analysis.endpoint.stats import Knee, LevelStats, RequestSample, find_knee, summarize
from perfmodel.serving.trace_record import RECORD_SCHEMA

# progress(concurrency, done, planned, failed)
Progress = Callable[[int, int, int, int], None]

SCHEMA = RECORD_SCHEMA   # serving/trace_record.py reads records back (perfmodel serve --trace)
SAMPLE_TEXT_CHARS = 300


class LevelResult(BaseModel):
    """One concurrency level: summary, every request, a few outputs, GPU peak memory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    requests_planned: int
    stats: LevelStats
    gpu_peak_memory_bytes: float | None = Field(None, description="nvidia-smi, summed over GPUs")
    sampled_outputs: list[SampledOutput] = []
    requests: list[RequestSample] = []
    prediction: Prediction | None = Field(None, description="The model's estimate (--predict)")


class BenchmarkRun(BaseModel):
    """Everything one `perfmodel bench-endpoint` run measured, as written to --out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["perfmodel.bench-endpoint/1"] = SCHEMA
    config: EndpointConfig
    record: ExperimentRecord
    levels: list[LevelResult]
    knee: Knee
    stopped_early: str | None = Field(None, description="Why the sweep ended before its last level")
    predict: PredictSpec | None = Field(None, description="The modelled deployment (--predict)")


def _client(cfg: EndpointConfig, concurrency: int, api_key: str | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(cfg.request_timeout_s, connect=min(PROBE_TIMEOUT_S, cfg.request_timeout_s)),
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        headers=auth_headers(api_key), follow_redirects=False, trust_env=False)


async def run_level(cfg: EndpointConfig, concurrency: int, *, api_key: str | None,
                    deadline: float, progress: Progress | None = None,
                    clock: Callable[[], float] = time.perf_counter) -> LevelResult:
    """Run one level of `cfg.requests` requests with `concurrency` in flight."""
    t0 = clock()
    pending = iter(range(cfg.requests))  # shared by the workers; next() never awaits
    samples: list[RequestSample] = []
    gpu = PeakMemory()

    async def worker(client: httpx.AsyncClient) -> None:
        for index in pending:
            if clock() >= deadline:
                return
            sample = await stream_request(client, cfg, index, t0=t0, deadline=deadline,
                                          api_key=api_key, clock=clock)
            samples.append(sample)
            if progress is not None:
                progress(concurrency, len(samples), cfg.requests, sum(not s.ok for s in samples))

    gpu.start()
    try:
        async with _client(cfg, concurrency, api_key) as client:
            await asyncio.gather(*(worker(client) for _ in range(min(concurrency, cfg.requests))))
    finally:
        peak = await gpu.stop()
    samples.sort(key=lambda s: s.index)
    kept = [s for s in samples if s.ok][:cfg.samples_per_level]
    return LevelResult(
        concurrency=concurrency, requests_planned=cfg.requests, stats=summarize(samples),
        gpu_peak_memory_bytes=peak, requests=samples,
        sampled_outputs=[SampledOutput(concurrency=concurrency, index=s.index,
                                       prompt_head=build_prompt(s.index, cfg.prompt_tokens)[:60],
                                       text=s.text[:SAMPLE_TEXT_CHARS]) for s in kept])


async def _sweep(cfg: EndpointConfig, api_key: str | None, progress: Progress | None,
                 clock: Callable[[], float]) -> tuple[list[LevelResult], str | None, float]:
    start = clock()
    deadline = start + cfg.max_seconds
    levels: list[LevelResult] = []
    stopped = None
    for c in cfg.concurrency:
        if clock() >= deadline:
            stopped = f"max_seconds={cfg.max_seconds:g} reached before concurrency {c}"
            break
        levels.append(await run_level(cfg, c, api_key=api_key, deadline=deadline,
                                      progress=progress, clock=clock))
        if levels[-1].stats.requests_sent < cfg.requests:
            stopped = f"max_seconds={cfg.max_seconds:g} reached during concurrency {c}"
            break
    return levels, stopped, clock() - start


def run_benchmark(cfg: EndpointConfig, progress: Progress | None = None,
                  predict: PredictSpec | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> BenchmarkRun:
    """Probe /models, sweep the levels, and assemble the experiment record; with `predict`,
    put the performance model's estimate beside each level (ids are checked before the sweep).

    Raises EndpointError subclasses (one-line messages) for an unreachable server, a
    non-OpenAI answer, an unserved model or an unset API-key variable. Once the sweep has
    started, failures are recorded per request and never raised.
    """
    api_key = cfg.api_key()
    if predict is not None:
        check_spec(predict, cfg)
    info: ServerInfo = probe_server(cfg, api_key)
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    levels, stopped, total_s = asyncio.run(_sweep(cfg, api_key, progress, clock))
    record = build_record(cfg, info, date=date, levels=levels, total_time_s=total_s,
                          gpus=query_gpus())
    run = BenchmarkRun(config=cfg, record=record, levels=levels, knee=find_knee(levels),
                       stopped_early=stopped)
    return with_predictions(run, predict) if predict is not None else run
