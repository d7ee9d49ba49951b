"""Figure builders of the web calculator, tested without Streamlit: traces, axes, and that
the figures place perfmodel's numbers where they belong (identities, not copied outputs)."""

from types import SimpleNamespace

import numpy as np
import pytest

from perfmodel import api
from perfmodel.core.hardware import load_gpu
from perfmodel.core.units import GB, MS, TERA
from perfmodel.webapp import (charts, charts_accuracy, charts_calib, charts_claims, charts_measure,
                              charts_size, charts_spec, charts_sweep)


@pytest.fixture(scope="module")
def est():
    return api.predict_request("llama-3.1-8b", "h100-sxm", batch=8, prompt=1024, output=256)


def test_memory_bar_stacks_to_the_total_and_marks_capacity(est):
    mem = est.memory
    fig = charts.memory_bar(mem)
    widths = [t.x[0] for t in fig.data]
    assert sum(widths) == pytest.approx(mem.total_bytes / GB, rel=1e-9)
    names = [t.name for t in fig.data]
    assert {"KV cache", "activations", "runtime reserve"} <= set(names)
    assert sum(n.startswith("weights:") for n in names) == sum(
        1 for b in mem.weight_bytes_by_group.values() if b > 0)
    lines = sorted(s.x0 for s in fig.layout.shapes)
    assert lines == pytest.approx(sorted([mem.capacity_bytes / GB, mem.device_bytes / GB]))
    assert fig.layout.barmode == "stack"


def test_memory_bar_says_when_it_does_not_fit():
    mem = api.memory("llama-3.1-70b", "rtx-4090", batch=1, context=2048)
    assert not mem.fits
    assert "NOT fit" in charts.memory_bar(mem).layout.title.text


def test_op_breakdown_sums_to_the_gpu_time_and_groups_by_bound(est):
    fig = charts.op_breakdown(est.ops)
    total_ms = sum(sum(t.x) for t in fig.data)
    assert total_ms == pytest.approx(sum(o.time_s for o in est.ops) / MS, rel=1e-9)
    bounds = {o.bound for o in est.ops if o.time_s > 0}
    assert len(fig.data) == len(bounds)
    order = list(fig.layout.yaxis.categoryarray)
    times = {o.name: o.time_s for o in est.ops}
    assert [times[n] for n in order] == sorted(times[n] for n in order)   # slowest on top


def test_roofline_ridge_is_peak_over_bandwidth_and_axes_are_log(est):
    hw = load_gpu("h100-sxm")
    fig = charts.roofline(hw, est.ops, "bf16")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    ridge = next(t for t in fig.data if t.name.startswith("ridge"))
    bw, peak = hw.memory_bandwidth_bytes_per_s, hw.peak_flops_per_s["bf16"]
    assert ridge.x[0] == pytest.approx(peak / bw)
    # H100 SXM datasheet: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3 -> ridge ~295 FLOP/byte
    assert ridge.x[0] == pytest.approx(989e12 / 3.35e12, rel=0.01)
    roofs = [t for t in fig.data if "roof" in t.name]
    assert len(roofs) == len(hw.peak_flops_per_s)
    for t in roofs:      # slope 1 (bandwidth) below the ridge, flat (peak) above it
        x0, xr, _ = t.x
        y0, yr, y1 = t.y
        assert y0 / x0 == pytest.approx(bw / TERA)
        assert yr == y1 and yr * TERA / xr == pytest.approx(bw)


def test_roofline_ops_never_beat_the_datasheet_roof(est):
    hw = load_gpu("h100-sxm")
    for ops in (est.ops, api.predict_request("llama-3.1-8b", "h100-sxm", batch=256, prompt=256,
                                             output=16).ops):
        fig = charts.roofline(hw, ops, "bf16")
        pts = next(t for t in fig.data if t.name == "ops of this step")
        assert len(pts.x) == sum(1 for o in ops if o.flops > 0 and o.bytes > 0 and o.time_s > 0)
        top = max(hw.peak_flops_per_s.values())
        kinds = {o.name: o.kind for o in ops}
        # matmuls and attention: bytes as moved; fused elementwise ops report their unfused
        # bytes (roofline.py times them at FUSED_ELEMENTWISE_BYTES of those), so they are left out
        checked = [(x, y) for x, y, n in zip(pts.x, pts.y, pts.hovertext)
                   if kinds[n] in ("gemm", "attention")]
        assert len(checked) >= 5
        for x, y in checked:
            assert y * TERA <= min(top, x * hw.memory_bandwidth_bytes_per_s) * (1 + 1e-9)


