"""Sizing with disaggregated prefill/decode pools (opt-in: `perfmodel size --disagg`).

    size_disagg(model, gpu, *, rate_rps, prompt, output, ttft_slo_s, tpot_slo_s, weights,
                engine, max_gpus, num_requests) -> DisaggSizing

Search: prefill layout x decode layout on one GPU type, each worker TP in 1, 2, 4, 8 (EP = TP
for MoE models), 1 to MAX_WORKERS workers per pool, at most max_gpus GPUs in all, cheapest
GPU count first. Each candidate is simulated (api.serve_disagg) as an open loop of
`num_requests` Poisson arrivals at the rate; it meets the targets when its p90 TTFT and p50
TPOT are within them (the simulator reports percentiles, not means; p90 TTFT is stricter than
the mean and also rejects a prefill queue that grows over the run).
The first GPU count with a candidate that meets the targets ends the search; among its
candidates the highest output tok/s wins. Every candidate is a full simulation (about a
second each), hence opt-in; `searched` says how many ran.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from perfmodel import api
from perfmodel.core.catalog import load_model
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.serving.curve import check_slo
from perfmodel.serving.disagg import PoolLayout

TP_CHOICES = (1, 2, 4, 8)
MAX_WORKERS = 4
DEFAULT_REQUESTS = 200    # Poisson arrivals simulated per candidate


class DisaggCandidate(BaseModel):
    model_config = ConfigDict(frozen=True)
    prefill: PoolLayout
    decode: PoolLayout
    num_gpus: int
    usd_per_hour: float | None
    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    output_tok_s_total: float
    meets: bool


class DisaggSizing(BaseModel):
    """The cheapest disaggregated layout that meets the targets, or why none does."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    weights: str
    engine: str
    rate_rps: float
    best: DisaggCandidate | None
    searched: int = Field(description="candidates simulated")
    reason: str = Field(description="why no layout meets the targets, or ''")
    assumptions: list[str]


def _layouts(m, max_gpus: int):
    ep = (lambda tp: tp) if m.is_moe else (lambda tp: 1)
    out = []
    for ptp in TP_CHOICES:
        for dtp in TP_CHOICES:
            for pw in range(1, MAX_WORKERS + 1):
                for dw in range(1, MAX_WORKERS + 1):
                    n = pw * ptp + dw * dtp
                    if n <= max_gpus:
                        out.append((n, PoolLayout(workers=pw, tp=ptp, ep=ep(ptp)),
                                    PoolLayout(workers=dw, tp=dtp, ep=ep(dtp))))
    return sorted(out, key=lambda x: (x[0], x[1].workers * x[1].tp))


def size_disagg(model, gpu, *, rate_rps: float, prompt: int, output: int, ttft_slo_s: float,
                tpot_slo_s: float, weights: str = "bf16", kv: str | None = None,
                engine: str = "vllm",
                max_gpus: int = 16, num_requests: int = DEFAULT_REQUESTS,
                hardware_dir: str | None = None) -> DisaggSizing:
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    if not (isinstance(rate_rps, (int, float)) and 0 < rate_rps < float("inf")):
        raise PerfModelError(f"rate_rps must be a positive finite number, got {rate_rps!r}")
    if not isinstance(max_gpus, int) or isinstance(max_gpus, bool) or not 2 <= max_gpus <= 64:
        raise PerfModelError(f"max_gpus must be an integer in [2, 64] for a disaggregated "
                             f"search, got {max_gpus!r}")
    m = model if not isinstance(model, str) else load_model(model)
    hw = gpu if not isinstance(gpu, str) else load_gpu(gpu, hardware_dir)
    price = hw.price.usd_per_hour if hw.price else None
    searched, best, found_n, last_err = 0, None, None, ""
    for n, pl, dl in _layouts(m, max_gpus):
        if found_n is not None and n > found_n:
            break
        try:
            r = api.serve_disagg(m, hw, prefill=pl, decode=dl, weights=weights, kv=kv,
                                 engine=engine,
                                 prompt_tokens=prompt, output_tokens=output, rate_rps=[rate_rps],
                                 num_requests=num_requests, hardware_dir=hardware_dir)
        except PerfModelError as exc:
            last_err = str(exc)
            continue
        searched += 1
        p = r.points[0]
        if p.ttft_p90_s is None or p.tpot_p50_s is None or p.output_tok_s_total is None:
            continue
        meets = p.ttft_p90_s <= ttft_slo_s and p.tpot_p50_s <= tpot_slo_s
        if not meets:
            continue
        c = DisaggCandidate(prefill=pl, decode=dl, num_gpus=n,
                            usd_per_hour=None if price is None else price * n,
                            ttft_p50_s=p.ttft_p50_s, ttft_p90_s=p.ttft_p90_s, tpot_p50_s=p.tpot_p50_s,
                            output_tok_s_total=p.output_tok_s_total, meets=True)
        if best is None or c.output_tok_s_total > best.output_tok_s_total:
            best, found_n = c, n
    reason = "" if best else (f"no layout of up to {max_gpus} GPUs meets the targets"
                              + (f" (last refusal: {last_err})" if last_err and not searched else ""))
    return DisaggSizing(model=m.id, gpu=hw.id, weights=weights, engine=engine, rate_rps=rate_rps,
                        best=best, searched=searched, reason=reason,
                        assumptions=[f"open loop of {num_requests} Poisson arrivals per candidate; "
                                     "targets checked on p90 TTFT and p50 TPOT",
                                     "EP = TP per worker for MoE models; one GPU type for both pools"])
