"""Row-parallel tensor-parallel shards (o_proj, mlp_down) reduce over K / tp and run below the
unsharded layer's GEMM rate (perfmodel/core/grouped_gemm.py shard_depth_factor; measured:
calibrate/data/tp-shards-h200-sxm.json, calibrate/bench_tp_shards.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.core.catalog import load_model
from perfmodel.core.efficiency import HOPPER_SHARD_DEPTH_HALF_K, default_efficiency
from perfmodel.core.engines import ENGINES
from perfmodel.core.grouped_gemm import shard_depth_factor
from perfmodel.core.hardware import load_gpu
from perfmodel.core.roofline import step_time
from perfmodel.core.specs import Deployment, Precision

RAW = Path(__file__).resolve().parents[1] / "calibrate" / "data" / "tp-shards-h200-sxm.json"
FP8, BF16 = Precision.of("fp8"), Precision.of("bf16")
K_HALF = dict(HOPPER_SHARD_DEPTH_HALF_K)


def test_worked_number_llama70b_o_proj_tp8():
    # (1 + 790 * 8 / 8192) / (1 + 790 / 8192) = 1.77148 / 1.09644 = 1.6157
    assert shard_depth_factor(790.0, 8192.0, 8.0) == pytest.approx(1.6157, abs=1e-3)


@pytest.mark.parametrize("k_half, k, split", [(790.0, 8192.0, 1.0), (0.0, 8192.0, 8.0),
                                              (790.0, 0.0, 8.0)])
def test_no_split_no_measurement_or_no_linear_keeps_the_rate(k_half, k, split):
    assert shard_depth_factor(k_half, k, split) == 1.0


def test_more_ranks_never_speed_a_shard():
    f = [shard_depth_factor(330.0, 5120.0, s) for s in (1, 2, 4, 8, 16)]
    assert all(b > a for a, b in zip(f, f[1:]))


def _measured(kind, model, layer, M):
    recs = json.loads(RAW.read_text())["records"]
    return {r["tp"]: r for r in recs if (r["kind"], r["model"], r["layer"], r["M"]) == (kind, model, layer, M)}


@pytest.mark.parametrize("kind", ["fp8", "bf16"])
@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen3-32b"])
@pytest.mark.parametrize("layer", ["o", "down"])
@pytest.mark.parametrize("M", [2048, 4096, 8192, 16384])
def test_the_law_follows_the_measured_tp8_slowdown_within_20_percent(kind, model, layer, M):
    """Time of the tp-8 shard per FLOP over that of the whole layer, both timed back to back on
    one H200, against the law with the committed K_half."""
    rows = _measured(kind, model, layer, M)
    measured = rows[1]["flops_per_s"] / rows[8]["flops_per_s"]
    k_layer = rows[1]["K"]
    assert rows[8]["K"] * 8 == k_layer           # the shard reduces over K / 8
    law = shard_depth_factor(K_HALF[kind], k_layer, 8.0)
    assert law == pytest.approx(measured, rel=0.20)


def _op(st_, name):
    return next(o for o in st_.ops if o.name == name)


def test_h100_prompt_step_prices_row_parallel_shards_by_the_law():
    """Qwen3-32B fp8, 4096-token prompt on 8 x H100: o_proj and mlp_down compute time is the
    law's multiple of what the same step costs with no shard law; q_proj and mlp_up keep it."""
    m, hw = load_model("qwen3-32b"), load_gpu("h100-sxm")
    eng, eff, dep = ENGINES["trtllm"], default_efficiency(hw), Deployment(tp=8)
    plain = eff.model_copy(update={"shard_depth_half_k": ()})
    with_law = step_time(m, hw, FP8, eng, eff, 1, 4096, 0, dep=dep, prefill=True)
    without = step_time(m, hw, FP8, eng, plain, 1, 4096, 0, dep=dep, prefill=True)
    o_k = m.num_heads * m.head_dim                 # o_proj reduces over N * H = 8192
    for name, k in (("o_proj", o_k), ("mlp_down", m.ffn_dim)):
        ratio = float(_op(with_law, name).compute_s) / float(_op(without, name).compute_s)
        assert ratio == pytest.approx(shard_depth_factor(790.0, k, 8.0), rel=1e-6)
    for name in ("q_proj", "mlp_up"):
        assert float(_op(with_law, name).compute_s) == float(_op(without, name).compute_s)


def test_one_gpu_and_unmeasured_chips_are_unchanged():
    m = load_model("llama-3.1-70b")
    h200, b200 = load_gpu("h200-sxm"), load_gpu("b200")
    eng = ENGINES["vllm"]
    for hw, dep in ((h200, Deployment(tp=1)), (b200, Deployment(tp=8))):
        eff = default_efficiency(hw)
        plain = eff.model_copy(update={"shard_depth_half_k": ()})
        a = step_time(m, hw, FP8, eng, eff, np.array([1.0, 4.0]), 2048, 0, dep=dep, prefill=True)
        b = step_time(m, hw, FP8, eng, plain, np.array([1.0, 4.0]), 2048, 0, dep=dep, prefill=True)
        np.testing.assert_array_equal(a.time_s, b.time_s)


def test_weight_only_kernels_keep_their_rate():
    """int4 weights run a dequantizing kernel the measurement did not time: no shard law."""
    m, hw = load_model("llama-3.1-70b"), load_gpu("h200-sxm")
    eff = default_efficiency(hw)
    plain = eff.model_copy(update={"shard_depth_half_k": ()})
    p = Precision.of("int4")
    a = step_time(m, hw, p, ENGINES["vllm"], eff, 1, 4096, 0, dep=Deployment(tp=8), prefill=True)
    b = step_time(m, hw, p, ENGINES["vllm"], plain, 1, 4096, 0, dep=Deployment(tp=8), prefill=True)
    assert float(a.time_s) == float(b.time_s)
