"""Disaggregated serving: P prefill workers and D decode workers, each with its own layout,
and the KV cache moved between them. Two runs of the one scheduler simulation
(serving/scheduler.py), no second cost model:

1. prefill pool: each request goes to a prefill worker (round robin in send order, the
   default of Dynamo's and SGLang's routers when no KV-aware routing is set); the worker runs
   it as a request of output 1 (prompt-only steps under the engine's token budget), so its
   first token time is the prefill completion (queueing and chunking included);
2. the KV transfer (serving/disagg_transfer.py) adds its exposed time; each prefill worker
   sends one transfer at a time;
3. decode pool: the transferred requests arrive, round robin in arrival order, at D decode
   workers as a replayed trace: a request of P prompt tokens and O outputs becomes P+1 tokens
   of which P are already cached (its KV arrived) and O-1 outputs, so its first step there
   computes token 2 next to the running decodes, exactly as a decode step.

Metrics (the keys of api.serve): the client's token stream comes from the decode worker
(Dynamo's disaggregation design, docs/design_docs/disagg_serving.md: the router sends the
prefill request, then the decode request with the transfer metadata, and "Decode -> Frontend:
stream tokens"; SGLang PD's router and vLLM's P/D proxy likewise stream the decode server's
response), so the first token reaches the client when the decode worker has the KV, has
admitted the request into its batch and run its first step:
    TTFT = prefill queue + prefill + KV transfer + decode admission + one decode step;
    TPOT = (last token - TTFT instant) / (O - 1), the decode pool's queueing included.
A closed loop at concurrency C (each request sent when an earlier one finishes) couples the
pools; its send times are found by fixed-point iteration: start with generations of C
requests spaced by the burst's mean E2E, simulate, set send C+k to the k-th completion,
repeat until the sends move by < 0.5% of the mean E2E (at most CLOSED_LOOP_ITERATIONS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.predict import Scenario
from perfmodel.serving.disagg_bundle import (BundledCost, bundle_size, bundled_policy,
                                             step_requests)
from perfmodel.serving.disagg_transfer import pool_link, schedule_transfers, transfer_s
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import (ServePoint, _cost, _pct, _policy, _weighted_pct,
                                        with_scheduler)
from perfmodel.serving.stepcost import StepCost
from perfmodel.serving.workload import Requests, ServeWorkload

CLOSED_LOOP_ITERATIONS = 6     # fixed-point passes for a closed loop (convergence: see module doc)
CLOSED_LOOP_TOLERANCE = 0.005  # stop when sends move by less than this share of the mean E2E


class PoolLayout(BaseModel):
    """One pool of identical workers and the parallel layout of each."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    workers: int = Field(gt=0, le=4096, description="Workers (engine instances) in the pool.")
    tp: int = Field(default=1, gt=0, description="Tensor-parallel degree of one worker.")
    pp: int = Field(default=1, gt=0, description="Pipeline-parallel degree of one worker.")
    ep: int = Field(default=1, gt=0, description="Expert-parallel degree of one worker.")
    dp: int = Field(default=1, gt=0, description="Attention data-parallel degree of one worker.")
    max_batch: int | None = Field(
        default=None, gt=0, le=1 << 20,
        description="Requests one worker runs at once (its engine's max_batch_size / "
        "max_num_seqs as the deployment sets it per role, over all its attention-DP ranks; "
        "it replaces the preset's limit, above or below it); None: the engine preset's "
        "online-server limit.")

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def num_gpus(self) -> int:
        return self.workers * self.gpus_per_worker


@dataclass(frozen=True)
class _Pool:
    sc: Scenario
    layout: PoolLayout
    cost: StepCost
    pol: Policy
    bundle: int = 1             # requests per simulated request (serving/disagg_bundle.py)

    def bundled(self, k: int, prompt: int | None = None) -> "_Pool":
        """The pool as bundles of k requests see it (`prompt`: the prefill pool's)."""
        if k == 1:
            return self
        group = None if prompt is None else step_requests(self.pol, prompt)
        return replace(self, cost=BundledCost(self.cost, k, group),
                       pol=bundled_policy(self.pol, k, prompt), bundle=k)


