"""Decode epochs: the continuous-batching scheduler's iterations on scalars instead of
per-sequence arrays. The same trace as the general loop, to the bit.

Under load (prefill waves, and a closed loop above what the KV pool holds) every iteration
of scheduler._Sim pays some thirty numpy calls over the whole batch, though it changes only
a few sequences: the newest are preempted until the step's new KV blocks fit, prompts
continue or start (recomputations, new requests), one step or a decode-only run follows,
finished sequences free their blocks and send the next request. Every decoding context grows
by one per step, so an epoch keeps each decoder as its values when it started decoding less
a shared step count `lag`:
  new blocks of a step  = decoders whose context is a multiple of the page size bs
                          (a histogram of the keys ctx - lag mod bs, read at -lag);
  new blocks of k steps = sum over empty slots e of count(e) * ceil(max(0, k - e) / bs);
  context sum           = S + d * lag (S: the keys of the d decoders);
  finishes              = the decoders whose key out - gen + lag is <= lag (a heap).
Prompts still prefilling (a handful) keep their values in the scheduler's arrays. Each
iteration takes _Sim._plan's and run_continuous's decisions in their order (a prompt-only
step first on engines without mixed batches; else preempt the newest while the decoders'
new blocks exceed the free ones, then continue running prompts and, if nobody was
preempted, admit waiting ones while budget, sequences and blocks last; a decode step when
the first waiting request could start, else a run to the next event) and prices through the
same calls (StepCost.step_s, _Sim._run_steps), so the trace is the same
(tests/test_decode_epoch.py runs both). Each step keeps _Sim.prev_t (when it began) as the
general loop does, so with an overlap scheduler (Policy.overlap: TensorRT-LLM's and SGLang's
overlap loops, vLLM's async scheduling) an arrival during step n joins step n + 2 here too
(_Sim._release). A sequence leaving the batch, and every one at the end, gets its context,
blocks and tokens written back. The epoch hands back to the general loop before anything
else: a token budget below the decoders, a batch that would empty, a step with nothing to
run, static batching, polling every n steps, batch waiting, attention-DP balance, TGI's join
rule, LMDeploy PyTorch's prefill deferral and whole-prompt packing, and a Policy with a
parameter it does not know (POLICY_FIELDS): a scheduler rule added to _Sim is not silently
skipped here.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math

import numpy as np

from perfmodel.serving.sim_state import steps_since_poll

POLICY_FIELDS = frozenset(("static", "mixed", "chunked", "max_seqs", "token_budget",
                           "total_blocks", "block_tokens", "reserve_output",
                           "request_overhead_s", "recv_interval_steps",
                           "overlap", "idle_takes_one", "batch_wait_iters", "batch_wait_tokens",
                           "adp_wait_iters", "adp_ranks", "rank_tokens", "join_ratio",
                           "join_wait_steps", "defer_share", "defer_steps",
                           "whole_prompts"))
"""The scheduler.Policy parameters the epoch models; with any other, it leaves every
iteration to the general loop (tests/test_decode_epoch.py then says it no longer runs)."""


def decode_epoch(sim) -> None:
    """Run `sim`'s (a scheduler._Sim) iterations from now while they stay in the regime the
    module docstring describes; return at the first one that needs the general loop."""
    pol = sim.pol
    budget = math.inf if pol.token_budget is None else float(pol.token_budget)
    if (not sim.nrun or budget < sim.nrun or pol.static or not _modelled(type(pol))
            or pol.recv_interval_steps > 1         # polling every n steps: the general loop
            or pol.batch_wait_iters                # prompts held while decodes run: the same
            or pol.adp_wait_iters
            or pol.join_ratio is not None          # TGI's join rule: the general loop
            or pol.defer_share is not None or pol.whole_prompts):   # LMDeploy PyTorch: the same
        return
    ep = _Epoch(sim)
    try:
        while sim.finished < sim.n and sim.nrun and ep.d <= budget:
            if not ep.iterate(budget):
                break
    finally:
        ep.write_back()


@functools.cache
def _modelled(policy_type) -> bool:
    return frozenset(f.name for f in dataclasses.fields(policy_type)) == POLICY_FIELDS


class _Epoch:
    """The running set by position (running order): decoders as keys plus the shared step
    count (see the module doc), prompts still prefilling as they are in the scheduler."""

    def __init__(self, sim):
        self.sim, self.bs = sim, sim.pol.block_tokens
        run = sim._rbuf[:sim.nrun]
        ctx = sim.ctx[run]
        pre = sim.done[run] < sim.need[run]
        self.ids = run.tolist()
        self.is_dec = (~pre).tolist()
        self.alive = [True] * len(self.ids)
        self.kc = ctx.tolist()                           # decoders: context - lag at start
        self.fin = (sim.out[run] - sim.gen[run]).tolist()  # decoders: tokens left + lag at start
        self.heap = sorted((self.fin[p], p) for p in np.flatnonzero(~pre).tolist())
        self.pref = np.flatnonzero(pre).tolist()        # positions still prefilling
        dec_ctx = ctx[~pre]
        self.hist = np.bincount((dec_ctx % self.bs).astype(int), minlength=self.bs).tolist()
        self.S = float(dec_ctx.sum())
        self.d = int(dec_ctx.size)
        self.stack = list(range(len(self.ids)))   # positions, newest last; its top is alive
        self.lag = 0
        # TensorRT-LLM's reservation (kv_reserve_output): the running prompts + outputs
        self.reserve = sim.pol.reserve_output
        if self.reserve:
            self.reserved = sim._reserved_blocks()
            sim._reserved_blocks = lambda: self.reserved     # _Sim._reservable reads this

    # ---------------------------------------------------------------- one iteration
    def iterate(self, budget: float) -> bool:
        """One scheduler iteration; False (nothing changed) where the general loop must run it."""
        sim, pol = self.sim, self.sim.pol
        sim._release()
        free = sim._free()
        if not pol.mixed and (self.pref or sim._admissible(budget)):
            chunks = self._chunks(budget, free, 0, (), admit=True)   # a prompt-only step
            if chunks:
                sim._tick()
                self._step(chunks, 0)
                self._retire()
                return True
            # no prompt fits after all: _plan(force_decode=True), the decode branch below
        cut = self._victims(free)
        if cut is None:
            return False                  # the batch would empty
        victims, free, grow, d = cut
        chunks = (self._chunks(budget - d, free - grow, d, victims, admit=not victims)
                  if pol.mixed else [])
        if not chunks and not d:
            return False                  # nothing to run: the general loop's own cases
        sim._tick()
        for p in victims:
            self._leave(p)
            sim.nrun -= 1
            sim._requeue(self.ids[p])
        if chunks:
            self._step(chunks, d)
        elif (not sim.waiting or sim.nrun >= pol.max_seqs
              or not sim._admissible(math.inf)):
            k = self._tokens_left()
            k = min(k, self._kv_steps(sim._free(), k))
            ctx0 = (self.S + d * self.lag) / d
            k = self._one_step(d, ctx0) if k == 1 else sim._run_steps(d, ctx0, k)
            self._advance(k)
        else:
            dur = sim.cost.step_s(d, self.S + d * self.lag, [], [], 0)
            sim._record(d, 0.0, 1, dur)
            sim.prev_t = sim.t            # the overlap scheduler plans from here (_Sim._release)
            sim.t += dur
            sim.itl1.append((dur, d))
            self._advance(1)
        self._retire()
        return True

    def _one_step(self, d: int, ctx0: float) -> int:
        """_Sim._run_steps for k = 1 (most runs under KV thrash) on floats: its numpy calls
        over one step give these values (an arrival cannot cut a single step short)."""
        sim = self.sim
        sim.budget.spend_decode(1)
        dur = sim.cost.decode_run_s(d, ctx0, 1)
        end = sim.t + float(dur[0])
        sim.recv_ct = steps_since_poll(sim.pol.recv_interval_steps, sim.recv_ct, 1)
        sim._record(d, 0, 1, end - sim.t)
        sim.tr.itl_values.append(dur)
        sim.tr.itl_weights.append(d)
        sim.prev_t, sim.t = sim.t, end
        return 1

    def _chunks(self, left: float, spare: float, d: int, gone, admit: bool) -> list:
        """_Sim._plan's prompt chunks beside d decode rows with `left` of the budget and
        `spare` blocks: running prompts continue, then (admit) waiting ones start.
        [(request, tokens, position or None for a new one)]."""
        sim, bs, out = self.sim, self.bs, []
        for p in self.pref:
            if p in gone:
                continue
            i = self.ids[p]
            c = sim._chunk(i, left, bool(out or d))
            if c <= 0:
                break
            extra = math.ceil((float(sim.ctx[i]) + c) / bs) - float(sim.blocks[i])
            if extra > spare:
                break
            out.append((i, c, p))
            spare -= extra
            left -= c
        new, held = 0, 0.0            # held: reservations of this step's admissions
        while (admit and new < len(sim.waiting) and left > 0
               and sim.nrun + new < sim.pol.max_seqs):
            i = sim.waiting[new]
            c = sim._chunk(i, left, bool(out or d))
            if c <= 0:
                break
            extra = math.ceil((float(sim.ctx[i]) + c) / bs) - float(sim.blocks[i])
            if extra > spare or (self.reserve and not self._reservable(i, held)):
                break
            out.append((i, c, None))
            if self.reserve:
                held += self._reservation(i)
            new += 1
            spare -= extra
            left -= c
        return out

    def _reservation(self, i: int) -> float:
        """Blocks request i's prompt + output reserve while it runs."""
        return float(math.ceil((float(self.sim.need[i]) + float(self.sim.out[i])) / self.bs))

    def _reservable(self, i: int, held: float) -> bool:
        """_Sim._reservable: request i's remaining prompt + output fits beside the running
        ones' reservations and `held` more."""
        sim = self.sim
        rest = float(math.ceil(float(sim.need[i] + sim.out[i] - sim.gen[i]) / self.bs))
        return self.reserved + held + rest <= sim.pol.total_blocks

    def _step(self, chunks: list, d: int) -> None:
        """_Sim._step: d decode rows (the decoders, or none in a prompt-only step) and the
        chunks; prompts that end start decoding."""
        sim = self.sim
        waiting, ctx, done, need, blocks = sim.waiting, sim.ctx, sim.done, sim.need, sim.blocks
        ctxs, ends, sizes, dones = [], [], [], []   # python floats: numpy scalars are slow
        for i, c, p in chunks:
            if p is None:
                waiting.popleft()
                sim.nrun += 1
            ctxs.append(float(ctx[i]))
            d0 = float(done[i])
            dones.append(d0)
            ends.append(d0 + c >= float(need[i]))
            sizes.append(c)
        dur = sim.cost.step_s(d, self.S + d * self.lag if d else 0.0, sizes, ctxs, sum(ends))
        # np.sum adds fewer than 8 values in order, as sum() does (pairwise past that)
        sim._record(d, float(sum(sizes) if len(sizes) < 8 else np.sum(sizes)), 1, dur)
        sim.prev_t = sim.t                # as _Sim._step: the overlap scheduler's cut
        sim.t += dur
        if d:
            sim.itl1.append((dur, d))
            self._advance(1)
        bs, first = self.bs, sim.tr.first_s
        for (i, c, p), s0, d0, end in zip(chunks, ctxs, dones, ends):
            done[i] = d0 + c
            b = float(math.ceil((s0 + c) / bs))      # _Sim._set_ctx on one request
            sim.used_blocks += b - float(blocks[i])
            blocks[i], ctx[i] = b, s0 + c
            if p is None:
                p = self._join(i)
                if self.reserve:
                    self.reserved += self._reservation(i)
            if end:
                sim.gen[i] += 1
                if math.isnan(first[i]):
                    first[i] = sim.t
                self._decode(p)

    # ---------------------------------------------------------------- the batch
    def _grow(self) -> int:
        """New blocks of one step: decoders' contexts at a multiple of bs."""
        return self.hist[-self.lag % self.bs]

    def _advance(self, k: int) -> None:
        """k decode steps: e empty slots need ceil(max(0, k - e) / bs) new blocks."""
        bs, lag, h = self.bs, self.lag, self.hist
        new = (h[-lag % bs] if k == 1 else
               sum(h[(-e - lag) % bs] * ((k - e + bs - 1) // bs) for e in range(min(k, bs))))
        self.sim.used_blocks += float(new)
        self.lag += k

    def _victims(self, free: float):
        """Positions preempted (newest first) until the decoders' new blocks fit, with the
        free blocks, new blocks and decoders after them; None where the batch would empty."""
        g, out, d = self._grow(), [], self.d
        at = len(self.stack) - 1
        while g > free:
            while not self.alive[self.stack[at]]:
                at -= 1
            p = self.stack[at]
            if self.is_dec[p]:
                c = self.kc[p] + self.lag
                free += math.ceil(c / self.bs)
                g -= c % self.bs == 0
                d -= 1
            else:
                free += float(self.sim.blocks[self.ids[p]])
            out.append(p)
            at -= 1
            if len(out) == self.sim.nrun:
                return None
        return out, free, g, d

    def _tokens_left(self) -> int:
        """Fewest tokens any decoder has left (the next finish)."""
        heap, alive = self.heap, self.alive
        while not alive[heap[0][1]]:
            heapq.heappop(heap)
        return int(heap[0][0] - self.lag)

    def _kv_steps(self, free_f: float, k: int) -> int:
        """_Sim._kv_steps on the histogram: the rem-th smallest empty slot count."""
        bs, d = self.bs, self.d
        free = int(round(free_f))
        if free >= d * (k // bs + 1):
            return k
        q, rem = divmod(max(free, 0), d)
        acc = 0
        for e in range(bs):
            acc += self.hist[(-e - self.lag) % bs]
            if acc > rem:
                break
        return int(max(1, min(k, q * bs + min(float(e), bs - 1.0))))

    def _join(self, i: int) -> int:
        """Request i joins the running set (newest), prefilling."""
        p = len(self.ids)
        self.ids.append(i)
        self.is_dec.append(False)
        self.alive.append(True)
        self.kc.append(0.0)
        self.fin.append(0.0)
        self.pref.append(p)
        self.stack.append(p)
        return p

    def _decode(self, p: int) -> None:
        """Position p (its prompt done, its values written) starts decoding."""
        sim, i = self.sim, self.ids[p]
        self.pref.remove(p)
        self.is_dec[p] = True
        self.kc[p] = key = float(sim.ctx[i]) - self.lag
        self.fin[p] = f = float(sim.out[i] - sim.gen[i]) + self.lag
        heapq.heappush(self.heap, (f, p))
        self.hist[int(key % self.bs)] += 1
        self.S += key
        self.d += 1

    def _leave(self, p: int) -> None:
        """Position p leaves the running set: a decoder's context, blocks and tokens are
        written back."""
        sim, i = self.sim, self.ids[p]
        if self.reserve:
            self.reserved -= self._reservation(i)
        if self.is_dec[p]:
            key = self.kc[p]
            c = key + self.lag
            sim.ctx[i] = c
            sim.blocks[i] = float(math.ceil(c / self.bs))
            sim.gen[i] = sim.out[i] - self.fin[p] + self.lag
            self.hist[int(key % self.bs)] -= 1
            self.S -= key
            self.d -= 1
        else:
            self.pref.remove(p)
        self.alive[p] = False
        stack = self.stack
        while stack and not self.alive[stack[-1]]:
            stack.pop()

    def _retire(self) -> None:
        """Decoders whose last token this was: off the batch (running order), finished."""
        if not self.d or self._tokens_left() > 0:
            return
        done, heap = [], self.heap
        while heap and heap[0][0] <= self.lag:
            f, p = heapq.heappop(heap)
            if self.alive[p]:
                done.append(p)
        done.sort()
        for p in done:
            self._leave(p)
            self.sim.nrun -= 1
        for p in done:
            self.sim._finish(self.ids[p], self.sim.t)

    def write_back(self) -> None:
        """The running set and its decoders' contexts, blocks and tokens, as the general loop
        keeps them."""
        sim = self.sim
        if self.reserve:
            del sim._reserved_blocks
        keep = [p for p, a in enumerate(self.alive) if a]
        dec = [p for p in keep if self.is_dec[p]]
        ids = np.array([self.ids[p] for p in dec], dtype=int)
        ctx = np.array([self.kc[p] for p in dec], dtype=float) + self.lag
        sim.ctx[ids] = ctx
        sim.blocks[ids] = np.ceil(ctx / self.bs)
        sim.gen[ids] = sim.out[ids] - np.array([self.fin[p] for p in dec], dtype=float) + self.lag
        sim._rbuf[:len(keep)] = [self.ids[p] for p in keep]
        assert len(keep) == sim.nrun, "decode epoch: running set out of step"
