"""The accelerator database: every YAML loads, agrees with the independently sourced
reference table (data/hardware_reference.csv) or says why not, peaks are dense, look-ups
are exact (card files, user directories and `perfmodel gpus`: test_hardware_files.py)."""

import csv
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.core import units
from perfmodel.core.errors import PerfModelError, SpecFileError, UnknownIdError
from perfmodel.core.hardware import ENV_VAR, builtin_dir, list_gpus, load_gpu, load_gpu_file
from perfmodel.core.specs import HardwareSpec

REPO = Path(__file__).resolve().parent.parent
REFERENCE_CSV = REPO / "data" / "hardware_reference.csv"
YAML_FILES = sorted(builtin_dir().glob("*.yaml"))

REQUIRED_IDS = [
    "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "b200", "gb200", "a100-sxm-80gb",
    "a100-sxm-40gb", "a100-pcie-80gb", "l40s", "l40", "l4", "a10", "a10g", "t4",
    "v100-sxm2-32gb", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-6000-ada",
    "rtx-pro-6000-blackwell", "mi250x", "mi300x", "mi325x", "mi355x", "gaudi2", "gaudi3",
    "tpu-v5e", "tpu-v5p", "tpu-v6e", "apple-m2-ultra", "apple-m3-max", "apple-m4-max",
]
OPTIONAL_IDS = ["b100", "rtx-a6000", "rtx-3090-ti"]

# Reference CSV row name -> our id. Every row must be mapped, so a new row gets noticed.
CSV_TO_ID = {
    "H100 SXM5 80GB": "h100-sxm",
    "H100 PCIe 80GB": "h100-pcie",
    "H100 NVL 94GB": "h100-nvl",
    "H200 SXM 141GB": "h200-sxm",
    "B200 (HGX B200, per GPU)": "b200",
    "GB200 (per Blackwell GPU in GB200 NVL72)": "gb200",
    "B100 (HGX B100, per GPU)": "b100",
    "A100 SXM4 80GB": "a100-sxm-80gb",
    "A100 SXM4 40GB": "a100-sxm-40gb",
    "A100 PCIe 80GB": "a100-pcie-80gb",
    "L40S": "l40s",
    "L40": "l40",
    "L4": "l4",
    "A10": "a10",
    "A10G (AWS G5)": "a10g",
    "T4": "t4",
    "V100 SXM2 32GB": "v100-sxm2-32gb",
    "GeForce RTX 4090": "rtx-4090",
    "GeForce RTX 3090": "rtx-3090",
    "GeForce RTX 5090": "rtx-5090",
    "RTX 6000 Ada Generation": "rtx-6000-ada",
    "RTX PRO 6000 Blackwell (Workstation/Server Ed.)": "rtx-pro-6000-blackwell",
    "Instinct MI300X": "mi300x",
    "Instinct MI325X": "mi325x",
    "Instinct MI355X": "mi355x",
    "Instinct MI250X (OAM, 2 GCDs)": "mi250x",
    "Gaudi 2": "gaudi2",
    "Gaudi 3 (OAM HL-325L)": "gaudi3",
    "TPU v5e": "tpu-v5e",
    "TPU v5p": "tpu-v5p",
    "TPU v6e (Trillium)": "tpu-v6e",
    "Apple M2 Ultra (76-core GPU)": "apple-m2-ultra",
    "Apple M3 Max (40-core GPU)": "apple-m3-max",
    "Apple M4 Max (40-core GPU)": "apple-m4-max",
}

# Compared field: (CSV column, scale to base units, our value, key the notes must name)
COMPARED = {
    "memory": ("memory_gb", units.GB, lambda g: g.memory_bytes, "memory_bytes"),
    "bandwidth": ("mem_bw_gbs", units.GB, lambda g: g.memory_bandwidth_bytes_per_s,
                  "memory_bandwidth"),
    "bf16": ("bf16_tflops_dense", units.TERA, lambda g: g.peak_flops_per_s.get("bf16"), "bf16"),
    "fp8": ("fp8_tflops_dense", units.TERA, lambda g: g.peak_flops_per_s.get("fp8"), "fp8"),
    "int8": ("int8_tops_dense", units.TERA, lambda g: g.peak_flops_per_s.get("int8"), "int8"),
    "tdp": ("tdp_w", 1.0, lambda g: g.tdp_w, "tdp_w"),
    # beyond the brief's list: every other figure the reference has
    "fp32": ("fp32_tflops", units.TERA, lambda g: g.peak_flops_per_s.get("fp32"), "fp32"),
    "tf32": ("tf32_tflops_dense", units.TERA, lambda g: g.peak_flops_per_s.get("tf32"), "tf32"),
    "fp4": ("fp4_tflops_dense", units.TERA, lambda g: g.peak_flops_per_s.get("fp4"), "fp4"),
    "l2": ("l2_mb", units.MB, lambda g: g.l2_bytes, "l2_bytes"),
    "sm_count": ("sm_count", 1.0, lambda g: g.sm_count, "sm_count"),
    "link": ("interconnect_gbs_unidirectional", units.GB,
             lambda g: g.intra_node_link and g.intra_node_link.bandwidth_bytes_per_s,
             "intra_node_link"),
}
TOLERANCE = 0.02

