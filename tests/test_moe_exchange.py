"""The measured dispatch/combine floor under the ep all-to-all of attention-DP x EP steps
of engines with one-sided exchange kernels (perfmodel/core/moe_exchange.py,
core/parallel.comm_times, EngineProfile.moe_a2a_kernels): aggregated servers, prefill and
decode pools alike."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core import parallel
from perfmodel.core.engines import load_engine
from perfmodel.core.errors import PerfModelError
from perfmodel.core.moe_exchange import EXCHANGE_US, exchange_s
from perfmodel.core.parallel import alltoall_s, busiest_rank_ratios, comm_times
from perfmodel.core.predict import step
from perfmodel.core.resolve import resolve
from perfmodel.core.units import US
from perfmodel.serving import stepcost

DSV3 = "deepseek-v3"
DSV3_MOE_LAYERS = 58   # DeepSeek-V3 config.json: 61 layers, first_k_dense_replace 3


def _a2a(sc, rows, one_sided=True):
    """The ep_alltoall op of comm_times at `rows` token rows (all dp ranks)."""
    return dict(comm_times(sc.model, sc.hw, sc.eff, sc.dep, np.asarray(rows, dtype=float),
                           one_sided_a2a=one_sided))["ep_alltoall"]


@pytest.fixture
def no_floor(monkeypatch):
    """comm_times with the core's bytes/latency estimate alone (the floor set to 0)."""
    def off():
        monkeypatch.setattr(parallel, "exchange_s", lambda tokens, ep: 0.0 * np.asarray(tokens))
    return off


def test_measured_exchange_is_the_blogs_dispatch_plus_combine():
    # TensorRT-LLM tech blog 18, GB200 NVL72, dispatch + combine (us) at tokens per rank
    assert exchange_s(1, 8) == pytest.approx((18.9 + 31.0) * US)
    assert exchange_s(128, 8) == pytest.approx((31.7 + 38.1) * US)
    assert exchange_s(512, 32) == pytest.approx((109.6 + 102.5) * US)
    assert exchange_s(2048, 64) == pytest.approx((399.2 + 372.1) * US)


def test_measured_exchange_interpolates_and_clamps():
    # between 64 (56.4 us) and 128 (69.8 us) tokens at EP 8, on log2 tokens: the midpoint
    assert exchange_s(64 * 2 ** 0.5, 8) == pytest.approx((56.4 + 69.8) / 2 * US)
    # between EP 16 and EP 32 on log2 EP at 1 token: (49.6 + 51.2) / 2
    assert exchange_s(1, 16 * 2 ** 0.5) == pytest.approx((49.6 + 51.2) / 2 * US)
    assert exchange_s(1, 1) == 0.0
    assert exchange_s(1, 4) == exchange_s(1, 8)
    assert exchange_s(1, 256) == exchange_s(1, 64)
    assert exchange_s(1 << 20, 8) == exchange_s(2048, 8)


def test_deepseek_on_gb200_dp32_ep32_by_hand(no_floor):
    # hardware_db/gb200.yaml: NVLink latency 3 us, core.parallel.A2A_LATENCY_HOPS 2 ->
    # the core alone charges 2 calls x 2 hops x 3 us = 12 us per layer (+ < 1 us of bytes at
    # one row per rank: 7168 x 2 B x 8 experts over 900 GB/s); the blog's EP32 table, read
    # at the busiest rank's ~2.5 tokens (uniform routing of 32 tokens, core/expert_load.py):
    # 51.0-51.2 us, which the all-to-all of every MoE layer now takes
    sc, _, _ = resolve(DSV3, "gb200", weights="fp4", kv="fp8", engine="sglang", tp=1, dp=32,
                       ep=32)
    assert float(_a2a(sc, 32)) == pytest.approx(DSV3_MOE_LAYERS * 51.0 * US, rel=0.02)
    no_floor()
    assert float(_a2a(sc, 32)) == pytest.approx(DSV3_MOE_LAYERS * 12.0 * US, rel=0.1)


@pytest.mark.parametrize("model,kw", [
    (DSV3, dict(tp=8, ep=8)),             # TP attention: no dispatch/combine kernels
    (DSV3, dict(tp=1, dp=8, ep=1)),       # attention DP without EP
    ("llama-3.1-70b", dict(tp=1, dp=8)),  # dense model
])
def test_no_floor_outside_attention_dp_times_ep(model, kw, no_floor):
    sc, _, _ = resolve(model, "b200", weights="fp8", engine="trtllm", **kw)
    rows = np.array([1.0, 64.0, 4096.0])
    before = dict(comm_times(sc.model, sc.hw, sc.eff, sc.dep, rows, one_sided_a2a=True))
    no_floor()
    after = dict(comm_times(sc.model, sc.hw, sc.eff, sc.dep, rows, one_sided_a2a=True))
    assert before.keys() == after.keys()
    for name in before:
        assert np.array_equal(before[name], after[name]), name


