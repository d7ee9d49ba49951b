"""Decode epochs: the scheduler's iterations while a decoding batch runs and prompts wait,
on scalars instead of per-sequence arrays. The same trace as the general loop, to the bit.

Under KV pressure (a closed loop above what the pool holds) nearly every iteration of
scheduler._Sim looks alike: every running sequence decodes; the newest ones are preempted
until the step's new KV blocks fit, or waiting prompts (recomputations, new requests) are
admitted whole; then one step or a decode-only run to the next event; finished sequences
free their blocks and send the next request. The general loop pays some thirty numpy calls
over the batch for each. Here every running context grows by one per step, so the epoch keeps
each sequence as its values when it joined less a shared step count `lag`:
  new blocks of a step  = sequences whose context is a multiple of the page size bs
                          (a histogram of the keys ctx - lag mod bs, read at -lag);
  new blocks of k steps = sum over empty slots e of count(e) * ceil(max(0, k - e) / bs);
  context sum           = S + d * lag (S: the keys of the d sequences running);
  finishes              = the sequences whose key out - gen + lag at joining is <= lag.
Each iteration takes _Sim.run_continuous's decisions in its order (preempt the newest while
the new blocks exceed the free ones and then admit nobody; else admit waiting prompts in
order while budget, sequences and blocks last; a decode step when the first waiting request
could start, else a run) and prices through the same calls (StepCost.step_s,
_Sim._run_steps), so the trace is the same (tests/test_decode_epoch.py runs both). A
sequence leaving the batch, and every one at the end, gets its context, blocks and tokens
written back. The epoch hands over to the general loop before anything it does not model:
a prompt split over steps, a token budget below the batch, a prompt-only step (engines
without mixed batches), TensorRT-LLM's output reservation, static batching.
"""

from __future__ import annotations

import heapq
import math

import numpy as np


def decode_epoch(sim) -> None:
    """Run `sim`'s (a scheduler._Sim) iterations from now while they stay in the regime the
    module docstring describes; return at the first one that needs the general loop."""
    pol = sim.pol
    budget = math.inf if pol.token_budget is None else float(pol.token_budget)
    if (sim.n_pref or not sim.nrun or not sim.waiting or budget < sim.nrun
            or pol.reserve_output or pol.static):
        return
    ep = _Epoch(sim)
    try:
        while sim.finished < sim.n and ep.d and ep.d <= budget:
            if not ep.iterate(budget):
                break
    finally:
        ep.write_back()


