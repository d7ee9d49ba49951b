"""Speculative decoding, the estimate: speed-up, optimal draft length, break-even batch and
the acceptance a claimed speed-up needs, for a target model and a drafter (SpeculativeEstimate).
The arithmetic of one speculative step (tokens per target step, Leviathan et al. 2023, and the
verify / draft / overhead times from the one op list) is in analysis/speculative_step.py and
re-exported here."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.api import make_query, resolve
from perfmodel.core.catalog import load_model
from perfmodel.analysis.drafts import (METHODS, RESEARCH_STEP_OPS, RESEARCH_TREES, Drafter,
                                       build_drafter)
from perfmodel.analysis.speculative_step import (BATCH_SEARCH_MAX, StepTimes,  # noqa: F401
                                                 acceptance_for_tokens, break_even_batch,
                                                 step_times, tokens_per_step)
from perfmodel.core.errors import PerfModelError, require_finite
from perfmodel.core.memory import MemoryEstimate, estimate_memory
from perfmodel.core.parallel import validate_deployment
from perfmodel.core.predict import Scenario, step
from perfmodel.core.specs import ModelSpec, Precision
from perfmodel.core.units import GB

__all__ = ["METHODS", "Drafter", "build_drafter", "tokens_per_step", "acceptance_for_tokens",
           "step_times", "break_even_batch", "SpeculativeEstimate", "estimate_specs",
           "speculative_estimate"]

DEFAULT_GAMMA = {"mtp": 1}       # DeepSeek-V3 trains one MTP module (one extra token)
FALLBACK_GAMMA = 4               # the others: a common vLLM/TRT-LLM setting
MAX_GAMMA = 64                   # assumption: no practical drafter proposes more per step
MAX_TREE_TOKENS = 16 * MAX_GAMMA  # assumption: a token tree verifies at most 16 branches of
                                 # MAX_GAMMA (EAGLE-2 and Medusa trees verify ~25-60 tokens)
GAMMA_SEARCH = range(1, 9)       # optimal gamma is searched over 1..8


# --------------------------------------------------------------------------- estimate


class BatchPoint(BaseModel):
    """Speed-up at one batch (same context, gamma and acceptance)."""

    model_config = ConfigDict(frozen=True)
    batch: int
    speedup: float
    fits: bool


class SpeculativeEstimate(BaseModel):
    """Speculative decoding against plain decoding at the same batch, context and engine."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    method: str
    drafter: str = Field(description="Draft model id, or the head the method adds.")
    precision: str
    draft_precision: str
    batch: int
    context: int
    gamma: int = Field(description="Draft tokens per step (tree depth for tree methods).")
    verify_tokens: int = Field(description="T of the verification step: gamma+1 or the tree budget.")
    acceptance: float = Field(description="Per-token acceptance alpha (given, or derived from tau).")
    acceptance_source: str
    tokens_per_step: float = Field(description="Mean tokens per target step, bonus token included.")
    speedup: float = Field(description="tokens_per_step * baseline / (verify + draft + overhead).")
    baseline_step_s: float = Field(description="Plain decode step at this batch and context.")
    verify_step_s: float = Field(description="Target step over verify_tokens tokens per sequence.")
    dominant_term: str = Field(description="The largest part of the speculative step: "
                               "verification, drafting or overhead.")
    dominant_note: str = Field(description="Each part's share of the speculative step.")
    draft_step_s: float = Field(description="All drafter passes of one target step.")
    overhead_s: float = Field(description="Proposer CPU work outside both (n-gram lookup).")
    spec_step_s: float = Field(description="verify + draft + overhead.")
    tpot_s: float = Field(description="spec_step_s / tokens_per_step.")
    baseline_tpot_s: float
    decode_tok_s_per_user: float
    baseline_tok_s_per_user: float
    verify_bound: str = Field(description="What bounds the verification step.")
    optimal_gamma: int = Field(description="Chain gamma in 1..8 with the best speed-up at this alpha.")
    optimal_speedup: float
    breakeven_batch: int | None = Field(description="Smallest batch (within memory) with speed-up < 1.")
    breakeven_note: str
    batch_curve: list[BatchPoint]
    fits: bool
    draft_weight_bytes: float = Field(description="Drafter weights per GPU (shared weights excluded).")
    draft_kv_bytes_per_token: float
    memory: MemoryEstimate
    target_speedup: float | None
    required_acceptance: float | None = Field(description="alpha that reaches target_speedup.")
    required_tokens_per_step: float | None = Field(description="tau at that alpha.")
    required_note: str
    warnings: list[str]
    assumptions: list[str]


