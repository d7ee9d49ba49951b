"""Two requests, A then B, through the serving simulator: the fixture that the scheduler
tests (tests/test_recv_interval.py, tests/test_trtllm_scheduler.py, tests/test_sglang_overlap.py)
time by hand. A (500 prompt tokens) starts alone at t = 0 and decodes; B (300 tokens, 5
outputs) is sent later. Also one disaggregated run with and without a pool's overlap
scheduler (disagg_with_overlap_off)."""

from __future__ import annotations

import numpy as np

from dataclasses import replace

from perfmodel.serving.workload import Requests, ServeWorkload

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


def disagg_with_overlap_off(sc):
    """One disaggregated run (1 prefill and 1 decode worker at tp 1, Poisson 20 req/s, 3000/64
    tokens, 40 requests) of the on-server scenario `sc` as it is, with its prefill pool's
    scheduler overlap off, and with its decode pool's off: (both on, prefill off, decode off),
    each the first level's LevelStats."""
    from perfmodel.serving.disagg import PoolLayout, simulate_disagg

    off = sc.engine.scheduler.model_copy(update=dict(overlap_scheduler=False))
    sc_off = replace(sc, engine=sc.engine.model_copy(update={"scheduler": off}))
    one = PoolLayout(workers=1, tp=1)
    wl = [ServeWorkload.make(arrival="poisson", rate_rps=20.0, prompt_tokens=3000,
                             output_tokens=64, num_requests=40)]
    return tuple(simulate_disagg(p, d, one, one, wl)[0][0]
                 for p, d in ((sc, sc), (sc_off, sc), (sc, sc_off)))
