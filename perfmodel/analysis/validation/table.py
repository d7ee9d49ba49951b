"""Measurement tables: the columns of data/public_measurements.csv, read into typed rows.

A table is a CSV file with exactly these columns (extra columns are an error, so a typo is
not silently ignored). `value` is in the metric's unit: tok/s, ms, s, GB, a ratio or a count.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.files import DATA_MAX_BYTES, read_text
from perfmodel.core.errors import SpecFileError

COLUMNS = ("source_url_or_repo_path", "source_kind", "gpu", "num_gpus", "tensor_parallel",
           "model", "params_b", "weight_precision", "kv_precision", "framework",
           "batch_or_concurrency", "input_len", "output_len", "metric", "value", "notes")

METRICS = ("decode_tok_s_per_user", "output_tok_s_total", "ttft_ms", "tpot_ms",
           "e2e_latency_s", "prefill_tok_s", "speculative_speedup", "max_batch", "memory_gb")
"""Metrics validate knows, with their units: tok/s, tok/s, ms, ms, s, tok/s, ratio, count, GB."""

_LOW_CONFIDENCE = re.compile(r"\blow[- ]confidence\b", re.IGNORECASE)


class Measurement(BaseModel):
    """One row of a measurement table, as written (strings), plus where it came from."""

    model_config = ConfigDict(frozen=True)

    dataset: str = Field(description="Table name (file stem) the row comes from.")
    row: int = Field(description="1-based data row number in that table.")
    source: str = Field(description="source_url_or_repo_path column.")
    source_kind: str
    gpu: str
    num_gpus: str
    tensor_parallel: str
    model: str
    params_b: str
    weight_precision: str
    kv_precision: str
    framework: str
    batch_or_concurrency: str
    input_len: str
    output_len: str
    metric: str
    value: str
    notes: str

    @property
    def low_confidence(self) -> bool:
        """The notes mark the row low-confidence: reported separately, not in the summary."""
        return bool(_LOW_CONFIDENCE.search(self.notes))

    @property
    def measured(self) -> float | None:
        """The value as a positive finite float, or None."""
        try:
            v = float(self.value)
        except ValueError:
            return None
        return v if MEASURED_MIN <= v <= MEASURED_MAX else None

    @property
    def label(self) -> str:
        return f"{self.dataset}#{self.row}"


MEASURED_MIN, MEASURED_MAX = 1e-12, 1e15
"""Plausible measured values in base units (assumption): no latency below a picosecond, no
rate above 1e15 tokens/s; outside them a row is unusable, and ratios of such values leave
finite arithmetic."""


def rows_from_dicts(dataset: str, records: list[dict[str, str]]) -> list[Measurement]:
    """Typed rows from CSV-like dicts (every column present, strings)."""
    out = []
    for i, rec in enumerate(records, start=1):
        fields = {k: str(rec.get(k, "") or "").strip() for k in COLUMNS}
        fields["source"] = fields.pop("source_url_or_repo_path")
        out.append(Measurement(dataset=dataset, row=i, **fields))
    return out


def read_table(path: str | Path) -> list[Measurement]:
    """Read one CSV table; errors name the file and what is wrong."""
    p = Path(path)
    text = read_text(p, what="measurement table", max_bytes=DATA_MAX_BYTES)
    try:
        return _parse_table(p, text)
    except csv.Error as exc:   # e.g. a cell over the csv module's field limit
        raise SpecFileError(f"{p}: not a CSV table ({exc})") from None


def _parse_table(p: Path, text: str) -> list[Measurement]:
    reader = csv.DictReader(io.StringIO(text, newline=""))   # quoted cells may hold newlines
    header = tuple(reader.fieldnames or ())
    missing = [c for c in COLUMNS if c not in header]
    extra = [c for c in header if c not in COLUMNS]
    if missing or extra:
        what = []
        if missing:
            what.append(f"missing column(s) {', '.join(missing)}")
        if extra:
            what.append(f"unknown column(s) {', '.join(map(str, extra))}")
        raise SpecFileError(f"{p}: not a measurement table: {'; '.join(what)}")
    return rows_from_dicts(p.stem, records(reader, p))


def records(reader: csv.DictReader, p: Path) -> list[dict[str, str]]:
    """Every record of a CSV reader; a line with more cells than the header is an error."""
    out = []
    for rec in reader:
        if None in rec:  # more cells than the header has columns
            raise SpecFileError(f"{p}: line {reader.line_num}: more cells than columns")
        out.append(rec)
    return out


def write_rows(path: str | Path, rows: list[dict[str, str]], columns) -> None:
    """Write CSV-like dicts with exactly these columns (missing cells empty)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in columns})


def write_table(path: str | Path, rows: list[dict[str, str]]) -> None:
    """Write CSV-like dicts with exactly the table's columns."""
    write_rows(path, rows, COLUMNS)
