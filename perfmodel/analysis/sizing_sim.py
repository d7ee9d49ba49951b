"""Sizing, second pass: the cheapest deployments the steady-state search found (a quick
estimate: serving.batching + serving.queueing) are simulated on their engine's scheduler
(serving.simulate) at their share of the rate, and ranked on the simulated p90 TTFT and
p90 TPOT against the targets.

Per deployment: open-loop Poisson arrivals at rate / replicas, VERIFY_REQUESTS requests of
the requested lengths (seed 0). A deployment whose simulated p90 misses a target gets one
more replica (up to EXTRA_REPLICAS, within max_gpus and the allowed counts) and is simulated
again; if it still misses it stays listed with sim_meets=False, below every one that meets.
"""

from __future__ import annotations


from perfmodel.api import resolve
from perfmodel.core.cost import usd_per_mtok
from perfmodel.core.errors import PerfModelError
from perfmodel.serving.simulate import simulate_points
from perfmodel.serving.workload import ServeWorkload

VERIFY_REQUESTS = 120    # requests per simulated verification (the p90 is the 108th of 120)
VERIFY_TOP = 8           # deployments verified, cheapest first
EXTRA_REPLICAS = 2       # replicas added to a deployment that misses in simulation


def _simulate(sc, rate: float, prompt: int, output: int):
    wl = ServeWorkload(arrival="poisson", rate_rps=rate, num_requests=VERIFY_REQUESTS,
                       prompt_tokens=prompt, output_tokens=output, seed=0)
    return simulate_points(sc, [wl])[0]


def verify(deployments: list, *, model, rate_rps: float, prompt: int, output: int,
           ttft_slo_s: float, tpot_slo_s: float, max_gpus: int, counts, profile) -> list:
    """The deployments with sim_ttft_p90_s, sim_tpot_p90_s and sim_meets set (the first
    VERIFY_TOP), ranked: meeting in simulation first, then as sizing ranks them (cheapest
    $/hour, fewer GPUs, more capacity) after the replicas the simulation added."""
    out = []
    for i, d in enumerate(deployments):
        if i >= VERIFY_TOP or rate_rps <= 0:
            out.append(d)
            continue
        w, _, kv = d.precision.partition("/")
        try:
            sc, _, _ = resolve(model, d.gpu, weights=w, kv=kv or None, engine=d.engine,
                               tp=d.tp, pp=d.pp, ep=d.ep, dp=d.dp, profile=profile)
        except PerfModelError:
            out.append(d)
            continue
        g = d.tp * d.dp * d.pp
        r = d.replicas
        while True:
            p = _simulate(sc, rate_rps / r, prompt, output)
            meets = (p.ttft_p90_s is not None and p.tpot_p90_s is not None
                     and p.ttft_p90_s <= ttft_slo_s and p.tpot_p90_s <= tpot_slo_s)
            nxt = r + 1
            allowed = nxt * g <= max_gpus and (counts is None or nxt * g in counts)
            if meets or nxt > d.replicas + EXTRA_REPLICAS or not allowed:
                break
            r = nxt
        out.append(_with(d, r, p, meets))
    def rank(d):   # sizing._rank, on the updated cost (a replica added may reorder)
        return (d.usd_per_hour is None, d.usd_per_hour or 0.0, d.count, -d.output_tok_s_total)
    first = sorted((d for d in out if d.sim_meets is not False), key=rank)
    return first + sorted((d for d in out if d.sim_meets is False), key=rank)


def _with(d, r: int, p, meets: bool):
    scale = r / d.replicas
    usd = d.usd_per_hour * scale if d.usd_per_hour is not None else None
    cap = d.output_tok_s_total * scale
    return d.model_copy(update=dict(
        replicas=r, count=r * d.tp * d.dp * d.pp, usd_per_hour=usd, output_tok_s_total=cap,
        goodput_rps=d.goodput_rps * scale, headroom=cap / d.served_output_tok_s - 1.0,
        usd_per_mtok=usd_per_mtok(usd, cap) if usd is not None else None,
        usd_per_mtok_at_rate=(usd_per_mtok(usd, d.served_output_tok_s) if usd is not None
                              else None),
        joules_per_token=(d.joules_per_token * 1.0 if d.joules_per_token is not None else None),
        sim_ttft_p90_s=p.ttft_p90_s, sim_tpot_p90_s=p.tpot_p90_s, sim_meets=meets))
