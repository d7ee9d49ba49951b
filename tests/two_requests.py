"""Two requests, A then B, through the serving simulator: the fixture that the scheduler
tests (tests/test_recv_interval.py, tests/test_trtllm_scheduler.py) time by hand. A (500
prompt tokens) starts alone at t = 0 and decodes; B (300 tokens, 5 outputs) is sent later."""

from __future__ import annotations

import numpy as np

from perfmodel.serving.workload import Requests

A_PROMPT, B_PROMPT = 500, 300


def a_then_b(b_send_s: float, a_out: int = 200) -> Requests:
    return Requests(send_s=np.array([0.0, b_send_s]),
                    prompt_tokens=np.array([A_PROMPT, B_PROMPT], float),
                    output_tokens=np.array([a_out, 5], float), cached_tokens=np.zeros(2),
                    concurrency=None)


def a_steps(cost, k: int) -> np.ndarray:
    """End times of A's prefill and of its first k decode steps alone (context 500 + j)."""
    t1 = cost.step_s(0, 0.0, [A_PROMPT], [0.0], finishing=1)
    return t1 + np.concatenate([[0.0], np.cumsum([cost.step_s(1, A_PROMPT + j)
                                                  for j in range(k)])])
