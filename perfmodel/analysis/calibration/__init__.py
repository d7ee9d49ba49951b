"""Calibration: fit perfmodel's efficiencies and engine parameters to calibrate/bench.py
results. `fit_profile(raw, gpu)` -> (Profile, FitReport); numpy only, no torch.

    from perfmodel.analysis.calibration import fit_profile, read_raw
    profile, report = fit_profile(read_raw("calibrate/data/raw-h200-sxm-20261201b.json"))
    report.held_out.median_abs_err, [(p.name, p.measured_s, p.fitted_s) for p in report.points]
"""

from perfmodel.analysis.calibration.fit import fit_profile
from perfmodel.analysis.calibration.raw import check_raw, read_raw
from perfmodel.analysis.calibration.report import ErrorSummary, FitParam, FitPoint, FitReport

__all__ = ["fit_profile", "read_raw", "check_raw", "FitReport", "FitPoint", "FitParam",
           "ErrorSummary"]
