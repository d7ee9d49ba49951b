"""AMD GEMM curves (core/efficiency_amd.py) against the aiter tuned-GEMM rows they were fitted to
(calibrate/data/aiter-*.csv: AMD's measured kernel times). Expected values are those rows'
times, or hand calculations from the curve's two numbers."""

import csv
import statistics
from pathlib import Path

import pytest

from perfmodel.core.efficiency import VENDOR, default_efficiency
from perfmodel.core.efficiency_amd import AMD_GROUPED_GEMM_MAX
from perfmodel.core.hardware import load_gpu

DATA = Path(__file__).resolve().parents[1] / "calibrate" / "data"


def _rows(name):
    with open(DATA / name) as f:
        return [{k: float(r[k]) for k in ("M", "N", "K", "us")}
                for r in csv.DictReader(line for line in f if not line.startswith("#"))]


def _priced_s(gpu, kind, r):
    """The roofline's GEMM time for one row: max(compute, bytes / bw) + kernel_s."""
    hw = load_gpu(gpu)
    eff = default_efficiency(hw)
    e = eff.for_gemm(kind).gemm(r["M"])
    flops = 2 * r["M"] * r["N"] * r["K"]
    nbytes = r["N"] * r["K"] + r["M"] * r["K"] + 2 * r["M"] * r["N"]
    bw = hw.memory_bandwidth_bytes_per_s * eff.mem_bw_fraction
    return max(flops / (hw.peak_flops_per_s["fp8"] * e), nbytes / bw) + eff.kernel_s


@pytest.mark.parametrize("name, gpu, kind", [
    ("aiter-a8w8-rowwise-gfx950-llama-tp8.csv", "mi355x", "fp8"),
    ("aiter-a8w8-blockscale-gfx942-cu304-dsv3.csv", "mi300x", "fp8_block"),
    ("aiter-a8w8-blockscale-gfx942-cu304-dsv3.csv", "mi325x", "fp8_block"),
    ("aiter-a8w8-blockscale-gfx950-cu256-dsv3.csv", "mi355x", "fp8_block")])
def test_curve_matches_aiter_tables_per_row_count(name, gpu, kind):
    rows = _rows(name)
    for m in sorted({r["M"] for r in rows if r["M"] >= 512}):
        ratios = [_priced_s(gpu, kind, r) / (r["us"] * 1e-6) for r in rows if r["M"] == m]
        # the median over the file's shapes at this M: within 25% of aiter's measured time
        assert 0.8 <= statistics.median(ratios) <= 1.25, (name, m, statistics.median(ratios))


def test_hand_calculation_of_the_curves():
    e355 = default_efficiency(load_gpu("mi355x"))
    # e(M) = gemm_max * M / (M + half_m): MI355X fp8 at M = half_m = 240 rows is half of 0.338
    assert e355.for_gemm("fp8").gemm(240.0) == pytest.approx(0.169)
    # MI300X block-scaled fp8 at 8192 rows: 0.228 * 8192 / 8362 = 0.2234, x 2614.9 = 584 TFLOP/s;
    # aiter's measured median over the DeepSeek-V3 shapes at M = 8192: 592
    e300 = default_efficiency(load_gpu("mi300x"))
    assert e300.for_gemm("fp8_block").gemm(8192.0) * 2614.9 == pytest.approx(584.0, rel=0.01)
    # MI300X per-tensor fp8 has no table: the vendor default stands
    assert e300.for_gemm("fp8").gemm_max == VENDOR["amd"][1]


def test_fused_moe_keeps_the_vendor_base():
    assert AMD_GROUPED_GEMM_MAX == VENDOR["amd"][1]
    for gpu in ("mi300x", "mi325x", "mi355x"):
        assert default_efficiency(load_gpu(gpu)).grouped_gemm_max == VENDOR["amd"][1]
    # chips without an aiter table keep the curve's own gemm_max (None)
    assert default_efficiency(load_gpu("mi250x")).grouped_gemm_max is None