class _Epoch:
    """The running batch as keys at joining plus a shared step count (see the module doc);
    positions follow the running order (admission order). Python lists: an epoch lasts
    hundreds of iterations, each touching a few sequences."""

    def __init__(self, sim):
        self.sim, self.bs = sim, sim.pol.block_tokens
        run = sim._rbuf[:sim.nrun]
        ctx = sim.ctx[run]
        self.ids = run.tolist()
        self.kc = ctx.tolist()                   # context at joining - lag at joining
        self.fin = (sim.out[run] - sim.gen[run]).tolist()   # tokens left + lag at joining
        self.alive = [True] * len(self.ids)
        self.heap = sorted(zip(self.fin, range(len(self.ids))))   # (fin, position)
        self.hist = np.bincount((ctx % self.bs).astype(int), minlength=self.bs).tolist()
        self.S = float(ctx.sum())
        self.d = len(self.ids)
        self.tail = self.d - 1
        self.lag = 0

    # ---------------------------------------------------------------- one iteration
    def iterate(self, budget: float) -> bool:
        """One scheduler iteration; False (nothing changed) where the general loop must run it."""
        sim, pol = self.sim, self.sim.pol
        sim._release()
        free = sim._free()
        if not pol.mixed and sim._admissible(budget):
            # a prompt-only step comes first (SGLang): the batch waits a step
            admits = self._admits(budget, free, 0)
            if not admits:
                return False              # a prompt split over steps, or none after all
            sim._tick()
            self._step(admits, 0)
            self._retire()
            return True
        victims = self._victims(free)
        if victims is None:
            return False                  # the batch would empty
        admits = [] if victims or not pol.mixed else self._admits(budget, free - self._grow(), self.d)
        if admits is None:
            return False                  # a prompt would be split over steps
        sim._tick()
        for p in victims:
            self._leave(p)
            sim.nrun -= 1
            sim._requeue(self.ids[p])
        if admits:
            self._step(admits, self.d)
        elif (not sim.waiting or sim.nrun >= pol.max_seqs
              or not sim._admissible(math.inf)):
            k = self._tokens_left()
            k = min(k, self._kv_steps(sim._free(), k))
            k = sim._run_steps(self.d, (self.S + self.d * self.lag) / self.d, k)
            self._advance(k)
        else:
            dur = sim.cost.step_s(self.d, self.S + self.d * self.lag, [], [], 0)
            sim._record(self.d, 0.0, 1, dur)
            sim.t += dur
            sim.itl1.append((dur, self.d))
            self._advance(1)
        self._retire()
        return True

    def _admits(self, budget: float, spare: float, d: int) -> list | None:
        """_Sim._plan's admissions beside d decode rows: [(request, tokens)], or None
        where one would prefill only part of its prompt."""
        sim, bs = self.sim, self.bs
        left, out = budget - d, []
        while (len(out) < len(sim.waiting) and left > 0
               and sim.nrun + len(out) < sim.pol.max_seqs):
            i = sim.waiting[len(out)]
            c = sim._chunk(i, left, bool(out or d))
            if c <= 0:
                break
            extra = math.ceil((float(sim.ctx[i]) + c) / bs) - float(sim.blocks[i])
            if extra > spare:
                break
            if c < float(sim.need[i] - sim.done[i]):
                return None
            out.append((i, c))
            spare -= extra
            left -= c
        return out

    def _step(self, admits: list, d: int) -> None:
        """_Sim._step with whole prompts admitted beside d decode rows (the batch, or none
        in a prompt-only step): they join the batch as decoders."""
        sim = self.sim
        for _ in admits:
            sim.waiting.popleft()
        sim.nrun += len(admits)
        sizes = [c for _, c in admits]
        ctxs = [float(sim.ctx[i]) for i, _ in admits]
        dur = sim.cost.step_s(d, self.S + d * self.lag if d else 0.0, sizes, ctxs, len(admits))
        sim._record(d, float(np.sum(sizes)), 1, dur)
        sim.t += dur
        if d:
            sim.itl1.append((dur, d))
            self._advance(1)
        for (i, c), s0 in zip(admits, ctxs):
            sim.done[i] += c
            b = float(math.ceil((s0 + c) / self.bs))      # _Sim._set_ctx on one request
            sim.used_blocks += b - float(sim.blocks[i])
            sim.blocks[i], sim.ctx[i] = b, s0 + c
            sim.gen[i] += 1
            if math.isnan(sim.tr.first_s[i]):
                sim.tr.first_s[i] = sim.t
            self._join(i)

    # ---------------------------------------------------------------- the batch
    def _grow(self) -> int:
        """New blocks of one step: contexts at a multiple of bs."""
        return self.hist[-self.lag % self.bs]

    def _advance(self, k: int) -> None:
        """k decode steps: e empty slots need ceil(max(0, k - e) / bs) new blocks."""
        bs, lag, h = self.bs, self.lag, self.hist
        new = (h[-lag % bs] if k == 1 else
               sum(h[(-e - lag) % bs] * ((k - e + bs - 1) // bs) for e in range(min(k, bs))))
        self.sim.used_blocks += float(new)
        self.lag += k

    def _victims(self, free: float) -> list[int] | None:
        """Positions preempted (newest first) until the step's new blocks fit; None where
        the batch would empty."""
        g, out, p = self._grow(), [], self.tail
        while g > free:
            while not self.alive[p]:
                p -= 1
            c = self.kc[p] + self.lag
            free += math.ceil(c / self.bs)
            g -= c % self.bs == 0
            out.append(p)
            p -= 1
            if len(out) == self.d:
                return None
        return out

    def _tokens_left(self) -> int:
        """Fewest tokens any running sequence has left (the next finish)."""
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

    def _join(self, i: int) -> None:
        """Request i (its values written) joins the batch as its newest decoder."""
        sim, p = self.sim, len(self.ids)
        key = float(sim.ctx[i]) - self.lag
        f = float(sim.out[i] - sim.gen[i]) + self.lag
        self.ids.append(i)
        self.kc.append(key)
        self.fin.append(f)
        self.alive.append(True)
        heapq.heappush(self.heap, (f, p))
        self.hist[int(key % self.bs)] += 1
        self.S += key
        self.d += 1
        self.tail = p

    def _leave(self, p: int) -> None:
        """Position p leaves the batch: its context, blocks and tokens are written back."""
        sim, i, key = self.sim, self.ids[p], self.kc[p]
        c = key + self.lag
        sim.ctx[i] = c
        sim.blocks[i] = float(math.ceil(c / self.bs))
        sim.gen[i] = sim.out[i] - self.fin[p] + self.lag
        self.alive[p] = False
        self.hist[int(key % self.bs)] -= 1
        self.S -= key
        self.d -= 1
        while self.tail >= 0 and not self.alive[self.tail]:
            self.tail -= 1

    def _retire(self) -> None:
        """Sequences whose last token this was: off the batch (running order), finished."""
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
        """The running set and its contexts, blocks and tokens, as the general loop keeps them."""
        sim = self.sim
        keep = [p for p, a in enumerate(self.alive) if a]
        ids = np.array([self.ids[p] for p in keep], dtype=int)
        ctx = np.array([self.kc[p] for p in keep], dtype=float) + self.lag
        sim.ctx[ids] = ctx
        sim.blocks[ids] = np.ceil(ctx / self.bs)
        sim.gen[ids] = sim.out[ids] - np.array([self.fin[p] for p in keep], dtype=float) + self.lag
        sim._rbuf[:ids.size] = ids
        assert ids.size == sim.nrun, "decode epoch: running set out of step"
