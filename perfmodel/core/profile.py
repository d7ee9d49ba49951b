"""Calibrated profiles: fitted efficiencies for one card and engine-parameter overrides,
written by calibrate/fit.py (or `perfmodel calibrate engine`) and read with --profile.

File format (YAML):
    kind: perfmodel-profile
    gpu: h200-sxm                  # hardware_db id the efficiencies were fitted on
    efficiency: {mem_bw_fraction: 0.86, gemm_max: 0.79, ...}  # a full Efficiency (old keys mem_bw, link load too)
    engines: {torch-graph: {kernels_per_layer: 44.2, elementwise_traffic: 6.2}}   # GPU side
    host: Intel(R) Xeon(R) Processor (family 6 model 207, 2100 MHz)   # host of the fit
    hosts: {<host>: {torch-eager: {launch_s: 1.3e-5, cpu_overhead_per_step_s: 3.0e-4}}}
    link_latency_s: 5.1e-6         # optional, fitted by calibrate/fit_link.py (bench_nccl.py)
    meta: {card: ..., driver: ..., torch: ..., date: ..., points: 120, fit_error: {...}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from perfmodel.core.engines import ENGINES
from perfmodel.core.files import load_spec
from perfmodel.core.errors import PerfModelError, SpecFileError, pydantic_message
from perfmodel.core.specs import Efficiency, EngineProfile, Spec

_ENGINE_FIELDS = set(EngineProfile.model_fields) - {"id", "name", "source"}
# Engine fields that are host (CPU) time, not GPU time: Python dispatch per kernel launch,
# Python per step and per request. Eager and HF generate steps are bound by them, so they
# follow the host CPU, not the card (calibrate/BENCH_NOTES.md): a profile keys them by host.
HOST_FIELDS = ("launch_s", "cpu_overhead_per_step_s", "per_request_overhead_s")


class Profile(Spec):
    """A calibration result."""

    kind: str = Field(default="perfmodel-profile", pattern="^perfmodel-profile$",
                      description="File marker.")
    gpu: str | None = Field(default=None, description="hardware_db id the fit was made on.")
    efficiency: Efficiency | None = Field(default=None, description="Fitted efficiencies.")
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                               description="engine id -> parameter overrides.")
    host: str | None = Field(
        default=None, max_length=200,
        description="Host CPU of the fit (bench.py's env.cpu: model name, family/model, clock): "
                    "whose `hosts` entry applies when no host is named.")
    hosts: dict[str, dict[str, dict[str, Any]]] = Field(
        default_factory=dict,
        description="host CPU -> engine id -> host-bound overrides (HOST_FIELDS), fitted per host "
                    "rather than per card; applied after `engines`.")
    link_latency_s: float | None = Field(
        default=None, ge=0, le=1.0, allow_inf_nan=False,
        description="Fitted fixed time per ring step of an intra-node collective (parallel.py's "
                    "latency term); replaces hardware_db's intra_node_link.latency_s on the card "
                    "named by gpu. None: keep the hardware_db value.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Card, driver, torch, date, fit error.")


def load_profile(path: str | Path) -> Profile:
    """Parse a profile; errors name the file and the field."""
    p = Path(path)
    prof = load_spec(p, Profile, what="profile", fmt="yaml")
    for eng, over in prof.engines.items():
        bad = set(over) - _ENGINE_FIELDS
        if bad:
            raise SpecFileError(f"{p}: engines.{eng}: unknown field(s) {', '.join(sorted(bad))}")
    for host, engines in prof.hosts.items():
        for eng, over in engines.items():
            bad = set(over) - set(HOST_FIELDS)
            if bad:
                raise SpecFileError(f"{p}: hosts.{host}.{eng}: not host fields: {', '.join(sorted(bad))} "
                                    f"(allowed: {', '.join(HOST_FIELDS)})")
    for host in [None, *prof.hosts]:
        for eng in set(prof.engines) | {e for h in prof.hosts.values() for e in h}:
            if eng in ENGINES:  # values checked now, so the error names the file
                try:
                    apply_engine(ENGINES[eng], prof, host)
                except SpecFileError as exc:
                    raise SpecFileError(f"{p}: {exc}") from None
    return prof


def save_profile(prof: Profile, path: str | Path) -> None:
    """Write atomically: a temporary file in the same folder, then rename."""
    p = Path(path)
    if p.is_dir():   # else the rename fails after the temporary file was left beside it
        raise PerfModelError(f"{p}: is a folder; give the profile's file path "
                             f"(e.g. {p / 'gpu.yaml'})")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(prof.model_dump(mode="json", exclude_none=True), sort_keys=False))
    tmp.replace(p)


def apply_engine(engine: EngineProfile, prof: Profile | None,
                 host: str | None = None) -> EngineProfile:
    """The engine with the profile's overrides for its id, if any: `engines` (card), then
    `hosts[host]` (host CPU; host None: the profile's own fit host)."""
    if not isinstance(engine, EngineProfile):
        raise PerfModelError(f"apply_engine: expected an EngineProfile, got {type(engine).__name__}")
    if prof is not None and not isinstance(prof, Profile):
        raise PerfModelError(f"apply_engine: expected a Profile or None, got {type(prof).__name__}")
    if prof is None:
        return engine
    host = host or prof.host
    engines = prof.engines if isinstance(prof.engines, dict) else {}
    hosts = prof.hosts if isinstance(prof.hosts, dict) else {}
    card = engines.get(engine.id, {})
    host_block = hosts.get(host, {}) if host else {}
    on_host = host_block.get(engine.id, {}) if isinstance(host_block, dict) else host_block
    for where, block in ((f"engines.{engine.id}", card), (f"hosts.{host}.{engine.id}", on_host)):
        if not isinstance(block, dict):
            raise SpecFileError(f"{where}: expected a mapping of engine fields, "
                                f"got {type(block).__name__}")
    if not card and not on_host:
        return engine
    try:
        return EngineProfile.model_validate({**engine.model_dump(), **card, **on_host})
    except ValidationError as exc:
        where = f"hosts.{host}.{engine.id}" if on_host else f"engines.{engine.id}"
        raise SpecFileError(f"{where}.{pydantic_message(exc)}") from None
