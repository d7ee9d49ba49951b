"""Typed results of the serving validation (errors are fractions: 0.15 means 15%)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.validation.checks import TargetCheck


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ServingRowResult(_Frozen):
    """One mapped serving point: measured means beside the predictions."""

    dataset: str
    row: int
    label: str = Field(description="dataset#row")
    row_id: str = Field(description="The file's id column.")
    mode: str = Field(description="agg or disagg.")
    model: str = Field(description="Catalog id.")
    gpu: str = Field(description="hardware_db id.")
    engine: str = Field(description="Engine preset id.")
    engine_version: str
    moe: bool
    num_gpus: int
    parallel: str = Field(description="tp/pp/ep/attention-dp as predicted.")
    precision: str
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    measured_ttft_s: float
    measured_tpot_s: float
    predicted_ttft_s: float
    predicted_tpot_s: float
    ttft_ape: float = Field(description="|predicted - measured| / measured.")
    tpot_ape: float
    fits: bool = Field(description="The memory model holds this concurrency.")
    calibrated_profile: str | None = None
    calibrated_ttft_s: float | None = None
    calibrated_tpot_s: float | None = None
    calibrated_ttft_ape: float | None = None
    calibrated_tpot_ape: float | None = None
    assumptions: list[str]


class ServingUnmappedRow(_Frozen):
    dataset: str
    row: int
    label: str
    row_id: str
    mode: str
    model_path: str
    system: str
    backend: str
    reason: str


class ServingSummary(_Frozen):
    """Errors of a set of rows, TTFT and TPOT side by side."""

    n: int
    ttft_median_ape: float
    tpot_median_ape: float
    ttft_within_25pct: float = Field(description="Share of rows with TTFT error <= 25%.")
    tpot_within_25pct: float
    ttft_median_ratio: float = Field(description="Median predicted / measured TTFT (bias).")
    tpot_median_ratio: float


class ServingGroup(ServingSummary):
    by: str = Field(description="engine, gpu, model, concurrency (bands), or engine x gpu x model.")
    key: str


class ReasonCount(_Frozen):
    reason: str = Field(description="The reason with its numbers replaced by '#'.")
    n: int


class ServingReport(_Frozen):
    data: list[str]
    predictor: str
    predictor_description: str
    statistic: str = Field(description="Which predicted value is compared with the measured means.")
    n_rows: int
    n_agg: int
    n_disagg: int
    summary: ServingSummary | None = Field(description="Aggregated rows, datasheet-only.")
    summary_moe: ServingSummary | None
    summary_disagg: ServingSummary | None
    summary_calibrated: ServingSummary | None = Field(
        description="Rows whose GPU has a profile, with it.")
    summary_calibrated_baseline: ServingSummary | None = Field(
        description="The same rows, datasheet-only (side by side).")
    baseline_description: str | None = Field(default=None, description="The baseline predictor.")
    baseline_summary: ServingSummary | None = Field(
        default=None, description="The baseline's datasheet errors on the aggregated rows both "
                                  "predicted.")
    groups: list[ServingGroup]
    targets: list[TargetCheck]
    unmapped_reasons: list[ReasonCount]
    profiles: list[str]
    rows: list[ServingRowResult]
    unmapped: list[ServingUnmappedRow]
