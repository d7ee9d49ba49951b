"""Batching physics under load, as numpy arrays over a concurrency grid C: the STEADY-STATE
QUICK ESTIMATE. It assumes desynchronized requests (one prompt at a time) and is kept as a
fast bound for wide searches (sizing's first pass, the Sweep page); a benchmark's TTFT under
load comes from the step-level simulation in serving/simulate.py (`perfmodel serve`).

Everything here is built from `predict.step` (the one op list) and `memory` (the one memory
model); nothing re-derives a FLOP or a byte. Notation: C concurrency (sequences holding KV),
P prompt tokens, O output tokens, all per request; one request yields O tokens, the first
from its prefill and O-1 from decode steps.

Continuous batching (vLLM, SGLang, TensorRT-LLM, llama.cpp; Yu et al., Orca, OSDI'22):
- In steady state each decode step carries C sequences at mean context S = P + O/2
  (contexts are staggered uniformly between P and P+O, and a step's cost is linear in the
  summed context, so the mean context gives the mean step).
- C requests finish every O-1 steps, so k = C/(O-1) new prompts are admitted per step.
- Separate prefill steps (SGLang's default): the k prompts of a step are prefilled
  together, g = clip(k, 1, C) at a time, so every decode step also pays (k/g)*prefill(g):
      TPOT = decode(C) + (k/g) * prefill(g, P);  prefill latency = prefill(g, P)
- Mixed steps (chunked prefill: vLLM V1, TensorRT-LLM in-flight batching, llama.cpp):
  the prompts ride in decode steps. A fraction k/g of the steps carries g prompts: its
  linear layers run once over C + g*P token rows (weights read once) and its attention is
  the decode attention of C sequences plus the g prompts' prefill attention; the other
  steps are plain decode steps (averaging the prompt rows over all steps instead would
  overstate MoE weight reads, which grow concavely with rows):
      mixed(g) = linear(C + g*P rows) + attn_decode(C, S) + attn_prefill(g, P)
      TPOT = (1 - k/g) * decode(C) + (k/g) * mixed(g)
  A new prompt is split into ceil(P / token budget) chunks; its first token comes after
  those steps plus its own prefill work: prefill latency = chunks*decode(C) + prefill(1, P).
- TTFT = per-request overhead + half a step (a request waits for the running step to end)
  + prefill latency. E2E = TTFT + (O-1)*TPOT.
- A request holds its KV slot for prefill latency + (O-1)*TPOT, so by Little's law the
  completed-request rate is C / that slot time and the output rate C*O / slot time.

Static batching (Hugging Face generate, plain PyTorch): a batch of C requests is prefilled
together and decoded until its longest request ends; no request joins a running batch.
With the longest prompt Pm >= P and longest output Om >= O, every sequence is padded to Pm
and held for Om steps (padding costs memory and time):
      cycle = overhead + prefill(C, Pm) + (Om-1) * decode(C, Pm + Om/2)
      TPOT = decode(C);  rate = C / cycle
Closed loop (C users, each sending its next request when the last one ends), a user whose
request ends early waits for the running batch to end before it can join the next one, so
by Little's law (C = rate * E2E) the mean E2E is one cycle, not TTFT + (O-1)*TPOT:
      E2E = cycle;  TTFT = E2E - (O-1) * TPOT  (closed_wait_s = the admission wait in it)
Open loop, an arrival under load first waits for the running batch: on average half a cycle
times the server's busy fraction (batch_wait_s is that half cycle; queueing.py adds it to
the TTFT without the closed-loop wait).

Memory: C fits while weights + KV(C, context) + activations + reserve <= the engine's share
of device memory (memory.estimate_memory's test, paged and block-rounded), at context
P+O (Pm+Om for static batching: padded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.core.memory import (MAX_BATCH_SEARCH, reserve_bytes, usable_bytes, held_context,
                              activation_bytes, kv_cache_bytes, weight_bytes_by_group)
from perfmodel.core.parallel import p2p_s
from perfmodel.core.predict import Scenario
from perfmodel.core.roofline import host_step_s, step_time

GRID_STEP = 2 ** 0.5       # concurrency grid: 1, 1.4, 2, 2.8, ... (rounded) and the limit


def concurrency_grid(limit: int) -> np.ndarray:
    """About sqrt(2)-spaced concurrencies from 1 to the limit, the limit included."""
    if limit <= 1:
        return np.array([1.0])
    n = int(np.floor(np.log(limit) / np.log(GRID_STEP))) + 1
    return np.unique(np.append(np.round(GRID_STEP ** np.arange(n)), float(limit)))


@dataclass(frozen=True)
class Limits:
    """How far concurrency can go for one scenario and request shape."""

    kv_max: int                # largest C whose KV cache fits (0: not even one sequence)
    engine_max: int | None     # engine cap on running sequences
    token_budget: int | None   # engine cap on tokens per step (mixed steps)
    mixed: bool                # prefill rides in decode steps (chunked prefill)
    static: bool               # static batching
    limit: int                 # min of the above (and the token-budget steady-state cap)
    limited_by: str            # "memory", "engine max batch" or "token budget"
    context: int               # context per sequence used for the memory test


def weights_bytes(sc: Scenario) -> float:
    """Weights held by one GPU of the scenario."""
    return sum(weight_bytes_by_group(sc.model, sc.precision, sc.dep).values())


def loaded_bytes(sc: Scenario, C, context, weights: float | None = None):
    """Per-GPU bytes besides the KV cache: weights, runtime reserve, activation peak."""
    w = weights_bytes(sc) if weights is None else weights
    reserve = reserve_bytes(sc.dep)
    return w + reserve + activation_bytes(sc.model, sc.precision, sc.engine,
                                          batch=np.asarray(C, dtype=float), context=context,
                                          dep=sc.dep, attention=sc.attention)


def used_bytes(sc: Scenario, C, context, weights: float | None = None):
    """Per-GPU memory at concurrency C (array) and context: the sum estimate_memory tests."""
    return (loaded_bytes(sc, C, context, weights)
            + kv_cache_bytes(sc.model, sc.precision, batch=np.asarray(C, dtype=float),
                             context=held_context(sc.model, sc.engine, batch=C, context=context),
                             dep=sc.dep, block_tokens=sc.engine.kv_block_tokens))


def capacity_bytes(sc: Scenario, C=1.0, context=None, weights: float | None = None):
    """The engine's usable memory (memory.usable_bytes); without a context, the nominal
    share of device memory."""
    if context is None:
        return sc.hw.memory_bytes * sc.engine.kv_memory_fraction
    return usable_bytes(sc.hw, sc.engine, loaded_bytes(sc, C, context, weights))


def max_fit(sc: Scenario, context: int, weights: float | None = None) -> int:
    """Largest C that fits at this context (0: none), by vectorized bisection: powers of two
    first, then 65 probes per round, reaching the exact integer estimate_memory finds."""

    def ok(c):
        return used_bytes(sc, c, context, weights) <= capacity_bytes(sc, c, context, weights)

    probe = 2.0 ** np.arange(0, int(np.log2(MAX_BATCH_SEARCH)) + 1)
    good = ok(probe)
    if not good[0]:
        return 0
    if good[-1]:
        return MAX_BATCH_SEARCH
    lo = int(probe[good].max())            # ok(lo) true, ok(hi) false
    hi = int(probe[~good].min())
    while hi - lo > 1:
        probe = np.unique(np.round(np.linspace(lo, hi, 65)))
        good = ok(probe)
        lo = int(probe[good].max())
        hi = int(probe[~good].min())
    return lo


def limits(sc: Scenario, prompt: int, output: int, *, max_batch: int | None = None,
           max_num_tokens: int | None = None, chunked_prefill: bool | None = None,
           longest_prompt: int | None = None, longest_output: int | None = None,
           weights: float | None = None) -> Limits:
    """The concurrency limit and what sets it (KV memory, engine cap, token budget)."""
    static = sc.engine.batching == "static"
    sched = sc.engine.scheduler
    eng_max, budget = sched.limits(sc.hw, sc.dep.pp)
    mixed = sched.mixed_prefill
    eng_max = max_batch if max_batch is not None else eng_max
    budget = max_num_tokens if max_num_tokens is not None else budget
    mixed = (chunked_prefill if chunked_prefill is not None else mixed) and not static
    if static:
        context = (longest_prompt or prompt) + (longest_output or output)
    else:
        context = prompt + output
    kv_max = max_fit(sc, context, weights)
    cands = [(kv_max, "memory")]
    if eng_max is not None:
        cands.append((eng_max, "engine max batch"))
    if mixed and budget is not None:
        # steady state: C decode rows + C/(O-1) prompts of P rows must fit in the budget
        per_seq = 1.0 + prompt / max(output - 1, 1)
        cands.append((max(1, int(budget // per_seq)), "token budget"))
    limit, by = min(cands, key=lambda x: x[0])
    if kv_max == 0:
        limit, by = 0, "memory"
    return Limits(kv_max=kv_max, engine_max=eng_max, token_budget=budget, mixed=bool(mixed),
                  static=static, limit=int(limit), limited_by=by, context=int(context))


@dataclass(frozen=True)
class Curve:
    """Closed-loop metrics at each concurrency C (arrays of the grid's shape)."""

    concurrency: np.ndarray
    fits: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    slot_s: np.ndarray            # time a request holds its KV slot
    rate_rps: np.ndarray          # completed requests per second (Little's law)
    output_tok_s_total: np.ndarray
    prefill_s: np.ndarray
    batch_wait_s: np.ndarray      # static batching: half a batch cycle (0 for continuous)
    closed_wait_s: np.ndarray     # static batching, closed loop: wait for the running batch
    used_bytes: np.ndarray


@dataclass(frozen=True)
class _Steps:
    """Per-query step time, GPU time, CPU time and attention time (1-D arrays)."""

    time_s: np.ndarray
    gpu_s: np.ndarray
    cpu_s: np.ndarray
    attn_s: np.ndarray
    host_s: np.ndarray       # per-sequence host work (part of cpu_s)
    eager: np.ndarray        # the step runs outside the engine's CUDA graphs (roofline.issue_s)


def _steps(scs: list[Scenario], queries: list[tuple]) -> list[_Steps]:
    """predict.step for scenarios that differ only in pp, in ONE step_time call.

    step_time does not depend on pp (shard and comm_times use tp and ep), so the queries of
    all pipeline depths are stacked; each then gets what predict.step adds for pp > 1:
    m = min(B, pp) micro-batches (the step runs at B/m) plus the stage hand-offs.
    """
    sc0 = scs[0]
    Bm, sizes = [], []
    for sc, (B, T, S) in zip(scs, queries):
        Bm.append(B / np.minimum(B, sc.dep.pp))
        sizes.append(B.size)
    B_all = np.concatenate(Bm)
    T_all = np.concatenate([q[1] for q in queries])
    S_all = np.concatenate([q[2] for q in queries])
    # prefill and mixed queries carry prompt tokens (T > 1): the same issue rule as the
    # simulator's step cost and predict's prefill (core/roofline.issue_s)
    est = step_time(sc0.model, sc0.hw, sc0.precision, sc0.engine, sc0.eff, B_all, T_all, S_all,
                    dep=sc0.dep, attention=sc0.attention, prefill=T_all > 1.0)
    shape = B_all.shape
    time = np.broadcast_to(np.asarray(est.time_s, dtype=float), shape)
    gpu = np.broadcast_to(np.asarray(est.gpu_s, dtype=float), shape)
    cpu = np.broadcast_to(np.asarray(est.cpu_s, dtype=float), shape)
    host = np.broadcast_to(np.asarray(est.host_s, dtype=float), shape)
    eager = np.broadcast_to(np.asarray(est.eager, dtype=bool), shape)
    attn = np.zeros(shape)
    for op in est.ops:
        if op.kind == "attention":
            attn = attn + np.broadcast_to(np.asarray(op.time_s, dtype=float), shape)
    out, start = [], 0
    for sc, bm, (_, T, _), n in zip(scs, Bm, queries, sizes):
        sl = slice(start, start + n)
        start += n
        hop = p2p_s(sc.hw, sc.eff, sc.dep, bm * T, sc.model) if sc.dep.pp > 1 else 0.0
        out.append(_Steps(time[sl] + hop, gpu[sl] + hop, cpu[sl], attn[sl], host[sl], eager[sl]))
    return out


def heavy_prompt_rows(total_rows, largest_rows, m):
    """Prompt rows of the heaviest of m pipeline micro-batches: max(total/m, largest).

    A prompt (or chunk) runs inside one micro-batch; the m micro-batches cycle through the
    same p stages, so the pipeline's period is that of its slowest micro-batch (GPipe,
    Huang et al. 2019: stages must be balanced; vLLM and TRT-LLM schedule a prompt chunk
    into one micro-batch (virtual engine)). Spreading prompt rows evenly over the
    micro-batches, as if a chunk could be cut into m pieces, priced pipeline-parallel
    serving with long prompts m-fold too cheaply per prompt token. m = 1 is the sum."""
    total = np.asarray(total_rows, dtype=float)
    return np.maximum(total / m, np.minimum(largest_rows, total))


def _queries(C: np.ndarray, P: float, O: float, lim: Limits, Pm: float, Om: float,
             pp: int = 1) -> tuple:
    """(B, T, S) of the steps a curve needs (see curve). Under pp stages a mixed step's
    prompts cannot be cut across micro-batches: the heaviest of the m = min(C, pp)
    micro-batches carries C/m decode rows and max(g*P/m, P) prompt rows, and it sets the
    pipeline's pace (heavy_prompt_rows)."""
    n = C.size
    ones, zeros = np.ones(n), np.zeros(n)
    if lim.static:       # prefill(C, Pm), decode(C) at the padded mean context
        return (np.concatenate([C, C]), np.concatenate([np.full(n, Pm), ones]),
                np.concatenate([zeros, np.full(n, Pm + Om / 2)]))
    k = C / max(O - 1.0, 1.0)               # prompts admitted per decode step
    g = np.clip(k, 1.0, C)                  # prompts prefilled together
    S = np.full(n, P + O / 2.0)             # mean context of a decode step
    if not lim.mixed:    # decode(C), prefill(g)
        return (np.concatenate([C, g]), np.concatenate([ones, np.full(n, P)]),
                np.concatenate([S, zeros]))
    # decode(C), prefill(g), linear layers over C + g*P rows, prefill(1)
    m = np.minimum(C, pp)                   # _steps runs each query at B / m
    return (np.concatenate([C, g, C, [1.0]]),
            np.concatenate([ones, np.full(n, P), 1.0 + heavy_prompt_rows(g * P, P, m) * m / C,
                            [P]]),
            np.concatenate([S, zeros, zeros, [0.0]]))


def curves(scs: list[Scenario], grids: list, prompt: int, output: int, lims: list[Limits], *,
           longest_prompt: int | None = None, longest_output: int | None = None,
           weights: list[float] | None = None) -> list[Curve]:
    """Curves of scenarios that differ only in pp, from one step evaluation."""
    P, O = float(prompt), float(output)
    Pm, Om = float(longest_prompt or prompt), float(longest_output or output)
    Cs = [np.atleast_1d(np.asarray(C, dtype=float)) for C in grids]
    steps = _steps(scs, [_queries(C, P, O, lim, Pm, Om, sc.dep.pp)
                         for sc, C, lim in zip(scs, Cs, lims)])
    ws = weights or [None] * len(scs)
    return [_assemble(sc, C, P, O, lim, st, Pm, Om, w)
            for sc, C, lim, st, w in zip(scs, Cs, lims, steps, ws)]


def curve(sc: Scenario, C, prompt: int, output: int, lim: Limits, *,
          longest_prompt: int | None = None, longest_output: int | None = None,
          weights: float | None = None) -> Curve:
    """Metrics over the concurrency grid C (see the module docstring for the formulas)."""
    return curves([sc], [C], prompt, output, [lim], longest_prompt=longest_prompt,
                  longest_output=longest_output, weights=[weights])[0]


def _assemble(sc: Scenario, C, P, O, lim: Limits, st: _Steps, Pm, Om, weights) -> Curve:
    n = C.size
    overhead = sc.engine.per_request_overhead_s
    decode_steps = max(O - 1.0, 0.0)
    t = st.time_s
    if lim.static:
        pre, dec = t[:n], t[n:]
        cycle = overhead + pre + max(Om - 1.0, 0.0) * dec
        tpot, prefill = dec, pre
        # closed loop: a user's next request waits for the running batch to end, so by
        # Little's law (C users, C requests per cycle) the mean E2E is one cycle
        e2e = cycle
        held = cycle - (overhead + pre + decode_steps * dec)   # admission wait, closed loop
        ttft = held + overhead + pre
        slot, wait = cycle, 0.5 * cycle
    else:
        k = C / max(O - 1.0, 1.0)
        g = np.clip(k, 1.0, C)
        dec, pre = t[:n], t[n:2 * n]
        if lim.mixed:
            cpu_overhead = sc.engine.cpu_overhead_per_step_s
            a = st.attn_s
            mixed_gpu = (st.gpu_s[2 * n:3 * n] - a[2 * n:3 * n]  # linear layers, C + g*P rows
                         + a[:n]                                 # decode attention, C sequences
                         + a[n:2 * n])                           # the g prompts' attention
            host = st.host_s[2 * n:3 * n]
            mixed = host_step_s(sc.engine, mixed_gpu, st.cpu_s[2 * n:3 * n] - cpu_overhead - host,
                                host, eager=st.eager[2 * n:3 * n])
            tpot = (1.0 - k / g) * dec + (k / g) * mixed
            chunks = np.ceil(P / lim.token_budget) if lim.token_budget else 1.0
            prefill = chunks * dec + t[-1]
        else:
            tpot = dec + (k / g) * pre
            prefill = pre
        ttft = overhead + 0.5 * tpot + prefill
        slot = prefill + decode_steps * tpot
        e2e = ttft + decode_steps * tpot
        wait = held = np.zeros(n)
    rate = C / slot
    used = np.broadcast_to(used_bytes(sc, C, lim.context, weights), (n,)).copy()
    fits = (C <= lim.limit) & (used <= capacity_bytes(sc, C, lim.context, weights))
    return Curve(concurrency=C, fits=fits, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, slot_s=slot,
                 rate_rps=rate, output_tok_s_total=rate * O, prefill_s=prefill,
                 batch_wait_s=wait, closed_wait_s=held, used_bytes=used)
