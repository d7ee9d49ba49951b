"""Evaluate a claim scenario with the one time model: every metric, and what bounds it.

Plain decoding: api.evaluate on the resolved scenario (TTFT, the decode steps integrated over
the growing context, E2E). On top of it, each scenario feature changes one piece:
- KV cache off: every decode step recomputes the whole prefix, i.e. the step that would
  read S cached tokens becomes a step of T = S+1 new tokens over S = 0 (the same op list),
  integrated over the decode contexts (trapezoid, KV_OFF_NODES points).
- speculative decoding: perfmodel.analysis.speculative prices a speculative step (verification of
  gamma+1 tokens plus the drafter's passes, tokens per step from the acceptance); its
  speed-up at the mid-decode context P + O/2 divides the plain TPOT. TTFT is unchanged
  (the draft model's prefill is not modelled).
- concurrency C: a closed-loop benchmark of `requests` (default 10 x C) simulated step by step under the
  engine's scheduler (perfmodel.serving.simulate; mixed lengths from
  serving.workload.mixed_lengths); TTFT, TPOT and E2E are the means over requests, and
  aggregate tok/s = C * O / mean E2E by Little's law (each user always has one request in
  the system; a static batch holds every slot until its longest request ends, so a user
  whose request ends early waits for the next batch).
- routing a share r of requests to a small model on the same GPUs: TTFT, E2E and TPOT are
  the request-weighted means (1-r)*big + r*small; per-user decode rate = 1 / mean TPOT;
  aggregate throughput is the time-weighted (harmonic) mixture
  1 / ((1-r)/thr_big + r/thr_small), since both models share the GPUs' time.
For a batch (not a concurrency) aggregate output tok/s = B * O / E2E (a batch of B requests
runs start to finish);
$/Mtok = price per GPU-hour * GPUs / (3600 * tok/s) * 1e6 (perfmodel.core.cost.usd_per_mtok).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel import api
from perfmodel.core import predict
from perfmodel.analysis.claims.scenario import Scenario, fill, metric_info, model_spec, revise
from perfmodel.core.cost import usd_per_mtok
from perfmodel.core.errors import PerfModelError, require_finite
from perfmodel.core.memory import estimate_memory, weight_bytes_by_group
from perfmodel.core.specs import Deployment, parse_format

KV_OFF_NODES = 17          # trapezoid points over the decode contexts when the KV cache is off
PAGED_BLOCK_TOKENS = 16    # block size when paged KV is switched on (vLLM default)


class Evaluation(BaseModel):
    """Every metric one scenario produces, with the regime that bounds it."""

    model_config = ConfigDict(frozen=True)
    scenario: str
    values: dict[str, float] = Field(description="metric -> value (units in scenario.METRICS).")
    regimes: dict[str, str] = Field(description="metric -> what bounds it (compute, memory, "
                                    "communication, overhead).")
    batch: int = Field(description="B: sequences decoded together.")
    fits: bool
    memory_bytes: float = Field(description="Per-GPU memory, drafter and small model included.")
    capacity_bytes: float
    max_batch: int = Field(description="Largest batch that fits at this context.")
    num_gpus: int
    speculative_speedup: float | None = None
    tokens_per_step: float | None = None
    speculative_terms: dict[str, float] | None = Field(
        default=None, description="Seconds of one speculative step at the mid-decode context: "
        "baseline_s (a plain decode step), verify_s, draft_s, overhead_s.")
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)

    def value(self, metric: str) -> float:
        metric_info(metric)
        if metric not in self.values:
            raise PerfModelError(f"scenario {self.scenario!r} cannot produce {metric}: "
                                 + ("no GPU price in hardware_db; give usd_per_gpu_hour"
                                    if metric == "usd_per_mtok" else "not computed"))
        return self.values[metric]


def evaluate(sc: Scenario, *, strict: bool = True) -> Evaluation:
    """All metrics of a scenario (defaults filled and listed in `assumptions`).

    strict=False is for intermediate scenarios of an attribution: activations narrower
    than the weights are raised to the weights' format and speculation without a KV cache
    is dropped, each with a warning, instead of raising."""
    filled, notes = fill(sc)
    ev = evaluate_filled(filled, strict=strict)
    return ev.model_copy(update={"assumptions": notes + ev.assumptions})


def resolve(f: Scenario, *, strict: bool = True) -> tuple[predict.Scenario, list[str]]:
    """A filled claim scenario -> the time model's Scenario (engine and efficiency adjusted)."""
    warnings: list[str] = []
    act = f.activations
    if not strict:
        try:
            w, a = parse_format(f.weights), parse_format(f.activations)
        except ValueError as exc:
            raise PerfModelError(str(exc)) from None
        if a.bits < w.bits:
            warnings.append(f"{f.label}: activations {a.name} narrower than weights {w.name}: "
                            f"matmul inputs stay {w.name} until the weights are quantized")
            act = f.weights
    sc, w2, _ = api.resolve(f.query(activations=act))
    eng = sc.engine
    if f.batching != eng.batching:
        eng = eng.model_copy(update={"batching": f.batching})
    if f.paged_kv and eng.attention != "paged":
        eng = eng.model_copy(update={"attention": "paged", "kv_block_tokens": PAGED_BLOCK_TOKENS,
                                     "kv_prealloc": "request"})
    elif not f.paged_kv and eng.attention == "paged":
        eng = eng.model_copy(update={"attention": "flash", "kv_block_tokens": 1})
    eff = sc.eff.model_copy(update={"mem_bw_fraction": f.mem_bw_utilization})
    return dataclasses.replace(sc, engine=eng, eff=eff), warnings + w2


