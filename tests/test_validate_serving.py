"""Serving validation: mapping rules on hand-written rows, unmapped reasons, the summary
arithmetic on a hand-made table, honesty (no row-specific code; order and names do not move a
prediction), the pluggable predictor, the CLI contract and fuzzing."""

import csv
import io
import math
import tokenize
from pathlib import Path

import pytest

from perfmodel.core.errors import PerfModelError
from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.run import ROOT
from perfmodel.analysis.validation.serving_map import (Capabilities, ServingTarget,
                                                       ServingUnmapped, gpu_for_system)
from perfmodel.analysis.validation.serving_results import ServingRowResult
from perfmodel.analysis.validation.serving_recipe import AIC_SGLANG_TEMPLATE_MIXES_CHUNKS
from perfmodel.analysis.validation.serving_report import ttft_residual_table
from perfmodel.analysis.validation.serving_run import (DEFAULT_SERVING, _targets, summarize,
                                                       validate_serving)
from perfmodel.analysis.validation.serving_table import read_serving, write_serving

from serving_rows import map_row, report, row  # noqa: F401 (report: a fixture)

SERVING_CODE = sorted((ROOT / "perfmodel/analysis/validation").glob("serving_*.py"))


# ------------------------------------------------------------------ mapping rules

def test_dense_fp8_checkpoint_row_maps_by_hand():
    # by hand: the -FP8 suffix is dropped and the org is not a catalog repo, so the name part
    # 'Llama-3.1-8B-Instruct' -> llama-3.1-8b; gemm fp8 -> W8A8; fp8 weights -> fp8 KV (assumed);
    # dense model: the MoE columns (moe_tp 4, moe_ep 4) are ignored
    t = map_row(model_path="nvidia/Llama-3.1-8B-Instruct-FP8", precision="fp8", gemm_quant_mode="fp8",
             moe_quant_mode="fp8", tp_size=2, moe_tp_size=4, moe_ep_size=4, batch_size=16,
             isl=2048, osl=256)
    assert isinstance(t, ServingTarget)
    assert (t.model, t.gpu, t.engine) == ("llama-3.1-8b", "h100-sxm", "trtllm")
    assert (t.weights, t.activations, t.kv) == ("fp8", "fp8", "fp8")
    assert (t.tp, t.pp, t.ep, t.attention_dp, t.moe) == (2, 1, 1, 1, False)
    assert (t.prompt, t.output, t.concurrency, t.num_gpus) == (2048, 256, 16, 2)
    assert any("KV cache fp8 assumed" in a for a in t.assumptions)


@pytest.mark.parametrize("system, want", [("h100_sxm", "h100-sxm"), ("h200_sxm", "h200-sxm"),
                                          ("b200_sxm", "b200"), ("gb200", "gb200")])
def test_systems_map_to_hardware_db(system, want):
    # b200_sxm: no 'b200-sxm' id, but 'b200' exists with no other variant -> b200
    assert gpu_for_system(system)[0] == want


def test_a_form_factor_is_not_dropped_when_the_card_has_variants():
    # h100 has sxm, pcie and nvl variants: 'h100_foo' must not fall back to any of them
    assert gpu_for_system("h100_sxm5")[0] is None


@pytest.mark.parametrize("gemm, expert, precision, repo, want", [
    ("nvfp4", "nvfp4", "fp4", "Qwen/Qwen3-32B", ("fp4-g16", "fp4", "fp8")),
    ("int4_wo", "int4_wo", "int4", "Qwen/Qwen3-32B", ("int4-g128", "bf16", "bf16")),
    ("", "", "", "Qwen/Qwen3-32B", ("bf16", "bf16", "bf16")),
    ("", "", "bf16", "Qwen/Qwen3-32B", ("bf16", "bf16", "bf16")),
    ("", "", "", "nvidia/Qwen3-32B-NVFP4", ("fp4-g16", "fp4", "fp8")),   # suffix when cells empty
    ("fp8_block", "fp8_block", "fp8", "Qwen/Qwen3-32B", ("fp8-b128", "fp8", "fp8")),
])
def test_quant_modes_give_formats(gemm, expert, precision, repo, want):
    t = map_row(gemm_quant_mode=gemm, moe_quant_mode=expert, precision=precision, model_path=repo)
    assert (t.weights, t.activations, t.kv) == want