def test_the_floor_fades_once_the_bytes_take_longer(no_floor):
    # TRT-LLM blog 18: flat up to batch 32 per rank, bandwidth-bound beyond; a prefill-sized
    # step (8192 rows per rank) moves ~1 GB per layer: the core's bytes set the time
    sc, _, _ = resolve(DSV3, "gb200", weights="fp4", kv="fp8", engine="sglang", tp=1, dp=32,
                       ep=32)
    rows = [32, 32 * 64, 32 * 8192]
    with_floor = _a2a(sc, rows)
    no_floor()
    core = _a2a(sc, rows)
    small, mid, big = with_floor - core
    assert small > mid >= big == 0.0
    assert np.all(with_floor >= core)


def test_a_prefill_step_and_an_aggregated_decode_step_pay_it(no_floor):
    # the floor is in the one op list: core.predict.step's ep_alltoall op of a 1024-token
    # prompt on tp1 x dp8 x EP8 B200 (128 rows per rank: blog EP8 69.8 us at 128, more at the
    # busiest rank's share) and of a 64-sequence decode step (8 per rank: ~49-51 us)
    sc, _, _ = resolve(DSV3, "b200", weights="fp8", kv="fp8", engine="trtllm", tp=1, dp=8,
                       ep=8)
    pre = next(o for o in step(sc, 1, 1024, 0, prefill=True).ops if o.name == "ep_alltoall")
    dec = next(o for o in step(sc, 64, 1, 2048).ops if o.name == "ep_alltoall")
    load_pre = float(busiest_rank_ratios(sc.model, sc.dep, 1024.0)[0])
    assert float(pre.time_s) >= DSV3_MOE_LAYERS * float(exchange_s(128 * load_pre, 8)) * 0.999
    assert float(pre.time_s) > DSV3_MOE_LAYERS * 69.8 * US
    assert DSV3_MOE_LAYERS * 49.0 * US <= float(dec.time_s) <= DSV3_MOE_LAYERS * 56.4 * US
    no_floor()
    dec0 = next(o for o in step(sc, 64, 1, 2048).ops if o.name == "ep_alltoall")
    assert float(dec0.time_s) < 0.5 * float(dec.time_s)


def test_a_lone_request_pays_the_floor_on_each_decode_step(no_floor):
    # one request of 65 outputs, decode pool DP x EP: after the client's first token its
    # decode worker runs 63 one-row steps, spread over O - 1 = 64 gaps (api.serve's TPOT,
    # as in test_disagg), so TPOT with the floor minus TPOT without is 63/64 x the floor's
    # excess over the core's all-to-all at one token row (a GPU-bound step)
    sc, _, _ = resolve(DSV3, "b200", weights="fp8", kv="fp8", engine="trtllm", tp=1, dp=8,
                       ep=8)
    kw = dict(prefill=dict(workers=1, tp=8, ep=8), decode=dict(workers=1, tp=1, dp=8, ep=8),
              weights="fp8", kv="fp8", engine="trtllm", trace=[(0.0, 1024, 65)])
    with_floor = api.serve_disagg(DSV3, "b200", **kw).points[0]
    a2a_one = float(_a2a(sc, 1))
    no_floor()
    without = api.serve_disagg(DSV3, "b200", **kw).points[0]
    excess = a2a_one - float(_a2a(sc, 1))
    assert excess > 0.0
    assert with_floor.tpot_p50_s - without.tpot_p50_s == pytest.approx(excess * 63 / 64,
                                                                       rel=1e-6)


def test_both_pools_pay_it(no_floor):
    # prefill and decode pools both tp1 x dp8 x EP8: a lone request's TTFT (prefill of 1024
    # rows + KV transfer + the decode worker's first step at one row) moves by the floor's
    # excess at the prefill step's busiest DP rank plus at one row. The lone prompt lives on
    # one of the 8 ranks, which dispatches all its 1024 rows: comm_times' per-rank share of
    # 8 x 1024 table rows (serving/stepcost.py, attention DP). The step's rows are interpolated
    # on the step-cost grid (stepcost._rows_grid, ROW_POINTS geometric points) up to the
    # surface's largest step: one request plus the 8 ranks' token budgets, 8 x 8192 (TensorRT-
    # LLM's server max_num_tokens 8192 per attention-DP rank, serving/simulate._dp_limits),
    # where the floor's excess is not linear: it is taken at the grid's neighbours of 8192
    # rows and interpolated as the surface does (the rest within 2%)
    sc, _, _ = resolve(DSV3, "b200", weights="fp8", kv="fp8", engine="trtllm", tp=1, dp=8,
                       ep=8)
    pool = dict(workers=1, tp=1, dp=8, ep=8)
    kw = dict(prefill=pool, decode=pool, weights="fp8", kv="fp8", engine="trtllm",
              trace=[(0.0, 1024, 9)])
    with_term = api.serve_disagg(DSV3, "b200", **kw).points[0]
    busiest = 8 * 1024.0
    grid = stepcost._rows_grid(1 + 8 * 8192, stepcost.ROW_POINTS)
    lo, hi = grid[grid <= busiest][-1], grid[grid > busiest][0]
    a2a = _a2a(sc, [lo, hi, 1.0])
    no_floor()
    without = api.serve_disagg(DSV3, "b200", **kw).points[0]
    excess = a2a - _a2a(sc, [lo, hi, 1.0])
    assert np.all(excess > 0.0)
    at_busiest = excess[0] + (excess[1] - excess[0]) * (busiest - lo) / (hi - lo)
    assert with_term.ttft_p50_s - without.ttft_p50_s == pytest.approx(
        float(at_busiest + excess[2]), rel=0.02)