def evaluate_filled(f: Scenario, *, strict: bool = True) -> Evaluation:
    """Evaluate a scenario whose fields are all filled (see module docstring)."""
    core = _decode(f, strict)
    values, regimes, warnings = core["values"], core["regimes"], core["warnings"]
    extra_w, extra_kv = core["extra_weight_bytes"], core["extra_kv_bytes_per_token"]
    sc = core["sc"]
    if f.routing is not None and f.routing.share > 0:
        small, w_small, warn_small = _small(f, strict)
        warnings += warn_small
        extra_w += w_small
        values = _mix(values, small, f.routing.share)
    gpus = sc.dep.num_gpus
    if f.usd_per_gpu_hour is not None:
        values["usd_per_mtok"] = usd_per_mtok(f.usd_per_gpu_hour * gpus,
                                              values["output_tok_s_total"])
        regimes["usd_per_mtok"] = regimes["output_tok_s_total"]
    B, ctx = f.width, f.prompt_tokens + f.output_tokens
    mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=B, context=ctx, engine=sc.engine,
                          dep=sc.dep, attention=sc.attention, extra_weight_bytes=extra_w,
                          extra_kv_bytes_per_token=extra_kv)
    fits, max_batch = mem.fits, mem.max_batch
    served = core["served"]
    if served is not None:
        fits, max_batch = fits and served["fits"], min(max_batch, served["limit"])
        if not served["fits"] and mem.fits:
            warnings.append(f"{f.label}: concurrency {B} is beyond the engine's limit of "
                            f"{served['limit']} ({served['limited_by']})")
    if not mem.fits:
        warnings.append(f"{f.label}: does not fit ({mem.total_bytes / mem.device_bytes:.0%} of "
                        f"device memory needed, max batch {mem.max_batch} at {ctx} tokens)")
    require_finite(f"{f.label} result", positive=True, **values)
    return Evaluation(scenario=f.label, values=values, regimes=regimes, batch=B, fits=fits,
                      memory_bytes=mem.total_bytes, capacity_bytes=mem.capacity_bytes,
                      max_batch=max_batch, num_gpus=gpus,
                      speculative_speedup=core["speedup"], tokens_per_step=core["tokens"],
                      speculative_terms=core["spec_terms"],
                      warnings=warnings, assumptions=core["assumptions"])


