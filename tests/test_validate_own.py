"""perfmodel validate: the converter of the project's own raw measurements into table rows,
and their validation with and without their profile."""

import json

import pytest
import yaml

from perfmodel.core.errors import PerfModelError
from perfmodel.analysis.validation.run import DEFAULT_TABLE, validate
from perfmodel.analysis.validation.names import engine_id, gpu_id
from perfmodel.analysis.validation.own import convert_raw
from perfmodel.analysis.validation.table import COLUMNS


# ------------------------------------------------------------------ own measurements

RAW = {"schema_version": 1, "complete": True, "args": {"compile_mode": "reduce-overhead"},
       "env": {"gpu_name": "NVIDIA H200", "torch_version": "2.x", "date_utc": "2026"},
       "e2e": {"model": {"name": "llama-3.1-8b-shape", "num_layers": 32, "d_model": 4096,
                         "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336,
                         "vocab_size": 128256, "tied_embeddings": False},
               "records": [
                   {"mode": "graph", "dtype": "bf16", "phase": "decode", "batch": 8,
                    "context": 4096, "prompt": None, "new_tokens": 1, "seconds": 0.0125},
                   {"mode": "compile", "dtype": "fp8_e4m3", "phase": "prefill", "batch": 2,
                    "context": 0, "prompt": 512, "new_tokens": 512, "seconds": 0.05},
                   {"mode": "hf_generate", "dtype": "bf16", "phase": "decode", "batch": 1,
                    "context": 512, "prompt": None, "new_tokens": 1, "seconds": 0.03,
                    "generated_tokens": 64},
                   {"mode": "mystery", "dtype": "bf16", "phase": "decode", "batch": 1,
                    "context": 1, "seconds": 1.0}]}}


def test_own_raw_results_convert_to_table_rows():
    rows = convert_raw(RAW, "calibrate/data/raw-h200-test.json")
    assert len(rows) == 3 and all(set(r) == set(COLUMNS) for r in rows)
    dec, pre, hf = rows
    assert (dec["metric"], float(dec["value"]), dec["input_len"], dec["output_len"]) == \
        ("tpot_ms", 12.5, "4096", "1")
    assert (pre["metric"], float(pre["value"])) == ("prefill_tok_s", 2 * 512 / 0.05)
    assert pre["weight_precision"] == "fp8" and dec["model"] == "llama-3.1-8b"
    assert (hf["metric"], hf["output_len"], hf["framework"].startswith("HF")) == ("tpot_ms", "64", True)
    graphless = convert_raw({**RAW, "args": {"compile_mode": "default"}})[1]["framework"]
    assert "no CUDA graphs" in graphless                 # said, and still the preset a profile fits
    assert engine_id(graphless)[0] == engine_id(pre["framework"])[0] == "torch-compile"


def test_tensor_parallel_decode_records_convert_at_their_gpu_count():
    raw = {"schema_version": 1, "world_size": 2, "env": {"gpu_names": ["NVIDIA H200"] * 2},
           "decode_tp": {"model": RAW["e2e"]["model"], "records": [
               {"mode": "graph", "tp": 2, "batch": 8, "context": 512, "seconds": 0.006},
               {"mode": "graph_nocomm", "tp": 2, "batch": 8, "context": 512, "seconds": 0.005}]}}
    rows = convert_raw(raw, "x")
    assert len(rows) == 1                        # a step without its all-reduces is no real run
    r = rows[0]
    assert (r["num_gpus"], r["tensor_parallel"], float(r["value"])) == ("2", "2", 6.0)
    assert gpu_id(r["gpu"])[0] == "h200-sxm"


def test_auto_discovered_files_that_are_not_measurements_are_skipped_and_named(monkeypatch, tmp_path):
    import perfmodel.analysis.validation.run as v
    bad = tmp_path / "raw-other.json"
    bad.write_text("{}")
    monkeypatch.setattr(v, "default_data", lambda: [DEFAULT_TABLE, bad])
    rep = v.validate(profiles=[], serving=[])   # the public tables only: serving rows are slow
    assert any("raw-other.json (skipped" in d for d in rep.data)
    with pytest.raises(PerfModelError):
        v.validate(data=[bad], profiles=[])       # named explicitly: an error


def test_own_rows_are_validated_with_and_without_their_profile(tmp_path):
    raw = tmp_path / "raw-h200-test.json"
    raw.write_text(json.dumps(RAW))
    prof = tmp_path / "h200.yaml"
    prof.write_text(yaml.safe_dump({"gpu": "h200-sxm", "efficiency": {
        "mem_bw": 0.9, "gemm_max": 0.8, "gemm_half_m": 16.0, "attn_compute": 0.5,
        "attn_mem": 0.85, "kernel_s": 2e-6, "link": 0.75}}))
    rep = validate(data=[raw], profiles=[prof])
    assert len(rep.rows) == 3 and {r.gpu for r in rep.rows} == {"h200-sxm"}
    assert {r.engine for r in rep.rows} == {"torch-graph", "torch-compile", "hf-eager"}
    assert all(r.calibrated_predicted is not None for r in rep.rows)
    assert "own" in rep.summary_by_source and rep.summary_calibrated
    own = [t for t in rep.targets if t.name.startswith("own")][0]
    assert own.n == 3 and own.met is not None
