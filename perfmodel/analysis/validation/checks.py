"""A target of an issue checked against the validation results."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TargetCheck(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    value: float | None
    limit: str
    n: int
    met: bool | None = Field(description="None: no rows to judge.")
