"""VLLM_FLOAT32_MATMUL_PRECISION=high in the InferenceX MiniMax-M2.5 scripts: the fp32 router
GEMM runs as TF32 (EngineProfile.fp32_matmul; serving_recipe_vllm.INFERENCEX_VLLM_TF32_SCRIPTS,
from the PRs that added the variable: #1069 B200 NVFP4 2026-04-17, #1106 B300 FP8 and #1107
B300 NVFP4 2026-04-21)."""
import dataclasses

import pytest

from perfmodel import api
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_recipe_model import Recipe
from perfmodel.core import predict
from perfmodel.core.efficiency import burst


def _src(date):
    return f"db-dump/2026-04-27 measured {date} image vllm/vllm-openai:v0.19.0-cu130"


@pytest.mark.parametrize("gpu, weights, date, expected", [
    ("b300", "fp8", "2026-04-21", "tf32"),   # PR #1106's own sweep
    ("b300", "fp8", "2026-04-17", None),     # before it: VLLM_FLASHINFER_ALLREDUCE_BACKEND only
    ("b300", "fp4", "2026-04-21", "tf32"),   # PR #1107
    ("b300", "fp4", "2026-04-17", None),
    ("b200", "fp4", "2026-04-22", "tf32"),   # PR #1069 (2026-04-17)
    ("b200", "fp4", "2026-04-08", None),
    ("b200", "fp8", "2026-04-22", None),     # no dated source for the FP8 B200 script
])
def test_the_scripts_that_set_the_variable_from_their_pr(gpu, weights, date, expected):
    r = recipe_for(_src(date), "vllm", 1024, gpu=gpu, model="minimax-m2.5", weights=weights,
                   version="0.19.0", concurrency=4, output=1024, tp=4)
    assert r.fp32_matmul == expected
    assert any("VLLM_FLOAT32_MATMUL_PRECISION" in n for n in r.notes) == (expected is not None)


def test_only_aggregated_vllm_rows_of_those_scripts():
    src = _src("2026-04-21")
    assert recipe_for(src, "sglang", 1024, gpu="b300", model="minimax-m2.5",
                      weights="fp8").fp32_matmul is None
    assert recipe_for(src, "vllm", 1024, gpu="b300", model="minimax-m2.5", weights="fp8",
                      disagg=True).fp32_matmul is None
    assert recipe_for(src, "vllm", 1024, gpu="b300", model="kimi-k2.5",
                      weights="fp4").fp32_matmul is None
    # a copy without a measurement date is not dated after the PR
    assert recipe_for("aic gap analysis", "vllm", 1024, gpu="b300", model="minimax-m2.5",
                      weights="fp8").fp32_matmul is None


def _router_gemm_s(fp32_matmul, T=8192):
    sc, _, _ = api.resolve(api.make_query(model="minimax-m2.5", gpu="b300", weights="fp8",
                                          kv="fp8", engine="vllm", tp=4))
    sc = dataclasses.replace(sc, eff=burst(sc.eff),
                             engine=sc.engine.model_copy(update={"fp32_matmul": fp32_matmul}))
    est = predict.step(sc, 1, T, 0, prefill=True)
    return {o.name: float(o.time_s) / sc.model.num_layers for o in est.ops
            if o.name in ("router", "router_upcast")}


def test_tf32_router_gemm_by_hand():
    # MiniMax-M2.5's router, M x 3072 @ 3072 x 256 in fp32 on every rank (ReplicatedLinear):
    # 2 x 8192 x 3072 x 256 = 12.88 GFLOP a layer. B300 dense peaks (hardware_db/b300.yaml):
    # fp32 75 TF/s, TF32 1125 TF/s, at the vendor GEMM efficiency 0.75 x 8192 / (8192 + 16):
    # fp32 12.88e9 / (75e12 x 0.7485) = 229 us; TF32 15.3 us of compute, so the op becomes
    # bound by reading its 8192 x 3072 fp32 input (100.7 MB at 8 TB/s: ~13-16 us)
    flops = 2 * 8192 * 3072 * 256
    e = 0.75 * 8192 / (8192 + 16)
    fp32, tf32 = _router_gemm_s("fp32"), _router_gemm_s("tf32")
    assert fp32["router"] == pytest.approx(flops / (75e12 * e), rel=0.10)
    assert flops / (1125e12 * e) * 0.8 <= tf32["router"] <= 30e-6
    assert tf32["router_upcast"] == pytest.approx(fp32["router_upcast"])   # the cast stays


def test_the_default_engine_keeps_fp32():
    sc, _, _ = api.resolve(api.make_query(model="minimax-m2.5", gpu="b300", weights="fp8",
                                          kv="fp8", engine="vllm", tp=4))
    assert sc.engine.fp32_matmul == "fp32"


def test_the_predictor_hands_the_recipe_to_the_engine():
    from perfmodel.analysis.validation.serving_predict import _with_recipe
    sc, _, _ = api.resolve(api.make_query(model="minimax-m2.5", gpu="b300", weights="fp8",
                                          kv="fp8", engine="vllm", tp=4))
    assert _with_recipe(sc, Recipe(fp32_matmul="tf32")).engine.fp32_matmul == "tf32"
    assert _with_recipe(sc, Recipe()).engine.fp32_matmul == "fp32"
