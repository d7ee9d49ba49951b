"""Pure chart builders of the Serving run page, without Streamlit: what they draw follows
from their inputs (base units in, display units out), and no input of the right shape raises."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.webapp import charts_serving as cs


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_timeline_bars_span_each_segment_and_units_convert():
    fig = cs.run_timeline(start_s=[0.0, 0.5, 1.5], duration_s=[0.5, 1.0, 0.25],
                          decode_rows=[0, 4, 8], prefill_tokens=[2048, 512, 0],
                          waiting=[6, 2, 0], kv_used_fraction=[0.1, 0.3, 0.35])
    bars = _trace(fig, "decode rows")
    # a bar is centred in its segment and as wide as it lasted
    assert list(bars.x) == [0.25, 1.0, 1.625] and list(bars.width) == [0.5, 1.0, 0.25]
    assert list(bars.y) == [0, 4, 8]
    assert list(_trace(fig, "prefill tokens").y) == [2048, 512, 0]
    assert list(_trace(fig, "waiting").x) == [0.0, 0.5, 1.5]
    assert list(_trace(fig, "KV in use").y) == [10.0, 30.0, 35.0]        # fraction -> %
    # panels: composition (decode rows left, prefill tokens right), queue, KV share 0-100%
    assert [t.yaxis for t in fig.data] == ["y", "y2", "y3", "y4"]
    assert json.loads(fig.to_json())["layout"]["yaxis4"]["range"] == [0, 100]


def test_latency_percentiles_in_ms_with_gaps_and_non_fitting_levels_marked():
    fig = cs.latency_percentiles([1, 8, 64], {"p50": [0.05, 0.2, None], "p99": [0.06, 0.4, None]},
                                 {"p50": [0.010, 0.012, None]}, fits=[True, True, False])
    ttft50 = _trace(fig, "TTFT p50")
    assert list(ttft50.y[:2]) == [50.0, 200.0] and math.isnan(ttft50.y[2])   # s -> ms, None -> gap
    assert list(ttft50.marker.symbol) == ["circle", "circle", "x"]
    assert _trace(fig, "TTFT p99").line.dash == "dot"
    assert [t.name for t in fig.data] == ["TTFT p50", "TTFT p99", "TPOT p50"]
    assert list(_trace(fig, "TPOT p50").y[:2]) == [10.0, 12.0]


def test_throughput_has_both_axes():
    fig = cs.throughput([1, 2], [100.0, 180.0], [0.5, 0.9], [True, True])
    assert list(_trace(fig, "output tok/s (all users)").y) == [100.0, 180.0]
    rps = _trace(fig, "requests/s")
    assert rps.yaxis == "y2" and list(rps.y) == [0.5, 0.9]


finite = st.floats(0, 1e6, allow_nan=False)
maybe = st.one_of(st.none(), st.floats(1e-6, 1e4, allow_nan=False))


@given(st.integers(0, 30).flatmap(lambda n: st.tuples(
    *(st.lists(finite, min_size=n, max_size=n) for _ in range(5)),
    st.lists(st.floats(0, 1), min_size=n, max_size=n))))
def test_timeline_never_raises_on_any_segments(cols):
    start, dur, rows, pre, wait, kv = cols
    fig = cs.run_timeline(start, dur, rows, pre, wait, kv)
    assert len(_trace(fig, "decode rows").x) == len(start)


@given(st.lists(st.tuples(st.integers(1, 4096), maybe, maybe, maybe, st.booleans()),
                min_size=1, max_size=8, unique_by=lambda t: t[0]))
def test_percentile_charts_never_raise(levels):
    c = [x[0] for x in levels]
    fits = [x[4] for x in levels]
    fig = cs.latency_percentiles(c, {"p50": [x[1] for x in levels]}, {"p50": [x[2] for x in levels]},
                                 fits)
    y = np.asarray(_trace(fig, "TTFT p50").y, dtype=float)
    assert all(np.isnan(v) or v > 0 for v in y)
    cs.throughput(c, [x[3] for x in levels], [x[3] for x in levels], fits)


def test_ratio_vs_concurrency_one_trace_per_engine():
    from types import SimpleNamespace as R
    rows = [R(concurrency=c, engine=e, label=f"r{c}{e}", gpu="g", model="m", measured_ttft_s=1.0,
              predicted_ttft_s=p, measured_tpot_s=0.01, predicted_tpot_s=0.01)
            for c, e, p in ((1, "vllm", 0.5), (8, "vllm", 0.25), (4, "trtllm", 2.0))]
    fig = cs.ratio_vs_concurrency(rows, "ttft")
    assert list(_trace(fig, "vllm").y) == [0.5, 0.25] and list(_trace(fig, "vllm").x) == [1, 8]
    assert list(_trace(fig, "trtllm").y) == [2.0]
    assert list(_trace(fig, "predicted = measured").y) == [1.0, 1.0]
    assert cs.ratio_vs_concurrency([], "tpot").data      # reference lines even without rows


def test_measured_means_drawn_beside_the_percentiles():
    from types import SimpleNamespace as M
    meas = [M(concurrency=4, ttft_s=0.5, tpot_s=0.02, label="a#1"),
            M(concurrency=16, ttft_s=0.7, tpot_s=0.03, label="a#2")]
    fig = cs.latency_percentiles([4, 16], {"p50": [0.4, 0.6]}, {"p50": [0.02, 0.025]},
                                 [True, True], meas)
    assert list(_trace(fig, "TTFT measured mean").y) == pytest.approx([500.0, 700.0])
    assert list(_trace(fig, "TPOT measured mean").y) == pytest.approx([20.0, 30.0])
    assert list(_trace(fig, "TTFT measured mean").x) == [4, 16]
