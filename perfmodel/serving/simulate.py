"""Simulated serving benchmark -> the percentiles `bench-endpoint` measures (LevelStats keys).

`simulate_points(sc, workloads)` prices every step from one step-cost surface
(serving/stepcost.py, one batched call of the op list), runs the engine's scheduler
(serving/scheduler.py) over each workload and summarizes the requests as a load generator
would:
  TTFT = first token - send;  E2E = last token - send;  TPOT = (E2E - TTFT) / (O - 1);
  ITL  = every decode step's duration, once per sequence it advanced (pooled);
  wall = first send -> last finish; output tok/s = output tokens / wall; req/s = N / wall;
  goodput = requests meeting both SLOs / wall.
Percentiles interpolate between order statistics (numpy's default), as stats.percentile.
KV capacity: the memory model's usable bytes minus weights, runtime reserve and the
activation peak, divided by the KV bytes of one token (every layer holding the full
context: conservative for sliding-window models), in blocks of the engine's page size.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.memory import kv_cache_bytes, linear_state_bytes
from perfmodel.core.predict import Scenario
from perfmodel.core.units import GB
from perfmodel.serving import stepcost
from perfmodel.serving.batching import capacity_bytes, loaded_bytes
from perfmodel.serving.scheduler import Policy, Stalled, StepBudget, Trace, simulate
from perfmodel.serving.workload import Requests, ServeWorkload

OPEN_LOOP_REFERENCE_SEQS = 256   # activation peak of an open-loop run: this many sequences
MAX_SIM_REQUESTS = 30_000
"""Requests one call simulates over all its levels (about 50 us of CPU each, under KV
thrash too: serving/decode_epoch.py; a 10-level curve to C=1,024 at 10 x C requests a level
is 20,460): a call over it stops with a one-line PerfModelError naming the cap. Besides, sim_state.MAX_SIM_STEPS
caps the scheduler iterations of one call (tiny token budgets, long outputs)."""
MAX_TIMELINE_SEGMENTS = 2_000
"""A timeline longer than this is down-sampled for display: consecutive segments are merged
into at most this many (start of the first, summed durations, steps and prefill tokens,
step-weighted mean decode rows, the most waiting and KV used)."""


class ServeTimeline(BaseModel):
    """A simulated run segment by segment (a segment is one step, or a run of decode-only
    steps with the same batch): typed arrays of equal length."""

    model_config = ConfigDict(frozen=True)
    start_s: list[float]
    duration_s: list[float]
    steps: list[int]
    decode_rows: list[int]
    prefill_tokens: list[float]
    waiting: list[int]
    kv_used_fraction: list[float]


class ServePoint(BaseModel):
    """One simulated level: the keys of bench-endpoint's LevelStats, plus fits and goodput."""

    model_config = ConfigDict(frozen=True)
    concurrency: int | None = Field(description="closed loop: requests in flight")
    rate_rps: float | None = Field(description="open loop: offered arrival rate")
    num_requests: int
    fits: bool = Field(description="every request in flight holds its KV at once and the engine admits them")
    reason: str = Field(description="why not, or what limits the level")
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_mean_s: float | None = None
    tpot_mean_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p90_s: float | None = None
    itl_p50_s: float | None = None
    itl_p90_s: float | None = None
    itl_p99_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p90_s: float | None = None
    e2e_mean_s: float | None = None
    output_tok_s_total: float | None = None
    request_rate_rps: float | None = None
    wall_s: float | None = None
    preemptions: int = 0
    max_running: int = Field(default=0, description="most sequences running at once")
    kv_capacity_tokens: int | None = Field(default=None, description="KV pool in tokens (per GPU)")
    goodput_rps: float | None = Field(default=None, description="requests meeting the SLOs per second")
    slo_attainment: float | None = Field(default=None, description="share of requests meeting the SLOs")
    timeline: ServeTimeline | None = None


def _pct(x: np.ndarray, p: float) -> float | None:
    return float(np.percentile(x, p)) if x.size else None