def test_tornado_percentages_and_order():
    V = SimpleNamespace
    rows = [V(name="small", low=9.5, high=10.5, low_label="a", high_label="b"),
            V(name="big", low=12.0, high=8.0, low_label="c", high_label="d"),
            V(name="missing", low=None, high=11.0, low_label="-", high_label="e")]
    fig = charts.tornado(10.0, rows, "TPOT", "ms", MS)
    assert len(fig.data) == 2
    low, high = fig.data
    order = list(fig.layout.yaxis.categoryarray)
    assert order[-1] == "big"                      # largest swing on top
    by = dict(zip(low.y, low.x))
    assert by["big"] == pytest.approx(20.0) and by["small"] == pytest.approx(-5.0)
    assert by["missing"] is None
    assert dict(zip(high.y, high.x))["missing"] == pytest.approx(10.0)


def test_latency_throughput_traces_and_knee():
    x = np.array([1, 2, 4, 8])
    fig = charts_sweep.latency_throughput(x, [100, 190, 300, 310], [0.010, 0.0105, 0.013, 0.026],
                                          [True, True, True, False], knee_x=4)
    assert [t.name for t in fig.data] == ["fits in memory", "does not fit", "knee (batch 4)"]
    assert list(fig.data[0].y) == pytest.approx([10.0, 10.5, 13.0])    # ms
    assert fig.data[2].x[0] == 300
    assert fig.layout.xaxis.type == "log"
    assert len(charts_sweep.latency_throughput(x, [1, 2, 3, 4], [1, 1, 1, 1], [True] * 4).data) == 1


def test_memory_vs_context_stacks_to_each_total():
    contexts = (512, 4096, 32768)
    mems = [api.memory("llama-3.1-8b", "h100-sxm", batch=4, context=c) for c in contexts]
    fig = charts_sweep.memory_vs_context(contexts, mems)
    stacked = [t for t in fig.data if t.stackgroup]
    assert len(stacked) == 4
    sums = np.sum([np.asarray(t.y) for t in stacked], axis=0)
    assert sums == pytest.approx([m.total_bytes / GB for m in mems])
    cap = next(t for t in fig.data if not t.stackgroup)
    assert set(cap.y) == {mems[0].capacity_bytes / GB}


def test_throughput_vs_context_axes():
    fig = charts_sweep.throughput_vs_context([128, 1024, 8192], [100, 90, 50], [800, 720, 400],
                                             [0.01, 0.05, 0.5], [True, True, False])
    assert len(fig.data) == 2 and fig.data[1].yaxis == "y2"
    assert fig.layout.xaxis.type == "log"
    assert list(fig.data[1].y) == pytest.approx([10, 50, 500])
    assert len(fig.layout.shapes) == 1       # the does-not-fit band


def test_speedup_heatmap_is_centred_on_one():
    z = [[1.5, 0.8], [2.0, 0.9]]
    fig = charts_spec.speedup_heatmap([1, 64], [1, 2], z, [[True, True], [True, False]])
    hm = fig.data[0]
    assert hm.type == "heatmap" and hm.zmid == 1.0
    assert np.asarray(hm.z).shape == (2, 2)
    assert "✗" in hm.text[1][1] and "✗" not in hm.text[0][1]


def _deployment(**kw):
    base = dict(gpu="h100-sxm", count=2, tp=2, pp=1, ep=1, precision="fp8", engine="vllm",
                output_tok_s_total=4000.0, usd_per_mtok=0.5, usd_per_mtok_at_rate=0.8)
    return SimpleNamespace(**{**base, **kw})


def test_sizing_charts_divide_by_gpu_count_and_skip_unpriced():
    rows = [_deployment(), _deployment(gpu="a10", count=4, tp=1, output_tok_s_total=1000.0,
                                       usd_per_mtok=None, usd_per_mtok_at_rate=None)]
    fig = charts_size.throughput_per_gpu(rows)
    assert list(fig.data[0].x) == [2000.0, 250.0]
    assert fig.data[0].y[0] == "h100-sxm x2 (TP2) fp8 vllm"
    cost = charts_size.cost_per_mtok(rows)
    assert len(cost.data) == 2 and list(cost.data[0].x) == [0.5]
    assert "1 without a price" in cost.layout.title.text


