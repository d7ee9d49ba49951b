"""Calibrated profiles: fitted efficiencies for one card and engine-parameter overrides,
written by calibrate/fit.py (or `perfmodel calibrate engine`) and read with --profile.

File format (YAML):
    kind: perfmodel-profile
    gpu: h200-sxm                  # hardware_db id the efficiencies were fitted on
    efficiency: {mem_bw: 0.86, gemm_max: 0.79, ...}    # a full Efficiency
    engines: {torch-eager: {launch_s: 6.1e-6, cpu_overhead_per_step_s: 2.0e-4}}
    link_latency_s: 5.1e-6         # optional, fitted by calibrate/fit_link.py (bench_nccl.py)
    meta: {card: ..., driver: ..., torch: ..., date: ..., points: 120, fit_error: {...}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from perfmodel.core.engines import ENGINES
from perfmodel.core.files import load_mapping
from perfmodel.core.errors import PerfModelError, SpecFileError, pydantic_message
from perfmodel.core.specs import Efficiency, EngineProfile, Spec

_ENGINE_FIELDS = set(EngineProfile.model_fields) - {"id", "name", "source"}


class Profile(Spec):
    """A calibration result."""

    kind: str = Field(default="perfmodel-profile", pattern="^perfmodel-profile$",
                      description="File marker.")
    gpu: str | None = Field(default=None, description="hardware_db id the fit was made on.")
    efficiency: Efficiency | None = Field(default=None, description="Fitted efficiencies.")
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                               description="engine id -> parameter overrides.")
    link_latency_s: float | None = Field(
        default=None, ge=0, le=1.0, allow_inf_nan=False,
        description="Fitted fixed time per ring step of an intra-node collective (parallel.py's "
                    "latency term); replaces hardware_db's intra_node_link.latency_s on the card "
                    "named by gpu. None: keep the hardware_db value.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Card, driver, torch, date, fit error.")


def load_profile(path: str | Path) -> Profile:
    """Parse a profile; errors name the file and the field."""
    p = Path(path)
    data = load_mapping(p, what="profile", fmt="yaml")
    try:
        prof = Profile.model_validate(data)
    except ValidationError as exc:
        raise SpecFileError(f"{p}: {pydantic_message(exc)}") from None
    for eng, over in prof.engines.items():
        bad = set(over) - _ENGINE_FIELDS
        if bad:
            raise SpecFileError(f"{p}: engines.{eng}: unknown field(s) {', '.join(sorted(bad))}")
        if eng in ENGINES:  # values checked now, so the error names the file
            try:
                apply_engine(ENGINES[eng], prof)
            except SpecFileError as exc:
                raise SpecFileError(f"{p}: {exc}") from None
    return prof


def save_profile(prof: Profile, path: str | Path) -> None:
    """Write atomically: a temporary file in the same folder, then rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(prof.model_dump(mode="json", exclude_none=True), sort_keys=False))
    tmp.replace(p)


def apply_engine(engine: EngineProfile, prof: Profile | None) -> EngineProfile:
    """The engine with the profile's overrides for its id, if any."""
    if not isinstance(engine, EngineProfile):
        raise PerfModelError(f"apply_engine: expected an EngineProfile, got {type(engine).__name__}")
    if prof is not None and not isinstance(prof, Profile):
        raise PerfModelError(f"apply_engine: expected a Profile or None, got {type(prof).__name__}")
    if prof is None or not isinstance(prof.engines, dict) or engine.id not in prof.engines:
        return engine
    block = prof.engines[engine.id]
    if not isinstance(block, dict):
        raise SpecFileError(f"engines.{engine.id}: expected a mapping of engine fields, "
                            f"got {type(block).__name__}")
    try:
        return EngineProfile.model_validate({**engine.model_dump(), **block})
    except ValidationError as exc:
        raise SpecFileError(f"engines.{engine.id}.{pydantic_message(exc)}") from None
