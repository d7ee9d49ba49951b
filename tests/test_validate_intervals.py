"""perfmodel validate: the conformal intervals (order statistics, leave-one-out coverage,
back-off by kind, the committed table)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation import intervals as iv


# ------------------------------------------------------------------ intervals

def test_conformal_order_statistics():
    r = np.arange(1, 10, dtype=float)            # n = 9: ranks floor(10*0.1)=1, ceil(10*0.9)=9
    assert iv.conformal_bounds(r, 0.8) == (1.0, 9.0)
    r = np.arange(1, 100, dtype=float)           # n = 99: ranks 10 and 90
    assert iv.conformal_bounds(r, 0.8) == (10.0, 90.0)


def test_leave_one_out_coverage_is_near_nominal_on_exchangeable_data():
    rng = np.random.default_rng(0)
    res = {("m", "serving", False): list(rng.normal(0.0, 0.2, 300))}
    cov = np.mean([(lambda b, x: b[0] <= x <= b[1])(iv.loo_bounds(res, ("m", "serving", False), i), x)
                   for i, x in enumerate(res[("m", "serving", False)])])
    assert 0.75 <= cov <= 0.88


def test_small_kinds_back_off_to_the_metric_then_everything():
    res = {("a", "eager", False): [0.1, 0.2], ("a", "serving", False): [0.0] * 3,
           ("b", "serving", False): [0.5] * 10}
    assert iv._pool(res, "a", "eager", False)[1] == "all"       # 5 residuals of metric a < 6
    res[("a", "serving", False)] = [0.0] * 4
    assert iv._pool(res, "a", "eager", False)[1] == "metric"


def test_interval_for_reads_the_committed_table_with_fallbacks(tmp_path):
    table = iv.fit({("ttft_ms", "serving", False): [-0.1 * i for i in range(8)],
                    ("tpot_ms", "compiled", False): [0.05 * i for i in range(8)]})
    path = tmp_path / "intervals.yaml"
    iv.save(table, path)
    lo, hi = iv.interval_for("ttft_ms", "serving", path=path)
    assert lo == pytest.approx(math.exp(-0.7), rel=1e-3) and hi == pytest.approx(1.0)
    assert iv.interval_for("ttft_ms", "serving", True, path=path) == (lo, hi)   # no calibrated fit
    assert iv.interval_for("nonsense", "eager", path=path)[0] > 0               # global pool


def test_committed_intervals_file_is_valid():
    table = iv.load()
    assert table.level == iv.LEVEL and table.kinds
    assert all(k.lo_factor <= k.hi_factor for k in table.kinds)


@given(st.text(max_size=20), st.sampled_from(["eager", "compiled", "serving", "*", "x"]),
       st.booleans())
def test_interval_for_never_crashes(metric, family, calibrated):
    lo, hi = iv.interval_for(metric, family, calibrated)
    assert 0 < lo <= hi and math.isfinite(hi)