def test_moe_row_takes_ep_and_the_experts_format():
    # by hand: MoE model -> ep = moe_ep_size 4; the experts' mode fp8_block (one fp8 format)
    # is used, its block-scale note is kept; attention dp 1 stated
    t = map_row(model_path="Qwen/Qwen3-235B-A22B-FP8", gemm_quant_mode="fp8",
             moe_quant_mode="fp8_block", precision="fp8", tp_size=4, moe_tp_size=1, moe_ep_size=4)
    assert (t.model, t.moe, t.tp, t.ep, t.attention_dp) == ("qwen3-235b-a22b", True, 4, 4, 1)
    assert t.weights == "fp8-b128" and any("fp8_block" in a for a in t.assumptions)


@pytest.mark.parametrize("over, words", [
    (dict(mode="disagg"), "disaggregated"),
    (dict(model_path="Qwen/Qwen3-235B-A22B", attention_dp_size=4, tp_size=4, moe_ep_size=4),
     "attention_dp 4"),
    # dp unstated: moe_tp 2 x moe_ep 1 spans 2 GPUs over tp 1 -> attention dp 2 implied
    (dict(model_path="Qwen/Qwen3-235B-A22B", attention_dp_size="", tp_size=1, moe_tp_size=2),
     "attention_dp 2"),
    (dict(model_path="example/NoSuchModel-7B"), "not in the catalog"),
    (dict(system="x999_sxm"), "not in hardware_db"),
    (dict(gemm_quant_mode="mxfp6"), "quant mode"),
    (dict(backend="someengine"), "no engine preset"),
    (dict(silicon_ttft_ms="nan"), "not a positive number"),
    (dict(silicon_tpot_ms="-3"), "not a positive number"),
    (dict(batch_size="0"), "positive integers"),
    (dict(isl=""), "positive integers"),
    (dict(mode="both"), "not agg or disagg"),
])
def test_rows_that_cannot_be_expressed_say_why(over, words):
    u = map_row(**over)
    assert isinstance(u, ServingUnmapped) and words in u.reason


def test_attention_dp_rows_map_once_the_predictor_supports_it():
    t = map_row(Capabilities(attention_dp=True), model_path="Qwen/Qwen3-235B-A22B",
             attention_dp_size=4, tp_size=2, moe_ep_size=8)
    assert isinstance(t, ServingTarget) and (t.tp, t.ep, t.attention_dp, t.num_gpus) == (2, 8, 4, 8)


# ------------------------------------------------------------------ arithmetic

def _result(mt, pt, mp, pp, **over) -> ServingRowResult:
    base = dict(dataset="d", row=1, label="d#1", row_id="x", mode="agg", model="m", gpu="g",
                engine="e", engine_version="", moe=False, num_gpus=1, parallel="", precision="",
                prompt_tokens=1, output_tokens=2, concurrency=1, measured_ttft_s=mt,
                measured_tpot_s=mp, predicted_ttft_s=pt, predicted_tpot_s=pp,
                ttft_ape=abs(pt - mt) / mt, tpot_ape=abs(pp - mp) / mp, fits=True, assumptions=[])
    return ServingRowResult(**{**base, **over})


def test_summary_arithmetic_on_a_hand_made_table():
    rows = [_result(1.0, 1.1, 0.010, 0.010), _result(2.0, 1.0, 0.020, 0.030),
            _result(4.0, 4.0, 0.040, 0.032)]
    s = summarize(rows)
    # TTFT errors 10%, 50%, 0% -> median 10%, 2 of 3 within 25%; ratios 1.1, 0.5, 1.0 -> 1.0
    assert s.ttft_median_ape == pytest.approx(0.10)
    assert s.ttft_within_25pct == pytest.approx(2 / 3)
    assert s.ttft_median_ratio == pytest.approx(1.0)
    # TPOT errors 0%, 50%, 20% -> median 20%, 2 of 3 within 25%; ratios 1, 1.5, 0.8 -> 1.0
    assert s.tpot_median_ape == pytest.approx(0.20)
    assert s.tpot_within_25pct == pytest.approx(2 / 3)
    assert s.tpot_median_ratio == pytest.approx(1.0)
    assert summarize([]) is None


