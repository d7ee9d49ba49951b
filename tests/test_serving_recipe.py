"""The benchmark recipe of each source family (analysis/validation/serving_recipe.py) and the
simulator behaviours it relies on: a synchronized closed loop against a desynchronized one,
and the token budget a deployment sets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_recipe import (AIC_MARGIN_TOKENS, AIC_MAX_BATCH_SIZE,
                                                          INFERENCEMAX_RANGE_RATIO, Recipe,
                                                          copied_from_inferencemax, family,
                                                          recipe_for)
from perfmodel.core.catalog import load_model
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING
from perfmodel.analysis.validation.serving_table import read_serving, rows_from_dicts
from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import load_gpu

AIC = "aic gap analysis measured 2026-03-20"
IMAX = "db-dump/2026-04-27 measured 2026-04-17 image vllm/vllm-openai:v0.19.0-cu130"
# the file's row 2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c64_tp4_ep4_1392
COPIED = "aic gap analysis measured 2026-04-03 image image=vllm/vllm-openai:v0.19.0-cu130"
# the file's 441 Llama-3.1-70B rows (serving_provenance.py: InferenceMAX's 70B sweep)
LLAMA70B = "aic gap analysis measured 2025-10-29"


def _row(**over) -> dict:
    base = dict(id="t", backend="vllm", backend_version="0.12.0",
                model_path="meta-llama/Llama-3.1-8B", system="h100_sxm", precision="", mode="agg",
                isl="1024", osl="128", gemm_quant_mode="", moe_quant_mode="", batch_size="8",
                tp_size="1", pp_size="1", attention_dp_size="1", moe_tp_size="1",
                moe_ep_size="1", silicon_ttft_ms="100", silicon_tpot_ms="10", source=AIC)
    base.update({k: str(v) for k, v in over.items()})
    return base


def _map(**over):
    return map_serving_row(rows_from_dicts("t", [_row(**over)])[0])


# ------------------------------------------------------------------ families and flags

@pytest.mark.parametrize("source, want", [
    (AIC, "aic"), ("aic gap analysis", "aic"), (IMAX, "inferencemax"), (COPIED, "inferencemax"),
    ("aic gap analysis measured 2026-03-20 image lmsysorg/sglang:v0.5.1", "aic"),
    ("db-dump/2026-04-27 measured 2025-11-02", "inferencemax"), ("", "other"),
    (LLAMA70B, "inferencemax"), ("aic gap analysis measured 2025-10-30", "aic"),
    ("aic gap analysis 2025-10-29", "aic"), ("db-dump/x measured 2025-10-29", "inferencemax"),
    ("aiconfigurator sweep", "other"), ("my own runs", "other")])
def test_the_source_column_names_the_family(source, want):
    assert family(source) == want


def test_a_copied_row_gets_the_inferencemax_recipe_and_says_why():
    r = recipe_for(COPIED, "vllm", 8192, concurrency=16, gpu="h200-sxm", output=1024)
    assert r.family == "inferencemax" and r.range_ratio == INFERENCEMAX_RANGE_RATIO
    assert r.max_num_batched_tokens is None     # not AIConfigurator's generator budget
    assert r.notes[0].startswith("provenance: an InferenceMAX measurement copied")
    assert r.key() == recipe_for(IMAX, "vllm", 8192, concurrency=16, gpu="h200-sxm",
                                 output=1024).key()
    # its per-GPU flags too: the Blackwell SGLang recv interval
    sg = COPIED.replace("vllm/vllm-openai:v0.19.0-cu130", "lmsysorg/sglang:v0.5.9-cu130")
    assert recipe_for(sg, "sglang", 1024, concurrency=64, gpu="b200").recv_interval_steps == 30
    assert not any(n.startswith("provenance") for n in recipe_for(IMAX, "vllm", 1024).notes)


def _duplicate_groups() -> list[list]:
    """Rows of the shipped file whose measured TTFT and TPOT agree to 1e-6 ms."""
    groups: dict[tuple, list] = {}
    for r in read_serving(DEFAULT_SERVING):
        key = (round(float(r.get("silicon_ttft_ms")), 6), round(float(r.get("silicon_tpot_ms")), 6))
        groups.setdefault(key, []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def _date_image(source: str) -> tuple[str, str]:
    words = source.replace("image=", "").split()
    return words[words.index("measured") + 1], words[words.index("image") + 1]


def test_the_shipped_files_aic_image_rows_are_inferencemax_copies():
    """The evidence of serving_provenance's first rule, counted on the shipped file: 254
    groups (540 rows) share their measured TTFT and TPOT; every "aic" row in them names a
    container image=; every such row beside a db-dump row agrees with it on date and image."""
    dups = _duplicate_groups()
    assert len(dups) >= 250 and sum(len(g) for g in dups) >= 500
    pairs = 0
    for g in dups:
        aic = [r for r in g if r.get("source").startswith("aic")]
        assert all(copied_from_inferencemax(r.get("source")) for r in aic)
        assert len({(r.get("model_path"), r.get("system"), r.get("isl"), r.get("osl"),
                     r.get("batch_size")) for r in g}) == 1      # the same point each time
        for d in (r for r in g if r.get("source").startswith("db-dump/")):
            for a in aic:
                assert _date_image(a.get("source")) == _date_image(d.get("source"))
                pairs += 1
    assert pairs >= 120


# InferenceMAX's 70B sweep (SemiAnalysisAI/InferenceX .github/workflows/70b-tmpl.yml, 1k1k/1k8k/
# 8k1k blocks of full-sweep-tmpl.yml): tp-list [1, 2, 4, 8] ([2, 4, 8] on H100); the TensorRT-LLM
# jobs' conc-list [4, 8, 16, 32, 64, 128], the vLLM jobs' InferenceMAX default 4..64 (the early
# InferenceMAX README, copy in jyothisambolu/InferenceMAX: "CONC | 4, 8, 16, 32, 64"); FP4 on
# B200 only; TensorRT-LLM on B200 and H200 only.
_IMAX_70B_JOBS = {("trtllm", "b200_sxm", "fp4"), ("trtllm", "b200_sxm", "fp8"),
                  ("trtllm", "h200_sxm", "fp8"), ("vllm", "b200_sxm", "fp4"),
                  ("vllm", "b200_sxm", "fp8"), ("vllm", "h200_sxm", "fp8"), ("vllm", "h100_sxm", "fp8")}


def _imax_70b_grid() -> set[tuple]:
    out = set()
    for engine, system, prec in _IMAX_70B_JOBS:
        tps = (2, 4, 8) if system == "h100_sxm" else (1, 2, 4, 8)
        concs = (4, 8, 16, 32, 64, 128) if engine == "trtllm" else (4, 8, 16, 32, 64)
        for isl, osl in ((1024, 1024), (1024, 8192), (8192, 1024)):
            out |= {(engine, system, prec, isl, osl, tp, c) for tp in tps for c in concs}
    return out


def test_the_shipped_files_llama70b_import_is_inferencemaxs_70b_sweep():
    """The evidence of serving_provenance's second rule, counted on the shipped file: the
    image-less "aic" rows measured 2025-10-29 are exactly InferenceMAX's 70B sweep grid, name no
    engine version (as no other aggregated "aic" row does), and the image-less InferenceMAX
    rows of AIConfigurator's same import repeat this file's db-dump rows."""
    rows = read_serving(DEFAULT_SERVING)
    imp = [r for r in rows if r.get("source") == LLAMA70B]
    assert len(imp) == 441 == len(_imax_70b_grid())
    assert all(copied_from_inferencemax(r.get("source")) for r in imp)
    assert {r.get("model_path") for r in imp} == {"meta-llama/Llama-3.1-70B"}
    got = {(r.get("backend"), r.get("system"), r.get("precision"), int(r.get("isl")),
            int(r.get("osl")), int(r.get("tp_size")), int(r.get("batch_size"))) for r in imp}
    assert got == _imax_70b_grid()                      # every point, once, and nothing else
    # AIConfigurator's own aggregated runs name the engine version; these rows do not
    own = [r for r in rows if family(r.get("source")) == "aic" and r.get("mode") == "agg"]
    assert len(own) >= 900 and all(r.get("backend_version") for r in own)
    assert not any(r.get("backend_version") for r in imp)
    # AIConfigurator's silicon_sample.csv (ai-dynamo/aiconfigurator, aic-core/src/
    # aiconfigurator_core/systems/, silicon_data_source "source_file=2026-04-06.csv; ...; wip=
    # False", the Llama rows' import) rows 2026_04_06_deepseek_r1_{h200_sxm_trtllm_fp8..._285,
    # b200_sxm_trtllm_fp4..._284, b200_sxm_sglang_fp4..._273}: TTFT, TPOT (ms), measured date
    same_import = [(616.3300446991343, 26.12158301838722, "2025-11-02"),
                   (228.0174952262314, 13.958856669512974, "2025-11-02"),
                   (592.7029677317478, 12.304602315039775, "2025-11-10")]
    for ttft, tpot, date in same_import:
        twin = [r for r in rows if float(r.get("silicon_ttft_ms")) == ttft
                and float(r.get("silicon_tpot_ms")) == tpot]
        assert len(twin) == 1 and twin[0].get("source") == f"db-dump/2026-04-27 measured {date}"
    # InferenceMAX rows of that time name no image: the db-dump rows measured in 2025-11
    nov = [r for r in rows if r.get("source").startswith("db-dump/2026-04-27 measured 2025-11")]
    assert len(nov) >= 80 and not any("image" in r.get("source") for r in nov)


def test_the_llama70b_import_gets_inferencemaxs_70b_recipe_by_hand():
    # benchmarks/70b_fp8_h200_trt_slurm.sh: --max_num_tokens $MAX_MODEL_LEN, 2048 at 1k/1k
    # (full-sweep-tmpl.yml), no enable_chunked_prefill, cuda_graph_config max_batch_size 1024
    r = recipe_for(LLAMA70B, "trtllm", 1024, concurrency=4, gpu="h200-sxm", output=1024)
    assert r.family == "inferencemax" and r.range_ratio == 0.8
    assert (r.max_num_batched_tokens, r.chunked_prefill, r.decode_graph_max_batch) == (2048, False, 1024)
    assert recipe_for(LLAMA70B, "trtllm", 8192, gpu="b200", output=1024).max_num_batched_tokens == 9216
    assert "Llama-70B sweep" in r.notes[0]
    # vLLM: the script's --max-num-batched-tokens 8192 is the preset's own default: not set
    v = recipe_for(LLAMA70B, "vllm", 1024, concurrency=4, gpu="b200", output=1024)
    assert v.family == "inferencemax" and v.max_num_batched_tokens is None
    # other InferenceMAX TensorRT-LLM rows keep their scripts' flags (dsr1 B200: graphs 512)
    d = recipe_for(IMAX, "trtllm", 1024, gpu="b200", output=1024)
    assert d.max_num_batched_tokens is None and d.decode_graph_max_batch == 512
    assert recipe_for(AIC, "trtllm", 1024).family == "aic"


def test_aic_vllm_budget_is_the_generators_rule_by_hand():
    # rule_plugin/vllm.rule: agg max_num_tokens = max_batch_size + isl + 1500; 512 + 1024 + 1500
    r = recipe_for(AIC, "vllm", 1024)
    assert r.max_num_batched_tokens == 3036 and r.range_ratio == 1.0


def test_aic_trtllm_budget_rounds_up_to_the_block_by_hand():
    # rule_plugin/trtllm.rule: ceil((512 + 1000 + 1500) / 32) * 32 = ceil(94.125) * 32 = 3040
    assert recipe_for(AIC, "trtllm", 1000).max_num_batched_tokens == 3040


def test_sglang_and_inferencemax_rows_keep_the_engine_defaults():
    assert recipe_for(AIC, "sglang", 1024).max_num_batched_tokens is None
    assert recipe_for(IMAX, "sglang", 1024).max_prefill_tokens is None
    r = recipe_for(IMAX, "vllm", 1024)
    assert r.max_num_batched_tokens is None and r.range_ratio == INFERENCEMAX_RANGE_RATIO == 0.8


def test_a_mapped_row_carries_its_recipe_and_says_so():
    t = _map(source=AIC, isl=2048)
    assert t.recipe.max_num_batched_tokens == AIC_MAX_BATCH_SIZE + 2048 + AIC_MARGIN_TOKENS
    assert any("--max-num-batched-tokens" in a for a in t.assumptions)
    u = _map(source=IMAX)
    assert u.recipe.range_ratio == 0.8 and any("range-ratio 0.8" in a for a in u.assumptions)
    # the recipe is part of the configuration: rows of two families are predicted apart
    assert t.config() != _map(source=IMAX, isl=2048).config()


@given(source=st.one_of(st.text(max_size=40), st.just("aic gap analysis")),
       engine=st.sampled_from(sorted(ENGINES)), prompt=st.integers(1, 1 << 20),
       version=st.one_of(st.none(), st.text(max_size=12), st.just("0.5.6.post2")),
       disagg=st.booleans())
def test_any_source_engine_and_prompt_give_a_valid_recipe(source, engine, prompt, version, disagg):
    r = recipe_for(source, engine, prompt, version=version, disagg=disagg)
    assert isinstance(r, Recipe) and 0 < r.range_ratio <= 1 and r.notes
    assert r.max_num_batched_tokens is None or r.max_num_batched_tokens > prompt
    assert r.max_prefill_tokens is None or r.max_prefill_tokens > prompt
    assert r.mixed_prefill is None or (engine == "sglang" and not disagg)


# ------------------------------------------------------------------ AIConfigurator's SGLang

def test_aic_sglang_mixes_chunks_where_the_versions_template_emits_the_flag():
    # backend_templates/sglang/cli_args.0.5.6.post2.j2 emits --enable-mixed-chunk and
    # --max-prefill-tokens; sglang.rule: max_prefill_tokens = isl + 1500 = 2000 + 1500 = 3500
    r = recipe_for("aic gap analysis", "sglang", 2000, version="0.5.6.post2")
    assert r.mixed_prefill is True and r.max_prefill_tokens == 3500
    assert any("--enable-mixed-chunk --max-prefill-tokens 3500" in n for n in r.notes)
    assert recipe_for("aic gap analysis", "sglang", 2000, version="v0.5.6.post2").mixed_prefill
    # cli_args.0.5.1.post1.j2 and cli_args.j2 test the key 'enable-mix-chunk' nobody sets
    # (every template emits --max-prefill-tokens)
    for version in ("0.5.1.post1", "0.5.9", "nightly-dev", None):
        r = recipe_for("aic gap analysis", "sglang", 2000, version=version)
        assert r.mixed_prefill is None and r.max_prefill_tokens == 3500
    # the rule is for an aggregated worker; other engines and families are untouched
    r = recipe_for("aic gap analysis", "sglang", 2000, version="0.5.6.post2", disagg=True)
    assert r.mixed_prefill is None and r.max_prefill_tokens is None
    assert recipe_for("aic gap analysis", "vllm", 2000, version="0.5.6.post2").mixed_prefill is None
    assert recipe_for(IMAX, "sglang", 2000, version="0.5.6.post2").mixed_prefill is None


@pytest.mark.parametrize("isl, budget", [(2000, 3500), (8000, 8192)])
def test_the_sim_predictor_caps_sglangs_prefill_tokens_at_the_chunk_size(isl, budget):
    # SGLang PrefillAdder: a mixed step holds the decodes plus prompt chunks within
    # min(--max-prefill-tokens, chunked_prefill_size); H200 (141 GB < 160 GiB) chunks at 8192:
    # isl 2000 -> min(3500, 8192) = 3500; isl 8000 -> min(9500, 8192) = 8192
    t = _map(source="aic gap analysis", backend="sglang", backend_version="0.5.6.post2",
             system="h200_sxm", isl=isl, batch_size=80)
    q = api.make_query(model="llama-3.1-8b", gpu="h200-sxm", engine="sglang",
                       prompt_tokens=isl, output_tokens=128)
    sc = sp._with_recipe(api.resolve(q)[0], t.recipe)
    assert sc.engine.scheduler.mixed_prefill is True
    assert sc.engine.scheduler.limits(sc.hw, sc.dep.pp)[1] == budget
    plain = sp._with_recipe(api.resolve(q)[0], _map(
        source="aic gap analysis", backend="sglang", backend_version="0.5.1.post1",
        system="h200_sxm", isl=isl).recipe)
    assert plain.engine.scheduler.mixed_prefill is False
    assert plain.engine.scheduler.limits(plain.hw, plain.dep.pp)[1] == budget


def _queue_bound_s(t) -> float:
    """C prompts' prefill at the GPUs' datasheet dense peak: 2 N flop a token."""
    n = load_model(t.model).published_params
    peak = load_gpu(t.gpu).peak_flops_per_s[t.activations]
    return t.concurrency * t.prompt * 2 * n / (t.tp * t.pp * t.attention_dp * peak)


def test_the_shipped_files_sglang_rows_show_which_versions_mixed_their_chunks():
    """The evidence of serving_recipe's SGLang rule, counted on the shipped file: a wave of C
    prompts queued for separate prefill batches cannot average a TTFT below half of their
    prefill at the datasheet peak. No dense 0.5.1.post1 row (no mixed-chunk flag) does; 19 of
    the 46 dense 0.5.6.post2 rows (--enable-mixed-chunk) do."""
    below, total = {}, {}
    for r in read_serving(DEFAULT_SERVING):
        if (r.get("backend"), r.get("mode")) != ("sglang", "agg") or family(r.get("source")) != "aic":
            continue
        t = map_serving_row(r)
        if t.moe:
            continue
        v = r.get("backend_version")
        total[v] = total.get(v, 0) + 1
        below[v] = below.get(v, 0) + (float(r.get("silicon_ttft_ms")) / 1e3 < 0.5 * _queue_bound_s(t))
    assert total["0.5.1.post1"] >= 70 and below["0.5.1.post1"] == 0
    assert total["0.5.6.post2"] >= 40 and below["0.5.6.post2"] >= 15


# ------------------------------------------------------------------ the engines' defaults

@pytest.mark.parametrize("gpu, want", [("h100-sxm", 8192), ("h200-sxm", 8192), ("b200", 16384),
                                       ("b300", 16384)])
def test_sglang_chunked_prefill_size_follows_device_memory(gpu, want):
    # sglang server_args.py: below 160 GiB ("H100, H200, A100, H20") 8192; else ("B200, MI300") 16384
    assert ENGINES["sglang"].scheduler.limits(load_gpu(gpu))[1] == want


# ------------------------------------------------------------------ what the simulator does

def _serve(**kw):
    base = dict(prompt_tokens=1024, output_tokens=1024, engine="vllm", weights="fp8", kv="fp8")
    return api.serve("llama-3.1-8b", "h100-sxm", **{**base, **kw})


def test_a_desynchronized_closed_loop_waits_about_one_prefill_a_synchronized_one_a_wave():
    """C=16 prompts of 1024 tokens, 1024 out (L_out >> C), budget 8192 tokens per step.
    Fixed lengths keep the waves synchronized: 16 x 1024 = 16384 prompt tokens arrive together
    every wave, two full 8192-token steps, so the mean TTFT is at least ~1.5 such steps (12
    lone prefills' compute; a lone request's TTFT also holds the fixed request overhead, so
    more than 5 of those). Lengths uniform in [0.8 L, L] (InferenceMAX) spread the arrivals: each
    prompt then shares one step with the running decodes, so the mean TTFT stays within a
    few lone prefills (the step it joins plus the one it waits for)."""
    alone = _serve(concurrencies=[1]).points[0].ttft_mean_s
    fixed = _serve(concurrencies=[16]).points[0].ttft_mean_s
    spread = _serve(concurrencies=[16], range_ratio=0.8).points[0].ttft_mean_s
    assert fixed > 5 * alone
    assert spread < 3 * alone


def test_a_smaller_token_budget_serves_a_synchronized_wave_sooner_on_average():
    """8 prompts of 1024 arrive together. With 8192 tokens per step all finish in one step
    (every TTFT = T); with 3036 (the AIConfigurator generator's budget) about two fit per step,
    so the mean completion is about (1 + 2 + 3 + 4) / 4 x T / 4 = 0.63 T: compute-bound
    prefill does the same work, but earlier requests are not held for the last."""
    big = _serve(concurrencies=[8], max_num_batched_tokens=8192).points[0].ttft_mean_s
    small = _serve(concurrencies=[8], max_num_batched_tokens=3036).points[0].ttft_mean_s
    assert small < 0.85 * big


def test_the_sim_predictor_replays_the_recipe_as_api_serve_would():
    # a version with the preset's async scheduling (0.12.0 rows run synchronously, which
    # api.serve's vllm preset does not: serving_recipe_vllm.py)
    t = _map(source=AIC, batch_size=8, backend_version="0.19.0")
    got = sp.simulated(t, [8], None, sp._Specs())[8]
    rep = api.serve("llama-3.1-8b", "h100-sxm", weights="bf16", kv="bf16", activations="bf16",
                    engine="vllm", prompt_tokens=1024, output_tokens=128, concurrencies=[8],
                    max_num_batched_tokens=t.recipe.max_num_batched_tokens)
    assert got.ttft_s == pytest.approx(rep.points[0].ttft_mean_s)
    assert got.tpot_s == pytest.approx(rep.points[0].tpot_mean_s)
    u = _map(source=IMAX, batch_size=8, backend_version="0.19.0")   # its image's version
    got = sp.simulated(u, [8], None, sp._Specs())[8]
    rep = api.serve("llama-3.1-8b", "h100-sxm", weights="bf16", kv="bf16", activations="bf16",
                    engine="vllm", prompt_tokens=1024, output_tokens=128, concurrencies=[8],
                    range_ratio=0.8)
    assert got.ttft_s == pytest.approx(rep.points[0].ttft_mean_s)
    assert math.isfinite(got.tpot_s) and np.isfinite(got.ttft_s)


def test_recipes_set_the_captured_decode_batch_their_scripts_give():
    # AIConfigurator trtllm.rule: cuda_graph_batch_sizes up to 512; InferenceX: B200 TRT-LLM
    # cuda_graph_config max_batch_size 512, H200 128; H200 SGLang --cuda-graph-max-bs 512 at
    # 1k/1k, 256 otherwise
    db = "db-dump/2026-04-27 measured 2025-11-02"
    assert recipe_for("aic gap analysis", "trtllm", 1024).decode_graph_max_batch == 512
    assert recipe_for("aic gap analysis", "vllm", 1024).decode_graph_max_batch is None
    assert recipe_for(db, "trtllm", 1024, gpu="b200", output=1024).decode_graph_max_batch == 512
    assert recipe_for(db, "trtllm", 1024, gpu="h200-sxm", output=1024).decode_graph_max_batch == 128
    assert recipe_for(db, "sglang", 1024, gpu="h200-sxm", output=1024).decode_graph_max_batch == 512
    assert recipe_for(db, "sglang", 8192, gpu="h200-sxm", output=1024).decode_graph_max_batch == 256
    assert recipe_for(db, "sglang", 1024, gpu="b200", output=1024).decode_graph_max_batch is None
    r = recipe_for(db, "trtllm", 1024, gpu="b200", output=1024)
    assert any("CUDA graphs for decode batches up to 512" in n for n in r.notes)
