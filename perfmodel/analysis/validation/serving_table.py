"""Measured serving points: the columns of data/serving/aic_silicon_sample.csv, read into typed rows.

One row is one benchmark point (data/serving/README.md): a model served by one engine on one
system at one input/output length and one concurrency, with the measured mean TTFT and TPOT in
milliseconds. Aggregated rows (mode=agg) carry tp/pp/attention-dp/moe-tp/moe-ep; disaggregated
rows (mode=disagg) carry the same per role (prefill_*, decode_*).

Cells are kept as written (strings); the mapping rules (serving_map.py) interpret them. A file
without the required columns is an error naming them, so a different table is not read as this one.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.analysis.validation.table import records, write_rows
from perfmodel.core.errors import SpecFileError
from perfmodel.core.files import DATA_MAX_BYTES, read_text
from perfmodel.core.units import MS

REQUIRED = ("backend", "model_path", "system", "mode", "isl", "osl", "silicon_ttft_ms",
            "silicon_tpot_ms")
OPTIONAL = ("id", "backend_version", "precision", "gemm_quant_mode", "moe_quant_mode",
            "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size",
            "moe_ep_size", "source")
ROLE_FIELDS = ("batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size",
               "moe_tp_size", "moe_ep_size")
DISAGG = tuple(f"{role}_{f}" for role in ("prefill", "decode") for f in ROLE_FIELDS)
COLUMNS = REQUIRED + OPTIONAL + DISAGG


class ServingMeasurement(BaseModel):
    """One measured serving point, cells as written, plus where it came from."""

    model_config = ConfigDict(frozen=True)
    dataset: str = Field(description="File stem the row comes from.")
    row: int = Field(description="1-based data row number in that file.")
    cells: dict[str, str] = Field(description="Every known column -> its cell ('' if empty).")

    def get(self, column: str) -> str:
        return self.cells.get(column, "")

    @property
    def label(self) -> str:
        return f"{self.dataset}#{self.row}"

    def _seconds(self, column: str) -> float | None:
        try:
            v = float(self.get(column))
        except ValueError:
            return None
        return v * MS if math.isfinite(v) and v > 0 else None

    @property
    def ttft_s(self) -> float | None:
        """Measured mean TTFT in seconds, or None if the cell is not a positive number."""
        return self._seconds("silicon_ttft_ms")

    @property
    def tpot_s(self) -> float | None:
        """Measured mean TPOT in seconds, or None if the cell is not a positive number."""
        return self._seconds("silicon_tpot_ms")


def rows_from_dicts(dataset: str, records: list[dict[str, str]]) -> list[ServingMeasurement]:
    """Typed rows from CSV-like dicts (missing optional columns read as '')."""
    return [ServingMeasurement(dataset=dataset, row=i,
                               cells={k: str(rec.get(k, "") or "").strip() for k in COLUMNS})
            for i, rec in enumerate(records, start=1)]


def read_serving(path: str | Path) -> list[ServingMeasurement]:
    """Read one serving CSV; errors name the file and what is wrong."""
    p = Path(path)
    text = read_text(p, what="serving measurement table", max_bytes=DATA_MAX_BYTES)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = tuple(reader.fieldnames or ())
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SpecFileError(f"{p}: not a serving measurement table: missing column(s) "
                            f"{', '.join(missing)}")
    return rows_from_dicts(p.stem, records(reader, p))


def write_serving(path: str | Path, rows: list[dict[str, str]]) -> None:
    """Write CSV-like dicts with every known column (tests and converters)."""
    write_rows(path, rows, COLUMNS)
