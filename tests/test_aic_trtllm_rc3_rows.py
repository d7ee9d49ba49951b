"""What AIConfigurator's undated TensorRT-LLM 1.0.0rc3 H100 rows ("aic gap analysis", 479
aggregated rows) show, counted on the shipped file (docs/aic_recipes.md, "The TensorRT-LLM
1.0.0rc3 rows"): the Llama-3.1-8B sweep carries a wait no engine or harness rule found in the
sources explains, and the Qwen3 sweeps of the same harness, version and GPU do not. The
simulator is not fitted to it; these tests keep the evidence honest if the file changes."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING

VERSION = "1.0.0rc3"
SHORT, LONG = 128, 512          # the two output lengths every 1.0.0rc3 sweep ran
MEASURED_REQUESTS_PER_C = 10    # eval/benchmarks/genai_perf_runner.py: --request-count C x 10


def _rc3_rows() -> list[dict]:
    with open(DEFAULT_SERVING, newline="") as f:
        return [r for r in csv.DictReader(f) if r["backend"] == "trtllm"
                and r["backend_version"] == VERSION and r["mode"] == "agg"]


def _waiting_requests() -> dict[tuple, float]:
    """K per (model, TP, ISL, C): how many of the 10 x C measured requests would each have to
    wait one whole generation (OSL x TPOT) to lift the mean TTFT from the OSL-128 row to the
    OSL-512 row: K = (TTFT_512 - TTFT_128) x 10 C / ((512 - 128) x TPOT_512). A prefill does
    not depend on the output length, so a closed loop of equal requests gives K = 0."""
    by = defaultdict(dict)
    for r in _rc3_rows():
        key = (r["model_path"], int(r["tp_size"]), int(r["isl"]), int(r["batch_size"]))
        by[key][int(r["osl"])] = r
    out = {}
    for key, rows in by.items():
        if SHORT in rows and LONG in rows:
            short, long_ = (float(rows[o]["silicon_ttft_ms"]) for o in (SHORT, LONG))
            gen_ms = (LONG - SHORT) * float(rows[LONG]["silicon_tpot_ms"])
            out[key] = (long_ - short) * MEASURED_REQUESTS_PER_C * key[3] / gen_ms
    return out


def test_the_shipped_file_holds_the_three_rc3_sweeps():
    """The block docs/aic_recipes.md describes: 479 aggregated rows, H100 only, three models."""
    rows = _rc3_rows()
    assert len(rows) == 479
    assert {r["system"] for r in rows} == {"h100_sxm"}
    assert {r["model_path"] for r in rows} == {"meta-llama/Llama-3.1-8B-Instruct",
                                               "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B-FP8"}


@pytest.mark.parametrize("conc", [8, 16])
def test_llama_rc3_rows_lose_about_eight_requests_to_a_whole_generation(conc):
    """Every Llama-3.1-8B (TP, ISL) pair at C = 8 and 16 (4 TPs x 3 ISLs) needs K between 6
    and 12: about eight requests per run, not a share of C, wait a whole generation (at C=8,
    K = 10 from TP1 ISL 1024: (550 - 191) ms x 80 / (384 x 7.4 ms); at C=16 about half a
    wave, at C=32 a quarter: the fall of TTFT from C=8 to C=32 the sweep shows)."""
    ks = {k: v for k, v in _waiting_requests().items()
          if k[0] == "meta-llama/Llama-3.1-8B-Instruct" and k[3] == conc}
    assert len(ks) == 12
    assert all(6 <= v <= 12 for v in ks.values()), ks


@pytest.mark.parametrize("model", ["Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B-FP8"])
def test_the_qwen3_rc3_rows_of_the_same_harness_show_no_such_wait(model):
    """The same harness, engine version and GPU, at C = 8 and 16: |K| < 3 in every pair (TTFT
    flat in the output length), so the Llama wait is not a rule of the harness or version."""
    ks = {k: v for k, v in _waiting_requests().items() if k[0] == model and k[3] in (8, 16)}
    assert len(ks) >= 10
    assert all(abs(v) < 3 for v in ks.values()), ks


def _kv_pool_tokens(recipe_fraction: float | None) -> int:
    """The simulator's KV pool for Qwen3-32B fp8 on one H100 (TensorRT-LLM, fp8 KV), with the
    recipe's free-memory fraction applied as serving_predict applies it."""
    from perfmodel import api   # noqa: PLC0415
    from perfmodel.analysis.validation import serving_predict as sp   # noqa: PLC0415
    from perfmodel.analysis.validation.serving_recipe import Recipe   # noqa: PLC0415
    from perfmodel.serving.report import serve_report   # noqa: PLC0415
    q = api.make_query(model="qwen3-32b", gpu="h100-sxm", weights="fp8", kv="fp8",
                       engine="trtllm", prompt_tokens=2048, output_tokens=512)
    sc, warnings, assumptions = api.resolve(q)
    rep = serve_report(q, sp._with_recipe(sc, Recipe(kv_memory_fraction=recipe_fraction)),
                       warnings, assumptions, concurrencies=[8])
    return rep.points[0].kv_capacity_tokens


