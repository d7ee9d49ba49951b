#!/usr/bin/env python3
"""Fit a perfmodel profile to a calibrate/bench.py raw result (numpy + perfmodel; no torch).

    python calibrate/fit.py calibrate/data/raw-h200-sxm-20261129.json --gpu h200-sxm
    # same as: perfmodel calibrate fit RAW.json [--gpu ID] [--out calibrate/profiles/<id>.yaml]

Writes the profile YAML (atomically), a report beside it (<profile>.report.md: fitted vs
measured per point, errors on fit and held-out points next to datasheet-only predictions),
and for a CPU run the CPU's measured hardware spec in <profile dir>/hardware/.
The fit itself is perfmodel.analysis.calibration.fit_profile (see its modules for the method).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from perfmodel.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["calibrate", "fit", *sys.argv[1:]]))
