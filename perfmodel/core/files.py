"""The one safe reader for every user file (YAML, JSON, CSV text): a size cap before
reading, yaml.safe_load semantics only (a `!!python/...` tag is an error), a nesting-depth
and node-count cap before anything recurses over the data, a mapping root where one is
required, and errors that name the file (SpecFileError, one line).

Limits are named assumptions, not measurements: the largest file perfmodel itself writes is
a raw calibration JSON of about 0.1 MB (calibrate/data/), and the deepest is about 6 levels.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from perfmodel.core.errors import SpecFileError, pydantic_message

SpecT = TypeVar("SpecT", bound=BaseModel)

SPEC_MAX_BYTES = 256_000
"""Spec files (hardware, model, profile, scenario, config.json): the built-in ones are
1-10 kB; 256 kB leaves a factor of 25 and parses in about 0.2 s even when padded with keys."""
DATA_MAX_BYTES = 64_000_000
"""Data files (raw calibration runs, bench-endpoint runs, measurement tables)."""
MAX_DEPTH = 32
"""Nesting levels; perfmodel's own files use at most 6."""
MAX_NODES = 2_000_000
"""Values in one document (also stops YAML alias 'billion laughs' expansion)."""

# libyaml's loader when present: the same safe constructor, ~10x faster on large files
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Format = Literal["yaml", "json", "auto"]


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = SPEC_MAX_BYTES) -> str:
    """The UTF-8 text (without a leading byte-order mark) of a regular file no larger than
    max_bytes."""
    p = Path(path).expanduser() if isinstance(path, (str, Path)) else None
    if p is None:
        raise SpecFileError(f"{what}: expected a file path, got {type(path).__name__}")
    try:
        st = p.stat()
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL byte
        raise SpecFileError(f"{p}: cannot read {what} ({_why(exc)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise SpecFileError(f"{p}: cannot read {what}: not a regular file")
    if st.st_size > max_bytes:
        raise SpecFileError(f"{p}: {what} is {st.st_size:,} bytes, over the "
                            f"{max_bytes:,}-byte limit")
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SpecFileError(f"{p}: cannot read {what} ({_why(exc)})") from None
    if len(raw) > max_bytes:
        raise SpecFileError(f"{p}: {what} is over the {max_bytes:,}-byte limit")
    try:
        # utf-8-sig: a leading byte-order mark (Excel's "CSV UTF-8" writes one) is dropped, so
        # the first column keeps its name; anywhere else it stays a character
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecFileError(f"{p}: {what} is not UTF-8 text (byte {exc.start})") from None


def _why(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc).splitlines()[0] if str(exc) else type(exc).__name__


def parse_text(text: str, *, where: str, fmt: Format = "yaml", mapping: bool = True) -> Any:
    """Parse YAML or JSON text safely; `where` names the source in errors."""
    if fmt == "auto":
        fmt = "json" if where.lower().endswith(".json") else "yaml"
    try:
        data = json.loads(text) if fmt == "json" else yaml.load(text, Loader=_SAFE_LOADER)
    except RecursionError:
        raise SpecFileError(f"{where}: nested too deeply (limit {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
        raise SpecFileError(f"{where}: malformed YAML{at}: {problem}") from None
    except ValueError as exc:  # json.JSONDecodeError, or a number string too long
        first = (str(exc).splitlines() or ["?"])[0]
        raise SpecFileError(f"{where}: not valid JSON (not JSON, or truncated?): {first}") from None
    check_tree(data, where=where)
    if mapping and not isinstance(data, dict):
        kind = "JSON object" if fmt == "json" else "YAML mapping"
        raise SpecFileError(f"{where}: expected a {kind} of fields, got {type(data).__name__}")
    return data


def load_mapping(path: str | Path, *, what: str = "file", fmt: Format = "auto",
                 max_bytes: int = SPEC_MAX_BYTES) -> dict[str, Any]:
    """A file's top-level mapping, read and parsed with every cap above."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return parse_text(text, where=str(path), fmt=fmt, mapping=True)


def validate_spec(data: Any, cls: type[SpecT], *, where: str) -> SpecT:
    """cls.model_validate(data), a bad field reported as one SpecFileError naming the file."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise SpecFileError(f"{where}: {pydantic_message(exc)}") from None


def load_spec(path: str | Path, cls: type[SpecT], *, what: str = "file", fmt: Format = "auto",
              max_bytes: int = SPEC_MAX_BYTES) -> SpecT:
    """A spec file (YAML or JSON mapping) read with every cap above and validated as cls."""
    return validate_spec(load_mapping(path, what=what, fmt=fmt, max_bytes=max_bytes), cls,
                         where=str(path))


def load_data(path: str | Path, *, what: str = "file", fmt: Format = "auto",
              max_bytes: int = DATA_MAX_BYTES) -> Any:
    """Like load_mapping for data files whose root may be a list."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return parse_text(text, where=str(path), fmt=fmt, mapping=False)


def check_tree(data: Any, *, where: str) -> None:
    """Refuse documents deeper than MAX_DEPTH, larger than MAX_NODES, or with keys that are
    not strings/numbers/booleans (iterative: never recurses)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SpecFileError(f"{where}: more than {MAX_NODES:,} values")
        if isinstance(node, dict):
            children = list(node.values())
            for k in node:
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise SpecFileError(f"{where}: a key of type {type(k).__name__}")
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise SpecFileError(f"{where}: nested too deeply (limit {MAX_DEPTH} levels)")
        stack.extend((c, depth + 1) for c in children)
