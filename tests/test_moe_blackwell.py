"""The fused-MoE kernel fraction on datacenter Blackwell (core/efficiency.py
BLACKWELL_GROUPED_KERNEL_FRACTION) against published Blackwell MoE timings
(calibrate/fit_moe_blackwell.py)."""
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.core.efficiency import (BLACKWELL_DC_GPUS, BLACKWELL_GROUPED_KERNEL_FRACTION,
                                       default_efficiency)
from perfmodel.core.efficiency_spec import HOPPER_GROUPED_KERNEL_FRACTION
from perfmodel.core.grouped_gemm import GROUPED_KERNEL_FRACTION, grouped_gemm_efficiency
from perfmodel.core.hardware import load_gpu
from calib_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
FIT = ROOT / "calibrate" / "fit_moe_blackwell.py"


def _fit_module():
    return load_script(FIT)


def _record(fit, name):
    return next(r for r in fit.RECORDS if r["name"] == name)


@pytest.mark.parametrize("gpu", sorted(BLACKWELL_DC_GPUS))
def test_datacenter_blackwell_takes_the_blackwell_fraction(gpu):
    assert default_efficiency(load_gpu(gpu)).grouped_kernel_fraction == BLACKWELL_GROUPED_KERNEL_FRACTION


@pytest.mark.parametrize("gpu", ["h200-sxm", "h100-sxm", "a100-sxm-80gb", "rtx-5090",
                                 "rtx-pro-6000-blackwell", "mi300x"])
def test_other_gpus_keep_the_h200_measured_fraction(gpu):
    # Hopper is where the law was measured; sm_120 Blackwell and other vendors keep it (assumption)
    assert default_efficiency(load_gpu(gpu)).grouped_kernel_fraction == GROUPED_KERNEL_FRACTION == 0.465


def test_b200_grouped_efficiency_worked_number():
    # 512 rows per expert (two-plus tiles of 64, last half empty): 0.25 * 0.75 * 512 / 544 = 0.1765
    eff = default_efficiency(load_gpu("b200"))
    assert float(grouped_gemm_efficiency(eff, 512.0, 8)) == pytest.approx(0.25 * 0.75 * 512 / 544)


@pytest.mark.parametrize("name, measured_s", [
    # flashinfer PR #5301, B300, TRTLLM NVFP4, DeepSeek-V3 EP8 shard, 16384 tokens: 0.622597 ms
    ("B300 trtllm-gen NVFP4 DSv3 EP8 16384 tok", 0.622597e-3),
    # Hugging Face blog "TFLOPS Gap", B200 NVFP4, batch 4096: SGLang 1262 TFLOP/s
    ("B200 SGLang NVFP4 MoE 4096 tok", 6 * 4096 * 4 * 2880 * 7680 / 1262e12),
    # the same blog: FlashInfer CuTe DSL 1225 TFLOP/s
    ("B200 FlashInfer CuTe DSL NVFP4 MoE 4096 tok", 6 * 4096 * 4 * 2880 * 7680 / 1225e12),
])
def test_blackwell_fraction_prices_the_published_moe_calls(name, measured_s):
    fit = _fit_module()
    rec = _record(fit, name)
    assert rec["seconds"] == pytest.approx(measured_s)
    # the whole call includes routing/quant/finalize: the GEMM law may sit a little below it
    assert 0.75 <= fit.law_s(rec, BLACKWELL_GROUPED_KERNEL_FRACTION) / measured_s <= 1.1
    # the Hopper fraction prices the same GEMMs at about half the measured time
    assert fit.law_s(rec, HOPPER_GROUPED_KERNEL_FRACTION) / measured_s < 0.6


def test_shipped_fraction_lies_between_the_whole_call_and_marginal_bounds():
    fit = _fit_module()
    implied = fit.implied_all()
    whole = [v for k, v in implied.items() if k != "marginal"]
    # whole calls (with fixed routing/finalize work) are lower bounds; the marginal an upper one
    assert max(whole) <= BLACKWELL_GROUPED_KERNEL_FRACTION + 0.01
    assert BLACKWELL_GROUPED_KERNEL_FRACTION < implied["marginal"]
    # every source says Blackwell's MoE kernels reach less of their peak than the H200's
    assert all(v < 0.7 * HOPPER_GROUPED_KERNEL_FRACTION for v in implied.values())


def test_fit_script_prints_each_record_and_the_marginal():
    run = subprocess.run([sys.executable, str(FIT)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "marginal" in run.stdout and run.stdout.count("NVFP4") == 5


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_grouped_kernel_fraction_is_validated(f):
    base = default_efficiency(load_gpu("b200")).model_dump()
    try:
        eff = type(default_efficiency(load_gpu("b200")))(**{**base, "grouped_kernel_fraction": f})
    except ValidationError:
        assert not (0 < f <= 1)
        return
    assert 0 < eff.grouped_kernel_fraction <= 1
    e = float(grouped_gemm_efficiency(eff, 300.0, 8))
    assert math.isfinite(e) and 0 < e <= f * eff.gemm_max


def test_law_rejects_a_nonpositive_fraction():
    fit = _fit_module()
    with pytest.raises(ValueError):
        fit.law_s(_record(fit, "B200 vLLM NVFP4 MoE 4096 tok"), 0.0)
