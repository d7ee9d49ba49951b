"""Shared CLI helpers: argument types, JSON output, tables. No formulas here."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from pydantic import BaseModel


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return v


def nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return v


def int_list(text: str) -> list[int]:
    return [positive_int(t) for t in text.split(",") if t.strip()] or _bad_list(text)


def str_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] or _bad_list(text)


def _bad_list(text: str):
    raise argparse.ArgumentTypeError(f"{text!r} is an empty list")


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError("refusing to print a non-finite number")
    return obj


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table."""
    if not rows:
        print("(no rows)")
        return
    cols = columns or list(rows[0].keys())
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
