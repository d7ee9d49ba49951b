"""Argument checks of analysis/sizing.size: lists of the right item types and prices per
GPU-hour within range, each refused with a PerfModelError naming the argument."""

from __future__ import annotations

import math

from perfmodel.core.errors import PerfModelError
from perfmodel.core.specs import HardwareSpec
from perfmodel.serving.curve import as_float


MAX_USD_PER_HOUR = 1e6
"""Largest price per GPU-hour accepted (about a million times a rental price; beyond it $/Mtok
leaves finite arithmetic: 1e308 USD/hour printed inf)."""


def check_list(name: str, value, types: tuple) -> None:
    """None, or a list/tuple whose items are of the given types."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, types) and
                                                        not isinstance(v, bool) for v in value):
        raise PerfModelError(f"{name} must be a list of {' or '.join(t.__name__ for t in types)}, "
                             f"got {value!r:.60}")


def prices_by_gpu(prices: dict[str, float] | None, hws: list[HardwareSpec]) -> dict[str, float]:
    out = {h.id: h.price.usd_per_hour for h in hws if h.price is not None}
    prices = dict(prices or {})
    if "*" in prices:   # one price for every GPU searched
        every = prices.pop("*")
        prices = {**{h.id: every for h in hws}, **prices}
    for gid, usd in prices.items():
        key = str(gid).strip().lower()
        if key not in {h.id for h in hws}:
            raise PerfModelError(f"--price for {gid!r}: not among the GPUs searched")
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) \
                or not math.isfinite(as_float(usd)) or not 0 < usd <= MAX_USD_PER_HOUR:
            raise PerfModelError(f"price for {gid!r} must be a positive number of USD/hour "
                                 f"up to {MAX_USD_PER_HOUR:g}")
        out[key] = float(usd)
    return out
