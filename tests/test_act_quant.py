"""The fused activation quantizer in front of W8A8 GEMMs (core/act_quant.py): its bytes and
rate against the H200 measurement, where it applies (W8A8 only) and how it grows."""
import json
import statistics
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core import roofline
from perfmodel.core.act_quant import (ACT_QUANT_BW_FRACTION, ACT_QUANT_MEASURED_BYTES_PER_S,
                                      H200_COPY_BYTES_PER_S, act_quant_bytes, act_quant_s)
from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import load_engine
from perfmodel.core.hardware import load_gpu
from perfmodel.core.ops import ops
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "calibrate" / "data" / "gemm-dtype-quant-h200-sxm-20261201.json"


@pytest.fixture(scope="module")
def fused():
    """The one-kernel group128 quantizer's records (kind=group128, impl=compiled_static)."""
    recs = json.loads(RAW.read_text())["quant"]["records"]
    return [r for r in recs if r["kind"] == "group128" and r["impl"] == "compiled_static"]


def test_worked_number_one_quantization():
    # M=4096, K=8192: 2 B read + 1 B write + 4 B per 128 elements = 3.03125 B per element
    # = 101,711,872 B, the bytes the bench counted for that shape (RAW, group128 4096 x 8192)
    assert act_quant_bytes(4096 * 8192) == 101_711_872
    # at the median rate 3.19 TB/s: 31.8 us; the H200 measured 33.1 us (GEMM_DTYPE_NOTES.md)
    t = act_quant_s(4096 * 8192, H200_COPY_BYTES_PER_S)
    assert t == pytest.approx(101_711_872 / 3.19e12, rel=1e-9)
    assert t == pytest.approx(33.09e-6, rel=0.05)


def test_bytes_are_the_benchs_bytes_and_the_rate_is_its_median(fused):
    assert len(fused) == 6
    for r in fused:
        assert act_quant_bytes(r["M"] * r["K"]) == r["bytes"]
    median = statistics.median(r["bytes_per_s"] for r in fused)
    assert ACT_QUANT_MEASURED_BYTES_PER_S == pytest.approx(median, rel=0.005)
    # 4274 GB/s HBM copy on the same card (calibrate/BENCH_NOTES.md)
    assert ACT_QUANT_BW_FRACTION == pytest.approx(median / 4.274e12, rel=0.005)


def test_time_at_the_measured_rate_tracks_each_prefill_sized_point(fused):
    # from 4096 x 5120 up the fused kernel runs at 2.5-3.5 TB/s: one rate misses by < 25 %
    for r in fused:
        if r["M"] * r["K"] < 4096 * 5120:
            continue    # 1024 x 5120 runs at 1.59 TB/s: too small to fill the card
        assert act_quant_s(r["M"] * r["K"], H200_COPY_BYTES_PER_S) == pytest.approx(
            r["seconds"], rel=0.25)


def _quant_s(model, weights, B, T, S=0, engine="sglang", dep=None):
    """GPU seconds the activation quantization adds to one step."""
    m, hw, e = load_model(model), load_gpu("h200-sxm"), load_engine(engine)
    act = "int8" if weights == "int8" else "fp8" if weights.startswith("fp8") else "bf16"
    eff, p = default_efficiency(hw), Precision.of(weights, "bf16", act)
    args = (m, hw, p, e, eff, B, T, S)
    with_q = step_time(*args, dep=dep, prefill=S == 0).gpu_s
    with mock.patch.object(roofline, "act_quant_s", lambda *a, **k: 0.0):
        without = step_time(*args, dep=dep, prefill=S == 0).gpu_s
    return float(with_q - without)


def test_qwen3_32b_prefill_pays_5_to_11_percent_of_its_gemms():
    # GEMM_DTYPE_NOTES.md: Qwen3-32B at 8192 rows, the quantizers take 5-11 % of a block-fp8
    # GEMM's time; over all GEMMs the model's share must lie in that band (3-12 %)
    m, hw, e = load_model("qwen3-32b"), load_gpu("h200-sxm"), load_engine("sglang")
    p = Precision.of("fp8-b128", "bf16", "fp8")
    st_ = step_time(m, hw, p, e, default_efficiency(hw), 1, 8192, 0, prefill=True)
    gemm_s = sum(float(o.time_s) for o in st_.ops if o.kind == "gemm" and o.name != "lm_head")
    q = _quant_s("qwen3-32b", "fp8-b128", 1, 8192)
    assert 0.03 < q / (gemm_s - q) < 0.12


def test_qkv_input_is_quantized_once():
    m = load_model("qwen3-32b")
    op = {o.name: o for o in ops(m, Precision.of("fp8", "bf16", "fp8"), 1, 100, 0)}
    L, D = m.num_layers, m.d_model
    assert float(op["q_proj"].quant_elements) == 100 * D * L
    assert op["k_proj"].quant_elements == 0 and op["v_proj"].quant_elements == 0
    assert float(op["o_proj"].quant_elements) == 100 * m.num_heads * m.head_dim * L


def test_moe_quantizes_the_permuted_rows():
    m = load_model("qwen3-30b-a3b")
    e = m.moe
    op = {o.name: o for o in ops(m, Precision.of("fp8", "bf16", "fp8"), 2, 50, 0)}
    want = 100 * e.experts_per_token * (m.d_model + e.expert_ffn_dim) * m.num_moe_layers
    assert float(op["experts"].quant_elements) == pytest.approx(want)


@pytest.mark.parametrize("weights", ["bf16", "int4", "fp8"])
def test_nothing_for_16_bit_activations(weights):
    # bf16 and weight-only formats (W4A16, and fp8 weights on an engine without fp8 kernels)
    assert _quant_s("qwen3-32b", "bf16", 1, 2048) == 0.0
    m, hw = load_model("llama-3.1-8b"), load_gpu("h200-sxm")
    p = Precision.of(weights, "bf16", "bf16" if weights != "fp8" else "fp8")
    e = load_engine("hf-eager" if weights == "fp8" else "sglang")
    args = (m, hw, p, e, default_efficiency(hw), 1, 1024, 0)
    base = step_time(*args, prefill=True).gpu_s
    with mock.patch.object(roofline, "act_quant_s", lambda *a, **k: 1.0):
        assert step_time(*args, prefill=True).gpu_s == base


@given(model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3"]),
       weights=st.sampled_from(["fp8", "fp8-b128", "int8"]),
       b=st.integers(1, 64), t=st.integers(1, 4096), grow=st.integers(2, 8))
def test_positive_and_grows_with_rows(model, weights, b, t, grow):
    dep = Deployment(tp=8) if model == "deepseek-v3" else None
    small = _quant_s(model, weights, b, t, dep=dep)
    big = _quant_s(model, weights, b, t * grow, dep=dep)
    assert 0.0 < small < big


@given(m=st.floats(1, 1e5), k=st.floats(1, 1e5), f=st.floats(1.01, 10))
def test_bytes_and_time_grow_with_m_and_k(m, k, f):
    assert act_quant_bytes(m * k) < act_quant_bytes(m * f * k) == pytest.approx(act_quant_bytes(m * k * f))
    assert 0 < act_quant_s(m * k, 3.3e12) < act_quant_s(m * k * f, 3.3e12)
