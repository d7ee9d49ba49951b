"""AMD Instinct measurements: the public-table rows (data/public_measurements.csv, MI300X) and
the serving sample (data/serving/amd_public_sample.csv, MI300X / MI325X / MI355X with H200
controls) parse and map to the intended model, GPU and engine. Expected counts are those of the
sources (notes and source cells say where each number is), not of the code."""

from collections import Counter
from pathlib import Path

from perfmodel.analysis.validation.mapping import Target, map_row
from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_provenance import family
from perfmodel.analysis.validation.serving_table import read_serving
from perfmodel.analysis.validation.table import read_table

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "data" / "public_measurements.csv"
SAMPLE = ROOT / "data" / "serving" / "amd_public_sample.csv"


def _amd_public():
    return [r for r in read_table(PUBLIC) if "MI300X" in r.gpu]


def test_public_mi300x_rows_map_to_mi300x_vllm():
    rows = _amd_public()
    # amd.com performance results: 8 throughput + 3 latency rows; Oracle blog: 9 latency + 2
    # throughput rows
    assert len(rows) == 22
    targets = [map_row(r) for r in rows]
    assert all(isinstance(t, Target) for t in targets)
    assert {t.gpu for t in targets} == {"mi300x"}
    assert {t.engine for t in targets} == {"vllm"}
    assert Counter(t.model for t in targets) == {"llama-3.1-405b": 15, "llama-3.1-70b": 7}
    assert {t.tp for t in targets} == {8}


def test_public_mi300x_loads_and_flags():
    targets = [map_row(r) for r in _amd_public()]
    assert Counter(t.load for t in targets) == {"batch": 12, "max_throughput": 10}
    # Oracle latency table: batch 1 .. 256 at 128 in / 128 out
    oracle = sorted(t.batch for t in targets if t.load == "batch" and t.output == 128)
    assert oracle == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    # the amd.com throughput unit (output vs total tok/s) is unstated in the copy read: rows
    # whose input share of tokens exceeds 10% (500/2000 and 2048/2048, both models) are
    # low-confidence; 128/2048 and 128/4096 (6% and 3%) are not
    low = [t for t in targets if t.measurement.low_confidence]
    assert sorted((t.prompt, t.output) for t in low) == [(500, 2000), (500, 2000),
                                                         (2048, 2048), (2048, 2048)]


def test_serving_sample_maps_every_row():
    rows = read_serving(SAMPLE)
    targets = [map_serving_row(r) for r in rows]
    reasons = [t.reason for t in targets if hasattr(t, "reason")]
    assert reasons == []
    by_gpu = Counter(t.gpu for t in targets)
    # dstack DeepSeek-R1 raw data: MI300X vLLM 8 + SGLang 8, H200 vLLM 8; InferenceX #890 (2)
    # and #3318 (5) on MI325X; llm-d MI355X reference: 10
    assert by_gpu == {"mi300x": 16, "h200-sxm": 8, "mi325x": 7, "mi355x": 10}
    assert {(t.gpu, t.engine) for t in targets} == {
        ("mi300x", "vllm"), ("mi300x", "sglang"), ("h200-sxm", "vllm"),
        ("mi325x", "sglang"), ("mi355x", "vllm")}
    assert {t.model for t in targets} == {"deepseek-r1", "llama-3.3-70b"}


def test_inferencex_run_rows_get_the_inferencex_harness():
    assert family("inferencex-run/ github.com/x measured 2026-03-08 image y") == "inferencemax"
    assert family("db-dump/2026-04-27 measured 2026-03-25 image y") == "inferencemax"
    assert family("dstack 2025-03 github.com/dstackai/benchmarks") == "other"
    rows = read_serving(SAMPLE)
    mi325 = [map_serving_row(r) for r in rows if r.get("system") == "mi325x"]
    assert mi325 and all(t.recipe.family == "inferencemax" and t.recipe.range_ratio == 0.8
                         for t in mi325)
    other = [map_serving_row(r) for r in rows if r.get("system") != "mi325x"]
    assert all(t.recipe.family != "inferencemax" for t in other)
