"""Validation against measured data: row mapping, prediction, intervals, accuracy report.

The entry point is perfmodel.analysis.validation.run.validate(); interval_for() gives the prediction
interval factors the CLI and UI show beside a point value.
"""

from perfmodel.analysis.validation.intervals import ENGINE_FAMILY, engine_family, interval_for

__all__ = ["ENGINE_FAMILY", "engine_family", "interval_for"]
