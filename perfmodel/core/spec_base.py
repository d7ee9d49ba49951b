"""The base of every typed input (Spec) and the compute dtypes a chip may list.

All quantities are in base units (bytes, seconds, FLOP/s, bytes/s). See DESIGN.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
"""Compute dtypes a chip may have a dense peak for."""


class Spec(BaseModel):
    """Base: frozen, strict, unknown keys are errors, and so are NaN and infinity (a YAML
    `.inf` bandwidth or kernel time would otherwise reach every result)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
