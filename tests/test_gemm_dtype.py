"""GEMM efficiency per dtype: the Hopper fp8 / block-fp8 curves against the H200 measurement,
their properties, where they apply, and the bench that measured them (calibrate/bench_gemm_dtype.py)."""
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.core.efficiency import HOPPER_GEMM_BY_DTYPE, HOPPER_GPUS, default_efficiency
from perfmodel.core.engines import load_engine
from perfmodel.core.hardware import list_gpus, load_gpu
from perfmodel.core.catalog import load_model
from perfmodel.core.roofline import gemm_kind, step_time
from perfmodel.core.specs import Efficiency, GemmCurve, Precision
from perfmodel.core.precision import parse_format
from calib_scripts import quick_cpu_run

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "calibrate" / "data" / "gemm-dtype-h200-sxm-20261201.json"
BENCH = ROOT / "calibrate" / "bench_gemm_dtype.py"
H200_FP8_PEAK = 1978.9e12    # dense fp8, NVIDIA H200 datasheet (hardware_db h200-sxm)

# Median TFLOP/s over the 19 layer shapes at M rows, read from RAW (calibrate/GEMM_DTYPE_NOTES.md
# prints the same table): (kind, M) -> measured.
MEASURED_TFLOPS = {
    ("fp8_tensor", 512): 1308, ("fp8_tensor", 1024): 1360, ("fp8_tensor", 4096): 1399,
    ("fp8_tensor", 16384): 1414,
    ("fp8_block", 512): 1020, ("fp8_block", 1024): 1204, ("fp8_block", 4096): 1293,
    ("fp8_block", 16384): 1276,
}
BAND = 0.06     # the one-curve fit misses the shape medians by at most this from M = 512 up
CURVE_KIND = {"fp8_tensor": "fp8", "fp8_block": "fp8_block"}


@pytest.fixture(scope="module")
def raw():
    return json.loads(RAW.read_text())


def test_the_golden_medians_are_the_files(raw):
    # guards the literals above against a re-run of the bench replacing the file
    for (kind, m), want in MEASURED_TFLOPS.items():
        got = statistics.median(r["flops_per_s"] for r in raw["gemm"]["records"]
                                if r["kind"] == kind and r["M"] == m)
        assert got / 1e12 == pytest.approx(want, abs=0.5)


@pytest.mark.parametrize("kind, m", sorted(MEASURED_TFLOPS))
def test_the_hopper_curve_reproduces_the_h200_measurement(kind, m):
    e = default_efficiency(load_gpu("h200-sxm")).for_gemm(CURVE_KIND[kind])
    predicted = H200_FP8_PEAK * e.gemm(m) / 1e12
    assert predicted == pytest.approx(MEASURED_TFLOPS[(kind, m)], rel=BAND)


def test_block_scaled_fp8_is_slower_than_per_tensor_at_every_m(raw):
    # measured: block 1276-1293 TFLOP/s at M >= 2048 against per-tensor 1399-1423 (RAW)
    eff = default_efficiency(load_gpu("h100-sxm"))
    block, tensor = eff.for_gemm("fp8_block"), eff.for_gemm("fp8")
    for m in (16, 128, 1024, 8192, 65536):
        assert block.gemm(m) < tensor.gemm(m)


def test_fp8_reaches_a_smaller_share_of_its_peak_than_bf16_at_large_m(raw):
    # RAW at M = 4096: bf16 787 / 989.4 = 0.80 of peak, fp8 per-tensor 1399 / 1978.9 = 0.71
    bf16 = statistics.median(r["flops_per_s"] for r in raw["gemm"]["records"]
                             if r["kind"] == "bf16" and r["M"] == 4096) / 989.4e12
    eff = default_efficiency(load_gpu("h200-sxm"))
    assert eff.for_gemm("fp8").gemm(4096) < min(bf16, eff.gemm(4096))


def test_bf16_and_gpus_without_curves_keep_the_vendor_curve():
    # Hopper lists fp8 kinds only; datacenter Blackwell has curves of its own
    # (tests/test_blackwell_gemm.py); the others keep the vendor curve for every kind
    for gpu in ("h100-sxm", "a100-sxm-80gb", "rtx-4090", "rtx-5090"):
        eff = default_efficiency(load_gpu(gpu))
        assert eff.for_gemm("bf16") is eff
        if gpu not in HOPPER_GPUS:
            assert eff.for_gemm("fp8") is eff and eff.for_gemm("fp8_block") is eff


def test_gemm_kind_picks_block_scales_from_the_weight_format():
    assert gemm_kind("fp8", parse_format("fp8-b128")) == "fp8_block"
    assert gemm_kind("fp8", parse_format("fp8")) == "fp8"
    # weight-only int4 runs its matmuls in bf16: the bf16 curve
    assert gemm_kind("bf16", parse_format("int4-g128")) == "bf16"
    # fp8 weights on a chip without fp8 units fall back to a 16-bit kind
    assert gemm_kind("bf16", parse_format("fp8-b128")) == "bf16"


