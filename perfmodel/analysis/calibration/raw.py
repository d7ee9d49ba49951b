"""Read a calibrate/bench.py raw result: check the fields the fit uses, name the missing one.

The schema is documented in calibrate/bench.py's docstring (schema_version 1). Only the
fields the fit reads are required; a section the run did not reach is allowed (its
parameters keep their defaults, and the fit says so), except `e2e`, which the fit needs.

Also here: the bench's model shape -> ModelSpec, the card -> HardwareSpec (hardware_db by
--gpu or by the reported GPU name), and for a CPU run a HardwareSpec made from the run's
own measured peaks, since a CPU has no hardware_db entry (see cpu_hardware).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from perfmodel.core.files import DATA_MAX_BYTES, load_mapping
from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.hardware import list_gpus, load_gpu
from perfmodel.core.specs import HardwareSpec, ModelSpec
from perfmodel.core.units import GB

SCHEMA_VERSION = 1
ENV_FIELDS = ("device", "torch_version")
RECORD_FIELDS = {
    "bandwidth": ("kind", "buffer_bytes", "bytes", "seconds"),
    "gemm": ("dtype", "M", "N", "K", "seconds", "flops", "bytes"),
    "attention": ("kind", "B", "S", "seconds", "kv_bytes", "flops"),
    "launch": ("mode", "timing", "kernels", "seconds", "seconds_per_kernel",
               "host_seconds_per_launch"),
    "e2e": ("mode", "dtype", "phase", "batch", "context", "new_tokens", "seconds"),
}
OPTIONAL_FIELDS = {"e2e": ("prompt", "kernels", "generated_tokens")}
TEXT = {"kind", "dtype", "mode", "timing", "phase"}
TIMES = {"seconds", "seconds_per_kernel", "host_seconds_per_launch"}
AT_LEAST_ONE = {"batch", "new_tokens", "M", "N", "K", "B", "S", "kernels", "prompt",
                "generated_tokens", "buffer_bytes", "bytes", "flops", "kv_bytes"}
SHAPE_FIELDS = ("num_layers", "d_model", "num_heads", "num_kv_heads", "head_dim", "ffn_dim",
                "vocab_size")
MAX_SHAPE = 10_000_000        # no transformer dimension is near this
MAX_COUNT = 1e18              # bytes, FLOPs, rows: larger is not a measurement
MIN_SECONDS, MAX_SECONDS = 1e-10, 1e6
MAX_CONTEXT = 1 << 20   # the bench shape has no context limit; any length it ran is allowed


def read_raw(path: str | Path) -> dict:
    """Parse a raw JSON file; a cut-off file is reported as such."""
    p = Path(path)
    return load_mapping(p, what="raw results", fmt="json", max_bytes=DATA_MAX_BYTES)


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise PerfModelError(f"raw JSON: {where or 'top level'} is not an object")
    if key not in obj or obj[key] is None:
        raise PerfModelError(f"raw JSON: missing field '{where + '.' if where else ''}{key}' "
                             "(truncated run, or not a calibrate/bench.py result)")
    return obj[key]


def check_raw(raw: Any) -> dict:
    """Validate what the fit reads; returns raw. Errors name the missing or bad field."""
    version = _need(raw, "schema_version", "")
    if version != SCHEMA_VERSION:
        raise PerfModelError(f"raw JSON: schema_version {version!r} is not {SCHEMA_VERSION}; "
                             "re-run calibrate/bench.py from this version of perfmodel")
    env = _need(raw, "env", "")
    for f in ENV_FIELDS:
        _need(env, f, "env")
    e2e = _need(raw, "e2e", "")
    shape = _need(e2e, "model", "e2e")
    for f in SHAPE_FIELDS:
        v = _need(shape, f, "e2e.model")
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= MAX_SHAPE:
            raise PerfModelError(f"raw JSON: e2e.model.{f} must be an integer in "
                                 f"[1, {MAX_SHAPE}], got {v!r}")
    for section, fields in RECORD_FIELDS.items():
        if section not in raw:
            continue
        records = _need(raw[section], "records", section)
        if not isinstance(records, list):
            raise PerfModelError(f"raw JSON: {section}.records is not a list")
        for i, rec in enumerate(records):
            where = f"{section}.records[{i}]"
            for f in fields:
                _check_value(f, _need(rec, f, where), where)
            for f in OPTIONAL_FIELDS.get(section, ()):
                if rec.get(f) is not None:
                    _check_value(f, rec[f], where)
    if not e2e["records"]:
        raise PerfModelError("raw JSON: e2e.records is empty; the fit needs end-to-end points")
    return raw


def _check_value(f: str, v: Any, where: str) -> None:
    """Text fields are strings; numbers are finite and in a physical range."""
    if f in TEXT:
        if not isinstance(v, str):
            raise PerfModelError(f"raw JSON: {where}.{f} must be a string, got {v!r}")
        return
    if f in TIMES:
        lo, hi = (MIN_SECONDS if f == "seconds" else 0.0), MAX_SECONDS
    else:
        lo, hi = (1.0 if f in AT_LEAST_ONE else 0.0), MAX_COUNT
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or not lo <= v <= hi or (f == "seconds_per_kernel" and v <= 0):
        raise PerfModelError(f"raw JSON: {where}.{f} must be a number in [{lo:g}, {hi:g}]"
                             f"{' and > 0' if f == 'seconds_per_kernel' else ''}, got {v!r}")


def host_key(env: dict) -> str:
    """The host CPU of a run, as a profile keys host-bound fields: bench.py's env.cpu (model
    name, family/model, clock from /proc/cpuinfo), or the older env.cpu_name alone."""
    cpu = env.get("cpu") if isinstance(env.get("cpu"), dict) else {}
    name = str(cpu.get("model_name") or env.get("cpu_name") or "unknown CPU").strip()[:120]
    detail = []
    if cpu.get("family") is not None and cpu.get("model") is not None:
        detail.append(f"family {cpu['family']} model {cpu['model']}")
    mhz = cpu.get("mhz_median")
    if isinstance(mhz, (int, float)) and not isinstance(mhz, bool) and math.isfinite(mhz) and mhz > 0:
        detail.append(f"{mhz:.0f} MHz")
    return f"{name} ({', '.join(detail)})" if detail else name


def model_from_shape(shape: dict) -> ModelSpec:
    """ModelSpec of the bench's random-weight Llama-shaped model (dense, gated MLP, GQA)."""
    name = str(shape.get("name") or "bench-shape")
    try:
        return ModelSpec(id=name, name=name, family="llama",
                         num_layers=shape["num_layers"], d_model=shape["d_model"],
                         num_heads=shape["num_heads"], num_kv_heads=shape["num_kv_heads"],
                         head_dim=shape["head_dim"], ffn_dim=shape["ffn_dim"],
                         vocab_size=shape["vocab_size"],
                         tied_embeddings=bool(shape.get("tied_embeddings", False)),
                         max_context=MAX_CONTEXT, source="calibrate/bench.py e2e model shape")
    except ValidationError as exc:
        raise PerfModelError(f"raw JSON: e2e.model: {pydantic_message(exc)}") from None


