"""Rounded copies of InferenceMAX rows in AIConfigurator's file (serving_provenance.py,
inferencemax_twins) get the InferenceMAX recipe."""

from __future__ import annotations

import collections

from perfmodel.analysis.validation.serving_map import Capabilities, map_serving_rows
from perfmodel.analysis.validation.serving_recipe import inferencemax_twins, recipe_for
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING
from perfmodel.analysis.validation.serving_table import read_serving, rows_from_dicts

# One pair of the shipped file: the image-less copy (printed to 0.01 ms) and the InferenceMAX
# measurement (Qwen3.5-397B fp8, 4 x B200, SGLang 0.5.9, 1k/1k, C=4)
ORIGINAL = dict(id="orig", backend="sglang", backend_version="0.5.9",
                model_path="Qwen/Qwen3.5-397B-A17B", system="b200_sxm", precision="fp8",
                mode="agg", isl="1024", osl="1024", batch_size="4", tp_size="4", pp_size="1",
                attention_dp_size="1", moe_tp_size="4", moe_ep_size="1",
                silicon_ttft_ms="338.3364140507183", silicon_tpot_ms="6.332719125474412",
                source="aic gap analysis measured 2026-03-20 image "
                       "image=lmsysorg/sglang:v0.5.9-cu130")
COPY = dict(ORIGINAL, id="copy", silicon_ttft_ms="338.34", silicon_tpot_ms="6.33",
            source="aic gap analysis")


def test_the_rounded_copy_is_found_and_mapped_with_the_inferencemax_recipe():
    rows = rows_from_dicts("t", [ORIGINAL, COPY])
    assert inferencemax_twins(rows) == {1}
    (orig, copy), unmapped = map_serving_rows(rows)
    assert not unmapped
    assert copy.recipe.family == orig.recipe.family == "inferencemax"
    assert copy.recipe.key() == orig.recipe.key()        # range ratio 0.8, recv interval 10
    assert any("repeat an InferenceMAX row's to 0.01 ms" in a for a in copy.assumptions)


def test_another_value_or_configuration_is_not_a_copy():
    for over in (dict(silicon_ttft_ms="338.35"), dict(silicon_tpot_ms="6.34"),
                 dict(batch_size="8"), dict(system="h200_sxm"), dict(isl="8192")):
        assert inferencemax_twins(rows_from_dicts("t", [ORIGINAL, dict(COPY, **over)])) == set()
    # a copy needs an InferenceMAX original: two AIConfigurator rows are not twins
    aic = dict(ORIGINAL, source="aic gap analysis measured 2026-03-20")
    assert inferencemax_twins(rows_from_dicts("t", [aic, COPY])) == set()


def test_the_twin_flag_changes_only_aic_rows():
    imax = "db-dump/2026-04-27 measured 2026-04-17 image lmsysorg/sglang:v0.5.10.post1-cu130"
    assert (recipe_for(imax, "sglang", 1024, concurrency=4, gpu="b200", inferencemax_twin=True)
            == recipe_for(imax, "sglang", 1024, concurrency=4, gpu="b200"))
    assert recipe_for("other", "vllm", 1024, inferencemax_twin=True).family == "other"


def test_the_shipped_files_image_less_copies():
    rows = read_serving(DEFAULT_SERVING)
    twins = inferencemax_twins(rows)
    by_model = collections.Counter(rows[i].get("model_path") for i in twins)
    # every image-less Qwen3.5 row of the file, and 47 of its Kimi-K2.5 rows (15 of them
    # copies of attention-DP rows written without attention DP: the next test)
    assert by_model == {"Qwen/Qwen3.5-397B-A17B": 76, "moonshotai/Kimi-K2.5": 47}
    qwen = [r for r in rows if r.get("model_path") == "Qwen/Qwen3.5-397B-A17B"
            and r.get("source").strip() == "aic gap analysis"]
    assert len(qwen) == 76


# One pair of the shipped file (Kimi-K2.5 NVFP4, 4 x B200, vLLM 0.17.0, 1k/1k, C = 16): the
# InferenceMAX row writes the run as tp 4 x attention_dp 4 with moe_ep 16 at batch_size 4 per
# DP rank; the image-less copy writes the same measurement as tp 4, ep 4 at batch_size 16.
DP_ORIGINAL = dict(id="orig", backend="vllm", backend_version="0.17.0",
                   model_path="moonshotai/Kimi-K2.5", system="b200_sxm", precision="fp4",
                   gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", mode="agg", isl="1024", osl="1024", batch_size="4", tp_size="4", pp_size="1",
                   attention_dp_size="4", moe_tp_size="1", moe_ep_size="16",
                   silicon_ttft_ms="207.72963483977946", silicon_tpot_ms="14.22011185788785",
                   source="db-dump/2026-04-27 measured 2026-03-27 image vllm/vllm-openai:v0.17.0")
DP_COPY = dict(DP_ORIGINAL, id="copy", batch_size="16", attention_dp_size="1", moe_ep_size="4",
               silicon_ttft_ms="207.73", silicon_tpot_ms="14.22", source="aic gap analysis")


def test_a_copy_without_attention_dp_meets_its_original_at_batch_times_dp():
    rows = rows_from_dicts("t", [DP_ORIGINAL, DP_COPY])
    assert inferencemax_twins(rows) == {1}
    # batch 16 against 4 per rank x 4 ranks; batch 4 (a quarter of the load) is not the run
    assert inferencemax_twins(rows_from_dicts("t", [DP_ORIGINAL, dict(DP_COPY, batch_size="4")])) \
        == set()
    (orig, copy), unmapped = map_serving_rows(rows, Capabilities(attention_dp=True))
    assert not unmapped
    assert copy.recipe.family == orig.recipe.family == "inferencemax"
    assert copy.concurrency == orig.concurrency == 16