@dataclass
class _Run:
    send: np.ndarray
    first: np.ndarray           # the client's first token (the decode worker's first step)
    finish: np.ndarray
    preemptions: int
    max_running: int
    itl_values: list
    itl_weights: list


def _run_pool(pool: _Pool, send, prompt, output, cached):
    """Simulate every worker of a pool over its share (round robin in send order).
    Returns first token and finish times per request, preemptions, ITL samples, max running."""
    n, W = send.size, pool.layout.workers
    worker = np.empty(n, dtype=int)
    worker[np.argsort(send, kind="stable")] = np.arange(n) % W
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    pre, most, itl_v, itl_w = 0, 0, [], []
    for w in range(min(W, n)):
        idx = np.flatnonzero(worker == w)
        req = Requests(send_s=send[idx], prompt_tokens=prompt[idx], output_tokens=output[idx],
                       cached_tokens=cached[idx], concurrency=None)
        tr = simulate(pool.cost, req, pool.pol)
        first[idx], finish[idx] = tr.first_s, tr.finish_s
        pre, most = pre + tr.preemptions, max(most, tr.max_running)
        itl_v += tr.itl_values
        itl_w += tr.itl_weights
    return worker, first, finish, pre, most, itl_v, itl_w


def _pipeline(pf: _Pool, dc: _Pool, link, layerwise: bool, req: Requests, send) -> _Run:
    """Both stages for requests sent at `send`."""
    P, O, cached = req.prompt_tokens, req.output_tokens, req.cached_tokens
    w_pre, done, _, pre1, _, _, _ = _run_pool(pf, send, P, np.ones_like(O), cached)
    xfer, k = transfer_s(pf.sc, link, P, layerwise), pf.bundle
    if k > 1:      # bundles: the mean member's times (serving/disagg_bundle.py)
        uniq, inv = np.unique(P, return_inverse=True)
        done = done - np.array([pf.cost.first_offset_s(int(p)) for p in uniq])[inv]
    arrive = schedule_transfers(done, w_pre, xfer * k) - (k - 1) / 2 * xfer
    finish = arrive.copy()
    pre2, most, itl_v, itl_w = 0, 0, [], []
    first = arrive.copy()
    multi = O > 1
    if multi.any():
        _, dfirst, fin, pre2, most, itl_v, itl_w = _run_pool(
            dc, arrive[multi], P[multi] + 1, O[multi] - 1, P[multi])
        first[multi], finish[multi] = dfirst, fin
    return _Run(send=send, first=first, finish=finish, preemptions=pre1 + pre2,
                max_running=most, itl_values=itl_v, itl_weights=itl_w)


def _closed_loop(pf, dc, link, layerwise, req: Requests, C: int) -> _Run:
    n = req.prompt_tokens.size
    C = min(C, n)
    burst = _pipeline(pf, dc, link, layerwise, _take(req, C), np.zeros(C))
    spacing = float(np.mean(burst.finish))
    send = np.floor(np.arange(n) / C) * spacing      # generations of C, one E2E apart
    run = burst if n == C else None
    for _ in range(CLOSED_LOOP_ITERATIONS if n > C else 0):
        run = _pipeline(pf, dc, link, layerwise, req, send)
        new = send.copy()
        new[C:] = np.sort(run.finish)[: n - C]
        moved = float(np.max(np.abs(new - send)))
        send = new
        if moved <= CLOSED_LOOP_TOLERANCE * float(np.mean(run.finish - run.send)):
            break
    return run


def _take(req: Requests, k: int) -> Requests:
    return Requests(send_s=None, prompt_tokens=req.prompt_tokens[:k],
                    output_tokens=req.output_tokens[:k], cached_tokens=req.cached_tokens[:k],
                    concurrency=k)


