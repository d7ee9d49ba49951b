"""vLLM's prompt attention on datacenter Blackwell before its TRT-LLM-gen prefill kernels
(core/engines.py vllm_prefill_attention, core/efficiency.py BLACKWELL_FA2_ATTN_COMPUTE), the
version each serving row is taken to have ran (serving_recipe.py), and where it applies."""
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation import serving_predict as sp
from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_versions import AIC_INFERENCEMAX_VLLM_ASSUMED_VERSION
from perfmodel.analysis.validation.serving_table import rows_from_dicts
from perfmodel.core.efficiency import (BLACKWELL_DC_GPUS, BLACKWELL_FA2_ATTN_COMPUTE,
                                       default_efficiency)
from perfmodel.core.engines import VLLM_NATIVE_PREFILL_SINCE, load_engine, vllm_prefill_attention
from perfmodel.core.hardware import load_gpu
from perfmodel.core.predict import step
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost

LLAMA70B = "aic gap analysis measured 2025-10-29"   # the image-less InferenceMAX 70B import
IMAX = "db-dump/2026-04-27 measured 2026-04-17 image vllm/vllm-openai:v0.19.0-cu130"


# ------------------------------------------------------------------ the version rule

@pytest.mark.parametrize("version, want", [
    # vllm-project/vllm PR #25998 (after the v0.11.0 branch): TRT-LLM-gen prefill from 0.11.1
    ("0.10.2", "fa2"), ("v0.11.0", "fa2"), ("0.11.0rc1", "fa2"), ("0.9.2", "fa2"),
    ("0.11.1", "native"), ("0.12.0", "native"), ("v0.19.0", "native"), ("1.0.0", "native"),
    (None, None), ("", None), ("nightly-5b8c30d62b754b57", None), ("main", None)])
def test_the_vllm_version_decides_the_prefill_kernels(version, want):
    assert vllm_prefill_attention(version) == want
    assert VLLM_NATIVE_PREFILL_SINCE == (0, 11, 1)


@given(st.text(max_size=24))
def test_any_version_text_gives_a_kernel_or_none(text):
    assert vllm_prefill_attention(text) in (None, "fa2", "native")


def test_the_presets_keep_the_native_kernels():
    for engine in ("vllm", "sglang", "trtllm"):
        assert load_engine(engine).prefill_attention == "native"


# ------------------------------------------------------------------ the rows

def test_the_versionless_llama70b_vllm_rows_assume_0_11_0_and_say_so():
    r = recipe_for(LLAMA70B, "vllm", 1024, concurrency=4, gpu="b200", output=1024)
    assert AIC_INFERENCEMAX_VLLM_ASSUMED_VERSION == "0.11.0"
    assert r.prefill_attention == "fa2"
    assert any("assumed 0.11.0" in n and "#25998" in n for n in r.notes)
    # the row's prediction key changes with it, so such rows are predicted apart
    assert r.key() != recipe_for(LLAMA70B, "vllm", 1024, concurrency=4, gpu="b200",
                                 output=1024, version="0.19.0").key()


@pytest.mark.parametrize("source, engine, version", [
    (IMAX, "vllm", "0.19.0"), (LLAMA70B, "vllm", "0.15.1"), (LLAMA70B, "trtllm", None),
    (IMAX, "sglang", "0.5.9"), ("aic gap analysis measured 2026-03-20", "vllm", None)])
def test_other_rows_keep_the_preset(source, engine, version):
    r = recipe_for(source, engine, 1024, gpu="b200", output=1024, version=version)
    assert r.prefill_attention is None
    assert not any("#25998" in n for n in r.notes)


def test_a_stated_old_version_gets_the_kernels_without_an_assumption():
    r = recipe_for(IMAX, "vllm", 1024, gpu="b200", version="0.10.2")
    assert r.prefill_attention == "fa2" and not any("assumed" in n for n in r.notes)


def _row70b(gpu: str) -> dict:
    return dict(id="t", backend="vllm", backend_version="", model_path="meta-llama/Llama-3.1-70B",
                system=gpu, precision="fp8", mode="agg", isl="8192", osl="1024",
                gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size="4", tp_size="1",
                pp_size="1", attention_dp_size="1", moe_tp_size="1", moe_ep_size="1",
                silicon_ttft_ms="745", silicon_tpot_ms="18", source=LLAMA70B)


