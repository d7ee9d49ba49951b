"""KV-cache block bookkeeping of the step-level scheduler (serving/scheduler.py): blocks of the
engine's page size per request, preemption by recompute (vLLM's PreemptionMode.RECOMPUTE),
eviction of waiting requests' cached prefixes, and TensorRT-LLM's GUARANTEED_NO_EVICT
reservation of each running request's whole prompt + output."""

from __future__ import annotations

import numpy as np


class KvBlocks:
    """Mixed into scheduler._Sim, whose state (pol, blocks, used_blocks, ctx, need, done,
    cached, gen, out, waiting, nrun, _rbuf, tr) these methods keep consistent."""

    def _blocks_for(self, tokens):
        return np.ceil(np.asarray(tokens, dtype=float) / self.pol.block_tokens)

    def _free(self) -> float:
        return self.pol.total_blocks - self.used_blocks

    def _set_ctx(self, i, ctx) -> None:
        """Set the KV length of request(s) i (an index or an index array)."""
        b = np.ceil(np.asarray(ctx, dtype=float) / self.pol.block_tokens)
        self.used_blocks += float(np.sum(b - self.blocks[i]))
        self.blocks[i] = b
        self.ctx[i] = ctx

    def _preempt_last(self) -> None:
        self.nrun -= 1
        self._requeue(int(self._rbuf[self.nrun]))

    def _requeue(self, i: int) -> None:
        """Request i, just taken off the running set, waits first to recompute."""
        self.used_blocks -= float(self.blocks[i])
        self.blocks[i] = 0.0
        self.need[i] = self.prompt[i] + self.gen[i]
        self.done[i] = self.cached[i]
        # its cached prefix stays cached but holds no blocks while it waits (evictable, as
        # vLLM's prefix cache frees them): as at arrival, readmission allocates them again.
        # Holding them made waiting, preempted requests fill the pool: nothing could start
        self.ctx[i] = self.cached[i]
        self.waiting.appendleft(i)
        self.tr.preemptions += 1

    def _evict_cached(self) -> bool:
        """Nothing runs and the waiting requests' cached prefixes fill the KV pool: evict
        them (a prefix cache frees unused blocks first), so those requests recompute their
        whole prompt. Only reached where the scheduler would otherwise stall."""
        held = [i for i in self.waiting if self.blocks[i] > 0]
        for i in held:
            self.used_blocks -= float(self.blocks[i])
            self.blocks[i] = 0.0
            self.ctx[i] = 0.0
            self.done[i] = 0.0
        return bool(held)

    def _reserved_blocks(self) -> float:
        """Blocks the running requests' whole prompts + outputs reserve (a decode epoch
        shadows this with its running sum)."""
        run = self._run()
        return float(np.sum(self._blocks_for(self.need[run] + self.out[run]))) if run.size else 0.0

    def _reservable(self, i: int) -> bool:
        reserved = self._reserved_blocks()
        return reserved + float(self._blocks_for(self.need[i] + self.out[i] - self.gen[i])) <= self.pol.total_blocks
