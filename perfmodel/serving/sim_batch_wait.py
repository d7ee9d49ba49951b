"""Prompt holding of the step-level scheduler (serving/scheduler.py): TensorRT-LLM batch
waiting (batch_wait_timeout_iters / batch_wait_max_tokens_ratio) and attention-DP balance
(attention_dp_config enable_balance), TGI v3's join rule and LMDeploy PyTorch's prefill
deferral: scheduled prompts beside running decodes wait while the decodes run alone."""

from __future__ import annotations

import numpy as np


class BatchWait:
    """Mixed into scheduler._Sim, whose state (pol, wait_ct, need, admitted, nrun, waiting,
    _rbuf) and decode run (_decode_run) these methods use."""

    def _held(self, dec: np.ndarray, chunks: list) -> bool:
        """TensorRT-LLM batch waiting (PyExecutor._schedule and _waiting_requests): with both
        prompt chunks and decodes scheduled, the prompts wait unless the iterations already
        held reach batch_wait_iters or the scheduled tokens (each prompt's whole length, one
        per decode row) reach batch_wait_tokens; a release resets the count.
        Attention-DP balance (Policy.adp_wait_iters; PyExecutor._balance_adp_requests with
        enable_balance, which replaces batch waiting under attention DP): the prompts wait
        until every DP rank has one, taken as adp_ranks scheduled prompts (the engine gives
        each arrival to the least-loaded rank), unless some rank runs no decode (taken as
        fewer decode rows than ranks) or adp_wait_iters iterations were held."""
        pol = self.pol
        if pol.adp_wait_iters and chunks:
            if (len(chunks) >= pol.adp_ranks or dec.size < pol.adp_ranks
                    or self.wait_ct >= pol.adp_wait_iters):
                self.wait_ct = 0
                return False
            return True
        if not (pol.batch_wait_iters and chunks and dec.size):
            if pol.defer_share is not None:
                return self._defer_held(chunks)                            # LMDeploy (below)
            return pol.join_ratio is not None and self._join_held(chunks)   # TGI (below)
        tokens = sum(float(self.need[i]) for i, _ in chunks) + dec.size
        if self.wait_ct >= pol.batch_wait_iters or tokens >= pol.batch_wait_tokens:
            self.wait_ct = 0
            return False
        return True

    def _join_held(self, chunks: list) -> bool:
        """TGI v3's join rule (backends/v3/src/backend.rs batching_task @1d0847a9, queue.rs
        State.next_batch): while a batch of `size` runs, the queue gives a new batch only if it
        holds at least min_size = floor(size x waiting_served_ratio) requests (computed in f32)
        that fit the budgets, unless waiting_tokens >= max_waiting_tokens (waiting_tokens is 1
        after a prefill and grows by 1 per decode, so after max_waiting_tokens - 1 decode
        steps); the new batch prefills in a step of its own and the next forward is a decode
        of both. An idle engine (next_batch(None, ...)) and a running prompt's next chunk are
        not held."""
        pol, m = self.pol, self.admitted
        size = self.nrun - m
        if not chunks or size <= 0 or len(chunks) != m:
            return False
        run = self._run()[:size]
        if not np.any(self.done[run] >= self.need[run]):
            return False                      # nothing decoding to run instead
        if self.joined:
            return True                       # a join prefill is followed by a decode
        min_size = int(np.floor(np.float32(size) * np.float32(pol.join_ratio)))
        if m >= min_size or self.since + 1 >= pol.join_wait_steps:
            self.joined = True
            return False
        return True

    def _defer_held(self, chunks: list) -> bool:
        """LMDeploy PyTorch engine, do_prefill_default (lmdeploy/pytorch/engine/inputs_maker.py
        @053945e0): with requests waiting, the next forward is a prefill if the consecutive
        decode rounds reached prefill_interval (`_decode_count`, lmdeploy#4532), or the waiting
        sequences' tokens reach max_prefill_token_num, or num_ready + num_running < max_batches
        x 0.5; else a decode of the running batch (the count + 1; a prefill forward or an empty
        queue resets it). An idle engine, and a long prompt's next chunk (the LongContextChunker
        runs before any choice), are not held."""
        pol, m = self.pol, self.admitted
        size = self.nrun - m
        if not chunks or size <= 0 or len(chunks) != m:
            return False
        run = self._run()
        if not np.any(self.done[run[:size]] >= self.need[run[:size]]):
            return False                      # nothing decoding to run instead
        if pol.defer_steps and self.defer_ct >= pol.defer_steps:
            return False
        if size < pol.max_seqs * pol.defer_share:
            return False
        w = np.concatenate([run[size:], np.fromiter(self.waiting, dtype=int)])
        budget = float("inf") if pol.token_budget is None else float(pol.token_budget)
        return float(np.sum(self.need[w] - self.done[w])) < budget

    def _hold(self, dec: np.ndarray) -> None:
        """The prompts _plan scheduled wait: the newly admitted go back to the head of the
        queue, and the decodes run alone until the next event or the timeout (each held
        iteration counts; a new arrival or finish re-plans, as each TensorRT-LLM iteration
        looks again)."""
        m = self.admitted
        if m:
            back = self._rbuf[self.nrun - m:self.nrun].tolist()
            self.nrun -= m
            self.waiting.extendleft(reversed(back))
        pol = self.pol
        if pol.join_ratio is not None or pol.defer_share is not None:   # TGI, LMDeploy: the
            dec, _ = self._plan(force_decode=True)   # running batch decodes (no prompt was
            if pol.join_ratio is not None:           # planned beside it) until an event or
                cap = 1 if self.joined else pol.join_wait_steps - 1 - self.since   # the wait
            else:
                cap = pol.defer_steps - self.defer_ct if pol.defer_steps else None
            if dec.size:
                self._decode_run(dec, None if cap is None else max(1, cap))
            return
        limit = self.pol.adp_wait_iters or self.pol.batch_wait_iters
        self.wait_ct += self._decode_run(dec, limit - self.wait_ct)