def test_ttft_residual_table_on_a_hand_made_table():
    rows = [_result(0.30, 0.10, 0.01, 0.01, moe=True, concurrency=4),       # +200 ms
            _result(0.50, 0.40, 0.01, 0.01, moe=True, concurrency=8),       # +100 ms
            _result(0.90, 0.50, 0.01, 0.01, moe=True, concurrency=8),       # +400 ms
            _result(2.00, 1.70, 0.01, 0.01, moe=True, concurrency=128),     # +300 ms
            _result(0.10, 0.12, 0.01, 0.01, concurrency=1),                 # dense, -20 ms
            _result(0.10, 0.05, 0.01, 0.01, concurrency=16),                # between the bands
            _result(9.00, 1.00, 0.01, 0.01, moe=True, mode="disagg")]       # not aggregated
    lines = ttft_residual_table(rows)
    body = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in lines[2:]}
    assert len(body) == 2
    # MoE: low-C medians of (0.30, 0.50, 0.90) and (0.10, 0.40, 0.50) s; residuals median +200 ms
    cells = [c.strip() for c in body[("e", "MoE")].strip("|").split("|")]
    assert cells[2:] == ["3", "500", "400", "+200", "1", "+300"]
    cells = [c.strip() for c in body[("e", "dense")].strip("|").split("|")]
    assert cells[2:] == ["1", "100", "120", "-20", "0", "-"]


def test_targets_compare_with_the_issue_limits():
    good = summarize([_result(1.0, 1.05, 0.01, 0.0105)])     # 5% errors
    bad = summarize([_result(1.0, 0.5, 0.01, 0.008)])        # 50% and 20% errors
    checks = {c.name: c for c in _targets(good, bad, None, n_disagg=10, n_disagg_done=9)}
    assert checks["aggregated rows: TTFT median error"].met is True
    assert checks["MoE aggregated rows: TTFT median error"].met is False
    assert checks["MoE aggregated rows: TPOT median error"].met is False     # 20% > 12%
    assert checks["disaggregated rows: answered"].value == pytest.approx(0.9)
    assert checks["disaggregated rows: answered"].met is True
    assert checks["disaggregated rows: TPOT median error"].met is None


# ------------------------------------------------------------------ the file

def test_every_serving_row_is_predicted_or_listed_with_a_reason(report):
    n = len(read_serving(DEFAULT_SERVING))
    assert report.n_rows == n == len(report.rows) + len(report.unmapped)
    assert len({r.label for r in report.rows} | {u.label for u in report.unmapped}) == n
    assert all(u.reason.strip() for u in report.unmapped)
    assert sum(r.n for r in report.unmapped_reasons) == len(report.unmapped)
    for r in report.rows:
        assert math.isfinite(r.predicted_ttft_s) and r.predicted_ttft_s > 0
        assert r.ttft_ape == pytest.approx(abs(r.predicted_ttft_s - r.measured_ttft_s)
                                           / r.measured_ttft_s)
    assert report.summary.n == sum(r.mode == "agg" for r in report.rows)


