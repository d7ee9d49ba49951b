"""The dispatch/combine floor of attention-DP x EP workers in the disaggregated pools
(perfmodel/serving/disagg_exchange.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.errors import PerfModelError
from perfmodel.core.resolve import resolve
from perfmodel.serving import disagg
from perfmodel.serving.disagg_exchange import (EXCHANGE_S, ExchangeCost, exchange_extra_s,
                                               exchange_s, with_exchange)

DSV3 = "deepseek-v3"


def test_measured_exchange_is_the_blogs_dispatch_plus_combine():
    # TensorRT-LLM tech blog 18, GB200 NVL72, dispatch + combine (us) at tokens per rank
    assert exchange_s(1, 8) == pytest.approx((18.9 + 31.0) * 1e-6)
    assert exchange_s(128, 8) == pytest.approx((31.7 + 38.1) * 1e-6)
    assert exchange_s(512, 32) == pytest.approx((109.6 + 102.5) * 1e-6)
    assert exchange_s(2048, 64) == pytest.approx((399.2 + 372.1) * 1e-6)


def test_measured_exchange_interpolates_and_clamps():
    # between 64 (56.4 us) and 128 (69.8 us) tokens at EP 8, on log2 tokens: the midpoint
    assert exchange_s(64 * 2 ** 0.5, 8) == pytest.approx((56.4 + 69.8) / 2 * 1e-6)
    # between EP 16 and EP 32 on log2 EP at 1 token: (49.6 + 51.2) / 2
    assert exchange_s(1, 16 * 2 ** 0.5) == pytest.approx((49.6 + 51.2) / 2 * 1e-6)
    assert exchange_s(1, 1) == 0.0
    assert exchange_s(1, 4) == exchange_s(1, 8)
    assert exchange_s(1, 256) == exchange_s(1, 64)
    assert exchange_s(1 << 20, 8) == exchange_s(2048, 8)


def test_deepseek_on_gb200_dp32_ep32_by_hand():
    # DeepSeek-V3 config.json: 61 layers, first_k_dense_replace 3 -> 58 MoE layers;
    # hardware_db/gb200.yaml: NVLink latency 3 us, core.parallel.A2A_LATENCY_HOPS 2 ->
    # the core charges 2 calls x 2 hops x 3 us = 12 us per layer (+ < 1 us of bytes at one
    # row per rank: 7168 x 2 B x 8 experts over 900 GB/s); the blog's EP32 table, read at
    # the busiest rank's ~2.5 tokens (uniform routing of 32 tokens, core/expert_load.py):
    # 51.0-51.2 us
    sc, _, _ = resolve(DSV3, "gb200", weights="fp4", kv="fp8", engine="sglang", tp=1, dp=32,
                       ep=32)
    assert exchange_extra_s(sc, 32) == pytest.approx(58 * (51.0 - 12.0) * 1e-6, rel=0.02)


@pytest.mark.parametrize("model,kw", [
    (DSV3, dict(tp=8, ep=8)),             # TP attention: no dispatch/combine kernels
    (DSV3, dict(tp=1, dp=8, ep=1)),       # attention DP without EP
    ("llama-3.1-70b", dict(tp=1, dp=8)),  # dense model
])
def test_no_floor_outside_attention_dp_times_ep(model, kw):
    sc, _, _ = resolve(model, "b200", weights="fp8", engine="trtllm", **kw)
    assert not np.any(exchange_extra_s(sc, [1, 64, 4096]))
    sentinel = object()
    assert with_exchange(sentinel, sc) is sentinel


class _Flat:
    """A step cost of 10 ms per forward step, 0 for an empty one."""

    def step_s(self, d, sum_ctx, chunks=(), chunk_ctx=(), finishing=0):
        return 0.01 if (d or len(chunks)) else 0.0

    def decode_run_s(self, d, mean_ctx0, steps):
        return np.full(steps, 0.01)


def test_the_floor_fades_once_the_bytes_take_longer():
    # TRT-LLM blog 18: flat up to batch 32 per rank, bandwidth-bound beyond; a prefill-sized
    # step (8192 rows per rank) moves ~1 GB per layer: no floor left
    sc, _, _ = resolve(DSV3, "gb200", weights="fp4", kv="fp8", engine="sglang", tp=1, dp=32,
                       ep=32)
    small, mid, big = exchange_extra_s(sc, [32, 32 * 64, 32 * 8192])
    assert small > mid >= big == 0.0


def test_exchange_cost_adds_the_floor_to_every_forward_step_only():
    c = ExchangeCost(_Flat(), (1.0, 1e6), (0.002, 0.002))
    assert c.step_s(4, 400.0) == pytest.approx(0.012)
    assert c.step_s(0, 0.0, [1], [100.0], 1) == pytest.approx(0.012)
    assert c.step_s(0, 0.0) == 0.0
    assert np.allclose(c.decode_run_s(4, 100.0, 3), 0.012)


def test_a_lone_request_pays_the_floor_on_each_decode_step(monkeypatch):
    # one request of 65 outputs, decode pool DP x EP: after the client's first token its
    # decode worker runs 63 one-row steps, spread over O - 1 = 64 gaps (api.serve's TPOT,
    # as in test_disagg), so TPOT with the term minus TPOT without is 63/64 x extra(1 row)
    sc, _, _ = resolve(DSV3, "b200", weights="fp8", kv="fp8", engine="trtllm", tp=1, dp=8,
                       ep=8)
    kw = dict(prefill=dict(workers=1, tp=8, ep=8), decode=dict(workers=1, tp=1, dp=8, ep=8),
              weights="fp8", kv="fp8", engine="trtllm", trace=[(0.0, 1024, 65)])
    with_floor = api.serve_disagg(DSV3, "b200", **kw).points[0]
    monkeypatch.setattr(disagg, "with_exchange", lambda cost, sc: cost)
    without = api.serve_disagg(DSV3, "b200", **kw).points[0]
    assert with_floor.tpot_p50_s - without.tpot_p50_s == pytest.approx(
        exchange_extra_s(sc, 1) * 63 / 64, rel=1e-6)


def test_only_the_decode_pool_pays_it(monkeypatch):
    # prefill and decode pools both tp1 x dp8 x EP8: a lone request's TTFT (prefill + KV
    # transfer + the decode worker's first step, a one-token chunk) moves by exactly the
    # decode step's extra at one token row; the prefill steps are untouched
    sc, _, _ = resolve(DSV3, "b200", weights="fp8", kv="fp8", engine="trtllm", tp=1, dp=8,
                       ep=8)
    pool = dict(workers=1, tp=1, dp=8, ep=8)
    kw = dict(prefill=pool, decode=pool, weights="fp8", kv="fp8", engine="trtllm",
              trace=[(0.0, 1024, 9)])
    with_term = api.serve_disagg(DSV3, "b200", **kw).points[0]
    monkeypatch.setattr(disagg, "with_exchange", lambda cost, sc: cost)
    without = api.serve_disagg(DSV3, "b200", **kw).points[0]
    assert with_term.ttft_p50_s - without.ttft_p50_s == pytest.approx(exchange_extra_s(sc, 1),
                                                                       rel=1e-6)


@given(tokens=st.floats(min_value=-1e3, max_value=1e9, allow_nan=False),
       ep=st.integers(min_value=-4, max_value=1 << 12))
def test_measured_exchange_is_finite_and_within_the_table(tokens, ep):
    t = float(exchange_s(tokens, ep))
    assert math.isfinite(t) and t >= 0.0
    if ep >= 2:
        every = [v for row in EXCHANGE_S.values() for v in row]
        assert min(every) * 1e-6 <= t <= max(every) * 1e-6


@given(tp=st.sampled_from([1, 2, 4, 8]), dp=st.sampled_from([1, 2, 4, 8, 16, 32]),
       ep=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       gpu=st.sampled_from(["gb200", "b200", "h200-sxm", "h100-sxm"]),
       rows=st.floats(min_value=-10.0, max_value=1e7, allow_nan=False))
def test_extra_is_a_bounded_nonnegative_term_or_a_clean_refusal(tp, dp, ep, gpu, rows):
    try:
        sc, _, _ = resolve(DSV3, gpu, weights="fp8", engine="trtllm", tp=tp, dp=dp, ep=ep)
    except PerfModelError:
        return
    x, one = exchange_extra_s(sc, [rows, 1.0])
    assert math.isfinite(x) and x >= 0.0 and math.isfinite(one)
    # at most the measured time of every MoE layer (the core's is subtracted, never added)
    assert max(x, one) <= sc.model.num_moe_layers * max(EXCHANGE_S[64]) * 1e-6
    assert (one > 0.0) == (dp > 1 and ep > 1)
