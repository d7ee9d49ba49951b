"""What AIConfigurator's undated TensorRT-LLM 1.0.0rc3 H100 rows ("aic gap analysis", 479
aggregated rows) show, counted on the shipped file (docs/aic_recipes.md, "The TensorRT-LLM
1.0.0rc3 rows"): the Llama-3.1-8B sweep carries a wait no engine or harness rule found in the
sources explains (about one whole generation per wave of C at C = 8, as if one slot were
taken), and the Qwen3 sweeps of the same harness, version and GPU do not; the rows' means pool
20 x C requests, not genai_perf_runner.py's 10 x C. The simulator is fitted to neither; these
tests keep the evidence honest if the file changes."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from fractions import Fraction

import pytest

from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING

VERSION = "1.0.0rc3"
SHORT, LONG = 128, 512          # the two output lengths every 1.0.0rc3 sweep ran
NS_PER_MS = 1e6                 # genai-perf records each request's times in integer nanoseconds


def _rc3_rows() -> list[dict]:
    with open(DEFAULT_SERVING, newline="") as f:
        return [r for r in csv.DictReader(f) if r["backend"] == "trtllm"
                and r["backend_version"] == VERSION and r["mode"] == "agg"]


def _waits_per_wave() -> dict[tuple, float]:
    """W per (model, TP, ISL, C): how many whole generations ((512 - 128) x TPOT_512 more per
    request at OSL 512) the C requests of one wave wait together, from the rise of the mean
    TTFT between the OSL-128 and OSL-512 rows: W = (TTFT_512 - TTFT_128) x C / ((512 - 128) x
    TPOT_512). A prefill does not depend on the output length, so a closed loop of equal
    requests whose C slots all run gives W = 0; a loop that runs only C - 1 at a time gives
    about C / (C - 1) (each request waits 1 / (C - 1) of a generation for a free slot).
    W needs no request count: the mean excess times C is the excess of one wave."""
    by = defaultdict(dict)
    for r in _rc3_rows():
        key = (r["model_path"], int(r["tp_size"]), int(r["isl"]), int(r["batch_size"]))
        by[key][int(r["osl"])] = r
    out = {}
    for key, rows in by.items():
        if SHORT in rows and LONG in rows:
            short, long_ = (float(rows[o]["silicon_ttft_ms"]) for o in (SHORT, LONG))
            gen_ms = (LONG - SHORT) * float(rows[LONG]["silicon_tpot_ms"])
            out[key] = (long_ - short) * key[3] / gen_ms
    return out


def test_the_shipped_file_holds_the_three_rc3_sweeps():
    """The block docs/aic_recipes.md describes: 479 aggregated rows, H100 only, three models."""
    rows = _rc3_rows()
    assert len(rows) == 479
    assert {r["system"] for r in rows} == {"h100_sxm"}
    assert {r["model_path"] for r in rows} == {"meta-llama/Llama-3.1-8B-Instruct",
                                               "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B-FP8"}


@pytest.mark.parametrize(("conc", "lo", "hi"), [(8, 0.85, 1.15), (16, 0.65, 1.0)])
def test_llama_rc3_rows_wait_about_one_generation_per_wave(conc, lo, hi):
    """Every Llama-3.1-8B (TP, ISL) pair at C = 8 (4 TPs x 3 ISLs) waits W = 0.90-1.11 whole
    generations per wave of 8 (TP1 ISL 1024: (550 - 191) ms x 8 / (384 x 7.42 ms) = 1.01), at
    C = 16 W = 0.71-0.89: as if one of the C slots were taken, not an engine rule the sources
    name (docs/aic_recipes.md, round 13)."""
    ws = {k: v for k, v in _waits_per_wave().items()
          if k[0] == "meta-llama/Llama-3.1-8B-Instruct" and k[3] == conc}
    assert len(ws) == 12
    assert all(lo <= v <= hi for v in ws.values()), ws


@pytest.mark.parametrize("model", ["Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B-FP8"])
def test_the_qwen3_rc3_rows_of_the_same_harness_show_no_such_wait(model):
    """The same harness, engine version and GPU, at C = 8 and 16: |W| < 0.3 in every pair (TTFT
    flat in the output length), so the Llama wait is not a rule of the harness or version."""
    ws = {k: v for k, v in _waits_per_wave().items() if k[0] == model and k[3] in (8, 16)}
    assert len(ws) >= 10
    assert all(abs(v) < 0.3 for v in ws.values()), ws


def _mean_is_over(value_ms: str, count: int) -> bool:
    """Whether a mean of `count` integer-nanosecond times can be this value: the exact value
    of the stored double times count is a whole number of nanoseconds to within what rounding
    the mean to a double can move it (count x 1e6 x one ulp; about 1e-5 ns here, so a value
    passes by chance about once in 1e5)."""
    exact = Fraction(float(value_ms)) * count * NS_PER_MS
    return abs(exact - round(exact)) <= count * NS_PER_MS * math.ulp(float(value_ms))


def test_rc3_means_pool_twenty_requests_per_slot_not_ten():
    """genai_perf_runner.py sends --request-count C x 10, but a mean over 10 C integer-ns
    requests is a multiple of 1 / (10 C) ns, and only 93 of the 198 rc3 rows at C <= 16 are;
    184 are multiples of 1 / (20 C) ns, as means over 20 C requests are (whether a sum is even
    decides which of them are also 10 C multiples: about half). The vLLM 0.12.0 H100 rows of the
    same family are 10 C means (80 of 93), so the test tells the two apart. Read, not adopted
    (docs/aic_recipes.md, round 13)."""
    low = [r for r in _rc3_rows() if int(r["batch_size"]) <= 16]
    over = {n: sum(_mean_is_over(r["silicon_ttft_ms"], n * int(r["batch_size"])) for r in low)
            for n in (10, 20)}
    assert len(low) == 198          # C = 4 (Qwen3-235B), 8 and 16
    assert over[20] >= 0.9 * len(low)
    assert over[10] <= 0.6 * len(low)
    with open(DEFAULT_SERVING, newline="") as f:
        vllm = [r for r in csv.DictReader(f) if r["backend"] == "vllm"
                and r["backend_version"] == "0.12.0" and r["system"] == "h100_sxm"
                and r["mode"] == "agg"]
    assert len(vllm) == 93
    assert sum(_mean_is_over(r["silicon_ttft_ms"], 10 * int(r["batch_size"]))
               for r in vllm) >= 0.8 * len(vllm)


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
