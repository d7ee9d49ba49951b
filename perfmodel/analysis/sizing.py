"""Sizing: the cheapest deployments that serve a request rate within TTFT and TPOT targets.

    size(model, *, rate_rps, prompt, output, ttft_slo_s, tpot_slo_s, gpus=None,
         precisions=None, engines=None, max_gpus=8, counts=None, prices=None, limit=20,
         profile=None, hardware_dir=None) -> SizingResult

Search: GPU x replica shape (TP in 1, 2, 4, 8 within a node; PP in powers of two; EP = TP
for MoE models, and for MoE models attention data parallelism too: dp groups of one GPU
with the experts over all dp GPUs, EP = dp, as SGLang's DP attention and TRT-LLM's
attention_dp serve DeepSeek and Kimi) x precision x engine. For each replica shape the curve over a concurrency
grid (batching.curve, vectorized) gives its goodput g (queueing.goodput_rps); serving R
req/s takes r = ceil(R / g) replicas and count = r x tp x dp x pp GPUs. Per GPU, precision and
engine the cheapest count is kept (shapes are tried smallest first and larger ones are
skipped once a cheaper count is known); the list is ranked by $/hour, cheapest first.

Reported per deployment: concurrency (mean requests in flight per replica at the rate,
rounded up), TTFT/TPOT/E2E at the rate, output_tok_s_total = the SLO-meeting capacity
(goodput x replicas x output tokens), headroom = capacity / demand - 1,
usd_per_mtok = $/h over output_tok_s_total (cost when fully used; usd_per_mtok_at_rate uses
the demanded rate), joules_per_token = TDP x ENERGY_UTILIZATION x GPUs over
output_tok_s_total (both formulas in perfmodel.core.cost), and the binding constraint: the one
with the least slack at the rate (memory: 1 - bytes used / usable; TPOT and TTFT:
1 - value / target, TTFT without the admission queue; rate: 1 - rate / the largest rate
whose queueing keeps TTFT on target).
A miss (nothing meets the targets) reports the requirement it fails instead.
The steady-state search is the quick estimate; the cheapest deployments it finds are then
simulated on their engine's scheduler and ranked on simulated p90 TTFT and TPOT
(analysis/sizing_sim.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from perfmodel.analysis import sizing_report as report
from perfmodel.analysis import sizing_sim
from perfmodel.api import resolve
from perfmodel.serving.batching import (capacity_bytes, concurrency_grid, curves, limits, used_bytes,
                                weights_bytes)
from perfmodel.core.catalog import load_model
from perfmodel.core.cost import joules_per_token, usd_per_mtok
from perfmodel.core.errors import OutOfRangeError, PerfModelError, require_finite
from perfmodel.core.hardware import list_gpus, load_gpu
from perfmodel.core.parallel import link_for, validate_deployment
from perfmodel.core.profile import load_profile
from perfmodel.serving.queueing import at_rate, goodput_rps, open_loop
from perfmodel.core.roofline import resolve_compute
from perfmodel.analysis.sizing_inputs import check_list, prices_by_gpu
from perfmodel.analysis.sizing_result import (SizedDeployment, SizingRequest,  # noqa: F401
                                              SizingResult)
from perfmodel.serving.curve import as_float, check_positive_int, check_slo
from perfmodel.core.specs import Deployment, HardwareSpec, ModelSpec
from perfmodel.core.units import SECONDS_PER_HOUR

# Mean board power under continuous-batched serving as a fraction of TDP: 0.7, the central
# value of "Energy use of AI inference: efficiency pathways and test-time compute" (2025;
# 8xH100 nodes, P5-P95 0.4-0.9 of max); idle gaps and memory-bound decode keep GPUs under TDP.
ENERGY_UTILIZATION = 0.70
DEFAULT_PRECISIONS = ("bf16", "fp8", "int4", "fp4")
DEFAULT_ENGINES = ("vllm",)
MAX_TP = 8                # tensor parallelism stays within one 8-GPU node
RATE_EPS = 1e-9           # a zero rate is sized as a trickle and reported as a miss
REL_EPS = 1e-12           # rate / goodput within round-off of an integer needs that many
BINDINGS = ("memory", "TPOT", "TTFT", "rate")


@dataclass
class _Ctx:
    m: ModelSpec
    rate: float
    prompt: int
    output: int
    ttft: float
    tpot: float
    max_gpus: int
    counts: list[int] | None
    prices: dict[str, float]


def size(model, *, rate_rps: float, prompt: int, output: int, ttft_slo_s: float,
         tpot_slo_s: float, gpus: list | None = None, precisions: list[str] | None = None,
         engines: list[str] | None = None, max_gpus: int = 8, counts: list[int] | None = None,
         prices: dict[str, float] | None = None, limit: int = 20, profile=None,
         hardware_dir: str | None = None) -> SizingResult:
    """Search deployments (see the module docstring). Raises PerfModelError on bad input;
    an impossible request returns a result with infeasible_reason and nearest_miss."""
    check_positive_int(prompt=prompt, output=output, max_gpus=max_gpus, limit=limit)
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, optional=False)
    number = (int, float, np.floating, np.integer)
    if isinstance(rate_rps, bool) or not isinstance(rate_rps, number) \
            or not math.isfinite(as_float(rate_rps)) or rate_rps < 0:
        raise PerfModelError(f"rate must be a finite number of requests/s >= 0, got {rate_rps!r}")
    if not math.isfinite(as_float(rate_rps) * as_float(output) * SECONDS_PER_HOUR):
        raise PerfModelError(f"rate {rate_rps!r} requests/s x {output} output tokens overflows")
    check_list("gpus", gpus, (str, HardwareSpec))
    check_list("precisions", precisions, (str,))
    check_list("engines", engines, (str,))
    check_list("counts", counts, (int, np.integer))
    if prices is not None and not isinstance(prices, dict):
        raise PerfModelError(f"prices must be a mapping of GPU id -> USD/hour, got {prices!r:.60}")
    if counts is not None:
        if not counts:
            raise PerfModelError("counts must be a non-empty list of positive integers")
        check_positive_int(**{f"count[{i}]": c for i, c in enumerate(counts)})
        max_gpus = max(max_gpus, max(counts))
    m = model if isinstance(model, ModelSpec) else load_model(model)
    if prompt + output > m.max_context:
        raise PerfModelError(f"prompt {prompt} + output {output} tokens exceed the "
                             f"{m.max_context}-token context of {m.id}")
    hws = ([g if isinstance(g, HardwareSpec) else load_gpu(g, hardware_dir) for g in gpus]
           if gpus else list_gpus(hardware_dir))
    if not hws:
        raise PerfModelError("no GPUs to search")
    if isinstance(profile, (str, Path)):
        profile = load_profile(profile)          # read once, not per GPU
    precisions = list(precisions or DEFAULT_PRECISIONS)
    engines = list(engines or DEFAULT_ENGINES)
    ctx = _Ctx(m, float(rate_rps) if rate_rps > 0 else RATE_EPS, prompt, output,
               float(ttft_slo_s), float(tpot_slo_s), max_gpus, counts,
               prices_by_gpu(prices, hws))
    found: list[SizedDeployment] = []
    misses: list[tuple[tuple, SizedDeployment]] = []
    evaluated = 0
    skipped: list[str] = []
    for hw in hws:
        for prec in precisions:
            w, kv = _split_precision(prec)
            for eng in engines:
                sc0, warnings, _ = resolve(m, hw, weights=w, kv=kv, engine=eng, profile=profile)
                try:
                    best, miss, n = _search_group(ctx, sc0, prec, warnings)
                except OutOfRangeError as exc:
                    skipped.append(f"{hw.id} {prec} {eng} left out: {exc}")
                    continue
                evaluated += n
                if best is not None:
                    found.append(best)
                elif miss is not None:
                    misses.append(miss)
    found.sort(key=_rank)
    found = sizing_sim.verify(found[:limit], model=m, rate_rps=float(rate_rps), prompt=prompt,
                              output=output, ttft_slo_s=ctx.ttft, tpot_slo_s=ctx.tpot,
                              max_gpus=max_gpus, counts=counts, profile=profile)
    request = SizingRequest(model=m.id, rate_rps=float(rate_rps), prompt_tokens=prompt,
                            output_tokens=output, ttft_slo_s=ctx.ttft, tpot_slo_s=ctx.tpot,
                            gpus=[h.id for h in hws], precisions=precisions, engines=engines,
                            max_gpus=max_gpus, counts=counts)
    reason, nearest = None, None
    if rate_rps == 0:
        reason = ("a rate of 0 requests/s needs no deployment; the nearest miss is the "
                  "cheapest deployment that meets the targets for a trickle of requests")
        nearest = found[0] if found else (min(misses, key=lambda x: x[0])[1] if misses else None)
        found = []
    elif not found:
        nearest = min(misses, key=lambda x: (x[0], _rank(x[1])))[1] if misses else None
        reason = report.infeasible_reason(ctx, nearest, hws, precisions)
    return SizingResult(request=request, deployments=found[:limit], infeasible_reason=reason,
                        nearest_miss=nearest, evaluated=evaluated,
                        assumptions=report.assumptions(ENERGY_UTILIZATION), warnings=skipped)


def _rank(d: SizedDeployment):
    """Cheapest $/hour first (unpriced last), then fewer GPUs, then more capacity."""
    return (d.usd_per_hour is None, d.usd_per_hour or 0.0, d.count, -d.output_tok_s_total)


def _split_precision(text: str) -> tuple[str, str | None]:
    """'fp8' -> (fp8, None); 'fp8/fp8' -> weights fp8, KV fp8."""
    parts = str(text).strip().split("/")
    if len(parts) > 2 or not all(parts):
        raise PerfModelError(f"precision {text!r}: use WEIGHTS or WEIGHTS/KV, e.g. fp8/fp8")
    return parts[0], (parts[1] if len(parts) == 2 else None)


def shapes(m: ModelSpec, max_gpus: int) -> list[tuple[int, int, int, int]]:
    """(tp, pp, ep, dp) replica shapes, fewest GPUs first. MoE models also get attention
    DP shapes (tp 1, dp = ep = 2, 4, 8 where ep divides the experts; pp 1)."""
    out = []
    for tp in (1, 2, 4, 8):
        if tp > min(MAX_TP, max_gpus) or m.num_heads % tp:
            continue
        pp = 1
        while tp * pp <= max_gpus and pp <= m.num_layers:
            eps = [1]
            if m.moe is not None and tp > 1 and m.moe.num_experts % tp == 0:
                eps.append(tp)
            out += [(tp, pp, ep, 1) for ep in eps]
            pp *= 2
    if m.moe is not None:
        out += [(1, 1, dp, dp) for dp in (2, 4, 8)
                if dp <= min(MAX_TP, max_gpus) and m.moe.num_experts % dp == 0]
    return sorted(out, key=lambda s: (s[0] * s[1] * s[3], s[1], s[3], s[0], s[2]))


def _search_group(ctx: _Ctx, sc0, prec: str, warnings: list[str]):
    """Cheapest deployment of one GPU x precision x engine, or its closest miss. Shapes of
    one (tp, ep) share a step evaluation (batching.curves); shapes needing more GPUs per
    replica than the cheapest count found so far are skipped."""
    best: SizedDeployment | None = None
    miss: tuple[tuple, SizedDeployment] | None = None   # ((kind, shortfall), miss)
    full_weights = weights_bytes(sc0)
    if sc0.precision.activations.name == "fp4" and not sc0.hw.has("fp4"):
        return None, None, 0       # W4A4 needs fp4 tensor cores; int4 is the weight-only 4-bit
    try:
        warnings = list(warnings) + resolve_compute(sc0.hw, sc0.precision, sc0.engine)[1]
    except PerfModelError:
        return None, None, 0       # e.g. activations narrower than weights
    # the engine's fixed costs alone miss a target: TPOT >= cpu_overhead_per_step_s and
    # TTFT >= per_request_overhead_s for every shape, so one evaluated shape (for the nearest
    # miss) is enough (bounds the work for a 1e-9 s target)
    hopeless = (sc0.engine.cpu_overhead_per_step_s >= ctx.tpot
                or sc0.engine.per_request_overhead_s >= ctx.ttft)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for tp, pp, ep, dp in shapes(ctx.m, ctx.max_gpus):
        groups.setdefault((tp, ep, dp), []).append(pp)
    evaluated = 0
    for (tp, ep, dp), pps in groups.items():
        if hopeless and miss is not None:
            break
        batch = []
        for pp in pps:
            g = tp * dp * pp
            if best is not None and g > best.count:
                continue
            reps = None
            if ctx.counts is not None:
                reps = sorted(c // g for c in ctx.counts if c % g == 0)
                if not reps:
                    continue
            sc = replace(sc0, dep=Deployment(tp=tp, pp=pp, ep=ep, dp=dp))
            # per-GPU weights: an even split, except under attention DP (replicated attention)
            w_gpu = full_weights / g if dp == 1 else weights_bytes(sc)
            try:
                validate_deployment(sc.model, sc.dep)
                if g > 1:
                    link_for(sc.hw, sc.dep)
            except PerfModelError:
                continue   # e.g. no link in hardware_db for multi-GPU communication
            lim = limits(sc, ctx.prompt, ctx.output, weights=w_gpu)
            base = dict(gpu=sc.hw.id, tp=tp, pp=pp, ep=ep, dp=dp, precision=prec,
                        engine=sc.engine.id, warnings=warnings)
            r_max = ctx.max_gpus // g if reps is None else max(reps)
            if lim.limit == 0:
                need = float(used_bytes(sc, 1.0, lim.context, w_gpu))
                cand = ((2, need / float(capacity_bytes(sc, 1.0, lim.context, w_gpu))),
                        _miss(ctx, sc, base, "memory", 0))
                miss = cand if miss is None or cand[0] < miss[0] else miss
                continue
            batch.append((sc, lim, w_gpu, reps, r_max, base))
        if not batch:
            continue
        with np.errstate(all="ignore"):
            cvs = curves([b[0] for b in batch], [concurrency_grid(b[1].limit) for b in batch],
                         ctx.prompt, ctx.output, [b[1] for b in batch],
                         weights=[b[2] for b in batch])
        for cv in cvs:
            require_finite(f"{sc0.model.id} on {sc0.hw.id}", positive=True, ttft_s=cv.ttft_s,
                           tpot_s=cv.tpot_s, e2e_s=cv.e2e_s, rate_rps=cv.rate_rps)
        evaluated += len(batch)
        for (sc, lim, _, reps, r_max, base), cv in zip(batch, cvs):
            dep, cand = _evaluate(ctx, sc, lim, cv, base, reps, r_max)
            if dep is not None and (best is None or _rank(dep) < _rank(best)):
                best = dep
            if cand is not None and (miss is None or cand[0] < miss[0]):
                miss = cand
    return best, miss, evaluated


def _evaluate(ctx: _Ctx, sc, lim, cv, base: dict, reps: list[int] | None, r_max: int):
    """(deployment meeting the request, None) or (None, (miss score, miss))."""
    g = sc.dep.num_gpus
    ol = open_loop(cv)
    if ol is None:
        return None, ((2, math.inf), _miss(ctx, sc, base, "memory", lim.limit))
    gp = goodput_rps(ol, ctx.ttft, ctx.tpot)
    if gp <= 0.0:
        worst = max(ol.ttft_base_s[0] / ctx.ttft, ol.tpot_s[0] / ctx.tpot)
        why = "TPOT" if ol.tpot_s[0] > ctx.tpot else "TTFT"
        return None, ((1, worst), _miss(ctx, sc, base, why, lim.limit, ol))
    r_need = max(1, math.ceil(ctx.rate / gp * (1.0 - REL_EPS)))   # a trickle still needs one
    choices = [r for r in (reps or [r_need]) if r >= r_need and r * g <= ctx.max_gpus]
    if not choices:
        d = _deployment(ctx, sc, base, r_max, lim.limit, ol, gp, meets=False, binding="rate")
        return None, ((0, ctx.rate / (gp * r_max)), d)
    return _deployment(ctx, sc, base, min(choices), lim.limit, ol, gp, meets=True), None


def _deployment(ctx: _Ctx, sc, base: dict, r: int, limit: int, ol, gp: float, *, meets: bool,
                binding: str | None = None) -> SizedDeployment:
    lam = ctx.rate / r
    at = {k: float(v) for k, v in at_rate(ol, lam).items()}
    if binding is None:
        slack = {
            "memory": 1.0 - at["used_bytes"] / capacity_bytes(sc),
            "TPOT": 1.0 - at["tpot_s"] / ctx.tpot,
            "TTFT": 1.0 - at["ttft_base_s"] / ctx.ttft,
            "rate": 1.0 - lam / max(goodput_rps(ol, ctx.ttft, None), 1e-300),
        }
        binding = min(BINDINGS, key=lambda k: slack[k])
    count = r * sc.dep.num_gpus
    cap_tok = gp * r * ctx.output
    served = ctx.rate * ctx.output
    price = ctx.prices.get(sc.hw.id)
    usd = price * count if price is not None else None
    fin = (lambda x: x if math.isfinite(x) else None)
    return SizedDeployment(
        **base, count=count, replicas=r, meets=meets,
        concurrency=max(1, math.ceil(at["concurrency"] - 1e-9)), max_concurrency=limit,
        ttft_s=fin(at["ttft_s"]), tpot_s=fin(at["tpot_s"]), e2e_s=fin(at["e2e_s"]),
        goodput_rps=gp * r, output_tok_s_total=cap_tok, served_output_tok_s=served,
        headroom=cap_tok / served - 1.0,
        usd_per_hour=usd,
        usd_per_mtok=usd_per_mtok(usd, cap_tok) if usd is not None else None,
        usd_per_mtok_at_rate=usd_per_mtok(usd, served) if usd is not None else None,
        joules_per_token=(joules_per_token(sc.hw.tdp_w * ENERGY_UTILIZATION * count, cap_tok)
                          if sc.hw.tdp_w else None),
        binding=binding, price_source=report.price_source(sc.hw, ctx.prices))


def _miss(ctx: _Ctx, sc, base: dict, binding: str, limit: int, ol=None) -> SizedDeployment:
    """One replica that cannot meet the request at any count (memory, TTFT, TPOT)."""
    count = sc.dep.num_gpus
    price = ctx.prices.get(sc.hw.id)
    at = {k: float(v) for k, v in at_rate(ol, 0.0).items()} if ol is not None else {}
    return SizedDeployment(
        **base, count=count, replicas=1, meets=False, concurrency=1 if ol else 0,
        max_concurrency=limit, ttft_s=at.get("ttft_s"), tpot_s=at.get("tpot_s"),
        e2e_s=at.get("e2e_s"), goodput_rps=0.0, output_tok_s_total=0.0,
        served_output_tok_s=ctx.rate * ctx.output, headroom=None,
        usd_per_hour=price * count if price is not None else None, usd_per_mtok=None,
        usd_per_mtok_at_rate=None, joules_per_token=None, binding=binding,
        price_source=report.price_source(sc.hw, ctx.prices))