def test_a_block_fp8_prefill_takes_longer_than_per_tensor_on_hopper_only():
    m, engine = load_model("qwen3-32b"), load_engine("trtllm")
    times = {}
    for gpu in ("h100-sxm", "b200"):
        hw = load_gpu(gpu)
        eff = default_efficiency(hw)
        for w in ("fp8", "fp8-b128"):
            p = Precision.of(w, "fp8", "fp8")
            times[gpu, w] = float(step_time(m, hw, p, engine, eff, 1, 4096, 0, prefill=True).time_s)
    # compute-bound prefill: its GEMM share scales by e_fp8(4096) / e_block(4096) =
    # (0.735*4096/4182.5) / (0.671*4096/4247.5) = 0.720 / 0.647 = 1.11; attention and the
    # elementwise ops, which do not change, dilute that
    assert 1.03 < times["h100-sxm", "fp8-b128"] / times["h100-sxm", "fp8"] < 1.10
    # no block-scaled curve on Blackwell (fp8_block takes its fp8 curve): the 0.002 bits of
    # block scales are all that differs
    assert times["b200", "fp8-b128"] == pytest.approx(times["b200", "fp8"], rel=1e-3)


def test_an_efficiency_file_may_carry_curves_and_bad_ones_are_rejected():
    base = default_efficiency(load_gpu("a100-sxm-80gb")).model_dump()
    base["gemm_by_dtype"] = {"fp8": {"gemm_max": 0.7, "gemm_half_m": 90.0}}
    eff = Efficiency.model_validate(base)
    assert eff.for_gemm("fp8").gemm_max == 0.7 and eff.for_gemm("fp8_block").gemm_half_m == 90.0
    for bad in ({"gemm_max": 1.5, "gemm_half_m": 10.0}, {"gemm_max": 0.7, "gemm_half_m": 0.0},
                {"gemm_max": float("nan"), "gemm_half_m": 10.0}, {"gemm_max": 0.7}):
        base["gemm_by_dtype"] = {"fp8": bad}
        with pytest.raises(ValidationError):
            Efficiency.model_validate(base)


# ----------------------------------------------------------------------------- properties

KINDS = ("bf16", "fp16", "fp8", "fp8_block", "int8", "fp4")


@given(gpu=st.sampled_from([g.id for g in list_gpus()]), kind=st.sampled_from(KINDS),
       m1=st.floats(1.0, 1e6), m2=st.floats(1.0, 1e6))
def test_default_curves_lie_in_0_1_and_never_fall_with_more_rows(gpu, kind, m1, m2):
    eff = default_efficiency(load_gpu(gpu)).for_gemm(kind)
    lo, hi = sorted((m1, m2))
    e_lo, e_hi = eff.gemm(lo), eff.gemm(hi)
    assert 0.0 < e_lo <= e_hi <= 1.0


@given(gemm_max=st.floats(1e-3, 1.0), half_m=st.floats(1e-3, 1e4), kind=st.sampled_from(KINDS),
       m=st.floats(1.0, 1e7))
def test_any_valid_curve_gives_a_fraction(gemm_max, half_m, kind, m):
    base = default_efficiency(load_gpu("h200-sxm"))
    eff = base.model_copy(update={"gemm_by_dtype": {kind: GemmCurve(gemm_max=gemm_max,
                                                                    gemm_half_m=half_m)}})
    e = eff.for_gemm(kind).gemm(m)
    assert 0.0 < e <= 1.0 and math.isfinite(e)
    assert eff.for_gemm(kind).gemm(2 * m) >= e


def test_hopper_curves_cite_the_measurement():
    # every curve names the committed H200 run it was fitted to (the dtype sweep; the fp32
    # router curve: the whole-layer run of calibrate/bench_moe_layer.py)
    for kind, curve in HOPPER_GEMM_BY_DTYPE.items():
        files = re.findall(r"[\w.-]+-h200-sxm-\d{8}\w*\.json", curve.source)
        assert files, kind
        assert all((ROOT / "calibrate" / "data" / f).exists() for f in files), kind
    assert "gemm-dtype-h200-sxm-20261201.json" in HOPPER_GEMM_BY_DTYPE["fp8"].source


# ----------------------------------------------------------------------------- the bench

def test_the_bench_runs_quick_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    res = quick_cpu_run(BENCH, tmp_path / "g.json", timeout=300)
    recs = res["gemm"]["records"]
    assert recs and {r["kind"] for r in recs} == {"bf16"}       # fp8 needs CUDA sm_89+
    for r in recs:
        assert r["flops"] == 2 * r["M"] * r["N"] * r["K"] and r["seconds"] > 0
    assert {r["kind"] for r in res["quant"]["records"]} == {"group128", "row", "tensor", "cast"}
    assert res["grouped"]["skipped"]                               # CUDA only


def test_the_fit_script_gives_the_shipped_hopper_curves_and_refuses_bad_files(tmp_path):
    # calibrate/fit_gemm_dtype.py on the committed run must print the curves efficiency.py ships
    script = ROOT / "calibrate" / "fit_gemm_dtype.py"
    run = subprocess.run([sys.executable, str(script), str(RAW)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    fits = {line.split(" ", 1)[0]: line for line in run.stdout.splitlines()
            if line.startswith(("fp8_tensor ", "fp8_block "))}
    for kind, name in (("fp8", "fp8_tensor"), ("fp8_block", "fp8_block")):
        curve = HOPPER_GEMM_BY_DTYPE[kind]
        got = {k: float(v) for k, v in re.findall(r"'(gemm_max|half_m)': ([0-9.]+)", fits[name])}
        assert got["gemm_max"] == pytest.approx(curve.gemm_max, abs=1e-6)
        assert got["half_m"] == pytest.approx(curve.gemm_half_m, abs=1e-6)
    bad = tmp_path / "bad.json"
    bad.write_text('{"gemm": {}}')
    for arg in (str(bad), str(tmp_path / "missing.json")):
        run = subprocess.run([sys.executable, str(script), arg], capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 2 and "fit_gemm_dtype:" in run.stderr
        assert "Traceback" not in run.stderr
