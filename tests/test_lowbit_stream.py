"""Weight streaming of dense GEMMs on fp4 tensor cores (core/weight_stream.py
NATIVE_LOWBIT_STREAM_VS_FP8, weight_stream_fraction, priced in core/roofline.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core import weight_stream
from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import DTYPE_BITS, step_time
from perfmodel.core.specs import Deployment, Precision
from perfmodel.core.weight_stream import weight_stream_fraction

FP8 = Precision.of("fp8", kv="fp8")
NVFP4 = Precision.of("fp4-g16", kv="fp8")
SERVING = ("vllm", "sglang", "trtllm")
DENSE_GEMMS = ("q_proj", "k_proj", "v_proj", "o_proj", "mlp_up", "mlp_down")


def _gemms(model: str, gpu: str, p: Precision, engine: str, batch, context, tp=1):
    m, hw = load_model(model), load_gpu(gpu)
    est = step_time(m, hw, p, ENGINES[engine], default_efficiency(hw), batch, 1.0, context,
                    dep=Deployment(tp=tp))
    return {o.name: o for o in est.ops if o.kind == "gemm"}, est


def test_fp4_weight_read_over_fp8_follows_cutlass_2266_rates():
    # NVFP4 = 4-bit E2M1 + an 8-bit E4M3 scale per 16 elements: 4.5 bits against fp8's 8;
    # NVIDIA/cutlass #2266 (B200, M=16): NVFP4 GEMM ~4 TB/s where MXFP8 reaches ~6 TB/s.
    expected = (4.5 / 8.0) / (4.0 / 6.0)
    fp8, _ = _gemms("llama-3.1-70b", "b200", FP8, "trtllm", 1.0, 1024.0)
    fp4, _ = _gemms("llama-3.1-70b", "b200", NVFP4, "trtllm", 1.0, 1024.0)
    for name in ("q_proj", "o_proj", "mlp_up", "mlp_down"):
        ratio = float(fp4[name].memory_s) / float(fp8[name].memory_s)
        assert ratio == pytest.approx(expected, rel=0.01), name


def _stream_rate_bytes_per_s(gpu: str, engine: str, dtype: str) -> float:
    """Weight bytes per second of a quantized dense GEMM at small M in this model."""
    hw = load_gpu(gpu)
    return (hw.memory_bandwidth_bytes_per_s * default_efficiency(hw).mem_bw_fraction
            * weight_stream_fraction(ENGINES[engine], True, dtype))


@pytest.mark.parametrize("engine", SERVING)
def test_stream_rates_match_the_cutlass_small_m_measurements(engine):
    # NVIDIA/cutlass #1139 (H100 SXM, fp8 GEMM 16..64 x 14336 x 4096): best ~2.2 TB/s
    assert _stream_rate_bytes_per_s("h100-sxm", engine, "fp8") == pytest.approx(2.2e12, rel=0.15)
    # NVIDIA/cutlass #2266 (B200, M=16): MXFP8 "much closer to 6 TB/s"; NVFP4 "not much higher
    # than 3 TB/s", "close to 4 TB/s" with the best tile
    assert _stream_rate_bytes_per_s("b200", engine, "fp8") == pytest.approx(6e12, rel=0.15)
    assert 3e12 <= _stream_rate_bytes_per_s("b200", engine, "fp4") <= 4e12


def test_llama_70b_b200_decode_step_fp4_over_fp8_near_inferencex():
    # data/serving/aic_silicon_sample.csv (InferenceX, B200, TRT-LLM, Llama-3.1-70B tp1, 1k/1k,
    # C=4): TPOT 12.1 ms NVFP4 vs 14.6 ms FP8, ratio 0.83 (bytes alone would say ~0.6)
    _, fp8 = _gemms("llama-3.1-70b", "b200", FP8, "trtllm", 4.0, 1500.0)
    _, fp4 = _gemms("llama-3.1-70b", "b200", NVFP4, "trtllm", 4.0, 1500.0)
    assert float(fp4.time_s) / float(fp8.time_s) == pytest.approx(12.1 / 14.6, abs=0.05)


def test_without_the_fraction_the_step_ratio_is_the_byte_ratio(monkeypatch):
    # the same step priced at the fp8 streaming rate lands near 0.64, far below InferenceX's 0.83
    monkeypatch.setattr(weight_stream, "NATIVE_LOWBIT_STREAM_VS_FP8", {})
    _, fp8 = _gemms("llama-3.1-70b", "b200", FP8, "trtllm", 4.0, 1500.0)
    _, fp4 = _gemms("llama-3.1-70b", "b200", NVFP4, "trtllm", 4.0, 1500.0)
    assert float(fp4.time_s) / float(fp8.time_s) < 0.72


@pytest.mark.parametrize("gpu,weights", [("b200", "fp8"), ("b200", "bf16"), ("h200-sxm", "fp8"),
                                         ("h100-sxm", "fp4-g16"), ("b200", "int4")])
def test_other_paths_are_unchanged(monkeypatch, gpu, weights):
    # fp8, bf16, weight-only int4 and fp4 weights on a chip without fp4 units (dequantized to
    # 16 bits) keep the engine's rate: the fraction belongs to the native fp4 MMA path only
    p = Precision.of(weights, kv="fp8")
    batch = np.array([1.0, 8.0, 64.0])
    _, with_table = _gemms("llama-3.1-8b", gpu, p, "vllm", batch, 2048.0)
    monkeypatch.setattr(weight_stream, "NATIVE_LOWBIT_STREAM_VS_FP8", {})
    _, without = _gemms("llama-3.1-8b", gpu, p, "vllm", batch, 2048.0)
    np.testing.assert_array_equal(with_table.time_s, without.time_s)


def test_moe_experts_keep_their_fused_kernel_rate(monkeypatch):
    # the expert GEMMs run the fused-MoE kernel (engine.moe_stream_fraction), not mm_fp4
    ops, _ = _gemms("deepseek-v3", "b200", NVFP4, "sglang", 4.0, 1024.0, tp=8)
    monkeypatch.setattr(weight_stream, "NATIVE_LOWBIT_STREAM_VS_FP8", {})
    plain, _ = _gemms("deepseek-v3", "b200", NVFP4, "sglang", 4.0, 1024.0, tp=8)
    assert float(ops["experts"].memory_s) == pytest.approx(float(plain["experts"].memory_s))
    assert float(ops["o_proj"].memory_s) > float(plain["o_proj"].memory_s)


@given(engine=st.sampled_from(sorted(ENGINES)), quantized=st.booleans(),
       dtype=st.sampled_from(sorted(DTYPE_BITS)), experts=st.booleans())
def test_fraction_is_a_share_of_the_memory_rate(engine, quantized, dtype, experts):
    f = weight_stream_fraction(ENGINES[engine], quantized, dtype, experts=experts)
    assert 0.0 < f <= 1.0
    if not quantized:
        assert f == 1.0


@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"]),
       gpu=st.sampled_from(["b200", "b300", "gb200"]), engine=st.sampled_from(SERVING),
       batch=st.floats(1.0, 512.0), context=st.floats(0.0, 16384.0),
       tp=st.sampled_from([1, 2, 4, 8]))
def test_fp4_never_streams_more_or_faster_than_fp8(model, gpu, engine, batch, context, tp):
    # a lower-bit format never moves more weight time than a higher-bit one, and its lower
    # streaming rate never makes a byte cheaper than an fp8 byte
    fp8, _ = _gemms(model, gpu, FP8, engine, batch, context, tp)
    fp4, _ = _gemms(model, gpu, NVFP4, engine, batch, context, tp)
    for name in DENSE_GEMMS:
        if name not in fp8:
            continue
        assert float(fp4[name].time_s) <= float(fp8[name].time_s) * (1 + 1e-12), name
        assert float(fp4[name].memory_s) >= 4.5 / 8.0 * float(fp8[name].memory_s) * (1 - 1e-9)
