"""Mapping rules for disaggregated rows (mode=disagg) of the serving data.

General rules only (nothing names a row, a model or a measured value):
- each role (prefill_*, decode_*) gets the aggregated rows' parallel rule (serving_map._parallel)
  on its own columns: tp, pp, ep = moe_ep, attention DP stated or implied by moe_tp x moe_ep;
- workers: {role}_num_workers; unstated -> 1 (stated in the row's assumptions);
- concurrency: the row's batch_size when given, else decode_batch_size x decode workers x
  decode attention DP (decode_batch_size is per attention-DP rank of one decode worker: the
  ids' c<N> equal this product on the rows that state both), else the id's `_c<N>_`.
"""

from __future__ import annotations

import re

from perfmodel.analysis.validation.serving_table import ServingMeasurement

ROLES = ("prefill", "decode")
_ID_CONC = re.compile(r"_c(\d+)_")


class RoleView:
    """The columns of one role of a disaggregated row, read as an aggregated row's."""

    def __init__(self, r: ServingMeasurement, role: str):
        self._r, self._role = r, role

    def get(self, column: str) -> str:
        return self._r.get(f"{self._role}_{column}")


def _count(text: str) -> int | None:
    t = text.strip()
    if re.fullmatch(r"\d+(\.0+)?", t) and float(t) > 0:
        return int(float(t))
    return None


def workers(r: ServingMeasurement, role: str) -> tuple[int, list[str]]:
    n = _count(r.get(f"{role}_num_workers"))
    if n is None:
        return 1, [f"{role} workers not stated: 1 assumed"]
    return n, []


def concurrency(r: ServingMeasurement, decode_workers: int, decode_dp: int) -> int | None:
    """Requests in flight over the whole deployment (see the module rule)."""
    c = _count(r.get("batch_size"))
    if c:
        return c
    b = _count(r.get("decode_batch_size"))
    if b and _count(r.get("decode_num_workers")):
        return b * decode_workers * decode_dp
    m = _ID_CONC.search(r.get("id"))
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None
