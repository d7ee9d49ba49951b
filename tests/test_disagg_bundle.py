"""Bundles of identical requests in high-concurrency disaggregated levels
(perfmodel/serving/disagg_bundle.py) and the per-role max batch (PoolLayout.max_batch)."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel import api
from perfmodel.core.resolve import resolve
from perfmodel.serving import disagg_bundle
from perfmodel.serving.disagg import PoolLayout, _pool
from perfmodel.serving.disagg_bundle import BundledCost, bundle_size, bundled_policy
from perfmodel.serving.disagg_transfer import pool_link, transfer_s
from perfmodel.serving.simulate import on_server

MODEL, GPU = "llama-3.1-8b", "h100-sxm"


@pytest.fixture(scope="module")
def prefill_pool():
    sc, _, _ = resolve(MODEL, GPU)
    pool, _, _ = _pool(sc, PoolLayout(workers=1), None, prompt=512, output=1, share=64,
                       overhead=True)
    return pool


def test_a_bundle_step_costs_k_times_its_rows(prefill_pool):
    base = prefill_pool.cost
    b = BundledCost(base, 3)
    assert b.step_s(2, 100.0, [128.0], [0.0], 1) == pytest.approx(
        base.step_s(6, 300.0, [128.0] * 3, [0.0] * 3, 3))
    assert b.decode_run_s(4, 700.0, 5) == pytest.approx(base.decode_run_s(12, 700.0, 5))


def test_a_bundle_wider_than_one_step_runs_as_back_to_back_steps(prefill_pool):
    # 8 prompts, 2 per real step: 4 steps of 2; each member (sent as the one before it
    # completes) gets its first token one step after it arrives: 3 tau before the bundle ends
    base = prefill_pool.cost
    tau = base.step_s(0, 0.0, [512.0] * 2, [0.0] * 2, 2)
    b = BundledCost(base, 8, group=2)
    assert b.step_s(0, 0.0, [512.0], [0.0], 1) == pytest.approx(4 * tau)
    assert b.first_offset_s(512) == pytest.approx(3 * tau)
    assert BundledCost(base, 2, group=2).first_offset_s(512) == 0.0


def test_bundled_limits_shrink_by_k(prefill_pool):
    pol = prefill_pool.pol
    b = bundled_policy(pol, 4)
    assert b.max_seqs == max(1, pol.max_seqs // 4)
    assert b.total_blocks == pol.total_blocks // 4
    assert b.token_budget == pol.token_budget // 4
    assert bundled_policy(pol, 10 ** 6, prompt=512).token_budget == 512   # one bundle per step
    assert bundled_policy(pol, 1) is pol


def test_bundle_size_only_above_the_threshold():
    t = disagg_bundle.BUNDLE_ABOVE_CONCURRENCY
    assert bundle_size(None) == bundle_size(1) == bundle_size(t) == 1
    assert bundle_size(t + 1) == 2 and bundle_size(10 * t) == 10


def _level(monkeypatch, above: int, conc: int, range_ratio: float = 1.0):
    monkeypatch.setattr(disagg_bundle, "BUNDLE_ABOVE_CONCURRENCY", above)
    r = api.serve_disagg(MODEL, GPU, prefill=dict(workers=1), decode=dict(workers=2),
                         prompt_tokens=512, output_tokens=48, concurrencies=[conc],
                         range_ratio=range_ratio)
    return r.points[0]


def test_bundles_stay_close_to_request_by_request(monkeypatch):
    # the same level simulated request by request and as 16 bundles of 6: the documented
    # cost of bundling (docs/disagg.md) is a few percent on TTFT, under 2% on TPOT/throughput
    exact, bundled = _level(monkeypatch, 1000, 96), _level(monkeypatch, 6, 96)
    assert (bundled.concurrency, bundled.num_requests) == (exact.concurrency, exact.num_requests)
    assert bundled.ttft_mean_s == pytest.approx(exact.ttft_mean_s, rel=0.15)
    assert bundled.tpot_mean_s == pytest.approx(exact.tpot_mean_s, rel=0.02)
    assert bundled.output_tok_s_total == pytest.approx(exact.output_tok_s_total, rel=0.03)


def test_bundles_of_drawn_lengths_stay_close_to_request_by_request(monkeypatch):
    # lengths uniform in [0.8 L, L] (InferenceX's --random-range-ratio 0.8): each bundle
    # repeats one draw; 16 bundles of 6 against the 96 requests one by one, the same bounds
    exact, bundled = (_level(monkeypatch, 1000, 96, 0.8), _level(monkeypatch, 6, 96, 0.8))
    assert bundled.ttft_mean_s == pytest.approx(exact.ttft_mean_s, rel=0.15)
    assert bundled.tpot_mean_s == pytest.approx(exact.tpot_mean_s, rel=0.02)
    assert bundled.output_tok_s_total == pytest.approx(exact.output_tok_s_total, rel=0.03)
    # shorter requests than the fixed-length level: at most the fixed level's E2E
    fixed = _level(monkeypatch, 6, 96)
    assert bundled.e2e_mean_s < fixed.e2e_mean_s


def test_prefill_max_batch_one_serializes_a_burst():
    # two prompts sent together: one step of two prompts, then two transfers one after the
    # other (mean wait 1.5 x); with max batch 1, two steps of one prompt, each transfer on
    # its own (x): mean TTFT grows by 1.5 one - two - 0.5 x
    sc = on_server(resolve(MODEL, GPU)[0])
    pool, _, _ = _pool(sc, PoolLayout(workers=1), None, prompt=512, output=1, share=2,
                       overhead=True)
    one = pool.cost.step_s(0, 0.0, [512.0], [0.0], 1)
    two = pool.cost.step_s(0, 0.0, [512.0] * 2, [0.0] * 2, 2)
    x = float(transfer_s(sc, pool_link(sc, 2)[0], np.array([512.0]))[0])
    trace = [(0.0, 512, 1), (0.0, 512, 1)]      # output 1: the first token is the prefill's
    both = api.serve_disagg(MODEL, GPU, prefill=dict(workers=1), decode=dict(workers=1),
                            trace=trace).points[0]
    serial = api.serve_disagg(MODEL, GPU, prefill=dict(workers=1, max_batch=1),
                              decode=dict(workers=1), trace=trace).points[0]
    assert serial.ttft_mean_s - both.ttft_mean_s == pytest.approx(1.5 * one - two - 0.5 * x,
                                                                  rel=1e-6)


@pytest.mark.parametrize("above", [False, True])
def test_a_deployed_max_batch_replaces_the_presets_limit_both_ways(above):
    # TRT-LLM's max_batch_size bounds each attention-DP rank (serving_map_disagg.py): a
    # worker's limit over its ranks may exceed the server preset's. With it set, the worker
    # runs that many at once (fits); without it, the preset's limit queues the rest.
    from perfmodel.serving.disagg import _plan
    sc = on_server(resolve(MODEL, GPU)[0])
    preset = sc.engine.scheduler.limits(sc.hw, 1)[0]
    cap = preset + 64 if above else preset // 2
    conc = cap if above else preset
    plain = _plan(sc, conc, prompt=32, output=8, share=conc, overhead=False)
    capped = _plan(sc, conc, prompt=32, output=8, share=conc, overhead=False, max_batch=cap)
    assert plain[0].max_seqs == preset and capped[0].max_seqs == cap
    assert plain[2] is (not above)   # the preset alone: fits below it, queues above it
    assert capped[2] is above        # the deployment's cap: runs all, or queues half
