"""Bundles: k requests of one shape of a high-concurrency closed loop simulated as one.

A closed loop of C requests sends its requests in generations that start, finish and are
replaced together; the simulation's cost grows with the requests it tracks
(10 x C per level, a few passes of the fixed point in serving/disagg.py), not with the rows
of a step. Above BUNDLE_ABOVE_CONCURRENCY the pools simulate C / k bundles of k requests
(k = ceil(C / BUNDLE_ABOVE_CONCURRENCY)): a bundle is admitted, prefilled, transferred and
decoded as one request whose every step is priced at k times its rows on the one step-cost
surface (BundledCost), so a step of b bundles costs what a step of k x b requests costs.
The scheduler's limits shrink by k (max running requests, token budget, KV blocks).

What it changes (the cost of cheapness, measured in docs/disagg.md): the k members of a
bundle move in lockstep, so requests that would have been split across two decode
admissions share one. A prefill worker whose step takes fewer than k prompts (its max batch,
its token budget) runs a bundle's prompts as ceil(k / step) steps back to back; each member
gets its first token one step after it reaches the worker (first_offset_s), and its k KV
transfers hold the link k times as long while the mean member waits (k - 1) / 2 of them
less than the last. Per-request metrics are the bundle's; counts (throughput, max running)
are scaled back by k. Concurrency is simulated as k x round(C / k) (at most k / 2 requests
off). Lengths drawn from a range (a harness's --random-range-ratio): each bundle repeats one
draw, so the level's n / k bundles (10 x BUNDLE_ABOVE_CONCURRENCY draws at 10 x C requests)
sample the distribution; the prefill worker's step group is counted at the longest prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from perfmodel.serving.scheduler import Policy
from perfmodel.serving.stepcost import StepCost

BUNDLE_ABOVE_CONCURRENCY = 32
"""Largest concurrency simulated request by request; above it, bundles (the module doc)."""


def bundle_size(concurrency: int | None) -> int:
    """k for a closed-loop level (1: no bundles; open loops and traces are never bundled)."""
    if concurrency is None or concurrency <= BUNDLE_ABOVE_CONCURRENCY:
        return 1
    return math.ceil(concurrency / BUNDLE_ABOVE_CONCURRENCY)


def step_requests(pol: Policy, prompt: int) -> int:
    """Prompts of `prompt` tokens one prefill step of the worker takes: its max batch and
    the prompts its token budget holds (at least one)."""
    most = pol.max_seqs
    if pol.token_budget is not None:
        most = min(most, pol.token_budget // max(prompt, 1))
    return max(1, most)


@dataclass(frozen=True)
class BundledCost:
    """The step cost of bundles of k requests: every row, chunk and logit counted k times.
    `group` (prompts one real step takes, None: no limit): when k exceeds it, a prefill-only
    step (one bundle: bundled_policy) runs as back-to-back steps of at most `group` prompts."""

    base: StepCost
    k: int
    group: int | None = None

    def step_s(self, d, sum_ctx, chunks=(), chunk_ctx=(), finishing: int = 0) -> float:
        k = self.k
        chunks, chunk_ctx = list(chunks) * k, list(chunk_ctx) * k
        if d or self.group is None or k <= self.group:   # bundles within one real step
            return self.base.step_s(k * d, k * sum_ctx, chunks, chunk_ctx, k * finishing)
        g = self.group          # prefill-only: groups of at most g prompts, one after another
        total = 0.0
        for lo in range(0, len(chunks), g):
            part = chunks[lo:lo + g]
            total += self.base.step_s(0, 0.0, part, chunk_ctx[lo:lo + g],
                                      min(k * finishing - lo, len(part)) if finishing else 0)
        return total

    def decode_run_s(self, d: int, mean_ctx0: float, steps: int):
        return self.base.decode_run_s(self.k * d, mean_ctx0, steps)

    def first_offset_s(self, prompt: int) -> float:
        """How much earlier than the bundle's end its members get their first token when its
        k prompts run as g = ceil(k / group) steps back to back: (g - 1) x tau, tau one full
        group's step. The members stand for requests sent one after another as earlier ones
        complete, not at one instant: each reaches the worker about when the step before
        it ends and waits one step, not its place in the bundle (taking every member as sent
        with the bundle overstated TTFT by (g - 1) / 2 steps: docs/disagg.md)."""
        if self.group is None or self.k <= self.group:
            return 0.0
        g = math.ceil(self.k / self.group)
        tau = self.base.step_s(0, 0.0, [float(prompt)] * self.group, [0.0] * self.group,
                               self.group)
        return tau * (g - 1)


def bundled_policy(pol: Policy, k: int, prompt: int | None = None) -> Policy:
    """The scheduler limits seen by bundles of k requests (at least one bundle of each);
    `prompt` (prefill pool): a bundle's whole prompt fits one simulated step, which
    BundledCost prices as the real steps it takes."""
    if k == 1:
        return pol
    budget = None if pol.token_budget is None else max(1, pol.token_budget // k)
    rank = pol.rank_tokens
    if budget is not None and prompt is not None:
        budget = max(budget, prompt)
    if rank is not None and prompt is not None:
        rank = max(rank, prompt)
    return replace(pol, max_seqs=max(1, pol.max_seqs // k), token_budget=budget, rank_tokens=rank,
                   total_blocks=max(1, pol.total_blocks // k))