@given(tokens=st.floats(min_value=-1e3, max_value=1e9, allow_nan=False),
       ep=st.integers(min_value=-4, max_value=1 << 12))
def test_measured_exchange_is_finite_and_within_the_table(tokens, ep):
    t = float(exchange_s(tokens, ep))
    assert math.isfinite(t) and t >= 0.0
    if ep >= 2:
        every = [v for row in EXCHANGE_US.values() for v in row]
        assert min(every) * US <= t <= max(every) * US


@given(tp=st.sampled_from([1, 2, 4, 8]), dp=st.sampled_from([1, 2, 4, 8, 16, 32]),
       ep=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       gpu=st.sampled_from(["gb200", "b200", "h200-sxm", "h100-sxm"]),
       rows=st.floats(min_value=-10.0, max_value=1e7, allow_nan=False))
def test_the_all_to_all_is_the_larger_of_core_and_measured_or_a_clean_refusal(tp, dp, ep, gpu,
                                                                              rows):
    try:
        sc, _, _ = resolve(DSV3, gpu, weights="fp8", engine="trtllm", tp=tp, dp=dp, ep=ep)
        M = np.array([max(rows, 0.0), 1.0])
        comm = dict(comm_times(sc.model, sc.hw, sc.eff, sc.dep, M, one_sided_a2a=True))
        collective = dict(comm_times(sc.model, sc.hw, sc.eff, sc.dep, M))
    except PerfModelError:
        return
    m, dep = sc.model, sc.dep
    if ep == 1 or dp == 1:   # TP attention: the MoE output is all-reduced, no exchange
        assert "ep_alltoall" not in comm
        return
    got = comm["ep_alltoall"] / m.num_moe_layers
    load, _ = busiest_rank_ratios(m, dep, M)
    local = M / dep.dp * m.d_model * 2.0 * m.moe.experts_per_token / dep.tp * load  # BF16
    core = 2 * alltoall_s(local, ep, sc.hw, dep, sc.eff)
    assert np.all(np.isfinite(got)) and np.all(got >= core * (1 - 1e-9))
    measured = exchange_s(M / (dep.tp * dep.dp) * load, ep)
    # never under the measured kernels, never above the larger of the two
    assert np.allclose(got, np.maximum(core, measured), rtol=1e-9)
    # collective exchange kernels (vLLM's default): the core's estimate alone
    assert np.allclose(collective["ep_alltoall"] / m.num_moe_layers, core, rtol=1e-9)


def test_engines_exchange_kernels():
    # TensorRT-LLM tech blog 18: NVLinkOneSided AlltoAll under attention DP; SGLang's large-EP
    # deployments run DeepEP low-latency (assumption, engines.py); vLLM's default
    # VLLM_ALL2ALL_BACKEND is allgather_reducescatter (vllm/envs.py)
    assert load_engine("trtllm").moe_a2a_kernels == "one_sided"
    assert load_engine("sglang").moe_a2a_kernels == "one_sided"
    assert load_engine("vllm").moe_a2a_kernels == "collective"


def test_a_collective_engine_keeps_the_cores_all_to_all():
    # the same tp1 x dp8 x EP8 decode step under vLLM: its ep_alltoall op is the core's
    # bytes and latencies (2 calls x 2 hops x the NVLink latency + bytes), well under the
    # blog's ~50 us per layer that TensorRT-LLM's step pays
    kw = dict(weights="fp8", kv="fp8", tp=1, dp=8, ep=8)
    vllm, _, _ = resolve(DSV3, "b200", engine="vllm", **kw)
    trt, _, _ = resolve(DSV3, "b200", engine="trtllm", **kw)
    a2a = {}
    for name, sc in (("vllm", vllm), ("trtllm", trt)):
        a2a[name] = float(next(o for o in step(sc, 8, 1, 2048).ops
                               if o.name == "ep_alltoall").time_s)
    assert a2a["vllm"] == pytest.approx(float(_a2a(vllm, 8, one_sided=False)), rel=1e-9)
    assert a2a["vllm"] < 0.5 * DSV3_MOE_LAYERS * 49.0 * US <= a2a["trtllm"]
