"""Least squares on log time, numpy only: Levenberg-Marquardt with bounded parameters and
a weak prior per parameter.

Residual of a point: log(predicted) - log(measured), so a 10% miss weighs the same on a
5 us kernel and a 100 ms prefill. Each measured value is already the bench's median over
its repeats; noisy host-bound points (eager decode is 16 or 26 ms at the same shape,
calibrate/BENCH_NOTES.md) are left in, and the fit lands between their modes.

Parameters are fitted in an unbounded coordinate u: log(theta) for positive quantities,
logit(theta) for fractions in (0, 1). Each has a prior (u - u0) / sigma, weighed against
point residuals of DATA_SIGMA (a point is expected to miss by ~10%), pulling it toward
its starting value (a microbenchmark's direct estimate, or a preset); sigma is wide where
the start is a guess. The prior only decides what the data cannot: it splits collinear
pairs (per-kernel launch cost vs per-step overhead when every step launches about as many
kernels), it does not override well-measured directions.

A parameter that cannot move at least MIN_POINTS points by MIN_SENSITIVITY (5%) when it is
multiplied or divided by IDENTIFY_FACTOR is not fitted: it keeps its start value and the
fit says so ("too few points for a parameter").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal

import numpy as np

MIN_SENSITIVITY = 0.05
MIN_POINTS = 2
IDENTIFY_FACTOR = 4.0
DATA_SIGMA = 0.10        # typical |log error| of one point: model misfit + measurement noise
STEP_U = 1e-4
FTOL = 1e-6              # stop when a step lowers the cost by less than this fraction of it
                         # (scipy's least_squares uses 1e-8 by default; on the H200 run 1e-6
                         # gives the same errors to 0.1% in 24 iterations instead of 60)


@dataclass(frozen=True)
class Param:
    """One fitted quantity: where it goes, where it starts, how it is bounded."""

    name: str                      # "efficiency.mem_bw_fraction", "torch-eager.launch_s"
    start: float
    kind: Literal["frac", "pos"]
    sigma: float                   # prior width in u (log / logit) units
    source: str                    # where the start value comes from
    fixed: bool = False
    note: str = ""

    def to_u(self, theta: float) -> float:
        if self.kind == "frac":
            t = min(max(theta, 1e-6), 1 - 1e-6)
            return float(np.log(t / (1 - t)))
        return float(np.log(max(theta, 1e-12)))

    def from_u(self, u: float) -> float:
        u = float(np.clip(u, -40.0, 40.0))
        if self.kind == "frac":
            return float(1.0 / (1.0 + np.exp(-u)))
        return float(np.exp(u))


@dataclass(frozen=True)
class Solution:
    values: dict[str, float]
    fitted: list[str]
    kept: dict[str, str]         # name -> why it kept its start value
    iterations: int
    cost: float


Predict = Callable[[dict[str, float]], np.ndarray]


def reach(predict: Predict, params: list[Param], values: dict[str, float]) -> np.ndarray:
    """|change of log t_i| when theta_j is multiplied or divided by IDENTIFY_FACTOR (the
    larger of the two): an additive overhead that starts small still counts as able to
    move a point (points x params)."""
    base = np.log(predict(values))
    cols = []
    for p in params:
        moved = []
        for f in (IDENTIFY_FACTOR, 1.0 / IDENTIFY_FACTOR):
            theta = values[p.name] * f
            if p.kind == "frac":
                theta = min(theta, 1.0 - 1e-6)
            moved.append(np.abs(np.log(predict(dict(values, **{p.name: theta}))) - base))
        cols.append(np.maximum(*moved))
    return np.stack(cols, axis=1) if cols else np.zeros((len(base), 0))


def identify(predict: Predict, params: list[Param], values: dict[str, float]) -> list[Param]:
    """Fix the parameters too few points depend on (see module docstring)."""
    free = [p for p in params if not p.fixed]
    if not free:
        return params
    s = reach(predict, free, values)
    out = []
    by_name = {p.name: i for i, p in enumerate(free)}
    for p in params:
        if p.fixed:
            out.append(p)
            continue
        n = int(np.sum(s[:, by_name[p.name]] >= MIN_SENSITIVITY))
        if n < MIN_POINTS:
            out.append(replace(p, fixed=True, note=(
                f"kept its start value ({p.source}): {n} fit point(s) move by >= "
                f"{MIN_SENSITIVITY:.0%} when it changes {IDENTIFY_FACTOR:g}x, {MIN_POINTS} needed")))
        else:
            out.append(p)
    return out


def fit(predict: Predict, measured: np.ndarray, params: list[Param], *,
        max_iter: int = 60, check_identifiable: bool = True) -> Solution:
    """Minimise sum (log pred - log meas)^2 + sum (DATA_SIGMA (u - u0) / sigma)^2 over the
    free parameters, from their start values."""
    measured = np.asarray(measured, dtype=float)
    values = {p.name: p.start for p in params}
    if check_identifiable:
        params = identify(predict, params, values)
    free = [p for p in params if not p.fixed]
    kept = {p.name: p.note or f"fixed ({p.source})" for p in params if p.fixed}
    if not free:
        r = np.log(predict(values)) - np.log(measured)
        return Solution(values, [], kept, 0, _cost(r, np.zeros(0)))
    u0 = np.array([p.to_u(p.start) for p in free])
    sig = np.array([p.sigma for p in free])
    log_meas = np.log(measured)

    def unpack(u):
        return dict(values, **{p.name: p.from_u(x) for p, x in zip(free, u)})

    def residuals(u):
        r = np.log(predict(unpack(u))) - log_meas
        return r, (u - u0) / sig * DATA_SIGMA   # priors in the data's units (see docstring)

    u = u0.copy()
    lam = 1e-2
    r, pr = residuals(u)
    cost = _cost(r, pr)
    it = 0
    for it in range(1, max_iter + 1):
        jac = np.empty((len(r), len(u)))
        for j in range(len(u)):
            du = np.zeros_like(u)
            du[j] = STEP_U
            jac[:, j] = (residuals(u + du)[0] - r) / STEP_U
        if not np.all(np.isfinite(jac)):
            break                     # the model left its domain: keep the last good point
        a = np.vstack([jac, np.diag(DATA_SIGMA / sig)])
        b = np.concatenate([r, pr])
        g = a.T @ a
        improved = False
        for _ in range(12):
            try:
                step = np.linalg.solve(g + lam * np.diag(np.diag(g) + 1e-12), -a.T @ b)
            except np.linalg.LinAlgError:
                break
            cand = u + step
            rc, prc = residuals(cand)
            cc = _cost(rc, prc)
            if np.isfinite(cc) and cc <= cost:
                improved = cost - cc > FTOL * max(cost, 1e-12)
                u, r, pr, cost = cand, rc, prc, cc
                lam = max(lam / 3, 1e-7)
                break
            lam *= 4
        if not improved:
            break
    return Solution(unpack(u), [p.name for p in free], kept, it, cost)


def _cost(r: np.ndarray, prior: np.ndarray) -> float:
    return float(np.sum(r ** 2) + np.sum(prior ** 2))
