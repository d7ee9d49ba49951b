"""perfmodel.analysis.calibration.stats.ratio_errors: the one definition of fit errors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.calibration.stats import ratio_errors
from perfmodel.core.errors import PerfModelError


def test_hand_computed_values():
    # ratios 2, 0.5, 1: |r - 1| = 1, 0.5, 0; ln r = ln2, -ln2, 0 -> RMS = ln2 * sqrt(2/3)
    e = ratio_errors([2.0, 1.0, 3.0], [1.0, 2.0, 3.0])
    assert e["median_abs_rel"] == pytest.approx(0.5)
    assert e["max_abs_rel"] == pytest.approx(1.0)
    assert e["rms_log"] == pytest.approx(math.log(2) * math.sqrt(2 / 3))
    assert e["points"] == 3


def test_a_perfect_prediction_has_no_error():
    assert ratio_errors([0.1, 7.0], [0.1, 7.0]) == {"rms_log": 0.0, "median_abs_rel": 0.0,
                                                    "max_abs_rel": 0.0, "points": 2}


@pytest.mark.parametrize("pred, meas", [([], []), ([1.0], [1.0, 2.0]), ([0.0], [1.0]),
                                        ([1.0], [-1.0]), ([np.nan], [1.0]), ([1.0], [np.inf]),
                                        ([1e308], [1e-308])])
def test_bad_inputs_are_clean_errors(pred, meas):
    with pytest.raises(PerfModelError):
        ratio_errors(pred, meas)


finite = st.floats(allow_nan=True, allow_infinity=True, width=64)


@given(st.lists(st.tuples(finite, finite), max_size=6))
def test_fuzz_typed_finite_result_or_clean_error(pairs):
    pred, meas = [p for p, _ in pairs], [m for _, m in pairs]
    try:
        e = ratio_errors(pred, meas)
    except PerfModelError:
        return
    assert e["points"] == len(pairs)
    assert all(math.isfinite(e[k]) and e[k] >= 0 for k in ("rms_log", "median_abs_rel", "max_abs_rel"))
    assert e["median_abs_rel"] <= e["max_abs_rel"]
