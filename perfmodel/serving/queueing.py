"""Open-loop load: requests arriving at a rate (Poisson) against one replica's curve.

The closed-loop curve (batching.curve) says, for each concurrency C, how fast requests
complete: rate(C) = C / slot time (Little's law, L = lambda * W). Read backwards, a replica
fed lambda requests per second settles at the concurrency C* where rate(C*) = lambda, and
its TPOT and prefill latency are those at C* (interpolated between grid points).

Requests that arrive while the replica is at its limit wait for admission. That wait is
approximated by an M/D/1 queue (Poisson arrivals, one server of deterministic service
1/mu, mu = the replica's peak rate); Pollaczek-Khinchine with a deterministic service gives
    W_q = rho / (2 mu (1 - rho)),   rho = lambda / mu
(Kleinrock, Queueing Systems vol. 1, sec. 5.7). It is small at moderate load and grows
without bound as lambda approaches mu, which is what makes the peak rate unusable under a
TTFT target. Static batching adds the wait for the running batch: rho * half a cycle.
    TTFT(lambda) = TTFT(C*) + rho * batch_wait(C*) + W_q
Goodput is the largest lambda whose TTFT and TPOT meet their targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.serving.batching import Curve

DENSE_RATES = 256   # rates between 0 and the peak at which the open-loop metrics are tabulated


@dataclass(frozen=True)
class OpenLoop:
    """Open-loop metrics on a dense ascending grid of rates below the replica's peak."""

    rate_rps: np.ndarray
    concurrency: np.ndarray
    ttft_s: np.ndarray          # with admission queueing and the static-batch wait
    ttft_base_s: np.ndarray     # without them: step wait + prefill + overhead at C*
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    used_bytes: np.ndarray
    peak_rps: float
    peak_concurrency: float
    xp: tuple                   # the interpolation table (rate, C, ttft, wait, tpot, e2e, used)


def open_loop(cv: Curve) -> OpenLoop | None:
    """Tabulate the open-loop metrics; None when no concurrency fits."""
    fit = np.flatnonzero(cv.fits)
    if fit.size == 0:
        return None
    fit = fit[: int(np.argmax(cv.rate_rps[fit])) + 1]       # beyond the peak rate is never used
    keep = np.concatenate([[True], np.diff(np.maximum.accumulate(cv.rate_rps[fit])) > 0])
    fit = fit[keep]
    first = fit[0]
    # a point at rate 0 (nothing in flight) with the metrics of the lightest load
    rate = np.concatenate([[0.0], cv.rate_rps[fit]])
    conc = np.concatenate([[0.0], cv.concurrency[fit]])

    def col(a):
        return np.concatenate([[a[first]], a[fit]])

    held = cv.closed_wait_s        # the closed-loop wait is replaced by the open-loop one
    xp = (rate, conc, col(cv.ttft_s - held), col(cv.batch_wait_s), col(cv.tpot_s),
          col(cv.e2e_s - held), col(cv.used_bytes))
    peak = float(rate[-1])
    lam = peak * np.arange(1, DENSE_RATES + 1) / (DENSE_RATES + 1)
    m = at_rate_table(xp, peak, lam)
    return OpenLoop(rate_rps=lam, concurrency=m["concurrency"], ttft_s=m["ttft_s"],
                    ttft_base_s=m["ttft_base_s"], tpot_s=m["tpot_s"], e2e_s=m["e2e_s"],
                    used_bytes=m["used_bytes"], peak_rps=peak,
                    peak_concurrency=float(conc[-1]), xp=xp)


def at_rate_table(xp: tuple, peak: float, lam) -> dict[str, np.ndarray]:
    """Metrics at rates lam (array) by interpolation; at or above the peak the queue is
    unbounded (TTFT and E2E are +inf, the rest are those at the peak)."""
    rate, conc, ttft, wait, tpot, e2e, used = xp
    lam = np.asarray(lam, dtype=float)
    rho = np.clip(lam / peak, 0.0, 1.0) if peak > 0 else np.ones_like(lam)
    with np.errstate(divide="ignore"):
        wq = np.where(rho < 1.0, rho / (2.0 * peak * np.maximum(1.0 - rho, 1e-300)), np.inf)
    extra = rho * np.interp(lam, rate, wait) + wq
    base = np.interp(lam, rate, ttft)
    return {"concurrency": np.interp(lam, rate, conc), "ttft_base_s": base,
            "ttft_s": base + extra, "tpot_s": np.interp(lam, rate, tpot),
            "e2e_s": np.interp(lam, rate, e2e) + extra, "used_bytes": np.interp(lam, rate, used),
            "queue_s": extra}


def at_rate(ol: OpenLoop, lam) -> dict[str, np.ndarray]:
    """Metrics of the replica fed `lam` requests per second."""
    return at_rate_table(ol.xp, ol.peak_rps, lam)


def goodput_rps(ol: OpenLoop | None, ttft_slo_s: float | None, tpot_slo_s: float | None,
                *, ttft_only_base: bool = False) -> float:
    """Largest tabulated rate at which mean TTFT and TPOT meet their targets (0: none).
    With ttft_only_base the TTFT test leaves out queueing (the latency floor)."""
    if ol is None:
        return 0.0
    ttft = ol.ttft_base_s if ttft_only_base else ol.ttft_s
    ok = np.ones(ol.rate_rps.shape, dtype=bool)
    if ttft_slo_s is not None:
        ok &= ttft <= ttft_slo_s
    if tpot_slo_s is not None:
        ok &= ol.tpot_s <= tpot_slo_s
    bad = np.flatnonzero(~ok)
    last = ok.size if bad.size == 0 else int(bad[0])   # metrics rise with rate: a prefix
    return float(ol.rate_rps[last - 1]) if last > 0 else 0.0
