"""Routed-expert GEMMs: reduction depth, tile padding, fused-kernel fraction
(perfmodel/core/grouped_gemm.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core import roofline
from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.grouped_gemm import (GROUPED_KERNEL_FRACTION, GROUPED_TILE_ROWS,
                                         depth_efficiency, expert_depth_factor,
                                         grouped_gemm_efficiency, moe_tp)
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

FP8 = Precision.of("fp8")


def _law(k: float) -> float:
    """The depth law without the reference and the cap: k / (k + 720)."""
    return k / (k + 720.0)


@pytest.mark.parametrize("k_shallow, k_deep, tflops_shallow, tflops_deep", [
    (512, 7168, 590, 1304),     # DeepGEMM README, normal GEMMs, M=4096: N=32768 vs N=4096
    (2048, 7168, 1025, 1304),   # M=4096: N=7168,K=2048 vs N=4096,K=7168
    (1536, 16384, 990, 1358),   # M=4096: N=24576,K=1536 vs N=7168,K=16384
])
def test_depth_law_matches_deepgemm_readme_within_5_percent(k_shallow, k_deep, tflops_shallow,
                                                            tflops_deep):
    measured = tflops_shallow / tflops_deep
    assert _law(k_shallow) / _law(k_deep) == pytest.approx(measured, rel=0.05)


def test_grouped_contiguous_gemms_follow_the_same_law():
    # DeepGEMM README, grouped contiguous layout, 8192 rows per group: K=2048 1099, K=7168 1297
    assert _law(2048) / _law(7168) == pytest.approx(1099 / 1297, rel=0.05)


def test_deep_reductions_keep_the_calibrated_rate():
    assert depth_efficiency(4096) == 1.0
    assert depth_efficiency(14336) == 1.0
    # K=256 with the fused MoE kernel's K_half = 430 (calibrate/MOE_PREFILL_NOTES.md):
    # (256/686) / (4096/4526) = 0.412
    assert depth_efficiency(256) == pytest.approx(0.4124, abs=1e-3)


@given(st.floats(1.0, 1e5), st.floats(1.0, 1e5))
def test_depth_efficiency_is_monotone_and_at_most_one(a, b):
    lo, hi = sorted((a, b))
    assert 0.0 < depth_efficiency(lo) <= depth_efficiency(hi) <= 1.0


def test_deepseek_v3_tp8_worked_number():
    m = load_model("deepseek-v3")
    # gate/up reduce over D=7168 (rate kept), down over 2048/8 = 256: 2/3 + 1/3 / 0.412 = 1.48
    assert expert_depth_factor(m, Deployment(tp=8)) == pytest.approx(1.475, abs=0.005)
    # EP8: every expert whole on one GPU, K=2048: (2048/2478) / (4096/4526) = 0.913,
    # 2/3 + 1/3 / 0.913 = 1.03
    assert expert_depth_factor(m, Deployment(tp=8, ep=8)) == pytest.approx(1.032, abs=0.005)


def test_dense_models_are_untouched():
    assert expert_depth_factor(load_model("llama-3.1-70b"), Deployment(tp=8)) == 1.0


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]))
def test_more_expert_slicing_never_speeds_the_experts(tp, ep):
    m = load_model("qwen3-235b-a22b")
    if ep > tp:
        return
    wider = expert_depth_factor(m, Deployment(tp=tp, ep=ep))
    thinner = expert_depth_factor(m, Deployment(tp=tp * 2, ep=ep))
    assert moe_tp(Deployment(tp=tp * 2, ep=ep)) > moe_tp(Deployment(tp=tp, ep=ep))
    assert thinner >= wider >= 1.0


def test_prefill_experts_compute_scales_by_the_factor(monkeypatch):
    m, hw = load_model("deepseek-v3"), load_gpu("h200-sxm")
    eng, eff, dep = ENGINES["sglang"], default_efficiency(hw), Deployment(tp=8)

    def experts_compute():
        st_ = step_time(m, hw, FP8, eng, eff, 1, 8192, 0, dep=dep)
        return float(next(o.compute_s for o in st_.ops if o.name == "experts"))

    with_depth = experts_compute()
    monkeypatch.setattr(roofline, "expert_depth_factor", lambda *_: 1.0)
    without = experts_compute()
    assert with_depth / without == pytest.approx(expert_depth_factor(m, dep), rel=1e-6)


def test_dense_step_is_unchanged(monkeypatch):
    m, hw = load_model("llama-3.1-70b"), load_gpu("h200-sxm")
    eng, eff = ENGINES["vllm"], default_efficiency(hw)
    before = step_time(m, hw, FP8, eng, eff, np.array([1.0, 64.0]), 2048, 0, dep=Deployment(tp=8))
    monkeypatch.setattr(roofline, "expert_depth_factor", lambda *_: 3.0)
    after = step_time(m, hw, FP8, eng, eff, np.array([1.0, 64.0]), 2048, 0, dep=Deployment(tp=8))
    np.testing.assert_array_equal(before.time_s, after.time_s)


# ------------------------------------------------------------------ tile padding, kernel fraction

def _h100_eff():
    return default_efficiency(load_gpu("h100-sxm"))


def test_veomni_h100_fused_moe_throughput_within_the_measured_spread():
    # VeOmni PR #460, H100 bf16, 32768 tokens, (D, F, E, k) = (4096, 1024, 128, 8):
    # Triton fused MoE 283 TFLOP/s. Predicted: peak x grouped efficiency / depth factor.
    eff, peak = _h100_eff(), 989e12
    rows = 32768 * 8 / 128
    e = float(grouped_gemm_efficiency(eff, rows, 8))
    depth = 2 / 3 / depth_efficiency(4096) + 1 / 3 / depth_efficiency(1024)
    assert peak * e / depth == pytest.approx(283e12, rel=0.15)


def test_touched_expert_with_few_rows_computes_a_whole_tile():
    eff = _h100_eff()
    # r = 20 rows of a 64-row tile: 0.465 * 0.75 * 20/64
    assert float(grouped_gemm_efficiency(eff, 20.0, 8)) == pytest.approx(
        GROUPED_KERNEL_FRACTION * eff.gemm_max * 20 / GROUPED_TILE_ROWS)
    # decode-sized: r <= k uses the 16-row tile, 0.465 * 0.75 * 4/16
    assert float(grouped_gemm_efficiency(eff, 4.0, 8)) == pytest.approx(
        GROUPED_KERNEL_FRACTION * eff.gemm_max * 4 / 16)
    # 100 rows: two tiles, the last half empty on average: 100 / 132 of the full-tile rate
    assert float(grouped_gemm_efficiency(eff, 100.0, 8)) == pytest.approx(
        GROUPED_KERNEL_FRACTION * eff.gemm_max * 100 / 132)


@given(st.floats(1.0, 1e5))
def test_grouped_efficiency_stays_below_the_kernels_full_tile_rate(rows):
    eff = _h100_eff()
    e = float(grouped_gemm_efficiency(eff, rows, 8))
    assert 0.0 < e < GROUPED_KERNEL_FRACTION * eff.gemm_max


@given(st.floats(9.0, 1e5), st.floats(9.0, 1e5))
def test_more_rows_per_expert_never_lowers_grouped_efficiency(a, b):
    # within one tile regime (r > k): monotone
    eff = _h100_eff()
    lo, hi = sorted((a, b))
    assert float(grouped_gemm_efficiency(eff, lo, 8)) <= float(grouped_gemm_efficiency(eff, hi, 8)) + 1e-12


def test_dsa_indexer_launches_its_reference_kernels_per_layer():
    # DeepSeek-V3.2-Exp inference/model.py Indexer.forward: wq_b, wk, weights_proj GEMMs plus
    # rotary, Hadamard and fp8 quant of q and k, k LayerNorm, cache store, weight scaling,
    # fp8_index and top-k: 3 + 11 kernels per layer.
    from perfmodel.core.ops import ops
    m = load_model("glm-5")
    twin = m.model_copy(update={"sparse_attention": None})
    per_step = sum(float(o.cost.kernels) for o in ops(m, FP8, 1, 1, 1000))
    without = sum(float(o.cost.kernels) for o in ops(twin, FP8, 1, 1, 1000))
    assert per_step - without == (3 + 11) * m.num_full_attention_layers
