"""Speculative decoding, one step: tokens per target step, the cost of one speculative step
from the one op list, its speed-up and the break-even batch. The estimate built on them
(optimal draft length, the acceptance a claimed speed-up needs, defaults per method) is
analysis/speculative.py.

Tokens per target step. With per-token acceptance alpha and a chain of gamma draft tokens
(Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1):
    E = (1 - alpha^(gamma+1)) / (1 - alpha) = sum_{i=0..gamma} alpha^i
(1 at alpha = 0, gamma+1 as alpha -> 1; computed as the sum, which is exact at alpha = 1).
Tree methods (EAGLE, Medusa) and benchmarks report the mean accepted length tau per target
step INCLUDING the bonus token (EAGLE's tau ~ 3.5-4, TRT-LLM's "acceptance rate" column, the
TRT-LLM n-gram blog's AL = w + 1). Given tau, tokens_per_step = tau and alpha is derived by
solving E(alpha, gamma) = tau.

One speculative step at batch B and context S (every time from predict.step, the same
op list and roofline as plain decoding):
    verify   = step(target, B, T = gamma+1 (or the tree budget), S, all_logits=True)
    draft    = first + (gamma - 1) * later          (drafter passes, see below)
    overhead = CPU work that no step contains: the n-gram lookup on serving engines; on
               research code (engine.speculative_impl) the Python ops that build the tree,
               evaluate the posterior and compact the KV, drafts.RESEARCH_STEP_OPS x launch
    speedup  = tokens_per_step * step(target, B, 1, S) / (verify + draft + overhead)
Drafter passes: a draft model, EAGLE head or MTP module runs gamma passes; the first
consumes the ~tau tokens the last verification accepted (the "catch-up", T = tau: vLLM and
SGLang run it as a draft extend), the later ones T = w tokens per sequence (w = 1 for a
chain, the mean tree width (budget - 1)/gamma for a tree). Medusa evaluates all heads in one
pass on the last hidden state (no KV). n-gram has no draft compute. Drafter passes pay the
engine's kernel launches but not its per-step scheduler overhead (that runs once per target
step). Not modelled: the draft model's prefill of the prompt (it adds to TTFT only).
As B grows, verification of gamma+1 tokens per sequence turns compute-bound and costs
~(gamma+1) plain steps, so the speed-up falls below 1: the break-even batch.
Defaults: on research code each method verifies its reference tree (drafts.RESEARCH_TREES:
EAGLE-1 26 tokens at depth 5, EAGLE-2 60, Medusa 64, ...); on serving engines a chain of
gamma = DEFAULT_GAMMA/FALLBACK_GAMMA. The estimate names the term that dominates the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.analysis.drafts import (NGRAM_LOOKUP_S, NGRAM_LOOKUP_S_PER_SEQ, RESEARCH_STEP_OPS,
                                       Drafter)
from perfmodel.core.errors import PerfModelError
from perfmodel.core.predict import Scenario, step

BATCH_SEARCH_MAX = 4096          # break-even batch is searched over 1..4096


def tokens_per_step(alpha, gamma):
    """E = (1 - a^(g+1)) / (1 - a) = sum_{i=0..g} a^i  (Leviathan et al. 2023, eq. 1)."""
    a = np.asarray(alpha, dtype=float)
    g = np.asarray(gamma, dtype=float)
    safe = np.where(a < 1.0, a, 0.0)
    closed = (1.0 - safe ** (g + 1.0)) / (1.0 - safe)
    return np.where(a < 1.0, closed, g + 1.0)


def acceptance_for_tokens(tau: float, gamma: int) -> float:
    """alpha in [0, 1] with E(alpha, gamma) = tau, by bisection (E rises with alpha)."""
    if not 1.0 <= tau <= gamma + 1.0:
        raise PerfModelError(f"mean accepted tokens {tau} must lie in [1, gamma+1 = {gamma + 1}]")
    if tau >= gamma + 1.0:
        return 1.0
    if tau <= 1.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(tokens_per_step(mid, gamma)) < tau else (lo, mid)
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class StepTimes:
    """Seconds per target step (arrays broadcast over B and tokens)."""

    baseline_s: object
    verify_s: object
    draft_s: object
    overhead_s: object
    tokens: object

    @property
    def spec_step_s(self):
        return self.verify_s + self.draft_s + self.overhead_s

    @property
    def speedup(self):
        return self.tokens * self.baseline_s / self.spec_step_s


def step_times(target: Scenario, drafter: Drafter, B, S, gamma: int, tokens,
               verify_tokens: int | None = None) -> StepTimes:
    """Baseline, verification, drafter and overhead seconds of one target step."""
    T = gamma + 1 if verify_tokens is None else verify_tokens
    B = np.asarray(B, dtype=float)
    tokens = np.asarray(tokens, dtype=float)
    base = step(target, B, 1.0, S).time_s
    verify = step(target, B, float(T), S, all_logits=True).time_s
    zero = np.zeros(np.broadcast_shapes(B.shape, tokens.shape))
    overhead = zero
    research = target.engine.speculative_impl == "research"
    if research:      # the reference code's per-step Python ops, one launch each
        overhead = zero + RESEARCH_STEP_OPS[drafter.method] * target.engine.launch_s
    if drafter.sc is None:
        draft = zero
        if drafter.method == "ngram" and not research:
            overhead = zero + NGRAM_LOOKUP_S + NGRAM_LOOKUP_S_PER_SEQ * B
    elif drafter.method == "medusa":
        draft = zero + step(drafter.sc, B, 1.0, 0.0).time_s
    else:
        width = (T - 1) / gamma                        # 1 for a chain, mean tree width otherwise
        first = step(drafter.sc, B, tokens, S).time_s  # catch-up on the accepted tokens
        later = step(drafter.sc, B, width, S).time_s if gamma > 1 else 0.0
        draft = zero + first + (gamma - 1) * later
    return StepTimes(base, verify, draft, overhead, zero + tokens)


def break_even_batch(target: Scenario, drafter: Drafter, S: int, gamma: int, tokens: float,
                     verify_tokens: int, max_batch: int) -> tuple[int | None, str]:
    """Smallest batch (1..BATCH_SEARCH_MAX, within memory) where the speed-up drops below 1."""
    grid = 2 ** np.arange(int(np.log2(BATCH_SEARCH_MAX)) + 1)
    sp = step_times(target, drafter, grid, S, gamma, tokens, verify_tokens).speedup
    below = np.nonzero(sp < 1.0)[0]
    limit = min(max_batch, BATCH_SEARCH_MAX)
    if below.size == 0:
        if max_batch < BATCH_SEARCH_MAX:
            return None, f"speed-up stays above 1 up to the memory limit (max batch {max_batch})"
        return None, f"speed-up stays above 1 up to batch {BATCH_SEARCH_MAX}"
    hi = int(grid[below[0]])
    lo = hi // 2
    if hi > 1:  # refine to the exact integer between the two powers of two
        cand = np.arange(lo + 1, hi + 1)
        sp_c = step_times(target, drafter, cand, S, gamma, tokens, verify_tokens).speedup
        hi = int(cand[np.nonzero(sp_c < 1.0)[0][0]])
    if hi > limit:
        return None, (f"speed-up stays above 1 up to the memory limit (max batch {max_batch} "
                      f"at this context); it would fall below 1 at batch {hi}")
    return hi, f"speed-up falls below 1 from batch {hi}"
