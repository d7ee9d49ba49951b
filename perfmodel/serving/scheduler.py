"""A discrete, step-level simulation of an engine's scheduler serving a stream of requests.

Continuous batching (vLLM V1, TensorRT-LLM in-flight batching, llama.cpp, SGLang): each step
- mixed engines (SchedulerSpec.mixed_prefill): the running decodes take one token of the
  step's token budget each, running prompts continue their chunk next, then waiting requests
  are admitted in arrival order while sequences (max_num_seqs), budget and KV blocks last
  (vLLM V1 scheduler.schedule: running first, then waiting);
- separate prefill steps (SGLang): a step is a prompt-only batch whenever a prompt can be
  admitted or is half done (prefill_first), else a decode step of every running sequence;
- a prompt longer than what is left of the budget is split over steps (chunked_prefill);
- KV memory is counted in blocks of the engine's page size (serving/sim_kv.py); when a step's
  blocks do not fit, the most recently admitted sequence is preempted and later recomputed over
  its prompt and the tokens it had generated (vLLM's default PreemptionMode.RECOMPUTE);
- with kv_reserve_output (TensorRT-LLM GUARANTEED_NO_EVICT) a request is admitted only if
  the blocks of its whole prompt + output fit beside those reserved by the running ones;
- prefix-cache hits start a prompt at its cached tokens (they hold KV but cost no compute).
A request is visible to the scheduler per_request_overhead_s after it is sent (tokenization,
API server); with Policy.recv_interval_steps n > 1 (SGLang --scheduler-recv-interval) a busy
engine polls for visible requests only every n-th decode step and right after a prefill step;
with Policy.overlap (TensorRT-LLM's overlap scheduler) a busy engine plans step k+1 while step k
runs, so it admits only requests visible when the step before the planned one began (one step
later than a synchronous loop; an idle engine takes a request at once); with
Policy.idle_takes_one (TensorRT-LLM's PyExecutor) an idle engine that blocked on its empty queue
plans its next step with the one request that woke it. Between events (an
arrival, a finish, KV running out) a decode-only batch is fixed and every context grows by one
per step, so such runs are priced in one vectorized call. With Policy.batch_wait_iters
(TensorRT-LLM batch_wait_timeout_iters / batch_wait_max_tokens_ratio) prompts beside running
decodes are held until enough tokens are scheduled or the iterations run out
(serving/sim_batch_wait.py); with Policy.join_ratio (TGI v3) a prefill beside a running batch
waits for enough admissions or max_waiting_tokens decode steps (the same module); with
Policy.defer_share (LMDeploy PyTorch) a prefill beside running decodes waits while the batch is
large, the waiting prompts short and fewer than defer_steps decodes ran (the same module).
Most iterations run in decode epochs (serving/decode_epoch.py): these decisions on scalars
(a histogram of contexts mod the page size, a shared step count), the same trace.

Static batching (hf-eager, torch-*; serving/static_batch.py): when idle, the engine takes every
waiting request up to what fits padded, prefills them together at the longest prompt, decodes
until the longest output ends and returns them all together; nobody joins a running batch.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from perfmodel.core.errors import PerfModelError
from perfmodel.serving.decode_epoch import decode_epoch
from perfmodel.serving.sim_batch_wait import BatchWait
from perfmodel.serving.sim_kv import KvBlocks
from perfmodel.serving.sim_state import (DECODE_PROBE_STEPS, Policy, Stalled, StepBudget, Trace,
                                          poll_steps, steps_since_poll)
from perfmodel.serving.static_batch import run_static
from perfmodel.serving.stepcost import StepCost
from perfmodel.serving.workload import Requests


class _Sim(KvBlocks, BatchWait):
    def __init__(self, cost: StepCost, req: Requests, pol: Policy, budget: StepBudget | None = None,
                 epochs: bool = True):
        self.cost, self.pol, self.epochs = cost, pol, epochs
        self.budget = budget or StepBudget()
        n = req.prompt_tokens.size
        self.n = n
        self.prompt, self.out, self.cached = req.prompt_tokens, req.output_tokens, req.cached_tokens
        self.need = self.prompt.copy()          # tokens to prefill (grows on recompute)
        self.done = self.cached.copy()          # prefilled so far (cached prefix included)
        self.ctx = self.cached.copy()           # tokens holding KV
        self.gen = np.zeros(n)
        self.blocks = np.zeros(n)
        self.tr = Trace(first_s=np.full(n, np.nan), finish_s=np.full(n, np.nan),
                        send_s=np.full(n, np.nan))
        self.pending: list = []                 # heap of (visible_s, index)
        self.next_send = 0                      # closed loop: next request to send
        self.waiting: deque = deque()
        self._rbuf = np.zeros(n, dtype=int)     # running requests in admission order:
        self.nrun = 0                           # the first nrun entries (no list round trips)
        self.itl1: list = []                    # single-step inter-token gaps (value, rows)
        self.used_blocks = 0.0
        self.finished = 0
        self.t = 0.0
        self.prev_t = 0.0                       # when the last step began (overlap scheduler)
        self.recv_ct = pol.recv_interval_steps   # decode steps since the last poll for requests
        self.admitted = 0                       # requests the last _plan took from waiting
        self.wait_ct = 0                        # iterations prompts were held (batch waiting)
        self.woken = False                      # an idle engine blocked on its empty queue
        self.since = 0                          # decode steps since the last prefill (TGI join)
        self.joined = False                     # the last step was a join prefill (TGI)
        self.defer_ct = 0                       # decodes while prompts waited (LMDeploy PyTorch)
        if pol.join_ratio is not None or pol.defer_share is not None:   # TGI's and LMDeploy's
            self._record = self._record_join    # rules count steps; the rest keep _record
        self.closed = req.send_s is None
        if self.closed:
            for _ in range(min(int(req.concurrency or 1), n)):
                self._send(0.0)
        else:
            for i, s in enumerate(req.send_s):
                self.tr.send_s[i] = s
                heapq.heappush(self.pending, (s + pol.request_overhead_s, i))

    # ---------------------------------------------------------------- arrivals and KV
    def _send(self, t: float) -> None:
        i = self.next_send
        self.next_send += 1
        self.tr.send_s[i] = t
        heapq.heappush(self.pending, (t + self.pol.request_overhead_s, i))

    def _release(self) -> None:
        n = self.pol.recv_interval_steps
        if n > 1:
            if self.nrun and self.recv_ct < n:
                return              # busy, and the next poll is recv_ct steps away
            self.recv_ct = 0
        # overlap scheduler: the step about to run was planned when the last one began; an
        # idle engine blocks on its queue and takes a request at once
        cut = self.prev_t if self.pol.overlap and self.nrun else self.t
        one, self.woken = self.woken, False     # woken from a blocking get: one item (idle_takes_one)
        while self.pending and self.pending[0][0] <= cut * (1 + 1e-12) + 1e-15:
            self.waiting.append(heapq.heappop(self.pending)[1])
            if one:
                break

    def _run(self) -> np.ndarray:
        """The running requests (a view: copy before the set changes)."""
        return self._rbuf[:self.nrun]

    def _finish(self, i: int, t: float) -> None:
        self.tr.finish_s[i] = t
        self.used_blocks -= float(self.blocks[i])
        self.blocks[i] = 0.0
        self.finished += 1
        if self.closed and self.next_send < self.n:
            self._send(t)

    # ---------------------------------------------------------------- continuous batching
    def _plan(self, force_decode: bool = False):
        """This step's decode rows and prompt chunks [(index, tokens)], preempting as needed."""
        pol = self.pol
        budget = float("inf") if pol.token_budget is None else float(pol.token_budget)
        preempted = False
        while True:
            run = self._run()
            prefilling = self.done[run] < self.need[run]
            partial = run[prefilling]
            prefill_turn = (not pol.mixed and not force_decode
                            and bool(partial.size or self._admissible(budget)))
            dec = np.zeros(0, int) if prefill_turn else run[~prefilling][:int(min(budget, run.size))]
            # one more token needs a new block only where the last block is full
            grow = float(np.count_nonzero(self.blocks[dec] * pol.block_tokens <= self.ctx[dec]))
            if grow <= self._free() or not self.nrun:
                break
            self._preempt_last()
            preempted = True
        left = budget - dec.size
        chunks = []
        self.admitted = 0
        if pol.mixed or prefill_turn:
            spare = self._free() - grow
            bs = pol.block_tokens
            for i in partial.tolist():
                c = self._chunk(i, left, bool(chunks or dec.size))
                if c <= 0:
                    break
                extra = math.ceil((float(self.ctx[i]) + c) / bs) - float(self.blocks[i])
                if extra > spare:
                    break
                chunks.append((int(i), c))
                spare -= extra
                left -= c
            while (self.waiting and left > 0 and self.nrun < pol.max_seqs
                   and not preempted       # vLLM admits nobody in a step that preempted
                   and not (pol.whole_prompts and partial.size)):   # a long prompt's chunk: alone
                i = self.waiting[0]
                c = self._chunk(i, left, bool(chunks or dec.size))
                if c <= 0:
                    break
                extra = math.ceil((float(self.ctx[i]) + c) / bs) - float(self.blocks[i])
                if extra > spare or (pol.reserve_output and not self._reservable(i)):
                    break
                self.waiting.popleft()
                self._rbuf[self.nrun] = i
                self.nrun += 1
                self.admitted += 1
                chunks.append((int(i), c))
                spare -= extra
                left -= c
        if prefill_turn and not chunks:
            return self._plan(force_decode=True)
        return dec, chunks

    def _chunk(self, i: int, left: float, shared: bool) -> float:
        """Prompt tokens request i prefills this step with `left` of the budget (0: none).
        Without chunked prefill a prompt runs whole or waits; one longer than the budget
        (a preempted request recomputing its prompt and output so far) runs alone in its step
        (`shared`: the step already holds other work), else it could never run again. With
        whole_prompts (LMDeploy PyTorch) a prompt is not split to fill a shared step either, and
        one longer than the budget runs alone in budget-sized chunks."""
        pol = self.pol
        rem = float(self.need[i]) - float(self.done[i])
        c = min(rem, left)
        if pol.rank_tokens is not None:   # its DP rank's budget (sim_state.Policy)
            c = min(c, float(pol.rank_tokens))
        if (not pol.chunked or pol.whole_prompts) and c < rem:
            return 0.0 if shared else (c if pol.chunked else rem)
        return c

    def _admissible(self, budget: float) -> bool:
        """Could the first waiting request start a prompt-only step now?"""
        pol = self.pol
        if not self.waiting or self.nrun >= pol.max_seqs:
            return False
        i = self.waiting[0]
        c = self._chunk(i, budget, False)
        if pol.reserve_output and not self._reservable(i):
            return False
        return (math.ceil((float(self.ctx[i]) + c) / pol.block_tokens)
                - float(self.blocks[i])) <= pol.total_blocks - self.used_blocks   # _free()

    def _decode_run(self, dec: np.ndarray, cap: int | None = None) -> int:
        """k decode-only steps (at most cap) until the next event, priced in one call."""
        k = int(np.min(self.out[dec] - self.gen[dec]))
        if cap is not None:
            k = min(k, cap)
        k = min(k, self._kv_steps(dec, k))
        k = self._run_steps(dec.size, float(np.mean(self.ctx[dec])), k)
        self._set_ctx(dec, self.ctx[dec] + k)
        self.gen[dec] += k
        self._retire(dec)
        return k

    def _run_steps(self, d: int, ctx0: float, k: int) -> int:
        """Price, record and time up to k decode-only steps of d rows (mean context ctx0):
        the run ends early at the next arrival. Returns the steps taken."""
        # price the run in doubling pieces while the next arrival falls past them, so a long
        # run cut short by an arrival costs about the steps it takes, not k
        kk = min(k, DECODE_PROBE_STEPS) if self.pending else k
        while True:
            self.budget.spend_decode(kk)
            dur = self.cost.decode_run_s(d, ctx0, kk)
            ends = self.t + np.cumsum(dur)
            if kk >= k or not (ends[-1] < self.pending[0][0]):
                break
            kk = min(2 * kk, k)
        k = kk
        n = self.pol.recv_interval_steps
        if self.pending:   # the arrival is taken in at the first poll after it
            arrive = self.pending[0][0]
            # the overlap scheduler sees it one step later (_release), then at the next poll
            seen = int(np.searchsorted(ends, arrive)) + 1 + int(self.pol.overlap and arrive > self.t)
            s = poll_steps(n, self.recv_ct, seen)
            if s > kk and kk < k:
                kk = min(k, s)
                self.budget.spend_decode(kk)
                ends = self.t + np.cumsum(dur := self.cost.decode_run_s(d, ctx0, kk))
            k = min(kk, s)
        self.recv_ct = steps_since_poll(n, self.recv_ct, k)
        self._record(d, 0, k, float(ends[k - 1] - self.t))
        self.tr.itl_values.append(dur[:k])
        self.tr.itl_weights.append(d)
        self.prev_t = float(ends[k - 2]) if k > 1 else self.t
        self.t = float(ends[k - 1])
        return k

    def _kv_steps(self, dec: np.ndarray, k: int) -> int:
        """Most decode steps (<= k, >= 1) whose KV blocks fit. With e_i empty slots in a
        sequence's last block, j more tokens need ceil(max(0, j - e_i) / bs) blocks, so
        over d sequences g(q bs + r) = q d + #{e_i < r} (0 <= r < bs): the largest j with
        g(j) <= free is q bs + min(e_(rem), bs - 1), q = free // d, rem = free - q d."""
        bs, d = self.pol.block_tokens, dec.size
        free = int(round(self._free()))
        if free >= d * (k // bs + 1):       # every sequence can grow k tokens: no search
            return k
        q, rem = divmod(max(free, 0), d)
        e = self.blocks[dec] * bs - self.ctx[dec]
        r = min(float(np.partition(e, rem)[rem]), bs - 1.0)
        return int(max(1, min(k, q * bs + r)))

    def _retire(self, idx) -> None:
        idx = np.asarray(idx, dtype=int)
        done = idx[self.gen[idx] >= self.out[idx]].tolist() if idx.size else []
        if done:
            # every other running sequence has tokens left (only idx advanced this step)
            run = self._run()
            keep = run[self.gen[run] < self.out[run]]
            self.nrun = keep.size
            self._rbuf[:keep.size] = keep
            for i in done:
                self._finish(i, self.t)

    def _step(self, dec: np.ndarray, chunks: list) -> None:
        idx = np.fromiter((i for i, _ in chunks), dtype=int, count=len(chunks))
        size = np.fromiter((c for _, c in chunks), dtype=float, count=len(chunks))
        ends = self.done[idx] + size >= self.need[idx]
        dur = self.cost.step_s(dec.size, float(np.sum(self.ctx[dec])), size.tolist(),
                               self.ctx[idx].tolist(), int(np.count_nonzero(ends)))
        self._record(dec.size, float(size.sum()), 1, dur)
        self.prev_t = self.t
        self.t += dur
        if dec.size:
            self.itl1.append((dur, dec.size))
            self._set_ctx(dec, self.ctx[dec] + 1)
            self.gen[dec] += 1
        if idx.size:
            self.done[idx] += size
            self._set_ctx(idx, self.ctx[idx] + size)
            firsts = idx[ends]
            self.gen[firsts] += 1
            new = firsts[np.isnan(self.tr.first_s[firsts])]
            self.tr.first_s[new] = self.t
            dec = np.concatenate([dec, firsts])
        n = self.pol.recv_interval_steps   # after a prefill step SGLang polls at once
        self.recv_ct = n if idx.size else steps_since_poll(n, self.recv_ct, 1)
        self._retire(dec)

    def _flush_itl(self) -> None:
        """Single-step gaps into the trace, one array per row count (the pooled percentiles
        do not depend on the order of the values)."""
        if not self.itl1:
            return
        v = np.array([x for x, _ in self.itl1])
        w = np.array([r for _, r in self.itl1])
        for rows in np.unique(w).tolist():
            self.tr.itl_values.append(v[w == rows])
            self.tr.itl_weights.append(rows)
        self.itl1 = []

    def _record(self, d, p, steps, dur) -> None:
        self.tr.segments.append((self.t, dur, steps, d, p, len(self.waiting), self.used_blocks))
        self.tr.max_running = max(self.tr.max_running, self.nrun)

    def _record_join(self, d, p, steps, dur) -> None:
        """_record, and the counters of TGI (decode steps since the last prefill) and LMDeploy
        PyTorch (decode steps while prompts waited: a prefill or an empty queue resets it)."""
        _Sim._record(self, d, p, steps, dur)
        self.since, self.joined = (0, self.joined) if p else (self.since + steps, False)
        self.defer_ct = 0 if p or not self.waiting else self.defer_ct + steps

    def _tick(self) -> None:
        """One scheduler iteration: spend the call's budget; the clock must stay finite (a
        step priced at inf on absurd hardware numbers made it NaN, and the loop never ended)."""
        self.budget.spend()
        if not math.isfinite(self.t):
            raise PerfModelError("the simulated clock is not finite: a step takes an infinite "
                                 "or undefined time on this hardware (check its numbers)")

    def run_continuous(self) -> Trace:
        while self.finished < self.n:
            if self.epochs:     # decode-only iterations on scalars (serving/decode_epoch.py)
                decode_epoch(self)
                if self.finished >= self.n:
                    break
            self._tick()
            self._release()
            if not self.nrun and not self.waiting:
                self.t = self.prev_t = max(self.t, self.pending[0][0])
                self.woken = self.pol.idle_takes_one
                continue
            dec, chunks = self._plan()
            if self._held(dec, chunks):
                self._hold(dec)
                continue
            if not chunks and not dec.size and self.nrun:
                # every running sequence is a half-done prompt and none can take its next
                # chunk (their chunks filled the pool): preempt the newest, as vLLM does when
                # it cannot allocate for a running request, and plan again
                self._preempt_last()
                continue
            if not chunks and not dec.size and not self.nrun and self._evict_cached():
                continue   # waiting requests' cached prefixes filled the pool: they recompute
            if not chunks and not dec.size:
                # not reached: _policy checks that one request alone fits the pool and that a
                # prompt fits the token budget of an engine without chunked prefill; should it
                # be, the level reports fits=False with this reason (simulate_points)
                i = self.waiting[0]
                raise Stalled(f"the scheduler cannot start a request of {self.need[i]:.0f} "
                              f"tokens ({self.cached[i]:.0f} cached): it does not fit the KV "
                              f"pool of {self.pol.total_blocks * self.pol.block_tokens} tokens "
                              "or the step's token budget")
            blocked = not self.waiting or self.nrun >= self.pol.max_seqs
            if not chunks and (blocked or not self._admissible(float("inf"))):
                self._decode_run(dec)
            else:
                self._step(dec, chunks)
        self._flush_itl()
        return self.tr



def simulate(cost: StepCost, req: Requests, pol: Policy, budget: StepBudget | None = None, *,
             epochs: bool = True) -> Trace:
    """Run every request to completion under the policy; times in seconds from t=0.
    Raises PerfModelError once the run spends more than the budget's scheduler steps.
    epochs=False runs every iteration through the general loop (the reference the decode
    epochs are tested against: the same trace)."""
    sim = _Sim(cost, req, pol, budget, epochs)
    return run_static(sim) if pol.static else sim.run_continuous()