GPUS = {g.id: g for g in list_gpus()}


def reference_rows() -> list[dict[str, str]]:
    with REFERENCE_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def notes_name(spec: HardwareSpec, key: str) -> bool:
    """The notes explain a field as 'key: ...' (e.g. 'memory_bandwidth: ...',
    'peak_flops_per_s.bf16: ...')."""
    return re.search(rf"\b{re.escape(key)}\w*\s*:", spec.notes) is not None


@pytest.fixture(autouse=True)
def _no_user_dirs(monkeypatch):
    """Tests see only the built-in database unless they set the variable themselves."""
    monkeypatch.delenv(ENV_VAR, raising=False)


# --------------------------------------------------------------------------- the files


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_every_yaml_loads_and_is_named_by_its_id(path: Path):
    spec = load_gpu_file(path)
    assert isinstance(spec, HardwareSpec)
    assert spec.id == path.stem


def test_required_ids_exist():
    assert len(YAML_FILES) >= 33
    missing = [i for i in REQUIRED_IDS + OPTIONAL_IDS if i not in GPUS]
    assert not missing, f"missing cards: {missing}"


@pytest.mark.parametrize("gpu_id", sorted(GPUS))
def test_every_figure_has_a_source(gpu_id: str):
    g = GPUS[gpu_id]
    for key in ("memory", "bandwidth", "flops"):
        assert g.sources.get(key, "").strip(), f"{gpu_id}: sources.{key} missing"
    if g.l2_bytes is not None:
        assert g.sources.get("l2"), f"{gpu_id}: l2_bytes without sources.l2"
    if g.tdp_w is not None:
        assert g.sources.get("tdp"), f"{gpu_id}: tdp_w without sources.tdp"
    for link in (g.intra_node_link, g.inter_node_link):
        if link is not None:
            assert link.source.strip()
            assert 0.5 * units.US <= link.latency_s <= 20 * units.US  # a few microseconds
    if g.price is not None:
        assert re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", g.price.date), g.price.date
        assert g.price.source.strip()


# --------------------------------------------------------------------------- reference table


def test_every_reference_row_is_mapped():
    names = [r["name"] for r in reference_rows()]
    assert sorted(names) == sorted(CSV_TO_ID), "update CSV_TO_ID for new or renamed rows"
    assert set(CSV_TO_ID.values()) <= set(GPUS)


@pytest.mark.parametrize("row", reference_rows(), ids=lambda r: CSV_TO_ID.get(r["name"], r["name"]))
@pytest.mark.parametrize("field", sorted(COMPARED))
def test_agrees_with_reference_or_notes_say_why(row: dict[str, str], field: str):
    column, scale, ours, key = COMPARED[field]
    raw = row[column].strip()
    if not raw:
        return  # the reference has no figure to compare with
    g = GPUS[CSV_TO_ID[row["name"]]]
    expected = float(raw) * scale
    actual = ours(g)
    agrees = actual is not None and abs(actual - expected) <= TOLERANCE * expected
    assert agrees or notes_name(g, key), (
        f"{g.id}: {field} = {actual} vs reference {expected:g}; explain it in notes "
        f"as '{key}: ...'")


def test_explained_disagreements_are_real():
    """The TPU v5p note exists because Google's 95 GiB is 102 GB, not the CSV's 95."""
    v5p = GPUS["tpu-v5p"]
    assert v5p.memory_bytes == pytest.approx(95 * units.GiB)
    assert notes_name(v5p, "memory_bytes")


# --------------------------------------------------------------------------- dense, dtypes


@pytest.mark.parametrize("gpu_id, dtype, dense_max, source", [
    ("h100-sxm", "bf16", 1.1e15, "H100 datasheet: 1,979 TF BF16 is with sparsity; dense 989"),
    ("h200-sxm", "fp8", 2.1e15, "H200 page: 3,958 TF FP8 is with sparsity; dense 1,979"),
    ("b200", "bf16", 2.5e15, "Blackwell datasheet: HGX B200 4.5 PF BF16 is sparse; dense 2.25"),
    ("a100-sxm-80gb", "bf16", 3.2e14, "A100 datasheet: 624 TF BF16 is sparse; dense 312"),
    ("l40s", "fp8", 8.0e14, "L40S datasheet: 1,466 TF FP8 is sparse; dense 733"),
    ("mi300x", "bf16", 1.4e15, "CDNA3 whitepaper: 2,614.9 TF BF16 is sparse; dense 1,307.4"),
    ("rtx-4090", "bf16", 1.7e14, "Ada whitepaper: 330.4 TF BF16 (FP32 acc) is sparse; dense 165.2"),
])
def test_peaks_are_dense_not_sparse(gpu_id, dtype, dense_max, source):
    assert GPUS[gpu_id].peak_flops_per_s[dtype] < dense_max, source