def _positive_int(name: str, v, low: int = 1) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
        raise PerfModelError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def _finite(name: str, v) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not np.isfinite(v):
        raise PerfModelError(f"{name} must be a finite number, got {v!r}")
    return float(v)


def _solve_acceptance(target, drafter, batch, context, gamma, verify_tokens, goal):
    """Bisection on alpha in [0, 1] for speedup(alpha) = goal (speed-up rises with alpha)."""
    def sp(a: float) -> float:
        tau = float(tokens_per_step(a, gamma))
        return float(step_times(target, drafter, batch, context, gamma, tau, verify_tokens).speedup)
    best = sp(1.0)
    if best < goal:
        return None, (f"unreachable: even with every draft token accepted (tau = {gamma + 1}) "
                      f"the speed-up is {best:.3g} at batch {batch}")
    if sp(0.0) >= goal:
        return 0.0, "reached without any accepted draft token"
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if sp(mid) < goal else (lo, mid)
    return hi, f"alpha >= {hi:.3f} (tau >= {float(tokens_per_step(hi, gamma)):.2f}) at gamma {gamma}"


def estimate_specs(target: Scenario, method: str, *, batch: int, context: int,
                   gamma: int | None = None, acceptance: float | None = None,
                   mean_accepted_tokens: float | None = None, draft: ModelSpec | None = None,
                   draft_precision: Precision | None = None, tree_tokens: int | None = None,
                   target_speedup: float | None = None) -> SpeculativeEstimate:
    """Speculative decoding of an already-resolved target Scenario (for reuse by claims).

    method: one of METHODS. Give acceptance (alpha in [0, 1)) or mean_accepted_tokens
    (tau in [1, gamma+1], bonus token included) or only target_speedup (then alpha is
    solved). gamma defaults to DEFAULT_GAMMA/FALLBACK_GAMMA; tree_tokens is the number of
    tokens verified per sequence (default gamma+1, a chain). draft/draft_precision: the
    separate draft model (method 'draft') and the drafter's precision (default: target's).
    Raises PerfModelError on bad input; never returns NaN or inf.
    """
    batch = _positive_int("batch", batch)
    context = _positive_int("context", context, low=0)
    research = target.engine.speculative_impl == "research"
    if research and gamma is None and tree_tokens is None and method in RESEARCH_TREES:
        gamma, tree_tokens = RESEARCH_TREES[method]      # the reference code's default tree
    gamma = _positive_int("gamma", DEFAULT_GAMMA.get(method, FALLBACK_GAMMA) if gamma is None
                          else gamma)
    if gamma > MAX_GAMMA:
        raise PerfModelError(f"gamma {gamma} is beyond {MAX_GAMMA} draft tokens per step")
    verify_tokens = gamma + 1 if tree_tokens is None else _positive_int("tree_tokens", tree_tokens)
    if verify_tokens < gamma + 1 or verify_tokens > MAX_TREE_TOKENS:
        raise PerfModelError(f"tree_tokens {verify_tokens} must lie in [gamma+1 = {gamma + 1}, "
                             f"{MAX_TREE_TOKENS}]")
    alpha, tau = _finite("acceptance", acceptance), _finite("mean_accepted_tokens", mean_accepted_tokens)
    goal = _finite("target_speedup", target_speedup)
    if alpha is not None and tau is not None:
        raise PerfModelError("give either acceptance or mean_accepted_tokens, not both")
    if alpha is None and tau is None and goal is None:
        raise PerfModelError("give acceptance, mean_accepted_tokens or target_speedup")
    if alpha is not None and not 0.0 <= alpha < 1.0:
        raise PerfModelError(f"acceptance {alpha} must lie in [0, 1)")
    if goal is not None and goal <= 0:
        raise PerfModelError(f"target speed-up {goal} must be positive")
    m = target.model
    if context + verify_tokens > m.max_context:
        raise PerfModelError(f"context {context} + {verify_tokens} verified tokens exceed the "
                             f"{m.max_context}-token context of {m.id}")
    validate_deployment(m, target.dep)
    drafter = build_drafter(target, method, gamma, draft=draft, draft_precision=draft_precision,
                            context=context)
    warnings, assumptions = list(drafter.warnings), list(drafter.assumptions)
    if tau is not None:
        alpha, source = acceptance_for_tokens(tau, gamma), "derived from the mean accepted tokens"
    elif alpha is not None:
        source = "given"
    req_alpha, req_note = None, ""
    if goal is not None:
        req_alpha, req_note = _solve_acceptance(target, drafter, batch, context, gamma,
                                                verify_tokens, goal)
    if alpha is None:
        alpha = 1.0 if req_alpha is None else req_alpha
        source = ("solved for the target speed-up" if req_alpha is not None
                  else "limit alpha -> 1 (target speed-up unreachable)")
    tau = float(tokens_per_step(alpha, gamma)) if tau is None else tau
    t = step_times(target, drafter, batch, context, gamma, tau, verify_tokens)
    verify_est = step(target, batch, verify_tokens, context, all_logits=True)

    best_g, best_sp = gamma, -1.0
    for g in GAMMA_SEARCH:
        if context + g + 1 > m.max_context:
            break
        d = build_drafter(target, method, g, draft=draft, draft_precision=draft_precision,
                          context=context) if method == "medusa" else drafter
        sp = float(step_times(target, d, batch, context, g, tokens_per_step(alpha, g)).speedup)
        if sp > best_sp:
            best_g, best_sp = g, sp

    mem = estimate_memory(m, target.hw, target.precision, batch=batch, context=context,
                          engine=target.engine, dep=target.dep, attention=target.attention,
                          extra_weight_bytes=drafter.weight_bytes,
                          extra_kv_bytes_per_token=drafter.kv_bytes_per_token)
    be, be_note = break_even_batch(target, drafter, context, gamma, tau, verify_tokens,
                                   mem.max_batch)
    grid = 2 ** np.arange(int(np.log2(BATCH_SEARCH_MAX)) + 1)
    curve_sp = step_times(target, drafter, grid, context, gamma, tau, verify_tokens).speedup
    curve = [BatchPoint(batch=int(b), speedup=float(s), fits=bool(b <= mem.max_batch))
             for b, s in zip(grid, curve_sp)]

    values = dict(tokens_per_step=tau, speedup=t.speedup, baseline_step_s=t.baseline_s,
                  verify_step_s=t.verify_s, draft_step_s=t.draft_s, overhead_s=t.overhead_s,
                  spec_step_s=t.spec_step_s, tpot_s=t.spec_step_s / tau,
                  baseline_tpot_s=t.baseline_s, decode_tok_s_per_user=tau / t.spec_step_s,
                  baseline_tok_s_per_user=1.0 / t.baseline_s, optimal_speedup=best_sp)
    values = {k: float(v) for k, v in values.items()}
    require_finite("speculative decoding", **values,
                   **{f"batch_curve[{p.batch}]": p.speedup for p in curve})
    warnings += list(verify_est.warnings)
    parts = {"verification": values["verify_step_s"], "drafting": values["draft_step_s"],
             "overhead": values["overhead_s"]}
    dominant = max(parts, key=parts.get)
    note = ", ".join(f"{k} {v / values['spec_step_s']:.0%}" for k, v in parts.items())
    if research:
        assumptions.append(f"research implementation on {target.engine.id}: "
                           f"{RESEARCH_STEP_OPS[method]} Python ops per step for tree "
                           "construction, posterior evaluation and KV compaction "
                           "(drafts.RESEARCH_STEP_OPS)")
    if values["speedup"] < 1.0:
        warnings.append(f"speculation is slower than plain decoding at batch {batch}: verifying "
                        f"{verify_tokens} tokens costs {values['verify_step_s'] / values['baseline_step_s']:.2f}"
                        " plain steps")
    if goal is not None and req_alpha is None:
        warnings.append(f"target speed-up {goal:g} is out of reach: {req_note}")
    if not mem.fits:
        warnings.append(f"does not fit with the drafter: needs {mem.total_bytes / GB:.1f} GB per "
                        f"GPU, {mem.capacity_bytes / GB:.1f} GB usable; max batch {mem.max_batch}")
    return SpeculativeEstimate(
        model=m.id, gpu=target.hw.id, engine=target.engine.id, method=method,
        drafter=draft.id if draft is not None else drafter.label,
        precision=target.precision.label,
        draft_precision=(drafter.sc.precision.label if drafter.sc is not None else "none"),
        batch=batch, context=context, gamma=gamma, verify_tokens=verify_tokens,
        acceptance=float(alpha), acceptance_source=source, verify_bound=str(verify_est.bound),
        dominant_term=dominant, dominant_note=f"of the speculative step: {note}",
        optimal_gamma=best_g, breakeven_batch=be, breakeven_note=be_note, batch_curve=curve,
        fits=mem.fits, draft_weight_bytes=drafter.weight_bytes,
        draft_kv_bytes_per_token=drafter.kv_bytes_per_token, memory=mem, target_speedup=goal,
        required_acceptance=req_alpha,
        required_tokens_per_step=(None if req_alpha is None
                                  else float(tokens_per_step(req_alpha, gamma))),
        required_note=req_note, warnings=warnings, assumptions=assumptions, **values)


