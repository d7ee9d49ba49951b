"""Error statistics of predictions against measurements: one definition for every fit.

With r = predicted / measured: RMS of ln r (what the log least-squares fits minimise), and
the median and max of |r - 1| (the relative error reports quote).
"""

from __future__ import annotations

import numpy as np

from perfmodel.core.errors import PerfModelError


def ratio_errors(predicted, measured) -> dict[str, float]:
    """{rms_log, median_abs_rel, max_abs_rel, points} of predicted against measured."""
    p, m = np.asarray(predicted, dtype=float).ravel(), np.asarray(measured, dtype=float).ravel()
    if p.size == 0 or p.shape != m.shape:
        raise PerfModelError(f"error statistics need matching non-empty arrays "
                             f"({p.size} predicted, {m.size} measured)")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(m)) and np.all(p > 0) and np.all(m > 0)):
        raise PerfModelError("error statistics need positive finite predicted and measured values")
    with np.errstate(over="ignore", under="ignore"):
        r = p / m
    if not np.all(np.isfinite(r) & (r > 0)):
        raise PerfModelError("predicted / measured overflows: the values are not comparable")
    return {"rms_log": float(np.sqrt(np.mean(np.log(r) ** 2))),
            "median_abs_rel": float(np.median(np.abs(r - 1.0))),
            "max_abs_rel": float(np.max(np.abs(r - 1.0))), "points": int(r.size)}