@pytest.mark.parametrize("gpu_id", sorted(GPUS))
def test_low_precision_is_never_slower_and_at_most_4x(gpu_id: str):
    p = GPUS[gpu_id].peak_flops_per_s
    for low, high in (("fp8", "bf16"), ("int8", "bf16"), ("fp4", "fp8")):
        if low in p and high in p:
            assert p[high] <= p[low] <= 4.01 * p[high], (gpu_id, low, high)


def test_missing_dtypes_stay_missing():
    assert not GPUS["a100-sxm-80gb"].has("fp8")
    assert not GPUS["a100-sxm-40gb"].has("fp8")
    for gpu_id in ("t4", "v100-sxm2-32gb"):
        assert not GPUS[gpu_id].has("bf16") and GPUS[gpu_id].has("fp16")
    assert not GPUS["mi250x"].has("fp8") and not GPUS["mi355x"].has("tf32")


def test_apple_chips_use_unified_memory_and_documented_bandwidth():
    expected = {"apple-m2-ultra": 800, "apple-m3-max": 400, "apple-m4-max": 546}
    for gpu_id, gb_per_s in expected.items():
        g = GPUS[gpu_id]
        assert g.vendor == "apple" and g.memory_type == "unified"
        assert g.memory_bandwidth_bytes_per_s == pytest.approx(gb_per_s * units.GB)
        assert g.peak_flops_per_s["fp16"] == g.peak_flops_per_s["fp32"]  # no 2x fp16


def test_consumer_and_pcie_cards_have_pcie_links():
    for gpu_id in ("rtx-3090", "rtx-3090-ti", "rtx-4090", "rtx-5090", "rtx-6000-ada",
                   "rtx-pro-6000-blackwell", "rtx-a6000", "l4", "l40s", "t4", "a10"):
        assert GPUS[gpu_id].intra_node_link.name.startswith("PCIe"), gpu_id


# --------------------------------------------------------------------------- look-up


def test_lookup_is_exact_and_case_insensitive():
    assert load_gpu("h100-sxm").id == "h100-sxm"
    assert load_gpu("  H100-SXM ").id == "h100-sxm"


def test_unknown_id_lists_close_ids_and_never_picks_by_substring():
    with pytest.raises(UnknownIdError) as exc:
        load_gpu("h100")
    assert {"h100-sxm", "h100-pcie"} <= set(exc.value.close)
    assert "h100-sxm" in str(exc.value) and "h100-pcie" in str(exc.value)
    for fragment in ("sxm", "mi300", "a100", "4090"):
        with pytest.raises(UnknownIdError):
            load_gpu(fragment)


def test_lookup_accepts_a_yaml_path():
    assert load_gpu(str(builtin_dir() / "l4.yaml")).id == "l4"
    with pytest.raises(SpecFileError):
        load_gpu("no/such/card.yaml")


def test_parsed_files_are_cached():
    path = builtin_dir() / "h100-sxm.yaml"
    assert load_gpu_file(path) is load_gpu_file(path)


# --------------------------------------------------------------------------- robustness


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=40) | st.sampled_from(
    sorted(GPUS) + ["", "/", ".", "..", "x.yaml", "\x00.yaml", "hardware_db", ".yaml",
                    "hardware_db/h100-sxm.yaml", "H100-SXM", "tests/"]))
def test_random_queries_give_a_spec_or_a_perfmodel_error(query: str):
    try:
        result = load_gpu(query)
    except PerfModelError:
        return
    assert isinstance(result, HardwareSpec)


def test_a10g_lists_its_tensor_core_peak():
    # Baseten "NVIDIA A10 vs A10G" spec table: A10G 70 TF dense BF16/FP16 tensor (A10: 125).
    # Without it an A10G bf16 prefill ran on the 31.5 TF non-tensor rate, 3.7x slower than an
    # A10's; with it, the two differ by about the peak ratio 125/70 = 1.8.
    from perfmodel.api import resolve
    from perfmodel.core.predict import step
    a10g = load_gpu("a10g")
    assert a10g.peak_flops_per_s["bf16"] == 70.0e12
    t = {g: float(step(resolve("llama-3.1-8b", g, weights="bf16")[0], 1, 4096, 0).time_s)
         for g in ("a10", "a10g")}
    assert t["a10g"] / t["a10"] == pytest.approx(125 / 70, rel=0.15)