def _decode(f: Scenario, strict: bool) -> dict:
    """TTFT, TPOT, E2E, throughput of the served model (speculation, KV-off, serving)."""
    sc, warnings = resolve(f, strict=strict)
    assumptions: list[str] = []
    B, P, O = f.width, f.prompt_tokens, f.output_tokens
    ev = api.evaluate(f.query(batch=B, concurrency=None), scenario=sc)   # the one step path
    ttft, tpot = ev.ttft_s, ev.tpot_s
    prefill_bound, decode_bound = ev.prefill_bound, ev.bound
    served = None
    if f.concurrency is not None:
        served = _serve(sc, f, assumptions)
        ttft, tpot = served["ttft_s"], served["tpot_s"]
    plain_tpot = tpot
    if not f.kv_cache:
        tpot, decode_bound = _recompute_tpot(sc, B, P, O)
    speedup = tokens = spec_terms = None
    extra_w = extra_kv = 0.0
    if f.speculative is not None:
        if not f.kv_cache:
            if strict:
                raise PerfModelError(f"{f.label}: speculative decoding needs a KV cache")
            warnings.append(f"{f.label}: speculative decoding ignored while the KV cache is off")
        else:
            spec = _speculate(sc, f, B, P + O // 2)
            speedup, tokens, decode_bound = spec["speedup"], spec["tokens"], spec["bound"]
            spec_terms = spec["terms"]
            extra_w, extra_kv = spec["weight_bytes"], spec["kv_bytes_per_token"]
            warnings += spec["warnings"]
            assumptions += spec["assumptions"]
            tpot = tpot / speedup
    e2e = ttft + max(O - 1, 0) * tpot
    if served is not None:   # Little's law: C requests each hold a slot (static: a cycle)
        e2e = served["e2e_s"] + max(O - 1, 0) * (tpot - plain_tpot)
        slot = served["slot_s"] + served["slot_steps"] * (tpot - plain_tpot)
        thr = B * O / slot
    else:                    # a batch of B requests runs start to finish
        thr = B * O / e2e
    e2e_bound = prefill_bound if ttft > e2e - ttft else decode_bound
    values = {"decode_tok_s_per_user": 1.0 / tpot, "tpot_s": tpot, "ttft_s": ttft, "e2e_s": e2e,
              "output_tok_s_total": thr}
    regimes = {"decode_tok_s_per_user": decode_bound, "tpot_s": decode_bound,
               "ttft_s": prefill_bound, "e2e_s": e2e_bound, "output_tok_s_total": e2e_bound}
    return dict(sc=sc, values=values, regimes=regimes, warnings=warnings, assumptions=assumptions,
                speedup=speedup, tokens=tokens, spec_terms=spec_terms, extra_weight_bytes=extra_w,
                extra_kv_bytes_per_token=extra_kv, served=served)


def _serve(sc: predict.Scenario, f: Scenario, assumptions: list[str]) -> dict:
    """A closed-loop benchmark at concurrency C, simulated step by step under the engine's
    scheduler (perfmodel.serving.simulate: continuous batching admits prompts as slots free,
    mixed into decode steps where the engine chunks prefill; static batching runs batches of
    up to C that hold every slot until their longest request ends). A mixed load (a longest
    length above the mean) draws its lengths from serving.workload.mixed_lengths."""
    from perfmodel.serving.batching import limits
    from perfmodel.serving.simulate import simulate_points
    from perfmodel.serving.workload import DEFAULT_PROMPTS_PER_SLOT, ServeWorkload, mixed_lengths

    C, P, O = f.concurrency, f.prompt_tokens, f.output_tokens
    lp, lo = f.longest_prompt_tokens or P, f.longest_output_tokens or O
    longest = dict(longest_prompt=f.longest_prompt_tokens, longest_output=f.longest_output_tokens)
    lim = limits(sc, P, O, **longest)
    n = f.requests or DEFAULT_PROMPTS_PER_SLOT * C
    lengths = None
    if lp > P or lo > O:
        lengths = tuple(zip(mixed_lengths(P, lp, n, seed=1).astype(int).tolist(),
                            mixed_lengths(O, lo, n, seed=2).astype(int).tolist()))
        assumptions.append(f"{f.label}: mixed lengths on [1, longest] with the stated means, "
                           "the maximum-entropy (truncated exponential) spread "
                           "(perfmodel.serving.workload.mixed_lengths)")
    wl = ServeWorkload.make(arrival="closed", concurrency=C, prompt_tokens=P, output_tokens=O,
                            num_requests=n, lengths=lengths)
    (pt,) = simulate_points(sc, [wl])
    if pt.ttft_mean_s is None or pt.tpot_mean_s is None or pt.e2e_mean_s is None:
        raise PerfModelError(f"{f.label}: concurrency {C} cannot be served: {pt.reason}")
    how = ("static batching: a batch of up to C runs until its longest request ends"
           if lim.static else "continuous batching, prefill mixed into decode steps"
           if lim.mixed else "continuous batching, separate prefill steps")
    assumptions.append(f"{f.label}: concurrency {C}, a closed loop of {n} requests simulated "
                       f"step by step ({how}; perfmodel.serving.simulate); means over requests")
    held = lo if lim.static else O            # decode steps a slot holds
    return dict(ttft_s=float(pt.ttft_mean_s), tpot_s=float(pt.tpot_mean_s),
                e2e_s=float(pt.e2e_mean_s), slot_s=float(pt.e2e_mean_s),
                slot_steps=max(held - 1, 0), fits=bool(pt.fits), limit=int(lim.limit),
                limited_by=lim.limited_by)


def _recompute_tpot(sc: predict.Scenario, B: int, P: int, O: int) -> tuple[float, str]:
    """Mean decode step without a KV cache: step(B, T=S+1, S=0) over S = P+1 .. P+O-1, each a
    prompt step (a prefill of the whole sequence, as an engine runs it)."""
    first, last = P + 1.0, P + max(O - 1.0, 1.0)
    grid = np.linspace(first, last, KV_OFF_NODES) if last > first else np.array([first])
    est = predict.step(sc, B, grid + 1.0, 0.0, prefill=True)
    t = np.broadcast_to(np.asarray(est.time_s, dtype=float), grid.shape)
    mean = float(np.trapezoid(t, grid) / (last - first)) if last > first else float(t[0])
    bounds = np.atleast_1d(est.bound)
    return mean, str(bounds[len(bounds) // 2])


def _speculate(sc: predict.Scenario, f: Scenario, B: int, S: int) -> dict:
    """Speed-up of speculative decoding at batch B and context S (perfmodel.analysis.speculative)."""
    from perfmodel.analysis.speculative import build_drafter, step_times, tokens_per_step

    s = f.speculative
    draft = model_spec(s.draft_model) if s.method == "draft" else None
    drafter = build_drafter(sc, s.method, s.draft_tokens, draft=draft, context=S)
    tau = float(tokens_per_step(s.acceptance, s.draft_tokens))
    st = step_times(sc, drafter, B, S, s.draft_tokens, tau)
    verify = predict.step(sc, B, s.draft_tokens + 1, S, all_logits=True)
    terms = {k: float(getattr(st, k)) for k in ("baseline_s", "verify_s", "draft_s", "overhead_s")}
    return dict(speedup=float(st.speedup), tokens=tau, bound=str(verify.bound), terms=terms,
                weight_bytes=drafter.weight_bytes, kv_bytes_per_token=drafter.kv_bytes_per_token,
                warnings=[f"{f.label}: {w}" for w in drafter.warnings],
                assumptions=[f"{f.label}: speculative speed-up taken at the mid-decode context "
                             f"{S} tokens"] + [f"{f.label}: {a}" for a in drafter.assumptions])


def _small(f: Scenario, strict: bool) -> tuple[dict, float, list[str]]:
    """The routed small model's values on the same GPUs, and its weights per GPU."""
    r = f.routing
    dense = not model_spec(r.small_model).is_moe      # expert parallelism has nothing to split
    small = revise(f, model=r.small_model, speculative=None, routing=None,
                   ep=1 if dense else f.ep, name=f"{f.label} [small model]")
    warnings: list[str] = []
    try:
        core = _decode(small, strict)
    except PerfModelError as exc:
        if "divide" not in str(exc) and "exceeds" not in str(exc):
            raise
        small = revise(small, tp=1, pp=1, ep=1, dp=1, nodes=None)
        warnings.append(f"{f.label}: the small model runs on one GPU ({exc})")
        core = _decode(small, strict)
    spec = core["sc"]
    dep = Deployment(tp=spec.dep.tp, pp=spec.dep.pp, ep=spec.dep.ep, dp=spec.dep.dp)
    w = sum(weight_bytes_by_group(spec.model, spec.precision, dep).values())
    return core["values"], float(w), warnings + core["warnings"]


def _mix(big: dict, small: dict, r: float) -> dict:
    """Request-weighted means; per-user rate from the mean TPOT; harmonic throughput."""
    out = {k: (1 - r) * big[k] + r * small[k] for k in ("ttft_s", "e2e_s", "tpot_s")}
    out["decode_tok_s_per_user"] = 1.0 / out["tpot_s"]
    out["output_tok_s_total"] = 1.0 / ((1 - r) / big["output_tok_s_total"]
                                       + r / small["output_tok_s_total"])
    return out
