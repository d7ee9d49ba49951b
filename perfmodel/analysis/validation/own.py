"""The project's own measurements: calibrate/bench.py (and bench_nccl.py) raw JSON ->
measurement-table rows.

Only the e2e section is converted (the microbenchmarks calibrate efficiencies; they are not
request metrics). The raw schema is documented in calibrate/bench.py's docstring:
- decode records of the plain-torch model (modes eager, graph, compile; a compile mode
  without CUDA graphs is named in the framework text, and still maps to torch-compile, the
  engine calibrate's fit overrides for it): one step of
  `batch` sequences at KV length `context` -> tpot_ms with input_len = context and
  output_len = 1 (TPOT of a single step at that context);
- prefill records: `batch` prompts of `prompt` tokens -> prefill_tok_s;
- hf_generate decode: seconds per generated token over `generated_tokens` after a prompt of
  `context` tokens -> tpot_ms; hf_generate prefill: generate() of one token -> ttft_ms.
bench_nccl.py's tensor-parallel decode records (graph and eager) become tpot_ms rows at
num_gpus = tensor_parallel = tp.
The model is the catalog id the shape's name refers to ("llama-3.1-8b-shape" ->
llama-3.1-8b) only when every shape field agrees with that catalog entry; otherwise the raw
name is kept and validate lists the rows as unmapped.
Host-bound records timed in rounds give their fastest round, as the fit takes them
(calibration.points.measured_seconds).
"""

from __future__ import annotations

from pathlib import Path

from perfmodel.analysis.calibration.points import measured_seconds
from perfmodel.core.catalog import load_model
from perfmodel.core.files import DATA_MAX_BYTES, load_mapping
from perfmodel.core.errors import PerfModelError, SpecFileError
from perfmodel.core.units import MS
from perfmodel.analysis.validation.table import Measurement, rows_from_dicts

OWN_KIND = "own_measurement"
FRAMEWORKS = {
    "eager": "PyTorch eager (calibrate/bench.py)",
    "graph": "PyTorch CUDA graph (calibrate/bench.py)",
    "compile": "torch.compile (calibrate/bench.py)",
    "hf_generate": "HF transformers generate (calibrate/bench.py)",
}
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8"}
# torch.compile modes that do not capture CUDA graphs: kernels are still issued from Python
GRAPHLESS_COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
_SHAPE_FIELDS = ("num_layers", "d_model", "num_heads", "num_kv_heads", "head_dim", "ffn_dim",
                 "vocab_size", "tied_embeddings")


def catalog_name(shape: dict | str) -> str:
    """Catalog id of a bench.py model shape, or its raw name when no entry agrees."""
    shape = shape if isinstance(shape, dict) else {"name": str(shape)}
    name = str(shape.get("name", "unnamed-shape"))
    key = name.removesuffix("-shape")
    try:
        m = load_model(key)
    except PerfModelError:
        return name
    same = all(shape.get(f) == getattr(m, f) for f in _SHAPE_FIELDS if f in shape)
    return m.id if same else name