def test_predictions_ignore_row_order_ids_dataset_and_source(report, tmp_path):
    # a special case keyed on a row's position, id, file name or source would move a prediction
    # (the source's first word names the harness family, serving_recipe.py, which the
    # simulator replays; the steady-state predictor used here replays none)
    rows = list(csv.DictReader(open(DEFAULT_SERVING, encoding="utf-8")))
    order = list(range(len(rows)))[::-1]
    order = order[11:] + order[:11]
    write_serving(tmp_path / "renamed.csv", [{**rows[j], "id": f"row{i}", "source": f"else/{i}"}
                                             for i, j in enumerate(order)])
    moved = validate_serving([tmp_path / "renamed.csv"], predictor="steady")
    original = {r.row: r for r in report.rows}
    reasons = {u.row: u.reason for u in report.unmapped}
    assert len(moved.rows) == len(report.rows)
    for r in moved.rows:
        o = original[order[r.row - 1] + 1]
        assert (r.model, r.gpu, r.engine, r.concurrency) == (o.model, o.gpu, o.engine, o.concurrency)
        assert (r.predicted_ttft_s, r.predicted_tpot_s) == (o.predicted_ttft_s, o.predicted_tpot_s)
    for u in moved.unmapped:
        assert u.reason == reasons[order[u.row - 1] + 1]


def _serving_values_and_cells():
    rows = list(csv.DictReader(open(DEFAULT_SERVING, encoding="utf-8")))
    values = set()
    for r in rows:
        for k in ("silicon_ttft_ms", "silicon_tpot_ms"):
            v = float(r[k])
            if not v.is_integer():
                values.add(v)
    cells = {r[k].lower() for r in rows for k in ("id", "model_path", "source", "backend_version")}
    # engine versions that a cited generator template names (serving_recipe.py) key an engine
    # rule, not a row: exempt exactly those
    cells -= set(AIC_SGLANG_TEMPLATE_MIXES_CHUNKS)
    return values, {c for c in cells if len(c) >= 8}


def _row_specific(path: Path, values, cells) -> list:
    nums, strs = set(), []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.NUMBER:
            nums.add(float(eval(tok.string)))     # noqa: S307 - a numeric literal
        elif tok.type == tokenize.STRING:
            strs.append(tok.string.lower())
    text = "\n".join(strs)
    return sorted(nums & values) + [c for c in cells if c in text]


def test_serving_validation_code_has_no_row_specific_constants():
    values, cells = _serving_values_and_cells()
    assert len(SERVING_CODE) >= 5
    for path in SERVING_CODE:
        hits = _row_specific(path, values, cells)
        assert not hits, (path.name, hits[:3])


def test_the_serving_constant_check_catches_a_planted_row(tmp_path):
    values, cells = _serving_values_and_cells()
    value, cell = sorted(values)[len(values) // 2], sorted(cells)[0]
    planted = tmp_path / "planted.py"
    planted.write_text(f"def fix(r):\n    if {cell!r} in r.id:\n        return {value!r}\n")
    hits = _row_specific(planted, values, cells)
    assert value in hits and cell in hits


# ------------------------------------------------------------------ the predictor plug

def test_one_predictor_call_per_configuration(monkeypatch, tmp_path):
    calls = []

    def fake(t, concurrencies, profile, specs):
        calls.append((t.config(), tuple(concurrencies)))
        return {c: sp.PredictedPoint(ttft_s=0.1 * c, tpot_s=0.01, fits=True) for c in concurrencies}

    fake_pred = sp.Predictor(name="fake", description="fake", statistic="test",
                             capabilities=Capabilities(), fn=fake)
    monkeypatch.setattr(sp, "predictors", lambda: {"fake": fake_pred})
    p = tmp_path / "s.csv"
    write_serving(p, [row(batch_size=8), row(batch_size=2), row(batch_size=8),
                      row(batch_size=4, isl=2048)])
    rep = validate_serving([p], predictor="fake")
    # two configurations (isl 1024 and 2048); concurrencies sorted and unique per call
    assert sorted(c for _, c in calls) == [(2, 8), (4,)]
    assert [r.predicted_ttft_s for r in rep.rows] == pytest.approx([0.8, 0.2, 0.8, 0.4])
    assert rep.predictor == "fake" and rep.statistic == "test"


def test_unknown_predictor_is_a_clean_error():
    with pytest.raises(PerfModelError, match="unknown serving predictor"):
        validate_serving([DEFAULT_SERVING], predictor="bogus")
