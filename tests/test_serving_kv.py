"""The KV pool a serving row's engine ran (analysis/validation/serving_kv.py): SGLang's own KV
format for DeepSeek Sparse Attention models, the InferenceX GLM-5 H200 recipe's memory share,
and the admission they set at high concurrency (issue 13)."""

from __future__ import annotations

import csv

import pytest

from perfmodel.analysis.validation.serving_kv import (SGLANG_DSA_BF16_KV, SGLANG_DSA_FP8_KV,
                                                      engine_kv,
                                                      inferencemax_sglang_mem_fraction)
from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_run import DEFAULT_SERVING
from perfmodel.analysis.validation.serving_table import rows_from_dicts
from perfmodel.core.catalog import load_model
from perfmodel.core.hardware import load_gpu

# GLM-5 (catalog glm-5.yaml, from zai-org/GLM-5 config.json): 78 layers, MLA kv rank 512 +
# rope 64 (one latent every TP rank keeps whole), and the DSA index key of 128 fp8 values with
# one fp32 scale in any KV format (core/ops.py index_key_bytes).
GLM5_LAYERS, GLM5_LATENT, GLM5_INDEX_KEY_BYTES = 78, 512 + 64, 128 + 4
H200_BYTES = 151.397597184e9       # hardware_db/h200-sxm.yaml: 141 GiB


@pytest.mark.parametrize("gpu, kv", [("h100-sxm", "bf16"), ("h200-sxm", "bf16"),
                                     ("b200", "fp8"), ("b300", "fp8"), ("gb200", "fp8"),
                                     ("mi355x", "bf16")])
def test_sglang_picks_its_dsa_kv_format_by_compute_capability(gpu, kv):
    """server_args.py: kv_cache_dtype auto -> fp8_e4m3 if major >= 10 else bfloat16 for a DSA
    model. Blackwell (10.x) has fp4 tensor cores, Hopper (9.0) and AMD (9.x) do not."""
    for model in ("glm-5", "deepseek-v3.2"):
        got = engine_kv("sglang", load_model(model), load_gpu(gpu))
        assert got is not None and got[0] == kv
    assert {SGLANG_DSA_FP8_KV, SGLANG_DSA_BF16_KV} == {"fp8", "bf16"}


def test_no_rule_for_other_engines_or_dense_attention_models():
    """The rule is SGLang's and about DSA only: vLLM on GLM-5 and SGLang on DeepSeek-V3 (dense
    MLA) keep the mapping's assumption."""
    h200 = load_gpu("h200-sxm")
    assert engine_kv("vllm", load_model("glm-5"), h200) is None
    assert engine_kv("trtllm", load_model("glm-5"), h200) is None
    assert engine_kv("sglang", load_model("deepseek-v3"), h200) is None


def test_mem_fraction_only_for_the_glm5_h200_sglang_script():
    """glm5_fp8_h200.sh: --mem-fraction-static 0.85; nothing for other models, GPUs, engines."""
    assert inferencemax_sglang_mem_fraction("sglang", "glm-5", "h200-sxm")[0] == 0.85
    assert inferencemax_sglang_mem_fraction("sglang", "glm-5", "b200") is None
    assert inferencemax_sglang_mem_fraction("vllm", "glm-5", "h200-sxm") is None
    assert inferencemax_sglang_mem_fraction("sglang", "deepseek-v3", "h200-sxm") is None


def _glm5_rows(system: str) -> list:
    with open(DEFAULT_SERVING, newline="") as f:
        recs = [r for r in csv.DictReader(f) if "glm-5" in r["model_path"].lower()
                and r["system"] == system and r["mode"] == "agg" and r["backend"] == "sglang"]
    return rows_from_dicts("aic_silicon_sample", recs)


def test_shipped_glm5_rows_map_to_the_engines_kv_and_the_scripts_share():
    """The H200 rows (glm5-hopper image, InferenceMAX copies) get a bf16 pool at 0.85 of the
    device; the B200 rows keep fp8 and the preset's share."""
    h200, b200 = _glm5_rows("h200_sxm"), _glm5_rows("b200_sxm")
    assert h200 and b200
    for r in h200:
        t = map_serving_row(r)
        assert t.kv == "bf16" and t.recipe.kv_memory_fraction == 0.85
        assert any("DeepSeek Sparse Attention" in a for a in t.assumptions)
    for r in b200:
        t = map_serving_row(r)
        assert t.kv == "fp8" and t.recipe.kv_memory_fraction is None


def _glm5_h200(kv: str, fraction: float | None):
    """GLM-5 fp8 on 8 H200 under SGLang, a recipe's memory share applied as validation does."""
    from perfmodel import api   # noqa: PLC0415
    from perfmodel.analysis.validation import serving_predict as sp   # noqa: PLC0415
    from perfmodel.analysis.validation.serving_recipe import Recipe   # noqa: PLC0415
    q = api.make_query(model="glm-5", gpu="h200-sxm", weights="fp8-b128", kv=kv,
                       engine="sglang", tp=8, prompt_tokens=8192, output_tokens=1024)
    sc, warnings, assumptions = api.resolve(q)
    return q, sp._with_recipe(sc, Recipe(kv_memory_fraction=fraction)), warnings, assumptions


def _pool_tokens(kv: str, fraction: float | None) -> int:
    from perfmodel.serving.simulate import _Kv   # noqa: PLC0415
    return _Kv(_glm5_h200(kv, fraction)[1], 64, 9216).tokens


def test_glm5_h200_pool_by_hand():
    """A bf16 token is 78 x (576 x 2 + 132) = 100,152 bytes on each GPU, an fp8 one 78 x (576 +
    132) = 55,224, so the same bytes hold 55,224 / 100,152 as many bf16 tokens; the script's
    0.85 against the preset's 0.88 takes 0.03 x 141 GiB = 4.54 GB off the pool: 4.54e9 /
    100,152 = 45,351 tokens fewer (one token of rounding)."""
    bf16_token = GLM5_LAYERS * (GLM5_LATENT * 2 + GLM5_INDEX_KEY_BYTES)
    fp8_token = GLM5_LAYERS * (GLM5_LATENT + GLM5_INDEX_KEY_BYTES)
    assert (bf16_token, fp8_token) == (100_152, 55_224)
    fp8, bf16 = _pool_tokens("fp8", None), _pool_tokens("bf16", None)
    assert bf16 / fp8 == pytest.approx(fp8_token / bf16_token, abs=1 / bf16)
    drop = bf16 - _pool_tokens("bf16", 0.85)
    assert drop == pytest.approx(0.03 * H200_BYTES / bf16_token, abs=1)


def test_the_pool_admits_what_fits_beside_the_running_prompts():
    """A closed loop of 64 fixed 8192/1024 requests on that bf16 pool at 0.85: each running
    request holds at least its 8,192 prompt tokens, so at most floor(pool / 8,192) run at
    once (a pool of ~314k tokens: 38; 39 x 8,192 = 319,488) and the rest queue for a whole
    generation; with the fp8 pool at the preset's share (~651k tokens) all 64 run."""
    from perfmodel.serving.report import serve_report   # noqa: PLC0415
    for kv, frac in (("bf16", 0.85), ("fp8", None)):
        q, sc, warnings, assumptions = _glm5_h200(kv, frac)
        p = serve_report(q, sc, warnings, assumptions, concurrencies=[64]).points[0]
        assert p.max_running == min(64, p.kv_capacity_tokens // 8192), kv
    assert p.max_running == 64   # the fp8 pool: 64 x 9,216 tokens fit