def _row(env: dict, source: str, rec: dict, shape: dict,
         compile_mode: str) -> dict[str, str] | None:
    mode, phase = rec.get("mode"), rec.get("phase")
    if mode not in FRAMEWORKS or phase not in ("decode", "prefill"):
        return None
    seconds, batch = measured_seconds(rec), int(rec["batch"])   # the fit's rule (rounds)
    framework = FRAMEWORKS[mode]
    if mode == "compile" and compile_mode in GRAPHLESS_COMPILE_MODES:
        framework = f"torch.compile mode={compile_mode}, no CUDA graphs (calibrate/bench.py)"
        # still the torch-compile preset: the calibrated profile describes this mode
    dtype = DTYPES.get(str(rec.get("dtype")), str(rec.get("dtype")))
    base = {
        "source_url_or_repo_path": source, "source_kind": OWN_KIND,
        "gpu": str(env.get("gpu_name") or env.get("device") or "unknown"),
        "num_gpus": "1", "tensor_parallel": "1", "model": catalog_name(rec.get("model") or shape),
        "params_b": "", "weight_precision": dtype, "kv_precision": "bf16",
        "framework": framework, "batch_or_concurrency": f"batch {batch}",
        "notes": (f"calibrate/bench.py e2e {mode} {rec.get('dtype')} {phase}; random weights; "
                  f"torch {env.get('torch_version')}, {env.get('date_utc')}"),
    }
    if phase == "decode" and mode == "hf_generate":
        return {**base, "input_len": str(int(rec["context"])),
                "output_len": str(int(rec.get("generated_tokens") or 2)),
                "metric": "tpot_ms", "value": f"{seconds / MS:.6g}"}
    if phase == "decode":
        return {**base, "input_len": str(int(rec["context"])), "output_len": "1",
                "metric": "tpot_ms", "value": f"{seconds / MS:.6g}"}
    if mode == "hf_generate":
        return {**base, "input_len": str(int(rec["prompt"])), "output_len": "1",
                "metric": "ttft_ms", "value": f"{seconds / MS:.6g}"}
    tokens = batch * int(rec["prompt"])
    return {**base, "input_len": str(int(rec["prompt"])), "output_len": "0",
            "metric": "prefill_tok_s", "value": f"{tokens / seconds:.6g}"}


def _tp_rows(data: dict, source: str) -> list[dict[str, str]]:
    """decode_tp / decode_1gpu of calibrate/bench_nccl.py: one decode step at `tp` GPUs ->
    tpot_ms (graph_nocomm, a step with its all-reduces removed, is not a real run)."""
    env = data.get("env") or {}
    gpu = str((env.get("gpu_names") or ["unknown"])[0])
    rows = []
    for section in ("decode_tp", "decode_1gpu"):
        part = data.get(section) or {}
        for rec in part.get("records") or []:
            try:
                mode, tp = rec["mode"], int(rec["tp"])
                if mode not in ("graph", "eager"):
                    continue
                rows.append({
                    "source_url_or_repo_path": source, "source_kind": OWN_KIND, "gpu": gpu,
                    "num_gpus": str(tp), "tensor_parallel": str(tp),
                    "model": catalog_name(part.get("model") or {}), "params_b": "",
                    "weight_precision": "bf16", "kv_precision": "bf16",
                    "framework": FRAMEWORKS[mode].replace("bench.py", "bench_nccl.py"),
                    "batch_or_concurrency": f"batch {int(rec['batch'])}",
                    "input_len": str(int(rec["context"])), "output_len": "1",
                    "metric": "tpot_ms", "value": f"{float(rec['seconds']) / MS:.6g}",
                    "notes": (f"calibrate/bench_nccl.py {section} {mode} tp={tp}; random "
                              f"weights; torch {env.get('torch_version')}, nccl "
                              f"{env.get('nccl_version')}, {env.get('date_utc')}")})
            except (KeyError, TypeError, ValueError, OverflowError):
                continue   # a malformed record is not a measurement
    return rows


def convert_raw(data: dict, source: str = "") -> list[dict[str, str]]:
    """Table rows (CSV-like dicts) from one raw bench.py or bench_nccl.py result."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise SpecFileError(f"{source or 'raw data'}: not a calibrate/bench.py result")
    if "decode_tp" in data or "decode_1gpu" in data:
        return _tp_rows(data, source)
    env = data.get("env") or {}
    e2e = data.get("e2e") or {}
    shape = e2e.get("model") or {}
    compile_mode = str((data.get("args") or {}).get("compile_mode") or "default")
    rows = []
    for rec in e2e.get("records") or []:
        try:
            r = _row(env, source, rec, shape, compile_mode)
        except (KeyError, TypeError, ValueError, ArithmeticError):
            continue   # a malformed record is not a measurement
        if r is not None:
            rows.append(r)
    return rows


def read_raw(path: str | Path) -> list[Measurement]:
    """Measurement rows from one raw JSON file."""
    p = Path(path)
    data = load_mapping(p, what="raw results", fmt="json", max_bytes=DATA_MAX_BYTES)
    return rows_from_dicts(p.stem, convert_raw(data, source=f"calibrate/data/{p.name}"))
