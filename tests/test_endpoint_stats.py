"""summarize / find_knee / nvidia-smi parsing, with hand-computed values (no network)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.analysis.endpoint import LevelStats, RequestSample, find_knee, percentile, summarize
from perfmodel.analysis.endpoint.gpu import parse_nvidia_smi
from perfmodel.core.errors import PerfModelError
from perfmodel.core.units import MiB


def ok(index, start, end, ttft, tokens, itl=()):
    return RequestSample(index=index, ok=True, start_s=start, end_s=end, ttft_s=ttft,
                         output_tokens=tokens, itl_s=tuple(itl), finish_reason="length")


def failed(index, start, end, kind):
    return RequestSample(index=index, ok=False, error_kind=kind, error="x", start_s=start, end_s=end)


def test_percentile_is_linear_interpolation():
    # rank p/100 * (n-1): p90 of [1, 2, 3, 4] is at rank 2.7 -> 3 + 0.7 * 1
    assert percentile([4.0, 1.0, 3.0, 2.0], 90) == pytest.approx(3.7)
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None


def test_summarize_hand_computed():
    samples = [
        ok(0, 0.0, 1.0, 0.2, 5, itl=(0.2, 0.2, 0.2, 0.2)),  # e2e 1, tpot (1-0.2)/4 = 0.2
        ok(1, 0.0, 2.0, 0.4, 9),                             # e2e 2, tpot 1.6/8 = 0.2
        ok(2, 1.0, 4.0, 1.0, 5),                             # e2e 3, tpot 2.0/4 = 0.5
        failed(3, 2.0, 2.5, "timeout"),
    ]
    s = summarize(samples)
    assert (s.requests_sent, s.ok, s.failed) == (4, 3, 1)
    assert s.errors == {"timeout": 1}
    assert s.finish_reasons == {"length": 3}
    assert s.wall_s == pytest.approx(4.0)                   # first start 0 -> last end 4
    # TTFT [0.2, 0.4, 1.0]: p50 = 0.4; p90 at rank 1.8 = 0.4 + 0.8*0.6; p99 at rank 1.98
    assert s.ttft_p50_s == pytest.approx(0.4)
    assert s.ttft_p90_s == pytest.approx(0.88)
    assert s.ttft_p99_s == pytest.approx(0.988)
    # TPOT [0.2, 0.2, 0.5]: p50 = 0.2; p90 = 0.2 + 0.8*0.3
    assert s.tpot_p50_s == pytest.approx(0.2)
    assert s.tpot_p90_s == pytest.approx(0.44)
    # E2E [1, 2, 3]
    assert (s.e2e_p50_s, s.e2e_mean_s) == (pytest.approx(2.0), pytest.approx(2.0))
    assert s.e2e_p90_s == pytest.approx(2.8)
    assert s.itl_p50_s == pytest.approx(0.2)
    assert s.output_tokens_total == 19
    assert s.output_tok_s == pytest.approx(19 / 4)
    assert s.requests_s == pytest.approx(3 / 4)
    assert s.tokens_source == "chunks"
    assert s.prompt_tokens_min is None


def test_tpot_undefined_for_one_token():
    assert ok(0, 0.0, 1.0, 0.5, 1).tpot_s is None
    assert ok(0, 0.0, 1.0, 0.5, 3).tpot_s == pytest.approx(0.25)


def test_summarize_all_failed_and_empty():
    s = summarize([failed(0, 0.0, 1.0, "connect"), failed(1, 0.0, 3.0, "connect")])
    assert (s.ok, s.failed, s.errors) == (0, 2, {"connect": 2})
    assert s.ttft_p50_s is None and s.e2e_mean_s is None and s.tokens_source is None
    assert s.output_tok_s == 0.0 and s.wall_s == pytest.approx(3.0)
    empty = summarize([])
    assert empty.requests_sent == 0 and empty.output_tok_s == 0.0


def level(tok_s: float, e2e: float | None, n_ok: int = 10) -> LevelStats:
    return LevelStats(
        requests_sent=10, ok=n_ok, failed=10 - n_ok, errors={}, finish_reasons={}, wall_s=1.0,
        ttft_p50_s=None, ttft_p90_s=None, ttft_p99_s=None, tpot_p50_s=None, tpot_p90_s=None,
        itl_p50_s=None, itl_p90_s=None, itl_p99_s=None, e2e_p50_s=e2e, e2e_p90_s=e2e,
        e2e_mean_s=e2e, output_tokens_total=0, prompt_tokens_min=None, prompt_tokens_max=None,
        output_tok_s=tok_s, requests_s=0.0, tokens_source=None)


def test_knee_at_the_level_after_which_gain_drops_below_ten_percent():
    # 1->2: x1.90 per doubling; 2->4: 200/190 = x1.053 < 1.10 while E2E 1.05 -> 2.0
    k = find_knee([(1, level(100, 1.0)), (2, level(190, 1.05)), (4, level(200, 2.0))])
    assert k.concurrency == 2
    assert "x1.053" in k.reason


def test_knee_gain_is_per_doubling():
    # 1 -> 4 is two doublings: x1.15 total = sqrt(1.15) = x1.072 per doubling < 1.10 -> knee at 1
    assert find_knee([(1, level(100, 1.0)), (4, level(115, 3.0))]).concurrency == 1
    # x1.30 total = x1.140 per doubling: still scaling
    assert find_knee([(1, level(100, 1.0)), (4, level(130, 3.0))]).concurrency is None


def test_no_knee_when_latency_does_not_grow_or_still_scaling():
    assert find_knee([(1, level(100, 1.0)), (2, level(101, 1.0))]).concurrency is None
    assert find_knee([(1, level(100, 1.0)), (2, level(195, 1.0)), (4, level(380, 1.1))]).concurrency is None
    assert find_knee([(1, level(100, 1.0))]).reason.startswith("fewer than two")


def test_knee_when_next_level_fails_entirely():
    k = find_knee([(1, level(100, 1.0)), (2, level(190, 1.1)), (4, level(0.0, None, n_ok=0))])
    assert k.concurrency == 2 and "no request succeeded" in k.reason


def test_knee_threshold_is_a_parameter():
    levels = [(1, level(100, 1.0)), (2, level(112, 1.5))]  # x1.12 per doubling
    assert find_knee(levels, min_gain=0.10).concurrency is None
    assert find_knee(levels, min_gain=0.15).concurrency == 1


def test_parse_nvidia_smi():
    snap = parse_nvidia_smi("NVIDIA H200, 1024, 143771\nNVIDIA H200, 512, 143771\n")
    assert snap.names == ["NVIDIA H200", "NVIDIA H200"]
    assert snap.used_total_bytes == pytest.approx(1536 * MiB)
    assert parse_nvidia_smi("garbage") is None


request = st.builds(
    lambda start, ttft, decode, tokens, good: (
        ok(0, start, start + ttft + decode, ttft, tokens) if good
        else failed(0, start, start + ttft, "timeout")),
    st.floats(0, 100), st.floats(0, 10), st.floats(0, 10), st.integers(1, 500), st.booleans())


@settings(deadline=None)
@given(st.lists(request, min_size=1, max_size=40))
def test_summarize_orders_and_bounds(samples):
    s = summarize(samples)
    assert s.ok + s.failed == len(samples) == s.requests_sent
    for lo, hi in [(s.ttft_p50_s, s.ttft_p90_s), (s.ttft_p90_s, s.ttft_p99_s),
                   (s.e2e_p50_s, s.e2e_p90_s), (s.tpot_p50_s, s.tpot_p90_s)]:
        if lo is not None:
            assert lo <= hi + 1e-12
    if s.ok:
        assert s.ttft_p50_s <= max(r.e2e_s for r in samples if r.ok) + 1e-9
    assert s.output_tok_s >= 0 and math.isfinite(s.output_tok_s)


stats_strategy = st.builds(level, st.floats(0, 1e6), st.one_of(st.none(), st.floats(1e-6, 1e3)),
                           st.integers(0, 10))


@given(st.lists(st.tuples(st.integers(-2, 64), stats_strategy), max_size=6))
def test_find_knee_is_a_level_of_the_run_or_a_clean_error(levels):
    try:
        k = find_knee(levels)
    except PerfModelError:
        cs = [c for c, _ in levels]
        assert len(set(cs)) != len(cs) or min(cs) <= 0   # only bad concurrencies are refused
        return
    assert k.concurrency is None or k.concurrency in {c for c, _ in levels}
    assert k.reason
