"""The typed result of sizing (analysis/sizing.py size): the request as understood
(SizingRequest), each deployment found or missed (SizedDeployment) and the ranked list
(SizingResult). Re-exported by analysis/sizing.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SizedDeployment(BaseModel):
    """One deployment: hardware, parallelism, precision, engine and how it serves the rate."""

    model_config = ConfigDict(frozen=True)
    gpu: str
    count: int = Field(description="GPUs in total: replicas x tp x dp x pp.")
    tp: int
    pp: int
    ep: int
    dp: int = Field(default=1, description="Attention data-parallel groups of tp GPUs.")
    replicas: int
    precision: str = Field(description="WEIGHTS[/KV] as given, e.g. fp8 or fp8/fp8.")
    engine: str
    meets: bool = Field(description="Serves the rate within both targets.")
    concurrency: int = Field(description="Mean requests in flight per replica, rounded up.")
    max_concurrency: int = Field(description="Concurrency limit of one replica.")
    ttft_s: float | None = Field(description="Mean TTFT at the rate (None: unbounded queue).")
    tpot_s: float | None
    e2e_s: float | None
    goodput_rps: float = Field(description="Requests/s the deployment serves within targets.")
    output_tok_s_total: float = Field(description="Output tok/s at goodput, all replicas.")
    served_output_tok_s: float = Field(description="Output tok/s the rate demands.")
    headroom: float | None = Field(description="output_tok_s_total / demanded - 1.")
    usd_per_hour: float | None
    usd_per_mtok: float | None = Field(description="At full use (output_tok_s_total).")
    usd_per_mtok_at_rate: float | None = Field(description="At the demanded rate.")
    joules_per_token: float | None
    binding: str = Field(description="memory, TTFT, TPOT or rate.")
    price_source: str | None
    sim_ttft_p90_s: float | None = Field(default=None, description="Simulated p90 TTFT at the "
                                         "rate (sizing_sim; None: not simulated).")
    sim_tpot_p90_s: float | None = Field(default=None, description="Simulated p90 TPOT.")
    sim_meets: bool | None = Field(default=None, description="Simulated p90s within both targets.")
    warnings: list[str]


class SizingRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    model: str
    rate_rps: float
    prompt_tokens: int
    output_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float
    gpus: list[str]
    precisions: list[str]
    engines: list[str]
    max_gpus: int
    counts: list[int] | None


class SizingResult(BaseModel):
    """Ranked deployments (cheapest first), or why there are none and the nearest miss."""

    model_config = ConfigDict(frozen=True)
    request: SizingRequest
    deployments: list[SizedDeployment]
    infeasible_reason: str | None
    nearest_miss: SizedDeployment | None
    evaluated: int = Field(description="Replica shapes whose curve was computed.")
    assumptions: list[str]
    warnings: list[str] = Field(default_factory=list,
                                description="Candidates left out, e.g. results outside finite "
                                            "arithmetic on an extreme hardware file.")