def test_the_recipe_reaches_the_simulated_engine_on_blackwell_only():
    for system, gpu in (("b200_sxm", "b200"), ("h200_sxm", "h200-sxm")):
        t = map_serving_row(rows_from_dicts("t", [_row70b(system)])[0])
        assert t.gpu == gpu and t.recipe.prefill_attention == "fa2"
        sc, _, _ = resolve("llama-3.1-70b", gpu, weights="fp8", kv="fp8", engine="vllm")
        out = sp._with_recipe(sc, t.recipe)
        assert out.engine.prefill_attention == "fa2"
        old = float(step(sc, 1, 8192, 0, prefill=True).time_s)
        new = float(step(replace(sc, engine=out.engine), 1, 8192, 0, prefill=True).time_s)
        if gpu == "b200":
            assert new > 1.2 * old       # see the worked number below
        else:                            # Hopper has FlashAttention 3: no FA2 rate of its own
            assert new == pytest.approx(old, rel=1e-12)


# ------------------------------------------------------------------ the worked number

def test_an_8k_llama70b_prompt_on_one_b200_by_hand():
    # attention FLOPs 4 * T * S_avg * N * H per layer, causal: S_avg ~ T/2; priced at
    # 2250e12 * attn_compute. FA2 on sm_100 reaches 0.155 of it (flashinfer PR #5133: ~320-390
    # TFLOP/s), the native default 0.5: the attention op is 0.5 / 0.155 = 3.2x longer when
    # compute-bound, the GEMMs and everything else are unchanged
    sc, _, _ = resolve("llama-3.1-70b", "b200", weights="fp8", kv="fp8", engine="vllm")
    fa2 = replace(sc, engine=sc.engine.model_copy(update={"prefill_attention": "fa2"}))
    a, b = (step(s, 1, 8192, 0, prefill=True) for s in (sc, fa2))
    att = {o.name: o for o in a.ops if o.kind == "attention"}
    att2 = {o.name: o for o in b.ops if o.kind == "attention"}
    for name, op in att.items():
        assert float(op.compute_s) > float(op.memory_s)          # compute-bound at 8k
        assert float(att2[name].compute_s) == pytest.approx(
            float(op.compute_s) * 0.5 / BLACKWELL_FA2_ATTN_COMPUTE, rel=1e-9)
    gemm = lambda est: sum(float(o.time_s) for o in est.ops if o.kind == "gemm")
    assert gemm(a) == pytest.approx(gemm(b), rel=1e-12)
    # decode steps keep the native kernels (vLLM's TRT-LLM-gen decode path since PR #19825)
    assert float(step(fa2, 8, 1, 8192).time_s) == pytest.approx(float(step(sc, 8, 1, 8192).time_s))


def test_the_simulators_surface_prices_the_prompt_attention_alike():
    # stepcost builds the chunk grid as prompt steps: it must match the op list's prefill step
    sc, _, _ = resolve("llama-3.1-70b", "b200", weights="fp8", kv="fp8", engine="vllm")
    fa2 = replace(sc, engine=sc.engine.model_copy(update={"prefill_attention": "fa2"}))
    cost = stepcost.build(fa2, max_rows=8192, max_seqs=16, max_chunk=8192, max_context=8192)
    for prompt in (700, 4000):
        want = float(step(fa2, 1, prompt, 0, prefill=True).time_s)
        assert cost.step_s(0, 0.0, [prompt], [0.0], finishing=1) == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("gpu", sorted(BLACKWELL_DC_GPUS))
def test_every_datacenter_blackwell_has_the_fa2_rate(gpu):
    assert default_efficiency(load_gpu(gpu)).attn_compute_fa2 == BLACKWELL_FA2_ATTN_COMPUTE
    # between the FA2 runs' 307 / 2250 = 0.136 and 390 / 2250 = 0.173
    assert 0.136 <= BLACKWELL_FA2_ATTN_COMPUTE <= 0.173


def test_other_gpus_have_no_fa2_rate():
    for gpu in ("h200-sxm", "h100-sxm", "a100-sxm-80gb", "rtx-5090", "mi300x"):
        assert default_efficiency(load_gpu(gpu)).attn_compute_fa2 is None
