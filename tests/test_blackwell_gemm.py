"""Datacenter-Blackwell GEMM curves (core/efficiency.py BLACKWELL_GEMM_BY_DTYPE) against the B200
kernel benchmarks they were fitted to, where they apply, and the fused-MoE law they leave alone."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import (BLACKWELL_DC_GPUS, BLACKWELL_GEMM_BY_DTYPE,
                                       BLACKWELL_GROUPED_GEMM_MAX,
                                       BLACKWELL_GROUPED_KERNEL_FRACTION, default_efficiency)
from perfmodel.core.engines import load_engine
from perfmodel.core.grouped_gemm import grouped_gemm_efficiency
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Precision
from perfmodel.core.units import US, tflops

# B200 dense peaks, NVIDIA Blackwell datasheet (hardware_db/b200.yaml): fp8 4.5, fp4 9, bf16 2.25 PF
PEAK = {"fp8": 4500e12, "fp4": 9000e12, "bf16": 2250e12}
# Published B200 TFLOP/s from M = 512 up, (kind, N, M) -> measured:
# fp8: vllm-project/vllm PR #19566 (bench_fp8_gemm.py, fp8-tensor-w-tensor-a-noquant column, after
# the PR's tunings); fp4: PR #20646 (bench_nvfp4_gemm.py, nvfp4-noquant, "Before" table);
# bf16: the torch-bf16 column of PR #20646's N=6144 table. All Llama-3.1-8B shapes, K = 4096.
MEASURED_TFLOPS = {
    ("fp8", 4096, 512): 1832.0, ("fp8", 4096, 1024): 2076.7, ("fp8", 6144, 16384): 2544.7,
    ("fp4", 6144, 512): 2188.0, ("fp4", 6144, 1024): 2895.0, ("fp4", 6144, 2048): 3411.5,
    ("fp4", 6144, 4096): 3645.6, ("fp4", 6144, 8192): 3778.8, ("fp4", 6144, 16384): 3904.3,
    ("bf16", 6144, 512): 1284.4, ("bf16", 6144, 1024): 1325.6, ("bf16", 6144, 4096): 1365.3,
    ("bf16", 6144, 16384): 1360.1,
}
BAND = 0.30   # one curve per kind over several shapes: the fits' worst miss from M = 512 is 1.28x


@pytest.mark.parametrize("kind, n, m", sorted(MEASURED_TFLOPS))
def test_the_blackwell_curve_reproduces_the_published_b200_gemms(kind, n, m):
    e = default_efficiency(load_gpu("b200")).for_gemm(kind)
    predicted = tflops(PEAK[kind] * e.gemm(m))
    assert predicted == pytest.approx(MEASURED_TFLOPS[(kind, n, m)], rel=BAND)


def test_blackwell_gemms_reach_a_smaller_share_of_their_peak_than_hopper_fp8():
    # B200 fp8 at M = 4096: 2533-2767 TFLOP/s measured (PR #19566) = 0.56-0.61 of 4500;
    # the H200 measurement: 1399 / 1979 = 0.71 (tests/test_gemm_dtype.py)
    b200, h200 = default_efficiency(load_gpu("b200")), default_efficiency(load_gpu("h200-sxm"))
    assert 0.50 < b200.for_gemm("fp8").gemm(4096) < 0.65 < h200.for_gemm("fp8").gemm(4096)
    # NVFP4 reaches the smallest share: 3646 / 9000 = 0.41 at M = 4096
    assert b200.for_gemm("fp4").gemm(4096) < b200.for_gemm("fp8").gemm(4096)
    # ... yet is still faster in absolute terms than fp8 at prefill sizes (3646 vs ~2600)
    assert PEAK["fp4"] * b200.for_gemm("fp4").gemm(4096) > PEAK["fp8"] * b200.for_gemm("fp8").gemm(4096)


@pytest.mark.parametrize("gpu", sorted(BLACKWELL_DC_GPUS))
def test_every_datacenter_blackwell_takes_the_curves_and_keeps_the_moe_base(gpu):
    eff = default_efficiency(load_gpu(gpu))
    assert eff.gemm_by_dtype == BLACKWELL_GEMM_BY_DTYPE
    assert eff.grouped_gemm_max == BLACKWELL_GROUPED_GEMM_MAX
    # the fused-MoE law multiplies its fraction by the base it was solved against (0.75), not
    # by the per-dtype dense curve: 0.25 x 0.75 x 512 / (512 + 64/2) = 0.1765 at 512 rows/expert
    for kind in ("fp8", "fp4", "bf16"):
        e = float(grouped_gemm_efficiency(eff.for_gemm(kind), 512.0, 8))
        assert e == pytest.approx(BLACKWELL_GROUPED_KERNEL_FRACTION * 0.75 * 512 / 544, rel=1e-9)


def test_the_workstation_blackwell_and_hopper_keep_their_own_laws():
    for gpu in ("rtx-5090", "rtx-pro-6000-blackwell", "h200-sxm"):
        eff = default_efficiency(load_gpu(gpu))
        assert eff.grouped_gemm_max is None
        assert eff.for_gemm("fp4") is eff


def test_a_b200_fp8_prefill_of_llama_70b_costs_what_the_curve_says():
    # Llama-3.1-70B, one 8192-token prompt on one B200, fp8 weights/activations/KV: its GEMMs
    # now run at e = 0.583 x 8192 / 8320 = 0.574 of the 4.5 PF peak instead of the vendor
    # 0.75 x 8192 / 8208 = 0.749, i.e. 1.30x longer; attention and elementwise ops are unchanged
    m, hw, engine = load_model("llama-3.1-70b"), load_gpu("b200"), load_engine("vllm")
    p = Precision.of("fp8", "fp8", "fp8")
    eff = default_efficiency(hw)
    vendor = eff.model_copy(update={"gemm_by_dtype": {}})
    new, old = (step_time(m, hw, p, engine, e, 1, 8192, 0, prefill=True) for e in (eff, vendor))
    gemm = lambda est: sum(float(o.time_s) for o in est.ops if o.kind == "gemm")
    assert gemm(new) / gemm(old) == pytest.approx(0.749 / 0.574, rel=0.03)
    attention = lambda est: sum(float(o.time_s) for o in est.ops if o.kind == "attention")
    assert attention(new) == pytest.approx(attention(old), rel=1e-9)


@given(kind=st.sampled_from(sorted(BLACKWELL_GEMM_BY_DTYPE)), m=st.floats(1.0, 1e6))
def test_the_blackwell_curves_stay_below_the_vendor_default(kind, m):
    # measured kernels never beat the vendor mid-range the model used before (0.75, 16 rows)
    eff = default_efficiency(load_gpu("b200"))
    assert 0.0 < eff.for_gemm(kind).gemm(m) < eff.gemm(m) <= 1.0


# DeepGEMM's block-scaled fp8 GEMM (1x128 / 128x128 scales, UE8M0), SGLang's default block-fp8
# linear on sm100: sgl-project/sglang PR #13528 (one GB200), N=24576 K=7168, DeepGEMM column:
# 146.03 us at M = 1024 and 260.38 us at M = 2048, i.e. 2471 and 2775 TFLOP/s.
DEEPGEMM_GB200_US = {1024: 146.031998, 2048: 260.383993}
DEEPGEMM_N, DEEPGEMM_K = 24576, 7168


@pytest.mark.parametrize("m", sorted(DEEPGEMM_GB200_US))
def test_the_block_fp8_fallback_prices_deepgemm_on_blackwell(m):
    # fp8_block has no curve of its own on Blackwell and takes the per-tensor fp8 one: on a GB200
    # (5000 TFLOP/s fp8) it gives 2591 / 2744 TFLOP/s at M = 1024 / 2048, within 5% of DeepGEMM
    hw = load_gpu("gb200")
    measured = 2 * m * DEEPGEMM_N * DEEPGEMM_K / (DEEPGEMM_GB200_US[m] * US)
    predicted = hw.peak_flops_per_s["fp8"] * default_efficiency(hw).for_gemm("fp8_block").gemm(m)
    assert tflops(predicted) == pytest.approx(tflops(measured), rel=0.10)
