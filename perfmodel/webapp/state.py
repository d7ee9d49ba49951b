"""The shared scenario of every page: one frozen UIScenario, kept in the URL
(st.query_params) so a link reproduces it, and downloadable/uploadable as JSON.

Uploaded files (a Hugging Face config.json or model YAML, a GPU YAML, a calibrated profile)
are stored on the server by content hash and referred to as 'upload:<sha>.<ext>', so the
scenario stays a handful of plain strings and integers (hashable cache keys). The JSON
download embeds the uploaded files' text, so it reproduces the scenario on any server.
Nothing here depends on Streamlit; inputs.py does the session glue.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.files import parse_text

UPLOAD_PREFIX = "upload:"
MAX_UPLOAD_BYTES = 1_000_000       # specs are a few kB (loaders cap them at SPEC_MAX_BYTES); raw JSON ~0.1 MB
MAX_TOKENS = 10_000_000             # widget bound; the model's own context limit is checked by perfmodel
MAX_BATCH = 1_000_000
MAX_GPUS = 4096
JSON_KIND = "perfmodel-scenario"
UPLOAD_FIELDS = {"model": "model", "gpu": "gpu", "profile": "profile", "calib_raw": "raw"}  # field -> kind
_REF = re.compile(r"^upload:([0-9a-f]{16})\.(json|yaml)$")
_ID = r"^[^\x00-\x1f]{0,300}$"      # any printable text; perfmodel checks the ids themselves

Metric = Literal["ttft_s", "tpot_s", "e2e_s", "decode_tok_s_per_user", "output_tok_s_total"]
METRIC_LABELS: dict[str, tuple[str, str]] = {   # id -> (label, unit shown)
    "ttft_s": ("TTFT", "ms"),
    "tpot_s": ("TPOT", "ms"),
    "e2e_s": ("E2E latency", "s"),
    "decode_tok_s_per_user": ("Decode tok/s per user", "tok/s"),
    "output_tok_s_total": ("Aggregate output tok/s", "tok/s"),
}


class UIScenario(BaseModel):
    """Everything the pages need to reproduce a prediction: ids and integers only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(default="llama-3.1-8b", pattern=_ID, description="Catalog id or upload ref.")
    gpu: str = Field(default="h100-sxm", pattern=_ID, description="hardware_db id or upload ref.")
    tp: int = Field(default=1, ge=1, le=MAX_GPUS, description="Tensor-parallel degree.")
    pp: int = Field(default=1, ge=1, le=MAX_GPUS, description="Pipeline-parallel degree.")
    ep: int = Field(default=1, ge=1, le=MAX_GPUS, description="Expert-parallel degree.")
    dp: int = Field(default=1, ge=1, le=MAX_GPUS, description="Attention data-parallel groups.")
    nodes: int = Field(default=0, ge=0, le=MAX_GPUS,
                       description="Servers the GPUs are laid over (0: not given, the model places them).")
    weights: str = Field(default="bf16", pattern=_ID, description="Weight precision.")
    kv: str = Field(default="bf16", pattern=_ID, description="KV-cache precision.")
    activations: str = Field(default="auto", pattern=_ID,
                             description="Matmul input precision ('auto': follows the weights).")
    engine: str = Field(default="vllm", pattern=_ID, description="Engine preset id.")
    batch: int = Field(default=8, ge=1, le=MAX_BATCH, description="Sequences decoded together.")
    prompt: int = Field(default=1024, ge=1, le=MAX_TOKENS, description="Prompt tokens.")
    output: int = Field(default=256, ge=1, le=MAX_TOKENS, description="Output tokens.")
    profile: str = Field(default="", pattern=_ID,
                         description="'' (datasheet defaults), a calibrate/profiles name, or an upload ref.")
    metric: Metric = Field(default="tpot_s", description="Metric of the sensitivity chart.")
    # page inputs (also in the URL, so a link reproduces every page)
    sweep_max_batch: int = Field(default=256, ge=1, le=MAX_BATCH, description="Sweep: largest batch.")
    spec_method: str = Field(default="eagle", pattern=_ID, description="Speculative: drafter kind.")
    spec_draft: str = Field(default="llama-3.2-1b", pattern=_ID, description="Speculative: draft model.")
    spec_gamma: int = Field(default=4, ge=1, le=64, description="Speculative: draft tokens per step.")
    spec_alpha: float = Field(default=0.7, ge=0.0, le=0.99, description="Speculative: acceptance.")
    spec_target: float = Field(default=2.0, gt=0.0, le=100.0, description="Speculative: target speed-up.")
    sweep_over: Literal["batch", "concurrency"] = Field(default="batch", description="Sweep: x axis.")
    size_rate: float = Field(default=10.0, ge=0.0, le=1e6, description="Sizing: requests per second.")
    size_ttft_slo_s: float = Field(default=1.0, gt=0.0, le=1e4, description="Sizing: TTFT target (s).")
    size_tpot_slo_s: float = Field(default=0.05, gt=0.0, le=1e3, description="Sizing: TPOT target (s).")
    size_gpus: tuple[str, ...] = Field(default=(), max_length=200, description="Sizing: GPUs (empty: all).")
    size_precisions: tuple[str, ...] = Field(default=("bf16", "fp8", "int4"), max_length=20,
                                             description="Sizing: weight[/KV] precisions.")
    size_engines: tuple[str, ...] = Field(default=("vllm",), max_length=20, description="Sizing: engines.")
    size_max_gpus: int = Field(default=8, ge=1, le=256, description="Sizing: most GPUs per deployment.")
    acc_metric: str = Field(default="decode_tok_s_per_user", pattern=_ID, description="Accuracy: metric.")
    measure_url: str = Field(default="http://127.0.0.1:8000/v1", pattern=_ID, description="Measure: base URL.")
    measure_model: str = Field(default="", pattern=_ID, description="Measure: model id the server lists.")
    measure_levels: str = Field(default="1,2,4,8", pattern=_ID,
                                description="Measure: concurrency levels.")
    measure_requests: int = Field(default=16, ge=1, le=1000, description="Measure: requests per level.")
    measure_prompt: int = Field(default=256, ge=1, le=131_072, description="Measure: prompt tokens.")
    measure_output: int = Field(default=64, ge=1, le=32_768, description="Measure: max output tokens.")
    claim_mode: Literal["preset", "free"] = Field(default="preset", description="Claims: preset or own.")
    claim_preset: str = Field(default="", pattern=_ID, description="Claims: preset id ('' = first).")
    claim_text: str = Field(default="2x", pattern=_ID, description="Claims: claimed factor.")
    claim_metric: str = Field(default="decode_tok_s_per_user", pattern=_ID, description="Claims: metric.")
    calib_raw: str = Field(default="", pattern=_ID,
                           description="Calibration: a calibrate/data raw name or an upload ref.")
    calib_gpu: str = Field(default="", pattern=_ID, description="Calibration: card id ('' = from the raw).")
    serve_levels: str = Field(default="1,4,16,64", pattern=_ID,
                              description="Serving run: concurrency levels.")
    serve_requests: int = Field(default=0, ge=0, le=100_000,
                                description="Serving run: requests per level (0: the simulator's "
                                            "default per concurrency).")
    serve_range_ratio: float = Field(default=1.0, gt=0.0, le=1.0,
                                     description="Serving run: lengths uniform in [ratio x, x].")
    serve_prefix_hit: float = Field(default=0.0, ge=0.0, lt=1.0,
                                    description="Serving run: share of prompt tokens cached.")
    serve_level: int = Field(default=0, ge=0, le=MAX_BATCH,
                             description="Serving run: level whose timeline is shown (0: largest).")

    def key(self, *page_fields: str) -> str:
        """Canonical JSON of the core fields (model ... profile) plus the named page fields:
        the plain, hashable id the cached wrappers take, so a page input invalidates only
        the results that depend on it."""
        names = CORE_FIELDS + tuple(page_fields)
        return json.dumps({n: getattr(self, n) for n in names}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_key(cls, key: str) -> "UIScenario":
        return cls.model_validate_json(key)


def levels_of(text: str) -> tuple[int, ...]:
    """'1, 4,16' -> (1, 4, 16): sorted distinct concurrency levels, or a one-line error."""
    try:
        out = tuple(sorted({int(x) for x in text.replace(" ", "").split(",") if x}))
    except ValueError:
        raise PerfModelError(f"concurrency levels {text!r}: use integers separated by commas") from None
    if not out:
        raise PerfModelError("give at least one concurrency level")
    if out[0] < 1:
        raise PerfModelError(f"concurrency levels must be positive, got {out[0]}")
    return out


DEFAULT = UIScenario()
FIELDS = tuple(UIScenario.model_fields)
PAGE_FIELDS = FIELDS[FIELDS.index("metric") + 1:]
CORE_FIELDS = FIELDS[:FIELDS.index("profile") + 1]
LIST_FIELDS = tuple(n for n, f in UIScenario.model_fields.items() if isinstance(f.default, tuple))


# --------------------------------------------------------------------------- URL


OLD_URL_FIELDS = {"size_ttft_ms": ("size_ttft_slo_s", 1e-3),    # milliseconds -> seconds
                  "size_tpot_ms": ("size_tpot_slo_s", 1e-3)}
"""URL keys renamed to the one unit (seconds); old links still load for one release."""


def to_query(scn: UIScenario) -> dict[str, str]:
    """The scenario as strings: every core field (so a link survives a change of defaults)
    and the page inputs that differ from their defaults (so links stay short)."""
    out = {}
    for k, v in scn.model_dump().items():
        if k in PAGE_FIELDS and v == getattr(DEFAULT, k):
            continue
        out[k] = ",".join(v) if k in LIST_FIELDS else str(v)
    return out


def from_query(params: Mapping[str, object]) -> tuple[UIScenario, list[str]]:
    """The scenario in the URL; a bad value is replaced by the default and reported.
    Unknown keys are ignored (Streamlit and browsers add their own)."""
    values: dict[str, object] = {}
    notes: list[str] = []
    params = dict(params)
    for old, (new, scale) in OLD_URL_FIELDS.items():   # links made before the rename
        if old in params and new not in params:
            try:
                params[new] = str(float(str(params.pop(old))) * scale)
            except ValueError:
                notes.append(f"URL parameter {old} ignored (not a number)")
    for name in FIELDS:
        if name not in params:
            continue
        raw = params[name]
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        text = str(raw)
        value = tuple(x for x in text.split(",") if x) if name in LIST_FIELDS else text
        try:
            UIScenario(**{name: value})
        except ValidationError as exc:
            notes.append(f"URL parameter {name}={text[:40]!r} ignored ({_short(exc)})")
            continue
        values[name] = value
    return UIScenario(**values), notes


def _short(exc: ValidationError) -> str:
    msg = pydantic_message(exc)
    return msg.split(": ", 1)[-1]


# --------------------------------------------------------------------------- uploads


def upload_dir() -> Path:
    """Where uploads are kept: $PERFMODEL_WEBAPP_UPLOADS or a folder in the temp dir."""
    base = os.environ.get("PERFMODEL_WEBAPP_UPLOADS") or Path(tempfile.gettempdir()) / "perfmodel-webapp-uploads"
    return Path(base)


def is_upload(ref: str) -> bool:
    return ref.startswith(UPLOAD_PREFIX)


def upload_path(ref: str) -> Path:
    """The file behind an upload ref; refuses anything but the exact ref pattern."""
    m = _REF.match(ref)
    if not m:
        raise PerfModelError(f"{ref[:60]!r} is not an upload reference")
    path = upload_dir() / f"{m.group(1)}.{m.group(2)}"
    if not path.is_file():
        raise PerfModelError(f"uploaded file {ref} is not on this server (uploads are kept by "
                             "content hash); upload it again or load the scenario JSON")
    return path


def save_upload(kind: Literal["model", "gpu", "profile", "raw"], data: bytes, name: str = "") -> str:
    """Store an uploaded file by content hash after checking that perfmodel reads it;
    returns its ref. Raises PerfModelError with a one-line reason."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise PerfModelError(f"{name or kind} file is {len(data)} bytes; the limit is {MAX_UPLOAD_BYTES}")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise PerfModelError(f"{name or kind} file is not UTF-8 text") from None
    is_json = (kind == "raw" or name.lower().endswith(".json")
               or (kind == "model" and data.lstrip()[:1] == b"{"))
    if kind in ("gpu", "profile") and is_json:
        raise PerfModelError(f"{name or kind}: expected a YAML file")
    ext = "json" if is_json else "yaml"
    sha = hashlib.sha256(data).hexdigest()[:16]
    ref = f"{UPLOAD_PREFIX}{sha}.{ext}"
    folder = upload_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sha}.{ext}"
    if not path.is_file():
        tmp = folder / f".{sha}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        tmp.replace(path)
    try:
        check_upload(kind, ref)
    except PerfModelError:
        path.unlink(missing_ok=True)
        raise
    return ref


def check_upload(kind: str, ref: str) -> None:
    """Parse the stored file with perfmodel's own loader; errors name the upload, not the path."""
    from perfmodel.core.catalog import load_model
    from perfmodel.core.hardware import load_gpu
    from perfmodel.core.profile import load_profile

    path = upload_path(ref)
    loader = {"model": load_model, "gpu": load_gpu, "profile": load_profile, "raw": _check_raw}[kind]
    try:
        loader(str(path))
    except PerfModelError as exc:
        raise PerfModelError(_scrub(str(exc), path, kind)) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:   # importer edge cases
        raise PerfModelError(f"uploaded {kind} file: {_scrub(str(exc), path, kind)}") from None


def _check_raw(path: str) -> None:
    """A calibrate/bench.py result: perfmodel.analysis.calibration's own checks."""
    from perfmodel.analysis.calibration import check_raw, read_raw

    check_raw(read_raw(path))


def _scrub(msg: str, path: Path, kind: str) -> str:
    text = msg.splitlines()[0] if msg else "unreadable"
    for form in sorted({str(path.resolve()), str(path), path.name}, key=len, reverse=True):
        text = text.replace(form, f"uploaded {kind} file")
    return text


def target(ref: str, kind: str) -> str:
    """What perfmodel's loaders take for a scenario field: the id itself, or the upload's path."""
    if not is_upload(ref):
        return ref
    return str(upload_path(ref))


def profiles_dir() -> Path:
    """Committed calibrated profiles (calibrate/profiles/*.yaml)."""
    return Path(__file__).resolve().parents[2] / "calibrate" / "profiles"


def raw_dir() -> Path:
    """Committed calibrate/bench.py results (calibrate/data/raw-*.json)."""
    return Path(__file__).resolve().parents[2] / "calibrate" / "data"


def list_raw() -> list[str]:
    d = raw_dir()
    return sorted(p.name for p in d.glob("raw-*.json")) if d.is_dir() else []


def raw_target(ref: str) -> str:
    """The path of a committed raw result or an uploaded one."""
    if is_upload(ref):
        return str(upload_path(ref))
    if ref not in list_raw():
        raise PerfModelError(f"unknown raw result {ref!r}; committed: {', '.join(list_raw()) or 'none'}")
    return str(raw_dir() / ref)


def list_profiles() -> list[str]:
    d = profiles_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def profile_target(ref: str) -> str | None:
    """None (datasheet defaults), a committed profile's path, or an uploaded profile's path."""
    if not ref:
        return None
    if is_upload(ref):
        return str(upload_path(ref))
    if ref not in list_profiles():
        raise PerfModelError(f"unknown profile {ref!r}; committed profiles: "
                             f"{', '.join(list_profiles()) or 'none'}")
    return str(profiles_dir() / f"{ref}.yaml")


def label(ref: str) -> str:
    """Display name of an id or upload ref."""
    return f"uploaded file ({ref[len(UPLOAD_PREFIX):]})" if is_upload(ref) else ref


# --------------------------------------------------------------------------- JSON


def to_json(scn: UIScenario) -> str:
    """The scenario with the text of any uploaded file, so it reproduces anywhere."""
    uploads = {}
    for name in UPLOAD_FIELDS:
        ref = getattr(scn, name)
        if is_upload(ref):
            try:
                uploads[name] = upload_path(ref).read_text(encoding="utf-8")
            except PerfModelError:
                pass
    doc = {"kind": JSON_KIND, "version": 1, "scenario": scn.model_dump(), "uploads": uploads}
    return json.dumps(doc, indent=1)


def from_json(data: bytes | str) -> UIScenario:
    """Parse a downloaded scenario; stores embedded uploads. Raises PerfModelError."""
    if isinstance(data, bytes):
        if len(data) > MAX_UPLOAD_BYTES:
            raise PerfModelError(f"scenario file is over the {MAX_UPLOAD_BYTES:,}-byte limit")
        data = data.decode("utf-8", errors="replace")
    doc = parse_text(data, where="scenario file", fmt="json", mapping=False)
    if not isinstance(doc, dict) or doc.get("kind") != JSON_KIND:
        raise PerfModelError(f"not a scenario file: expected \"kind\": \"{JSON_KIND}\"")
    fields = doc.get("scenario")
    uploads = doc.get("uploads") or {}
    if not isinstance(fields, dict) or not isinstance(uploads, dict):
        raise PerfModelError("scenario file: 'scenario' and 'uploads' must be objects")
    fields = dict(fields)
    for name, text in uploads.items():
        if name not in UPLOAD_FIELDS or not isinstance(text, str):
            raise PerfModelError(f"scenario file: uploads.{str(name)[:20]} is not one of "
                                 f"{', '.join(UPLOAD_FIELDS)} as text")
        kind = UPLOAD_FIELDS[name]
        ext = ".json" if kind == "raw" or (kind == "model" and text.lstrip().startswith("{")) else ".yaml"
        fields[name] = save_upload(kind, text.encode("utf-8"), name=f"{name}{ext}")
    try:
        return UIScenario(**fields)
    except ValidationError as exc:
        raise PerfModelError(f"scenario file: {pydantic_message(exc)}") from None
    except TypeError as exc:
        raise PerfModelError(f"scenario file: {exc}") from None