def _weighted_pct(values: np.ndarray, weights: np.ndarray, p: float) -> float | None:
    """np.percentile of `values` each repeated `weights` times, without expanding them."""
    if not values.size or weights.sum() <= 0:
        return None
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    rank = p / 100.0 * (cum[-1] - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    vlo, vhi = v[np.searchsorted(cum, lo, side="right")], v[np.searchsorted(cum, hi, side="right")]
    return float(vlo + (vhi - vlo) * (rank - lo))


UNBOUNDED_BLOCKS = 1 << 40   # a pool no request can exhaust (a model without per-token KV)


class _Kv:
    """KV pool of one run: blocks, page size, tokens, or why nothing fits.

    Hybrid models (linear-attention layers: Qwen3-Next/3.5, ...) hold a constant recurrent
    state per sequence besides the per-token KV of their full-attention layers; the engines
    keep it in its own per-sequence pool (SGLang's mamba/state pool, vLLM's hybrid KV manager).
    The `seqs` resident sequences' states come off the memory first; the blocks hold only the
    per-token KV (counting the state once per token made the pool thousands of times too small)."""

    def __init__(self, sc: Scenario, seqs: float, context: int):
        bs = sc.engine.kv_block_tokens
        loaded = float(loaded_bytes(sc, seqs, context))
        state = float(linear_state_bytes(sc.model, sc.precision, batch=1, dep=sc.dep))
        pool = float(capacity_bytes(sc, seqs, context)) - loaded - seqs * state
        per_token = float(kv_cache_bytes(sc.model, sc.precision, batch=1, context=1,
                                         dep=sc.dep)) - state
        self.block_tokens = bs
        if pool <= 0:
            self.blocks = 0
        elif per_token <= 0:               # no full-attention layer: only the states bind
            self.blocks = UNBOUNDED_BLOCKS
        else:
            self.blocks = int(pool // (per_token * bs))
        self.tokens = self.blocks * bs
        self.pool_bytes, self.loaded_bytes = pool, loaded


def on_server(sc: Scenario) -> Scenario:
    """The scenario with the engine's online-server scheduler (EngineProfile.server_scheduler)
    in place of its offline one: a serving benchmark talks to a server. Idempotent."""
    srv = sc.engine.server_scheduler
    if srv is None:
        return sc
    eng = sc.engine.model_copy(update={"scheduler": srv, "server_scheduler": None})
    return replace(sc, engine=eng)


def with_scheduler(sc: Scenario, *, max_num_seqs: int | None = None,
                   max_num_batched_tokens: int | None = None,
                   recv_interval_steps: int | None = None,
                   chunked_prefill: bool | None = None) -> Scenario:
    """The scenario with the engine's scheduler limits overridden (on every GPU size)."""
    upd = {}
    if chunked_prefill is not None:
        upd.update(chunked_prefill=chunked_prefill)
    if recv_interval_steps is not None:
        upd.update(recv_interval_steps=recv_interval_steps)
    if max_num_seqs is not None:
        upd.update(max_num_seqs=max_num_seqs, small_gpu_max_num_seqs=max_num_seqs,
                   seqs_divided_by_pp=False)
    if max_num_batched_tokens is not None:
        upd.update(max_num_batched_tokens=max_num_batched_tokens,
                   small_gpu_max_num_batched_tokens=max_num_batched_tokens)
    if not upd:
        return sc
    sched = sc.engine.scheduler.model_copy(update=upd)
    return replace(sc, engine=sc.engine.model_copy(update={"scheduler": sched}))


def _batch_wait_tokens(ratio: float, budget: int | None) -> float:
    """TensorRT-LLM's release threshold ratio x max_num_tokens (ratio 0: every scheduled
    batch reaches it, so nothing waits; no budget: only the timeout releases)."""
    if budget is None:
        return math.inf if ratio > 0 else 0.0
    return ratio * budget


def _dp_limits(sched, dp: int, seqs: int | None, budget: int | None
               ) -> tuple[int | None, int | None, int | None]:
    """The one simulated scheduler's (max running requests, step token budget) over all dp
    attention-DP ranks, and one rank's token budget (the most a request, living on one rank,
    prefills in a step; None: no separate cap). Each rank runs its own scheduler: vLLM starts
    one engine core per DP rank, each with the server's max_num_seqs / max_num_batched_tokens
    (vllm/v1/engine/core.py DPEngineCoreProc, an EngineCore with its own Scheduler); TensorRT-
    LLM admits up to tp_size x max_num_active_requests over the attention-DP ranks and each
    rank schedules its own max_num_tokens (tensorrt_llm/_torch/pyexecutor/py_executor.py
    _fetch_new_requests, total_max_num_active_requests). SGLang divides the server's limits
    among the ranks (SchedulerSpec.dp_limits_divided): chunked_prefill_size // dp_size
    (python/sglang/srt/server_args.py _handle_data_parallelism), max_running_requests //
    dp_size (python/sglang/srt/model_executor/model_runner.py)."""
    if dp <= 1:
        return seqs, budget, None
    if sched.dp_limits_divided:
        seqs = None if seqs is None else max(1, seqs // dp) * dp
        rank = None if budget is None else max(1, budget // dp)
    else:
        seqs, rank = None if seqs is None else seqs * dp, budget
    total = None if rank is None else rank * dp
    # without chunked prefill a prompt runs whole (checked against the budget by _policy)
    return seqs, total, rank if sched.chunked_prefill else None


def _policy(sc: Scenario, wl: ServeWorkload) -> tuple[Policy | None, str, bool]:
    """The run's scheduler parameters, or None with the reason nothing can run."""
    sched = sc.engine.scheduler
    eng_seqs, budget = sched.limits(sc.hw, sc.dep.pp)
    static = sc.engine.batching == "static"
    P, O = wl.longest_prompt, wl.longest_output
    ref = wl.concurrency or min(eng_seqs or OPEN_LOOP_REFERENCE_SEQS, OPEN_LOOP_REFERENCE_SEQS)
    kv = _Kv(sc, ref, P + O)
    need = math.ceil((P + O) / kv.block_tokens)
    if kv.blocks < need:
        gb = kv.pool_bytes / GB
        return None, (f"one request of {P}+{O} tokens needs {need * kv.block_tokens} KV tokens; "
                      f"the KV pool holds {kv.tokens} ({gb:.2f} GB left after weights, reserve "
                      "and activations)"), False
    if not static and not sched.chunked_prefill and budget is not None:
        computed = P - min(math.floor(wl.prefix_hit * P), P - 1)
        if computed > budget:
            return None, (f"a prompt of {P} tokens ({computed} to prefill) exceeds the step's "
                          f"token budget of {budget} on an engine without chunked prefill"), False
    eng_seqs, budget, rank_tokens = _dp_limits(sched, sc.dep.dp, eng_seqs, budget)
    max_seqs = eng_seqs or 1 << 30
    if static:
        max_seqs = min(max_seqs, kv.tokens // (P + O))   # padded and preallocated
        budget = None
    pol = Policy(static=static, mixed=sched.mixed_prefill, chunked=sched.chunked_prefill,
                 max_seqs=int(max_seqs), token_budget=budget, total_blocks=kv.blocks,
                 block_tokens=kv.block_tokens, reserve_output=sched.kv_reserve_output,
                 request_overhead_s=sc.engine.per_request_overhead_s,
                 recv_interval_steps=sched.recv_interval_steps, overlap=sched.overlaps(sc.model, sc.dep.pp),
                 idle_takes_one=sched.idle_takes_one,
                 # TensorRT-LLM skips batch waiting under attention DP (PyExecutor._schedule)
                 batch_wait_iters=sched.batch_wait_timeout_iters if sc.dep.dp == 1 else 0,
                 batch_wait_tokens=_batch_wait_tokens(sched.batch_wait_max_tokens_ratio, budget),
                 adp_wait_iters=sched.adp_balance_timeout_iters if sc.dep.dp > 1 else 0,
                 adp_ranks=sc.dep.dp, rank_tokens=None if static else rank_tokens,
                 join_ratio=sched.waiting_served_ratio,
                 join_wait_steps=sched.max_waiting_tokens or 0,
                 defer_share=sched.prefill_defer_share, defer_steps=sched.prefill_interval or 0,
                 whole_prompts=sched.whole_prompts)
    reason, fits = f"KV pool {kv.tokens} tokens", True
    if wl.concurrency is not None:
        resident = min(wl.concurrency, wl.n_requests)
        if resident > max_seqs and sched.refuses_over_max_seqs:
            fits, reason = False, (f"concurrency {resident} > {max_seqs} requests the server "
                                   "takes at once: it refuses the rest (HTTP 429)")
        elif resident > max_seqs:
            fits, reason = False, (f"concurrency {resident} > {max_seqs} sequences the engine "
                                   "runs at once: the rest queue")
        elif resident * need > kv.blocks:
            fits, reason = False, (f"concurrency {resident} x {P + O} tokens exceeds the KV pool "
                                   f"of {kv.tokens} tokens: requests queue or are preempted")
    return pol, reason, fits


def _cost(sc: Scenario, wls: list[ServeWorkload], pols: list[Policy]) -> stepcost.StepCost:
    """One surface wide enough for every run."""
    seqs = rows = chunk = ctx = 1
    for wl, pol in zip(wls, pols):
        P, O = wl.longest_prompt, wl.longest_output
        s = min(pol.max_seqs, wl.n_requests, pol.total_blocks * pol.block_tokens)
        seqs, ctx = max(seqs, s), max(ctx, P + O)
        if pol.static:
            rows, chunk = max(rows, s * P), max(chunk, P)
        else:
            c = min(pol.token_budget or P + O, P + O)
            rows, chunk = max(rows, s + (pol.token_budget or s * (P + O))), max(chunk, c)
    return stepcost.build(sc, max_rows=rows, max_seqs=seqs, max_chunk=chunk, max_context=ctx)


def simulate_points(sc: Scenario, workloads: list[ServeWorkload], *, ttft_slo_s: float | None = None,
                    tpot_slo_s: float | None = None, timeline: bool = False) -> list[ServePoint]:
    """Simulate each workload on the scenario (one step-cost surface for all of them)."""
    sc = on_server(sc)
    plans = [_policy(sc, wl) for wl in workloads]
    runnable = [(wl, p[0]) for wl, p in zip(workloads, plans) if p[0] is not None]
    cost = _cost(sc, [w for w, _ in runnable], [p for _, p in runnable]) if runnable else None
    total = sum(wl.n_requests for wl, _ in runnable)
    if total > MAX_SIM_REQUESTS:
        if any(wl.arrival == "trace" for wl, _ in runnable):   # num_requests does not apply
            raise PerfModelError(f"the trace holds {total} requests: at most {MAX_SIM_REQUESTS} "
                                 "are simulated per call (shorten the trace)")
        raise PerfModelError(f"{total} requests over the levels: at most {MAX_SIM_REQUESTS} are "
                             "simulated per call (lower num_requests or the levels)")
    budget = StepBudget()
    out = []
    for wl, (pol, reason, fits) in zip(workloads, plans):
        head = dict(concurrency=wl.concurrency, rate_rps=wl.rate_rps, num_requests=wl.n_requests)
        if pol is None:
            out.append(ServePoint(**head, fits=False, reason=reason))
            continue
        req = wl.requests()
        try:
            tr = simulate(cost, req, pol, budget)
        except Stalled as exc:
            out.append(ServePoint(**head, fits=False, reason=str(exc)))
            continue
        out.append(_summarize(tr, req, pol, head, fits, reason, ttft_slo_s, tpot_slo_s, timeline))
    return out


def _summarize(tr: Trace, req: Requests, pol: Policy, head: dict, fits: bool, reason: str,
               ttft_slo_s, tpot_slo_s, timeline: bool) -> ServePoint:
    ttft = tr.first_s - tr.send_s
    e2e = tr.finish_s - tr.send_s
    multi = req.output_tokens > 1
    tpot = (tr.finish_s[multi] - tr.first_s[multi]) / (req.output_tokens[multi] - 1)
    wall = float(np.max(tr.finish_s) - np.min(tr.send_s))
    wall = wall if wall > 0 else float("nan")
    itl_v = np.concatenate(tr.itl_values) if tr.itl_values else np.zeros(0)
    itl_w = (np.concatenate([np.full(v.size, w, float) for v, w in zip(tr.itl_values, tr.itl_weights)])
             if tr.itl_values else np.zeros(0))
    good = np.ones(ttft.size, bool)
    if ttft_slo_s is not None:
        good &= ttft <= ttft_slo_s
    if tpot_slo_s is not None:
        tp_all = np.where(multi, (tr.finish_s - tr.first_s) / np.maximum(req.output_tokens - 1, 1), 0.0)
        good &= tp_all <= tpot_slo_s
    slo = ttft_slo_s is not None or tpot_slo_s is not None
    vals = dict(
        ttft_p50_s=_pct(ttft, 50), ttft_p90_s=_pct(ttft, 90), ttft_p99_s=_pct(ttft, 99),
        ttft_mean_s=float(np.mean(ttft)), tpot_mean_s=float(np.mean(tpot)) if tpot.size else None,
        tpot_p50_s=_pct(tpot, 50), tpot_p90_s=_pct(tpot, 90),
        itl_p50_s=_weighted_pct(itl_v, itl_w, 50), itl_p90_s=_weighted_pct(itl_v, itl_w, 90),
        itl_p99_s=_weighted_pct(itl_v, itl_w, 99),
        e2e_p50_s=_pct(e2e, 50), e2e_p90_s=_pct(e2e, 90), e2e_mean_s=float(np.mean(e2e)),
        output_tok_s_total=float(req.output_tokens.sum()) / wall,
        request_rate_rps=ttft.size / wall, wall_s=wall,
        goodput_rps=float(good.sum()) / wall if slo else None,
        slo_attainment=float(good.mean()) if slo else None)
    bad = [k for k, v in vals.items() if v is not None and not math.isfinite(v)]
    if bad:
        raise PerfModelError(f"the simulated run has no finite {', '.join(bad)} "
                             "(zero-length run): check the workload")
    tl = _timeline(tr, pol) if timeline else None
    return ServePoint(**head, fits=fits, reason=reason, preemptions=tr.preemptions,
                      max_running=tr.max_running, kv_capacity_tokens=pol.total_blocks * pol.block_tokens,
                      timeline=tl, **vals)


def _timeline(tr: Trace, pol: Policy) -> ServeTimeline:
    seg = np.asarray(tr.segments, dtype=float).reshape(-1, 7)
    if seg.shape[0] > MAX_TIMELINE_SEGMENTS:
        seg = _downsample(seg, MAX_TIMELINE_SEGMENTS)
    return ServeTimeline(
        start_s=seg[:, 0].tolist(), duration_s=seg[:, 1].tolist(),
        steps=seg[:, 2].astype(int).tolist(), decode_rows=seg[:, 3].astype(int).tolist(),
        prefill_tokens=seg[:, 4].tolist(), waiting=seg[:, 5].astype(int).tolist(),
        kv_used_fraction=(seg[:, 6] / max(pol.total_blocks, 1)).tolist())


def _downsample(seg: np.ndarray, m: int) -> np.ndarray:
    """Merge consecutive segments (rows of start, duration, steps, decode rows, prompt tokens,
    waiting, KV blocks) into at most m."""
    starts = np.unique(np.linspace(0, seg.shape[0], m + 1).astype(int)[:-1])
    add = lambda col: np.add.reduceat(seg[:, col], starts)           # noqa: E731
    mx = lambda col: np.maximum.reduceat(seg[:, col], starts)        # noqa: E731
    steps = add(2)
    rows = np.add.reduceat(seg[:, 3] * seg[:, 2], starts) / np.maximum(steps, 1)
    return np.column_stack([seg[starts, 0], add(1), steps, np.round(rows), add(4), mx(5), mx(6)])