def _plan(sc: Scenario, conc: int | None, *, prompt: int, output: int, share: int,
          overhead: bool, max_batch: int | None = None):
    """(policy or None, reason, fits, the worker's workload) for one worker of a pool serving
    `share` requests, `conc` of them at once (None: as they come), at most `max_batch` of
    them running (None: the engine's limit)."""
    shape = dict(prompt_tokens=prompt, output_tokens=output, num_requests=share)
    if conc is not None:
        worker_wl = ServeWorkload.make(arrival="closed", concurrency=conc, **shape)
    else:
        worker_wl = ServeWorkload.make(arrival="poisson", rate_rps=1.0, **shape)
    if max_batch is not None:   # the deployment's own limit replaces the preset's, both ways
        # max_batch is the worker's, over its attention-DP ranks (_Pool.max_batch); an engine
        # whose ranks each apply the limit is given one rank's share (simulate._dp_limits)
        dp = sc.dep.dp
        per = max_batch if sc.engine.scheduler.dp_limits_divided else -(-max_batch // dp)
        sc = with_scheduler(sc, max_num_seqs=per)
    pol, reason, fits = _policy(sc, worker_wl)
    if pol is not None and not overhead:   # tokenized and admitted by the prefill worker
        pol = replace(pol, request_overhead_s=0.0)
    return pol, reason, fits, worker_wl


def graphs_cover(sc: Scenario) -> Scenario:
    """A disaggregated decode worker captures CUDA graphs for the batches it is deployed to run
    (AIConfigurator's generator sets a decode worker's cuda_graph_batch_sizes through its
    max_batch_size + 8, rule_plugin/trtllm.rule), and its running batch never exceeds that
    max batch: every decode step of the worker is a graph replay (core/roofline.issue_s)."""
    if sc.engine.decode_graph_max_batch is None and not sc.engine.decode_graph_max_batch_by_gpu:
        return sc
    return replace(sc, engine=sc.engine.model_copy(update={
        "decode_graph_max_batch": None, "decode_graph_max_batch_by_gpu": ()}))


def _pool(sc: Scenario, layout: PoolLayout, conc: int | None, *, prompt: int, output: int,
          share: int, overhead: bool):
    """(pool or None, reason, fits): one level's worker with its own step-cost surface."""
    pol, reason, fits, wl = _plan(sc, conc, prompt=prompt, output=output, share=share,
                                  overhead=overhead)
    if pol is None:
        return None, reason, False
    return _Pool(sc=sc, layout=layout, cost=_cost(sc, [wl], [pol]), pol=pol), reason, fits


def _desc(lay: PoolLayout) -> str:
    return f"tp{lay.tp} pp{lay.pp} ep{lay.ep} dp{lay.dp}"


def simulate_disagg(pre: Scenario, dec: Scenario, pre_layout: PoolLayout, dec_layout: PoolLayout,
                    workloads: list[ServeWorkload], *, layerwise: bool = False,
                    ttft_slo_s: float | None = None,
                    tpot_slo_s: float | None = None) -> tuple[list[ServePoint], str]:
    """Each workload through both pools; also which link carries the KV ('scale-up'/'scale-out').
    One step-cost surface per pool serves every level."""
    link, kind = pool_link(pre, pre_layout.num_gpus + dec_layout.num_gpus)
    plans = []
    for wl in workloads:
        n, P, O = wl.n_requests, wl.longest_prompt, wl.longest_output
        pp = _plan(pre, None, prompt=P, output=1, share=math.ceil(n / pre_layout.workers),
                   overhead=True, max_batch=pre_layout.max_batch)
        if pp[0] is None:
            raise PerfModelError(f"the prefill worker ({_desc(pre_layout)}) cannot hold one "
                                 f"request: {pp[1]}")
        # Context servers run without TensorRT-LLM's overlap scheduler: "The overlap scheduler
        # for context servers is currently disabled, as it is not yet supported in
        # disaggregated context server architectures" (TensorRT-LLM examples/disaggregated/
        # README.md, ctx config `disable_overlap_scheduler: True`; AIConfigurator's
        # rule_plugin/trtllm.rule sets the same for prefill workers).
        # SGLang's prefill workers keep theirs (SchedulerSpec.overlap_disagg_prefill).
        if not pre.engine.scheduler.overlap_disagg_prefill:
            pp = (replace(pp[0], overlap=False),) + pp[1:]
        dconc = None if wl.concurrency is None else math.ceil(min(wl.concurrency, n) / dec_layout.workers)
        dp = _plan(dec, dconc, prompt=P + 1, output=max(O - 1, 1),
                   share=math.ceil(n / dec_layout.workers), overhead=False,
                   max_batch=dec_layout.max_batch)
        if dp[0] is None:
            raise PerfModelError(f"the decode worker ({_desc(dec_layout)}) cannot receive the KV "
                                 f"of one request: {dp[1]}")
        plans.append((pp, dp))
    dec = graphs_cover(dec)
    pcost = _cost(pre, [p[3] for p, _ in plans], [p[0] for p, _ in plans])
    dcost = _cost(dec, [d[3] for _, d in plans], [d[0] for _, d in plans])
    out = []
    for wl, (pp, dp) in zip(workloads, plans):
        pf = _Pool(sc=pre, layout=pre_layout, cost=pcost, pol=pp[0])
        dc = _Pool(sc=dec, layout=dec_layout, cost=dcost, pol=dp[0])
        head = dict(concurrency=wl.concurrency, rate_rps=wl.rate_rps, num_requests=wl.n_requests)
        req = wl.requests()
        if wl.concurrency is not None:
            k = _bundle(req, wl.concurrency)
            C, req = max(1, round(wl.concurrency / k)), _take(req, max(1, round(req.prompt_tokens.size / k)))
            run = _closed_loop(pf.bundled(k, int(req.prompt_tokens.max())), dc.bundled(k), link,
                               layerwise, req, C)
            run.max_running *= k
        else:
            k, run = 1, _pipeline(pf, dc, link, layerwise, req, req.send_s)
        out.append(_summarize(run, req, head, dp[2], f"decode worker: {dp[1]}", ttft_slo_s,
                              tpot_slo_s, k))
    return out, kind


def _bundle(req: Requests, concurrency: int) -> int:
    """Bundle size of a closed-loop level (serving/disagg_bundle.py): each bundle repeats one
    drawn request shape k times, so lengths drawn from a range keep their distribution over
    the level's n / k bundles."""
    return bundle_size(concurrency) if req.prompt_tokens.size else 1


def _summarize(run: _Run, req: Requests, head: dict, fits: bool, reason: str,
               ttft_slo_s, tpot_slo_s, k: int = 1) -> ServePoint:
    """The level's metrics; with bundles of k, each simulated request counts k times."""
    O = req.output_tokens
    ttft, e2e = run.first - run.send, run.finish - run.send
    multi = O > 1
    tp_all = np.where(multi, (run.finish - run.first) / np.maximum(O - 1, 1), 0.0)
    wall = float(np.max(run.finish) - np.min(run.send))
    good = np.ones(ttft.size, bool)
    if ttft_slo_s is not None:
        good &= ttft <= ttft_slo_s
    if tpot_slo_s is not None:
        good &= tp_all <= tpot_slo_s
    slo = ttft_slo_s is not None or tpot_slo_s is not None
    itl_v = np.concatenate(run.itl_values) if run.itl_values else np.zeros(0)
    itl_w = (np.concatenate([np.full(v.size, w, float) for v, w in zip(run.itl_values, run.itl_weights)])
             if run.itl_values else np.zeros(0))
    means = {k: v for k, v in (("ttft_mean_s", float(np.mean(ttft))),
                               ("tpot_mean_s", float(np.mean(tp_all[multi])) if multi.any() else None))
             if k in ServePoint.model_fields}      # the simulator's means, where it has them
    return ServePoint(
        **head, **means, fits=fits, reason=reason, preemptions=run.preemptions,
        max_running=run.max_running,
        ttft_p50_s=_pct(ttft, 50), ttft_p90_s=_pct(ttft, 90), ttft_p99_s=_pct(ttft, 99),
        tpot_p50_s=_pct(tp_all[multi], 50), tpot_p90_s=_pct(tp_all[multi], 90),
        itl_p50_s=_weighted_pct(itl_v, itl_w, 50), itl_p90_s=_weighted_pct(itl_v, itl_w, 90),
        itl_p99_s=_weighted_pct(itl_v, itl_w, 99),
        e2e_p50_s=_pct(e2e, 50), e2e_p90_s=_pct(e2e, 90), e2e_mean_s=float(np.mean(e2e)),
        output_tok_s_total=k * float(O.sum()) / wall, request_rate_rps=k * ttft.size / wall,
        wall_s=wall, goodput_rps=k * float(good.sum()) / wall if slo else None,
        slo_attainment=float(good.mean()) if slo else None)
