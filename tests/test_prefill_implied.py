"""The prefill a closed loop's measured TPOT implies (analysis/validation/prefill_implied.py)
and its script (benchmarks/prefill_implied.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation import prefill_implied as pi
from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_table import rows_from_dicts, write_serving
from perfmodel.core.errors import PerfModelError

IMAX = "db-dump/2026-04-27 measured 2026-04-17 image vllm/vllm-openai:v0.19.0-cu130"


def _row(**over) -> dict:
    base = dict(id="r", backend="vllm", backend_version="0.12.0",
                model_path="meta-llama/Llama-3.1-8B", system="h100_sxm", precision="", mode="agg",
                isl="2048", osl="512", gemm_quant_mode="", moe_quant_mode="", batch_size="16",
                tp_size="1", pp_size="1", attention_dp_size="1", moe_tp_size="1",
                moe_ep_size="1", silicon_ttft_ms="400", silicon_tpot_ms="30",
                source="aic gap analysis")
    base.update({k: str(v) for k, v in over.items()})
    return base


def _rows(*dicts):
    return rows_from_dicts("t", list(dicts))


# ------------------------------------------------------------------ the arithmetic

def test_the_implied_prefill_by_hand():
    # TPOT 30 ms over a 20 ms decode step, mean output 1024, C = 16:
    # (0.030 - 0.020) * 1023 / 15 = 10.23 / 15 = 0.682 s
    assert pi.implied_prefill_s(0.030, 0.020, 1024, 16) == pytest.approx(0.682)


def test_mean_lengths_of_a_recipe_by_hand():
    # InferenceMAX --random-range-ratio 0.8 at 8192: uniform in [ceil(6553.6), 8192] = [6554,
    # 8192], mean (6554 + 8192) / 2 = 7373; fixed lengths keep L
    assert pi.mean_length(8192, 0.8) == 7373.0
    assert pi.mean_length(1024, 1.0) == 1024.0
    assert pi.mean_length(1, 0.5) == 1.0


@pytest.mark.parametrize("tpot, d, o, c", [(0.02, 0.02, 1024, 16), (0.01, 0.02, 1024, 16),
                                           (0.03, 0.02, 1, 16), (0.03, 0.02, 1024, 1),
                                           (math.nan, 0.02, 1024, 16), (math.inf, 0.02, 1024, 16),
                                           (0.03, 0.0, 1024, 16), (0.03, 0.02, math.nan, 16)])
def test_no_prefill_to_read_is_a_clean_error(tpot, d, o, c):
    with pytest.raises(PerfModelError):
        pi.implied_prefill_s(tpot, d, o, c)


@given(tpot=st.floats(allow_nan=True, allow_infinity=True),
       d=st.floats(allow_nan=True, allow_infinity=True),
       o=st.floats(allow_nan=True, allow_infinity=True), c=st.integers(-5, 1 << 20))
def test_any_input_gives_a_positive_finite_prefill_or_a_clean_error(tpot, d, o, c):
    try:
        p = pi.implied_prefill_s(tpot, d, o, c)
    except PerfModelError:
        return
    assert math.isfinite(p) and p >= 0


def _implied(**kw) -> pi.ImpliedRow:
    base = dict(row_id="x", family="aic", model="m", engine="vllm", moe=False, gpu="h100-sxm",
                parallel="tp1 pp1 ep1 dp1",
                weights="fp8", prompt_tokens=1024, prompt_mean=1024, output_mean=1024,
                concurrency=16, decode_step_s=0.020, prefill_model_s=0.5,
                prefill_implied_s=0.682, measured_ttft_s=1.364, measured_tpot_s=0.030)
    return pi.ImpliedRow(**{**base, **kw})


def test_the_ttft_error_splits_into_cost_and_queue_by_hand():
    # measured: P_eff 0.682 s, TTFT 1.364 s -> Q_meas 2. simulated TPOT 25 ms: P_eff(sim) =
    # 0.005 * 1023 / 15 = 0.341 s (half the measured: cost factor 0.5); TTFT_pred 1.023 s ->
    # Q_sim 3 (queue factor 1.5); TTFT_pred / TTFT_meas = 0.75 = 0.5 x 1.5
    r = _implied(predicted_tpot_s=0.025, predicted_ttft_s=1.023)
    assert r.q_measured == pytest.approx(2.0)
    assert r.prefill_implied_sim_s == pytest.approx(0.341)
    assert r.cost_factor == pytest.approx(0.5) and r.q_simulated == pytest.approx(3.0)
    assert r.queue_factor == pytest.approx(1.5) and r.ttft_ratio == pytest.approx(0.75)
    assert r.share == pytest.approx(1 / 3)
    assert _implied(predicted_tpot_s=0.019, predicted_ttft_s=1.0).cost_factor is None


@given(tpot=st.floats(0.021, 10), ttft=st.floats(1e-3, 100))
def test_cost_times_queue_is_the_ttft_ratio(tpot, ttft):
    r = _implied(predicted_tpot_s=tpot, predicted_ttft_s=ttft)
    assert r.cost_factor * r.queue_factor == pytest.approx(r.ttft_ratio, rel=1e-9)


def test_group_takes_medians_per_key():
    rows = [_implied(gpu="a", prefill_implied_s=p) for p in (0.5, 1.0, 1.5)] + \
           [_implied(gpu="b", prefill_implied_s=2.0)]
    g = {x.key: x for x in pi.group(rows, ("gpu",))}
    assert g[("a",)].n == 3 and g[("a",)].ratio == pytest.approx(2.0)   # median 1.0 / 0.5
    assert g[("b",)].ratio == pytest.approx(4.0) and g[("b",)].cost_factor is None


# ------------------------------------------------------------------ rows of a file

def test_a_row_built_with_twice_the_models_prefill_reads_twice():
    """A measured TPOT made of the model's decode step plus (C - 1) prefills of 2 x P_model
    spread over the mean output reads back P_eff / P_model = 2 (the InferenceMAX recipe's
    mean lengths: 2048 -> 1843.5, 512 -> 461)."""
    t = map_serving_row(_rows(_row(source=IMAX))[0])
    sc = pi._scenario(t, sp._Specs())
    D, P, fits = pi._model_times(sc, 16, 1843.5, 461.0)
    assert fits and D > 0 and P > 0
    tpot_ms = (D + 15 * 2 * P / 460.0) * 1e3
    rows, skipped = pi.implied_rows(_rows(_row(source=IMAX, silicon_tpot_ms=tpot_ms)))
    assert not skipped and len(rows) == 1
    assert rows[0].prompt_mean == 1843.5 and rows[0].family == "inferencemax"
    assert rows[0].ratio == pytest.approx(2.0, rel=1e-6)


def test_rows_are_kept_unreadable_or_skipped_with_their_reason():
    rows, skipped = pi.implied_rows(_rows(
        _row(id="fast", silicon_tpot_ms="0.001"),          # TPOT below any decode step
        _row(id="low", batch_size="4"),                     # below MIN_CONCURRENCY: not read
        _row(id="full", batch_size="4096", isl="8192", osl="8192")))   # KV pool overflows
    why = {s.row_id: s.reason for s in skipped}
    assert set(why) == {"full"} and "KV pool" in why["full"]
    (fast,) = rows                      # kept for the fit, unreadable alone
    assert fast.row_id == "fast" and not fast.readable and fast.ratio is None
    assert fast.q_measured is None and pi.group(rows, ("gpu",)) == []


def test_predictions_come_from_a_validate_json(tmp_path):
    p = tmp_path / "v.json"
    p.write_text(json.dumps({"serving": {"rows": [
        {"row_id": "r", "predicted_ttft_s": 0.3, "predicted_tpot_s": 0.02},
        {"row_id": "u", "predicted_ttft_s": None, "predicted_tpot_s": None}]}}))
    assert pi.load_predictions(p) == {"r": (0.3, 0.02)}
    (tmp_path / "bad.json").write_text("[1, 2]")
    (tmp_path / "rows.json").write_text('{"serving": {"rows": [1, {"predicted_ttft_s": 1}]}}')
    for bad in (tmp_path / "bad.json", tmp_path / "missing.json", tmp_path / "rows.json"):
        with pytest.raises(PerfModelError):
            pi.load_predictions(bad)


_cells = st.one_of(st.just(""), st.text(max_size=6), st.integers(-10, 1 << 21).map(str),
                   st.floats(allow_nan=True).map(str))


@given(isl=_cells, osl=_cells, conc=_cells, ttft=_cells, tpot=_cells,
       source=st.sampled_from(["aic gap analysis", IMAX, "", "x"]))
def test_any_row_gives_an_implied_row_or_a_reason(isl, osl, conc, ttft, tpot, source):
    rows, skipped = pi.implied_rows(_rows(_row(isl=isl, osl=osl, batch_size=conc,
                                               silicon_ttft_ms=ttft, silicon_tpot_ms=tpot,
                                               source=source)))
    assert len(rows) + len(skipped) <= 1
    for r in rows:
        assert math.isfinite(r.decode_step_s) and r.decode_step_s > 0
        assert not r.readable or all(math.isfinite(x) and x > 0 for x in (
            r.prefill_implied_s, r.ratio, r.q_measured))
    assert all(s.reason for s in skipped)


def test_the_script_prints_a_table(tmp_path, capsys):
    import importlib.util  # noqa: PLC0415
    from perfmodel.analysis.validation.run import ROOT  # noqa: PLC0415
    spec = importlib.util.spec_from_file_location("prefill_implied_script",
                                                  ROOT / "benchmarks" / "prefill_implied.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    csv = tmp_path / "s.csv"
    write_serving(csv, [_row(id="a"), _row(id="b", batch_size="32", silicon_tpot_ms="40")])
    assert mod.main(["--data", str(csv), "--by", "engine,moe", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| vllm | dense | 2 |" in out and "2 rows read" in out
    assert mod.main(["--data", str(csv), "--by", "gpu", "--fit"]) == 0
    assert "0 configurations fitted" in capsys.readouterr().out
    assert mod.main(["--data", str(tmp_path / "none.csv")]) == 2
    assert mod.main(["--data", str(csv), "--by", "colour"]) == 2
    assert "unknown field(s) colour" in capsys.readouterr().err


def test_the_two_factor_fit_recovers_a_decode_scale_and_a_prefill_ratio():
    """Levels built as TPOT = 0.9 D(C) + 1.5 (C - 1) P / (O - 1) (a decode step 10% slower
    than the model's would read as a smaller P_eff per row) fit back a = 0.9, b = 1.5; the
    simulated TPOT built with a = 1, b = 0.75 gives the cost factor 0.5."""
    P, O = 0.2, 1024.0
    rows = []
    for c, d in ((8, 0.010), (32, 0.014), (128, 0.025)):
        x = (c - 1) * P / (O - 1)
        rows.append(_implied(concurrency=c, decode_step_s=d, prefill_model_s=P, output_mean=O,
                             measured_tpot_s=0.9 * d + 1.5 * x, prefill_implied_s=1.0,
                             predicted_tpot_s=d + 0.75 * x, predicted_ttft_s=0.6))
    (f,) = pi.fit_configs(rows)
    assert f.decode_scale == pytest.approx(0.9) and f.ratio == pytest.approx(1.5)
    assert f.decode_scale_sim == pytest.approx(1.0) and f.ratio_sim == pytest.approx(0.75)
    assert f.cost_factor == pytest.approx(0.5)
    # Q_meas = 1.364 / (1.5 x 0.2) = 4.547, Q_sim = 0.6 / (0.75 x 0.2) = 4: queue 0.88
    assert f.queue_factor == pytest.approx(4.0 / (1.364 / 0.3))
    assert f.cost_factor * f.queue_factor == pytest.approx(f.ttft_ratio)
    assert pi.fit_configs(rows[:2]) == []          # two levels: no fit
    (g,) = pi.group_fits([f], ("engine",))
    assert g.configs == 1 and g.ratio == pytest.approx(1.5)
