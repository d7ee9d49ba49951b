"""The fused MoE kernel's weight-streaming rate and quantize casts (EngineProfile.
moe_stream_fraction, moe_act_quant_kernels; perfmodel/core/grouped_gemm.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.grouped_gemm import SGLANG_FUSED_MOE_STREAM_FRACTION
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

FP8 = Precision.of("fp8")
MOE_BLOCK = ("experts", "moe_routing", "moe_permute", "moe_combine", "mlp_activation")


def _moe_block_s(engine, batch: float) -> float:
    """Per-MoE-layer time of the ops one SGLang fused_moe call runs, Qwen3-235B fp8 TP8 H200."""
    m, hw = load_model("qwen3-235b-a22b"), load_gpu("h200-sxm")
    est = step_time(m, hw, FP8, engine, default_efficiency(hw), batch, 1.0, 1024.0,
                    dep=Deployment(tp=8))
    return sum(float(o.time_s) for o in est.ops if o.name in MOE_BLOCK) / m.num_moe_layers


def test_sglang_fused_moe_increment_matches_pr_11730_within_5_percent():
    # sgl-project/sglang PR #11730 (H200, Qwen3-235B-A22B fp8 w8a8 block, TP8, default config):
    # fused_moe 31.70 us at batch 1, 124.99 us at batch 32: 93.3 us for the extra experts touched
    measured_s = (124.99 - 31.70) * 1e-6
    increment = _moe_block_s(ENGINES["sglang"], 32) - _moe_block_s(ENGINES["sglang"], 1)
    assert increment == pytest.approx(measured_s, rel=0.05)


def test_without_the_fraction_the_increment_is_short_of_the_measurement():
    # the same engine streaming experts at the dense rate misses PR #11730 by more than 15%
    dense_rate = ENGINES["sglang"].model_copy(update={"moe_stream_fraction": 1.0})
    increment = _moe_block_s(dense_rate, 32) - _moe_block_s(dense_rate, 1)
    assert increment < 0.85 * (124.99 - 31.70) * 1e-6


def test_sglang_whole_moe_call_within_8_percent_of_pr_11730_at_every_batch():
    # sgl-project/sglang PR #11730, H200, Qwen3-235B fp8 TP8: batch -> fused_moe time (us)
    measured_us = {1: 31.70, 2: 36.56, 4: 49.67, 8: 66.87, 16: 92.36, 24: 117.38, 32: 124.99}
    for batch, us in measured_us.items():
        assert _moe_block_s(ENGINES["sglang"], batch) == pytest.approx(us * 1e-6, rel=0.08)


def test_without_the_quantize_casts_one_token_misses_pr_11730():
    # PR #11730 at batch 1: 31.70 us; without the two casts per layer the call is > 12% short
    no_casts = ENGINES["sglang"].model_copy(update={"moe_act_quant_kernels": 0.0})
    assert _moe_block_s(no_casts, 1) < 0.88 * 31.70e-6


def test_quantize_casts_cost_two_kernel_floors_per_moe_layer_only_in_w8a8():
    # sglang fused_moe.py invoke_fused_moe_kernel: one per_token_group_quant_fp8 per grouped GEMM
    m, hw = load_model("qwen3-235b-a22b"), load_gpu("h200-sxm")
    eff, dep = default_efficiency(hw), Deployment(tp=8)
    no_casts = ENGINES["sglang"].model_copy(update={"moe_act_quant_kernels": 0.0})
    for precision, casts in ((FP8, 2.0), (Precision.of("bf16"), 0.0)):
        with_c, without = (float(step_time(m, hw, precision, e, eff, 4.0, 1.0, 1024.0,
                                           dep=dep).gpu_s) for e in (ENGINES["sglang"], no_casts))
        assert with_c - without == pytest.approx(casts * m.num_moe_layers * eff.kernel_s,
                                                 rel=1e-9, abs=1e-12)


def test_dense_models_do_not_see_the_fraction():
    m, hw = load_model("llama-3.1-70b"), load_gpu("h200-sxm")
    eff, dep = default_efficiency(hw), Deployment(tp=8)
    batch = np.array([1.0, 64.0])
    with_fraction = step_time(m, hw, FP8, ENGINES["sglang"], eff, batch, 1.0, 2048.0, dep=dep)
    dense_rate = ENGINES["sglang"].model_copy(update={"moe_stream_fraction": 1.0})
    without = step_time(m, hw, FP8, dense_rate, eff, batch, 1.0, 2048.0, dep=dep)
    np.testing.assert_array_equal(with_fraction.time_s, without.time_s)


def test_only_the_sglang_preset_sets_a_fraction_and_casts():
    assert ENGINES["sglang"].moe_stream_fraction == SGLANG_FUSED_MOE_STREAM_FRACTION
    assert ENGINES["sglang"].moe_act_quant_kernels == 2.0
    others = [e for k, e in ENGINES.items() if k != "sglang"]
    assert all(e.moe_stream_fraction == 1.0 and e.moe_act_quant_kernels == 0.0 for e in others)


@pytest.mark.parametrize("field, bad", [("moe_stream_fraction", 0.0),
                                        ("moe_stream_fraction", -0.5),
                                        ("moe_stream_fraction", 1.5),
                                        ("moe_act_quant_kernels", -1.0)])
def test_out_of_range_moe_kernel_fields_are_rejected(field, bad):
    with pytest.raises(ValidationError, match=field):
        ENGINES["sglang"].model_validate({**ENGINES["sglang"].model_dump(), field: bad})


@given(st.floats(0.2, 1.0), st.floats(0.2, 1.0), st.sampled_from([1.0, 4.0, 32.0, 256.0]),
       st.sampled_from(["deepseek-v3", "qwen3.5-397b-a17b", "mixtral-8x7b"]))
def test_a_slower_moe_kernel_never_speeds_the_step(f1, f2, batch, model):
    m, hw = load_model(model), load_gpu("b200")
    eff, dep = default_efficiency(hw), Deployment(tp=8)
    slow, fast = sorted((f1, f2))
    times = [float(step_time(m, hw, FP8, ENGINES["sglang"].model_copy(
        update={"moe_stream_fraction": f}), eff, batch, 1.0, 1024.0, dep=dep).time_s)
        for f in (slow, fast)]
    assert times[0] >= times[1] > 0
