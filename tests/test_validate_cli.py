"""perfmodel validate: the README/docs block, the CLI contracts and fuzzing."""

import csv
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError
from perfmodel.analysis.validation.run import ROOT, validate
from perfmodel.analysis.validation.report import (END, START, replace_block, summary_section,
                                                  write_docs)
from perfmodel.analysis.validation.table import COLUMNS, write_table

from public_rows import report, row


# ------------------------------------------------------------------ docs

def test_readme_block_is_the_summary_section(report, tmp_path):
    docs, readme = tmp_path / "docs" / "accuracy.md", tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nold\n{END}\n\nafter\n")
    write_docs(report, docs, readme)
    section = summary_section(report)
    assert section in docs.read_text() and section in readme.read_text()
    assert "old" not in readme.read_text() and readme.read_text().endswith("after\n")
    assert replace_block("no markers here", "x") is None


def test_committed_readme_block_matches_committed_docs():
    readme = (ROOT / "README.md").read_text()
    docs = (ROOT / "docs" / "accuracy.md").read_text()
    block = readme.split(START, 1)[1].split(END, 1)[0].strip()
    assert block and block in docs


# ------------------------------------------------------------------ CLI

def test_cli_json_contract(capsys, tmp_path):
    p = tmp_path / "t.csv"
    write_table(p, [row(), row(gpu="Tesla P100 16GB")])
    assert main(["validate", "--data", str(p), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"summary", "rows", "unmapped"} <= set(out)
    s = out["summary"]["decode_tok_s_per_user"]
    assert s["n"] == 1 and 0 <= s["median_ape"] and 0 <= s["within_25pct"] <= 1
    assert out["unmapped"][0]["reason"]


def test_cli_strict_leaves_unstated_variants_unmapped(capsys, tmp_path):
    p = tmp_path / "t.csv"
    write_table(p, [row(gpu="H100 80GB")])
    assert main(["validate", "--data", str(p), "--json"]) == 0
    loose = json.loads(capsys.readouterr().out)
    assert len(loose["rows"]) == 1 and not loose["unmapped"]
    assert main(["validate", "--data", str(p), "--json", "--strict"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert not strict["rows"] and "variant not stated" in strict["unmapped"][0]["reason"]


def test_cli_bad_table_is_one_line_and_exit_2(capsys, tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("a,b\n1,2\n")
    assert main(["validate", "--data", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "column" in err
    assert main(["validate", "--data", str(tmp_path / "missing.csv")]) == 2


def test_predict_json_carries_intervals(capsys):
    assert main(["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "4",
                 "--prompt", "512", "--output", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tpot = out["intervals"]["tpot_s"]
    assert tpot["lo"] == pytest.approx(out["tpot_s"] * tpot["lo_factor"])
    assert tpot["lo"] < tpot["hi"]


text_cell = st.one_of(st.sampled_from(["", "bf16", "fp8", "int4 g128", "batch 8", "1", "2",
                                       "128", "H100 SXM 80GB", "Llama 2 7B", "vLLM",
                                       "TensorRT-LLM", "request rate 3 QPS", "n/a", "-5",
                                       "offline max throughput", "nan", "1e309"]),
                      st.text(max_size=12))
metric_cell = st.sampled_from(["decode_tok_s_per_user", "output_tok_s_total", "ttft_ms",
                               "tpot_ms", "e2e_latency_s", "prefill_tok_s", "max_batch",
                               "memory_gb", "speculative_speedup", "bogus"])


@given(st.lists(st.fixed_dictionaries({c: (metric_cell if c == "metric" else text_cell)
                                       for c in COLUMNS}), min_size=1, max_size=4))
def test_validate_fuzz_returns_typed_results_or_clean_errors(tmp_path_factory, rows):
    p = tmp_path_factory.mktemp("fuzz") / "t.csv"
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        w.writerows(rows)
    try:
        rep = validate(data=[p], profiles=[])
    except PerfModelError:
        return
    assert len(rep.rows) + len(rep.unmapped) == len(rows)
    for r in rep.rows:
        assert math.isfinite(r.predicted) and r.predicted > 0
    assert main(["validate", "--data", str(p), "--json"]) in (0, 2)


number_cell = st.one_of(st.integers(0, 10 ** 7).map(str), st.sampled_from(["0", "1", "2"]))
perturbed = st.fixed_dictionaries({}, optional={
    "input_len": number_cell, "output_len": number_cell, "num_gpus": number_cell,
    "tensor_parallel": number_cell, "value": text_cell, "weight_precision": text_cell,
    "batch_or_concurrency": st.one_of(text_cell, number_cell.map(lambda n: f"batch {n}"),
                                      number_cell.map(lambda n: f"request rate {n} QPS")),
    "metric": metric_cell, "gpu": st.sampled_from(["L40S", "RTX 4090 24GB", "B200 180GB"]),
    "framework": st.sampled_from(["TensorRT-LLM", "HF transformers", "gpt-fast", "vLLM"])})


@given(st.lists(perturbed, min_size=1, max_size=3))
def test_validate_fuzz_near_valid_rows(tmp_path_factory, overrides):
    p = tmp_path_factory.mktemp("near") / "t.csv"
    write_table(p, [row(**o) for o in overrides])
    rep = validate(data=[p], profiles=[])
    assert len(rep.rows) + len(rep.unmapped) == len(overrides)
    for r in rep.rows:
        assert math.isfinite(r.predicted) and r.predicted > 0 and math.isfinite(r.interval_hi)


@given(st.lists(st.text(max_size=8), max_size=3))
def test_cli_fuzz_arguments_exit_cleanly(args):
    try:
        code = main(["validate", "--profile", *args] if args else ["validate", "--data", "x.zzz"])
    except SystemExit as exc:
        code = exc.code
    assert code in (0, 2)
