"""Typed results of `perfmodel validate` (errors are fractions: 0.15 means 15%)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.validation.checks import TargetCheck
from perfmodel.analysis.validation.serving_results import ServingReport

__all__ = ["TargetCheck", "ServingReport"]   # re-exported: defined beside the serving results


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RowResult(_Frozen):
    """One mapped row: measured beside the datasheet-only (and calibrated) prediction."""

    dataset: str
    row: int
    label: str = Field(description="dataset#row")
    source_kind: str
    source: str
    metric: str
    model: str = Field(description="Catalog id.")
    gpu: str = Field(description="hardware_db id.")
    engine: str = Field(description="Engine preset id.")
    engine_family: str
    num_gpus: int
    precision: str
    workload: str = Field(description="Load, batch and lengths as predicted.")
    measured: float
    predicted: float
    ape: float = Field(description="|predicted - measured| / measured.")
    log_ratio: float = Field(description="ln(measured / predicted).")
    within_25pct: bool
    interval_lo: float = Field(description="80% interval, fitted without this row.")
    interval_hi: float
    covered: bool = Field(description="measured inside [interval_lo, interval_hi].")
    calibrated_profile: str | None = None
    calibrated_predicted: float | None = None
    calibrated_ape: float | None = None
    calibrated_covered: bool | None = None
    low_confidence: bool
    bound: str
    fits: bool
    warnings: list[str]
    assumptions: list[str]
    diagnosis: str = Field(default="", description="What the model lacks, for rows off by >25%.")


class UnmappedRow(_Frozen):
    dataset: str
    row: int
    label: str
    metric: str
    gpu: str
    model: str
    framework: str
    value: str
    reason: str


class MetricSummary(_Frozen):
    n: int
    median_ape: float
    median_abs_log_ratio: float
    within_25pct: float = Field(description="Share of rows with ape <= 0.25.")
    interval_coverage: float | None = Field(default=None, description="Leave-one-out coverage.")


class GroupSummary(MetricSummary):
    metric: str
    gpu: str
    engine: str


class ValidationReport(_Frozen):
    summary: dict[str, MetricSummary] = Field(
        description="Datasheet-only, every dataset, low-confidence rows excluded.")
    summary_by_source: dict[str, dict[str, MetricSummary]] = Field(
        description="'public' (published tables) and 'own' (calibrate/data) separately.")
    summary_calibrated: dict[str, MetricSummary] = Field(
        description="Rows that have a calibrated prediction, calibrated errors.")
    summary_calibrated_baseline: dict[str, MetricSummary] = Field(
        description="The same rows, datasheet-only errors (side by side).")
    groups: list[GroupSummary]
    coverage: dict[str, float | int] = Field(description="Leave-one-out coverage of the intervals.")
    targets: list[TargetCheck]
    worst: dict[str, list[str]] = Field(
        description="Per source ('public', 'own'): labels of the rows furthest off, worst first.")
    rows: list[RowResult]
    unmapped: list[UnmappedRow]
    data: list[str]
    profiles: list[str]
    interval_level: float
    serving: ServingReport | None = Field(
        default=None, description="Measured serving points (TTFT, TPOT per concurrency).")
