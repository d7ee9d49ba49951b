"""Serving validation: the CLI contract, fuzzing, concurrency bands, the simulator as the
predictor, and how the rows of one configuration are read."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import ms
from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.serving_map import Capabilities, ServingTarget, map_serving_row
from perfmodel.analysis.validation.serving_run import (DEFAULT_SERVING, concurrency_band,
                                                       measured_points, validate_serving)
from perfmodel.analysis.validation.serving_table import COLUMNS, read_serving, write_serving
from perfmodel.analysis.validation.table import write_table

from serving_rows import map_row, report, row  # noqa: F401 (report: a fixture)


# ------------------------------------------------------------------ CLI and fuzzing

def _public_row() -> dict:
    return dict(source_url_or_repo_path="test", source_kind="repo_benchmark", gpu="H100 SXM 80GB",
                num_gpus="1", tensor_parallel="1", model="Llama 3.1 8B", params_b="8.0",
                weight_precision="bf16", kv_precision="bf16", framework="vLLM",
                batch_or_concurrency="batch 1", input_len="512", output_len="128",
                metric="decode_tok_s_per_user", value="100", notes="")


def test_cli_json_carries_the_serving_report(capsys, tmp_path):
    pub, srv = tmp_path / "t.csv", tmp_path / "s.csv"
    write_table(pub, [_public_row()])
    write_serving(srv, [row(), row(system="x999_sxm")])
    assert main(["validate", "--data", str(pub), "--serving-data", str(srv), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["serving"]
    assert len(out["rows"]) == 1 and out["unmapped"][0]["reason"]
    assert out["summary"]["n"] == 1 and 0 <= out["summary"]["ttft_median_ape"]
    assert main(["validate", "--data", str(pub), "--json"]) == 0     # --data alone: no serving
    assert json.loads(capsys.readouterr().out)["serving"] is None


def test_cli_bad_serving_inputs_are_one_line_and_exit_2(capsys, tmp_path):
    pub, bad = tmp_path / "t.csv", tmp_path / "bad.csv"
    write_table(pub, [_public_row()])
    bad.write_text("a,b\n1,2\n")
    for args in (["--serving-data", str(bad)], ["--serving-data", str(tmp_path / "nope.csv")],
                 ["--serving-predictor", "bogus"]):
        assert main(["validate", "--data", str(pub), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err


cell = st.one_of(st.sampled_from(["", "0", "1", "2", "8", "1024", "-1", "nan", "1e309", "agg",
                                  "disagg", "fp8", "nvfp4", "int4_wo", "fp8_block", "h100_sxm",
                                  "b200_sxm", "trtllm", "vllm", "sglang", "Qwen/Qwen3-32B",
                                  "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-8B"]),
                 st.text(max_size=10))


@given(st.lists(st.fixed_dictionaries({}, optional={c: cell for c in COLUMNS}), min_size=1,
                max_size=3))
def test_serving_fuzz_returns_typed_results_or_clean_errors(tmp_path_factory, overrides):
    p = tmp_path_factory.mktemp("sfuzz") / "s.csv"
    write_serving(p, [row(**o) for o in overrides])
    try:
        rep = validate_serving([p], predictor="steady")
    except PerfModelError:
        return
    assert len(rep.rows) + len(rep.unmapped) == len(overrides)
    for r in rep.rows:
        for v in (r.predicted_ttft_s, r.predicted_tpot_s, r.ttft_ape, r.tpot_ape):
            assert math.isfinite(v) and v >= 0


@pytest.mark.parametrize("c, label", [(1, "C 1-4"), (4, "C 1-4"), (5, "C 5-16"), (64, "C 17-64"),
                                      (256, "C 65-256"), (257, "C >= 257"), (4096, "C >= 257")])
def test_concurrency_bands(c, label):
    assert concurrency_band(c)[1] == label


def test_groups_by_concurrency_band_partition_the_rows(report):
    bands = [g for g in report.groups if g.by == "concurrency"]
    assert sum(g.n for g in bands) == report.summary.n
    order = ["C 1-4", "C 5-16", "C 17-64", "C 65-256", "C >= 257"]     # low load first
    assert [g.key for g in bands] == [k for k in order if k in {g.key for g in bands}]


def test_simulator_statistic_is_the_mean_when_reported_else_p50():
    assert sp._sim_stat({"ttft_p50_s", "tpot_p50_s"}) == "p50"
    assert sp._sim_stat({"ttft_p50_s", "tpot_p50_s", "ttft_mean_s", "tpot_mean_s"}) == "mean"


def test_simulator_predicts_rows_when_present(tmp_path):
    pytest.importorskip("perfmodel.serving.simulate")
    p = tmp_path / "s.csv"
    write_serving(p, [row(batch_size=1, osl=64), row(batch_size=16, osl=64)])
    rep = validate_serving([p], predictor="sim")
    assert rep.predictor == "sim" and ("p50" in rep.statistic or "mean" in rep.statistic)
    one, many = sorted(rep.rows, key=lambda r: r.concurrency)
    # 16 requests released at once queue behind each other's prefills: TTFT and TPOT grow
    assert many.predicted_ttft_s > one.predicted_ttft_s
    assert many.predicted_tpot_s >= one.predicted_tpot_s


def test_a_baseline_predictor_is_scored_on_the_same_rows(monkeypatch, tmp_path):
    def const(value):
        def fn(t, concurrencies, profile, specs):
            return {c: sp.PredictedPoint(ttft_s=value, tpot_s=value / 10, fits=True)
                    for c in concurrencies}
        return sp.Predictor(name=f"c{value}", description=f"constant {value}", statistic="test",
                            capabilities=Capabilities(), fn=fn)

    monkeypatch.setattr(sp, "predictors", lambda: {"a": const(0.1), "b": const(0.2)})
    p = tmp_path / "s.csv"
    write_serving(p, [row(), row(batch_size=2)])      # measured TTFT 100 ms, TPOT 10 ms
    rep = validate_serving([p], predictor="a", baseline="b")
    assert rep.summary.ttft_median_ape == pytest.approx(0.0)           # 0.1 s vs 100 ms
    assert rep.baseline_description == "constant 0.2"
    assert rep.baseline_summary.n == 2 and rep.baseline_summary.ttft_median_ape == pytest.approx(1.0)
    assert validate_serving([p], predictor="a", baseline="a").baseline_summary is None


def test_measured_points_of_one_configuration(tmp_path):
    p = tmp_path / "s.csv"
    write_serving(p, [row(batch_size=8), row(batch_size=2, silicon_ttft_ms="50"),
                      row(batch_size=4, tp_size=2), row(batch_size=4, isl=2048)])
    pts = measured_points("llama-3.1-8b", "h100-sxm", "trtllm", "bf16", prompt=1024, output=128,
                          data=[p])
    # by hand: rows 1 and 2 match (tp 1, isl 1024); sorted by concurrency; ms -> s
    assert [(m.concurrency, m.ttft_s) for m in pts] == [(2, pytest.approx(0.05)),
                                                        (8, pytest.approx(0.1))]
    assert measured_points("llama-3.1-8b", "h100-sxm", "vllm", "bf16", prompt=1024, output=128,
                           data=[p]) == []


def test_reasons_count_together_whatever_their_numbers():
    from perfmodel.analysis.validation.serving_run import reason_class
    a = reason_class("one request of 8192+1024 tokens needs 9216 KV tokens; the pool holds 5623 "
                     "(68.71 GB left)")
    b = reason_class("one request of 1024+8192 tokens needs 9216 KV tokens; the pool holds 0 "
                     "(-0.29 GB left)")
    assert a == b == "one request of #+# tokens needs # KV tokens; the pool holds # (# GB left)"
    assert reason_class("tp=64 does not divide num_heads=32 of qwen3.5-397b-a17b") == \
        "tp=# does not divide num_heads=# of qwen3.5-397b-a17b"


@pytest.mark.parametrize("over, want", [
    # vLLM DP attention as AIC imported it: tp = the GPUs, dp 2, moe_ep = tp x dp, batch per rank
    (dict(backend="vllm", model_path="MiniMaxAI/MiniMax-M2.5", system="b200_sxm", tp_size=2,
          attention_dp_size=2, moe_ep_size=4, batch_size=64), (1, 2, 2, 2, 128)),
    # TRT-LLM attention DP over 8 GPUs written squared: dp 64 = moe_tp 8 x moe_ep 8, batch per rank
    (dict(model_path="deepseek-ai/DeepSeek-V3", system="b200_sxm", tp_size=1,
          attention_dp_size=64, moe_tp_size=8, moe_ep_size=8, batch_size=4), (1, 8, 8, 8, 256)),
    # TP8 EP8 written squared: tp 64 on an 8-GPU server
    (dict(model_path="deepseek-ai/DeepSeek-V3", system="b200_sxm", tp_size=64,
          moe_tp_size=8, moe_ep_size=8, batch_size=8), (8, 8, 1, 8, 8)),
    # a genuine hybrid (moe_tp 2 x moe_ep 2 inside TP4: 4 GPUs fit one server) is left as written
    (dict(model_path="Qwen/Qwen3-235B-A22B", system="h100_sxm", tp_size=4,
          attention_dp_size="", moe_tp_size=2, moe_ep_size=2, batch_size=8), (4, 2, 1, 4, 8)),
])
def test_import_encodings_read_back_to_the_layout_run(over, want):
    t = map_row(Capabilities(attention_dp=True), **over)
    assert isinstance(t, ServingTarget), t
    assert (t.tp, t.ep, t.attention_dp, t.num_gpus, t.concurrency) == want


def test_twin_rows_of_the_file_map_to_one_layout():
    """data/serving/aic_silicon_sample.csv lists MiniMax-M2.5 fp8 on B200 (vLLM, 1024/1024,
    'tp2 ep2' at concurrency 128) twice: tp2/dp2/moe_ep4 at batch 64 and tp2/moe_ep2 at batch
    128, with identical TTFT and TPOT (the same run). Both must map to 2 GPUs at 128."""
    rows = [r for r in read_serving(DEFAULT_SERVING)
            if r.get("model_path") == "MiniMaxAI/MiniMax-M2.5" and r.get("system") == "b200_sxm"
            and r.get("isl") == r.get("osl") == "1024" and r.get("precision") == "fp8"
            and r.get("tp_size") == "2" and r.get("moe_ep_size") in ("2", "4")
            and r.get("moe_tp_size") == "1"]
    got = {}
    for r in rows:
        t = map_serving_row(r, Capabilities(attention_dp=True))
        got.setdefault(round(ms(r.tpot_s), 1), set()).add((t.num_gpus, t.concurrency))
    pairs = [v for v in got.values() if len(v) == 1 and next(iter(v))[1] == 128]
    assert rows and pairs, got
    assert all(len(v) == 1 for v in got.values()), got   # the same TPOT -> the same layout