def test_aic_trtllm_rows_get_the_templates_kv_fraction_by_hand():
    """extra_engine_args.<version>.yaml.j2: free_gpu_memory_fraction default 0.80, against
    TensorRT-LLM's 0.9 (the preset): the pool is a share of the memory left free after weights,
    reserve and activations, so it shrinks by 0.8 / 0.9 = 0.889 (to a 64-token block)."""
    from perfmodel.analysis.validation.serving_recipe import recipe_for   # noqa: PLC0415
    for version in (VERSION, "1.3.0rc1"):
        assert recipe_for("aic gap analysis", "trtllm", 1024,
                          version=version).kv_memory_fraction == 0.80
    assert recipe_for("aic gap analysis", "vllm", 1024).kv_memory_fraction is None
    preset, aic = _kv_pool_tokens(None), _kv_pool_tokens(0.80)
    assert aic / preset == pytest.approx(0.8 / 0.9, abs=64 / aic)


def _osl_series(model: str) -> dict[tuple, dict[int, dict]]:
    """(TP, ISL, C) -> {OSL: row} for the model's C = 8 and 16 rows with all three OSLs."""
    by = defaultdict(dict)
    for r in _rc3_rows():
        if r["model_path"] == model and int(r["batch_size"]) in (8, 16):
            by[(int(r["tp_size"]), int(r["isl"]), int(r["batch_size"]))][int(r["osl"])] = r
    return {k: v for k, v in by.items() if {128, 256, 512} <= set(v)}


def test_qwen3_32b_tpot_is_a_decode_step_plus_prompt_work_spread_over_the_output():
    """docs/aic_recipes.md ("Where the rest of the Qwen3-32B gap is"): in a closed loop of
    equal requests each one's decode window holds the same prompt steps of the others whatever
    its OSL, so TPOT = d + X / (OSL - 1), d the decode step, X the prompt work in the window.
    Fitted on OSL 128 and 512, it predicts every OSL-256 row of the 24 Qwen3-32B (TP, ISL, C)
    series within 2% (TP1 4096 C=8: 27.84 / 19.44 ms give d 16.7 ms, X 1.42 s; 22.2 against
    22.05 ms measured), and X grows with the prompt: the split is the data's, not a fit."""
    series = _osl_series("Qwen/Qwen3-32B")
    assert len(series) == 24
    for (tp, isl, conc), rows in series.items():
        t = {o: float(rows[o]["silicon_tpot_ms"]) for o in (128, 256, 512)}
        x = (t[128] - t[512]) / (1 / 127 - 1 / 511)
        d = t[512] - x / 511
        assert d + x / 255 == pytest.approx(t[256], rel=0.02), (tp, isl, conc)
        assert 0 < d < t[512] and x > 0
    for tp in (1, 2, 4, 8):
        for conc in (8, 16):
            xs = [_x(series[(tp, isl, conc)]) for isl in (1024, 2048, 4096)]
            assert xs[0] < xs[1] < xs[2], (tp, conc, xs)


def _x(rows: dict[int, dict]) -> float:
    t = {o: float(rows[o]["silicon_tpot_ms"]) for o in (128, 512)}
    return (t[128] - t[512]) / (1 / 127 - 1 / 511)