def hardware_for(raw: dict, gpu: HardwareSpec | str | None,
                 hardware_dir: str | None = None) -> tuple[HardwareSpec, str]:
    """The card the raw data was measured on, and how it was chosen."""
    if isinstance(gpu, HardwareSpec):
        return gpu, "given"
    if gpu:
        return load_gpu(gpu, hardware_dir), "--gpu"
    env = raw["env"]
    if env.get("device") == "cpu":
        return cpu_hardware(raw), "built from the run's own measurements (a CPU has no datasheet entry)"
    name = str(env.get("gpu_name") or "")
    hits = _name_matches(name, float(env.get("total_memory_bytes") or 0.0), hardware_dir)
    if len(hits) == 1:
        return hits[0], f"matched by name {name!r}"
    found = ", ".join(h.id for h in hits) if hits else "none"
    raise PerfModelError(f"cannot tell which hardware_db card {name or 'this device'!r} is "
                         f"(candidates: {found}); pass --gpu ID (see `perfmodel gpus`)")


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


def _name_matches(name: str, memory_bytes: float, hardware_dir: str | None) -> list[HardwareSpec]:
    """Cards whose name holds every word of the reported name and whose memory is within
    15% of the reported total (drivers report GiB-ish totals, datasheets GB)."""
    words = _tokens(name)
    if not words:
        return []
    out = []
    for hw in list_gpus(hardware_dir):
        if not words <= _tokens(hw.name):
            continue
        if memory_bytes and abs(memory_bytes / hw.memory_bytes - 1.0) > 0.15:
            continue
        out.append(hw)
    return out


def cpu_hardware(raw: dict) -> HardwareSpec:
    """A HardwareSpec for a CPU run: peak bandwidth = the best bandwidth record, peak FLOP/s
    per dtype = the best GEMM record of that dtype. These are measured, not datasheet
    figures (a CPU is not in hardware_db), so "datasheet-only" on a CPU means default
    efficiencies applied to the best measured rates."""
    env = raw["env"]
    bw = [r["bytes"] / r["seconds"] for r in raw.get("bandwidth", {}).get("records", [])]
    peaks: dict[str, float] = {}
    names = {"bf16": "bf16", "fp16": "fp16", "int8": "int8", "fp8_e4m3": "fp8"}
    for r in raw.get("gemm", {}).get("records", []):
        d = names.get(r["dtype"])
        if d:
            peaks[d] = max(peaks.get(d, 0.0), r["flops"] / r["seconds"])
    if not bw:
        raise PerfModelError("raw JSON: a CPU run needs bandwidth.records to build its hardware spec")
    if "bf16" not in peaks and "fp16" not in peaks:
        raise PerfModelError("raw JSON: a CPU run needs bf16 or fp16 gemm.records to build its "
                             "hardware spec")
    peaks["fp32"] = max(peaks.get("bf16", 0.0), peaks.get("fp16", 0.0))
    cpu = str(env.get("cpu_name") or "cpu")
    slug = "-".join(sorted(_tokens(cpu) - {"r", "tm", "processor", "cpu"}, key=cpu.lower().find))
    vendor = "amd" if "amd" in cpu.lower() else "apple" if "apple" in cpu.lower() else "intel"
    return HardwareSpec(
        id=f"cpu-{slug or 'host'}"[:60].strip("-."), name=f"CPU {cpu} ({env.get('cpu_count')} cores)",
        vendor=vendor, memory_type="unified", memory_bytes=64 * GB,
        memory_bandwidth_bytes_per_s=max(bw), peak_flops_per_s=peaks,
        sources={"bandwidth": "best calibrate/bench.py bandwidth record of this run",
                 "flops": "best calibrate/bench.py GEMM record per dtype of this run",
                 "memory": "not measured (placeholder; the fit does not use it)"},
        notes="Built by perfmodel.analysis.calibration from a CPU bench run: measured peaks, not a datasheet.")