def test_accuracy_scatter_counts_rows_inside_their_interval():
    R = SimpleNamespace
    rows = [R(predicted=100.0, measured=110.0, interval_lo=80.0, interval_hi=130.0, label="a#1",
              gpu="h100-sxm", engine="vllm", calibrated_predicted=None),
            R(predicted=50.0, measured=90.0, interval_lo=40.0, interval_hi=65.0, label="a#2",
              gpu="a10", engine="vllm", calibrated_predicted=85.0)]
    fig = charts_accuracy.predicted_vs_measured(rows, "decode_tok_s_per_user", "tok/s")
    assert "1/2 inside" in fig.layout.title.text
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    band = fig.data[0]                                      # vertical interval segments
    assert [v for v in band.y if v == v] == [80.0, 130.0, 40.0, 65.0]
    assert any(t.name == "calibrated prediction" for t in fig.data)
    ident = next(t for t in fig.data if t.name == "measured = predicted")
    assert list(ident.x) == list(ident.y)


def test_measure_charts_pair_measured_with_predicted():
    def level(c, tok_s, tpot, pred=True):
        stats = SimpleNamespace(ok=4, tpot_p50_s=tpot, output_tok_s=tok_s, ttft_p50_s=0.05,
                                ttft_p90_s=0.08)
        p = SimpleNamespace(output_tok_s_total=tok_s * 1.1, tpot_s=tpot * 0.9, ttft_s=0.04) if pred else None
        return SimpleNamespace(concurrency=c, stats=stats, prediction=p)
    levels = [level(1, 100.0, 0.010), level(4, 350.0, 0.012), level(16, 900.0, 0.020, pred=False)]
    fig = charts_measure.latency_throughput(levels)
    assert [t.name for t in fig.data] == ["measured (p50)", "predicted"]
    assert len(fig.data[0].x) == 3 and len(fig.data[1].x) == 2
    assert list(fig.data[0].y) == pytest.approx([10.0, 12.0, 20.0])
    ttft = charts_measure.ttft_vs_concurrency(levels)
    assert list(ttft.data[0].error_y.array) == pytest.approx([30.0] * 3)   # p90 - p50 in ms
    assert [t.name for t in ttft.data] == ["measured p50 (bar to p90)", "predicted"]
    levels[1].prediction.simulated = {"ttft_p50_s": 0.25}      # the level's replay (serve --trace)
    ttft = charts_measure.ttft_vs_concurrency(levels)
    sim = ttft.data[-1]
    assert sim.name == "simulated p50 (replay)" and list(sim.x) == [4]
    assert list(sim.y) == pytest.approx([250.0])


def test_log_axis_ticks_cover_the_data():
    ax = charts.log_axis([140, 5600])
    assert ax["type"] == "log"
    assert min(ax["tickvals"]) <= 140 and max(ax["tickvals"]) >= 5600
    assert "1k" in ax["ticktext"] and "2k" in ax["ticktext"]


def test_lever_waterfall_walks_from_baseline_to_result():
    S = SimpleNamespace
    steps = [S(lever="weights", factor=1.5, value_before=10.0, value_after=15.0),
             S(lever="batching", factor=2.0, value_before=15.0, value_after=30.0)]
    fig = charts_claims.lever_waterfall(steps, "decode_tok_s_per_user", "tok/s")
    w = fig.data[0]
    assert w.type == "waterfall" and list(w.measure) == ["absolute", "relative", "relative", "total"]
    assert w.y[0] + w.y[1] + w.y[2] == pytest.approx(w.y[3])   # deltas land on the result
    assert w.text[1] == "x1.5" and "x3" in w.text[-1]           # factors multiply to the total
    bars = charts_claims.shapley_bars({"a": 1.2, "b": 2.5})
    assert list(bars.data[0].x) == ["b", "a"] and bars.layout.yaxis.type == "log"


def test_calibration_charts_keep_fit_and_held_out_apart():
    P = SimpleNamespace
    pts = [P(name="a", measured_s=0.010, fitted_s=0.011, datasheet_s=0.005, held_out=False),
           P(name="b", measured_s=0.020, fitted_s=0.018, datasheet_s=0.030, held_out=True)]
    fig = charts_calib.fitted_vs_measured(pts)
    names = [t.name for t in fig.data]
    assert names[:3] == ["calibrated, fit points", "calibrated, held-out points", "datasheet only"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert list(fig.data[0].x) == pytest.approx([10.0]) and list(fig.data[1].y) == pytest.approx([18.0])
    res = charts_calib.residuals(pts)
    assert list(res.data[1].y) == pytest.approx([10.0, -10.0])      # fitted / measured - 1, %
    assert list(res.data[0].y) == pytest.approx([-50.0, 50.0])      # datasheet only
