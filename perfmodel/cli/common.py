"""Shared CLI helpers: argument types, flags generated from the Query, JSON output, tables.
No formulas here."""

from __future__ import annotations

import argparse
import json
import math
import sys
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import Query, make_query


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"{text!r} must be {what}")
    return v


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    return _int_at_least(text, 0, ">= 0")


def _finite_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return v


def positive_float(text: str) -> float:
    v = _finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return v


def nonneg_float(text: str) -> float:
    v = _finite_float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return v


def check_out_path(path, flag: str) -> None:
    """Refuse an output path that is a folder before any work is done (a benchmark runs for
    minutes before it writes)."""
    if path is not None and Path(path).expanduser().is_dir():
        raise PerfModelError(f"{flag} {str(path)!r} is a folder: give a file path in it")


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


def print_notes(result: Any) -> None:
    """A result's warnings, then its assumptions, one line each."""
    for w in result.warnings:
        print(f"warning: {w}")
    for a in result.assumptions:
        print(f"assumed: {a}")


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


# --------------------------------------------------------------------------- Query flags

OLD_SPELLINGS = {"prompt_tokens": "--prompt", "output_tokens": "--output",
                 "context_tokens": "--context", "ttft_slo_s": "--ttft-slo",
                 "tpot_slo_s": "--tpot-slo", "rate_rps": "--rate", "num_requests": "--requests"}
"""Flags renamed to the Query's field names; the old spelling stays an alias for one release."""


def _parse(annotation, meta=()) -> tuple[str, tuple]:
    """(kind, choices) of a Query field's type: count, nonneg, real, text or choice."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        return _parse(base, (*meta, *extra))
    if origin in (Union, types.UnionType):
        kinds = [_parse(a, meta) for a in get_args(annotation) if a is not type(None)]
        return next((k for k in kinds if k[0] != "text"), kinds[0])
    if origin is Literal:
        return "choice", get_args(annotation)
    flat = [m for x in meta for m in ([x, *x.metadata] if isinstance(x, FieldInfo) else [x])]
    if annotation is int:
        return ("nonneg" if any(isinstance(m, Ge) and m.ge == 0 for m in flat) else "count"), ()
    if annotation is float:
        return ("share" if any(isinstance(m, Ge) and m.ge == 0 for m in flat) else "real"), ()
    return "text", ()


_TYPES = {"count": positive_int, "nonneg": nonneg_int, "real": positive_float,
          "share": nonneg_float, "text": str}
"""Argument types by kind; upper bounds (a share below 1, a ratio up to 1) are the Query's."""


def lower_id(text: str) -> str:
    """An id as the look-ups compare it (catalog, hardware_db, engines: stripped, lower case)."""
    return text.strip().lower()


def query_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_query_args(p, names, *, required=(), defaults: dict | None = None,
                   choices: dict | None = None, help_suffix: dict | None = None) -> None:
    """One flag per Query field: --field-name (old spelling kept as an alias), the type
    and help from the field itself (perfmodel/core/query.py)."""
    defaults, choices, help_suffix = defaults or {}, choices or {}, help_suffix or {}
    for name in names:
        field = Query.model_fields[name]
        kind, literal = _parse(field.annotation, tuple(field.metadata))
        flags = [query_flag(name)] + ([OLD_SPELLINGS[name]] if name in OLD_SPELLINGS else [])
        help_ = field.description + help_suffix.get(name, "")
        if len(flags) > 1:
            help_ += f" ({flags[1]}: old spelling, kept for one release)"
        kw: dict[str, Any] = dict(dest=name, help=help_)
        if name in required:
            kw["required"] = True
        else:
            kw["default"] = defaults.get(name, None if field.default is PydanticUndefined
                                         else field.default)
        if kind == "choice" or name in choices:
            kw["choices"] = list(choices.get(name, literal))
            if all(isinstance(c, str) and c == c.lower() for c in kw["choices"]):
                kw["type"] = lower_id      # `--engine VLLM` as `--gpu H100-SXM`: ids ignore case
        else:
            kw["type"] = _TYPES[kind]
        p.add_argument(*flags, **kw)


def query_from_args(args, names) -> Query:
    """The Query the parsed flags name (fields not given keep the Query's defaults)."""
    return make_query(**{n: getattr(args, n) for n in names if getattr(args, n, None) is not None})
