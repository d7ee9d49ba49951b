"""Prompt holding of the step-level scheduler (serving/scheduler.py): TensorRT-LLM batch
waiting (batch_wait_timeout_iters / batch_wait_max_tokens_ratio) and attention-DP balance
(attention_dp_config enable_balance): scheduled prompts beside running decodes wait while the
decodes run alone."""

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
            return False
        tokens = sum(float(self.need[i]) for i, _ in chunks) + dec.size
        if self.wait_ct >= pol.batch_wait_iters or tokens >= pol.batch_wait_tokens:
            self.wait_ct = 0
            return False
        return True

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
        limit = self.pol.adp_wait_iters or self.pol.batch_wait_iters
        self.wait_ct += self._decode_run(dec, limit - self.wait_ct)
