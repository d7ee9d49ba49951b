"""Errors a user can cause. The CLI turns any PerfModelError into one line and exit code 2."""

from __future__ import annotations

import difflib

import numpy as np


class PerfModelError(ValueError):
    """Bad input: an unknown id, a malformed file, an impossible configuration."""


class UnknownIdError(PerfModelError):
    """An id that is not in a catalog; the message lists the closest ids."""

    def __init__(self, kind: str, query: str, known: list[str]):
        query = str(query)  # an id of the wrong type (None, 5) is still just an unknown id
        close = closest(query, known)
        hint = f"; closest: {', '.join(close)}" if close else f"; known: {', '.join(sorted(known)[:12])} ..."
        super().__init__(f"unknown {kind} {query!r}{hint}")
        self.query = query
        self.close = close


class SpecFileError(PerfModelError):
    """A YAML or JSON file that does not parse into a spec; names the file and the field."""


def closest(query: str, known: list[str], n: int = 5) -> list[str]:
    """Close ids by edit similarity and by shared prefix; never used to pick one silently."""
    q = query.lower().strip()
    hits = [k for k in sorted(known) if q and k.startswith(q)][:n]   # 'h100' -> h100-* first
    hits += [k for k in difflib.get_close_matches(q, known, n=n, cutoff=0.5) if k not in hits]
    for k in sorted(known):
        if len(hits) >= n:
            break
        if (q and (k.startswith(q) or q in k)) and k not in hits:
            hits.append(k)
    return hits[:n]


def pydantic_message(exc: Exception) -> str:
    """First error of a pydantic ValidationError as 'field.path: message'."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            # a validator's own ValueError: its text, without pydantic's 'Value error, ' prefix
            msg = str(first.get("msg", "")).removeprefix("Value error, ")
            return f"{loc}: {msg}" if loc else msg
        except Exception:  # noqa: BLE001 - fall back to the plain text
            pass
    return str(exc).splitlines()[0]


class OutOfRangeError(PerfModelError):
    """Inputs each within their own bounds whose combination leaves finite arithmetic (a
    bandwidth of 1e-300 B/s, a 1e300 FLOP/s peak, a 1e15-token context): a result that is
    NaN, inf or a zero rate is reported as this error, never returned or printed."""


def require_finite(what: str, *, positive: bool = False, **values) -> None:
    """Raise OutOfRangeError (a PerfModelError, exit 2 from the CLI) naming every value
    (scalar or array; None skipped) that is not finite, or with positive=True not > 0.

    The one finiteness guard of the results: a NaN or infinity is refused, never printed.
    Schema-valid but extreme inputs reach it (a GPU YAML with a 1e-300 B/s bandwidth), so
    it is a user-facing error rather than an ArithmeticError."""
    bad = []
    for k, v in values.items():
        if v is None:
            continue
        a = np.asarray(v, dtype=float)
        ok = np.isfinite(a) & (a > 0) if positive else np.isfinite(a)
        if not np.all(ok):
            bad.append(k)
    if bad:
        kind = "positive and finite" if positive else "finite"
        raise OutOfRangeError(f"{what}: {', '.join(bad[:4])} not {kind}: an input (a rate, size "
                              "or length in a file or argument) is outside the model's range")