def speculative_estimate(model, gpu, *, method: str, draft=None, gamma: int | None = None,
                         acceptance: float | None = None, mean_accepted_tokens: float | None = None,
                         batch: int = 1, context: int = 1024, weights: str = "bf16",
                         kv: str | None = None, activations: str | None = None,
                         draft_weights: str | None = None, engine: str = "vllm", tp: int = 1,
                         pp: int = 1, ep: int = 1, dp: int = 1, nodes: int | None = None,
                         tree_tokens: int | None = None,
                         target_speedup: float | None = None, attention: str | None = None,
                         profile=None, hardware_dir: str | None = None) -> SpeculativeEstimate:
    """By ids (as api.predict_request): model/draft are catalog ids, HF repos or config paths;
    draft_weights sets the drafter's weight precision (default: the target's precision).
    The ids, batch and context are validated once, as a Query (core/query.py)."""
    q = make_query(model=model, gpu=gpu, weights=weights, kv=kv, activations=activations,
                   engine=engine, tp=tp, pp=pp, ep=ep, dp=dp, nodes=nodes, attention=attention,
                   profile=profile, hardware_dir=hardware_dir, batch=batch, context_tokens=context)
    sc, warnings, assumptions = resolve(q)
    draft_spec = None if draft is None else (draft if isinstance(draft, ModelSpec) else load_model(draft))
    dprec = None
    if draft_weights is not None:
        try:
            dprec = Precision.of(draft_weights, kv)
        except ValueError as exc:
            raise PerfModelError(str(exc)) from None
    if gamma is None and tree_tokens is None and sc.engine.speculative_impl == "research" \
            and method in RESEARCH_TREES:
        g, t = RESEARCH_TREES[method]
        assumptions = assumptions + [f"the reference implementation's default: depth {g}, "
                                     f"{t} tokens verified per step (drafts.RESEARCH_TREES)"]
    elif gamma is None:
        assumptions = assumptions + [f"gamma {DEFAULT_GAMMA.get(method, FALLBACK_GAMMA)} "
                                     "draft tokens per step (default)"]
    est = estimate_specs(sc, method, batch=q.batch, context=q.context, gamma=gamma,
                         acceptance=acceptance, mean_accepted_tokens=mean_accepted_tokens,
                         draft=draft_spec, draft_precision=dprec, tree_tokens=tree_tokens,
                         target_speedup=target_speedup)
    return est.model_copy(update={"warnings": warnings + est.warnings,
                                  "assumptions": assumptions + est.assumptions})
