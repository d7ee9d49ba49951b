"""TGI v3's join rule and request refusal in the simulator (SchedulerSpec.waiting_served_ratio,
max_waiting_tokens, refuses_over_max_seqs; Policy.join_ratio / join_wait_steps;
serving/sim_batch_wait.py _join_held).

Sources of the expected behaviour (huggingface/text-generation-inference):
- backends/v3/src/backend.rs @1d0847a9 batching_task: after a prefill `waiting_tokens = 1`;
  each loop iteration computes min_size = None if waiting_tokens >= max_waiting_tokens else
  Some((batch_size as f32 * waiting_served_ratio).floor()), asks the queue for a new batch,
  prefills it on its own if it gets one (then `waiting_tokens = 1`), then decodes the
  concatenated batches and adds 1 to waiting_tokens;
- backends/v3/src/queue.rs State.next_batch: None when fewer than min_size entries wait or
  fewer than min_size fit the budgets;
- docs/source/reference/launcher.md @032fc4c4: WAITING_SERVED_RATIO [default: 0.3],
  MAX_WAITING_TOKENS [default: 20], MAX_CONCURRENT_REQUESTS [default: 128]; the router answers
  requests beyond it with 429 (Overloaded).
So with a running batch of 10, min_size = floor(3.0) = 3: one waiting request joins only after
max_waiting_tokens - 1 = 19 decode steps since the last prefill; three join at once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.engines import ENGINES, load_engine
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="tgi")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=4096, max_context=4096)
P = 300          # every prompt
OUT = 400        # the running batch's outputs: it outlives every case below


def _pol(ratio: float | None = 0.3, wait: int = 20) -> Policy:
    """TGI-like: separate prefill steps, chunked, budget 4096, room for everything."""
    return Policy(static=False, mixed=False, chunked=True, max_seqs=128, token_budget=4096,
                  total_blocks=1_000_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, join_ratio=ratio, join_wait_steps=wait if ratio else 0)


def _batch_ends(n: int, k: int) -> np.ndarray:
    """End of the n-request prefill at t = 0 and of its first k decode steps (each request
    holds P + j tokens of KV at decode step j)."""
    t0 = COST.step_s(0, 0.0, [float(P)] * n, [0.0] * n, finishing=n)
    return t0 + np.concatenate([[0.0], np.cumsum([COST.step_s(n, n * (P + j) * 1.0)
                                                   for j in range(k)])])


def _trace(n: int, late: list[float], late_out: int = 5) -> Requests:
    send = np.array([0.0] * n + late)
    m = len(late)
    return Requests(send_s=send, prompt_tokens=np.full(n + m, float(P)),
                    output_tokens=np.array([OUT] * n + [late_out] * m, float),
                    cached_tokens=np.zeros(n + m), concurrency=None)


def _prefill(m: int) -> float:
    return COST.step_s(0, 0.0, [float(P)] * m, [0.0] * m, finishing=m)


def _mid(ends: np.ndarray, j: int) -> float:
    """A time inside decode step j (between ends[j] and ends[j + 1])."""
    return float(0.5 * (ends[j] + ends[j + 1]))


def test_one_request_waits_19_decodes_beside_a_batch_of_10_by_hand():
    ends = _batch_ends(10, 40)
    tr = simulate(COST, _trace(10, [_mid(ends, 2)]), _pol())
    off = simulate(COST, _trace(10, [_mid(ends, 2)]), _pol(None))
    # off: it joins after the decode step it arrived in (3 decode steps done)
    assert off.first_s[10] == pytest.approx(ends[3] + _prefill(1), rel=1e-9)
    # on: 1 < floor(10 x 0.3) = 3, so it waits until waiting_tokens = 20: 19 decodes
    assert tr.first_s[10] == pytest.approx(ends[19] + _prefill(1), rel=1e-9)
    assert tr.first_s[0] == off.first_s[0] == pytest.approx(ends[0], rel=1e-12)


def test_three_requests_join_a_batch_of_10_at_once():
    ends = _batch_ends(10, 40)
    at = _mid(ends, 2)
    tr = simulate(COST, _trace(10, [at, at, at]), _pol())
    assert np.allclose(tr.first_s[10:], ends[3] + _prefill(3), rtol=1e-9)


def test_a_join_prefill_is_followed_by_a_decode():
    """Batch of 3: min_size floor(0.9) = 0, so B joins at once; C, arriving during B's
    prefill, joins (1 >= floor(4 x 0.3) = 1) only after one decode of all four."""
    ends = _batch_ends(3, 40)
    b_at = _mid(ends, 2)
    b_first = ends[3] + _prefill(1)
    c_at = float(0.5 * (ends[3] + b_first))
    tr = simulate(COST, _trace(3, [b_at, c_at]), _pol())
    assert tr.first_s[3] == pytest.approx(b_first, rel=1e-9)
    decode4 = COST.step_s(4, 3.0 * (P + 3) + P)
    assert tr.first_s[4] == pytest.approx(b_first + decode4 + _prefill(1), rel=1e-9)


def test_the_tgi_preset_carries_the_launcher_defaults_and_no_other_preset_does():
    s = load_engine("tgi").scheduler
    assert (s.waiting_served_ratio, s.max_waiting_tokens, s.refuses_over_max_seqs) == \
        (0.3, 20, True)
    assert s.max_num_seqs == 128
    for eid in ENGINES:
        if eid == "tgi":
            continue
        o = load_engine(eid).scheduler
        assert o.waiting_served_ratio is None and o.max_waiting_tokens is None
        assert o.refuses_over_max_seqs is False


def test_without_the_rule_no_prompt_is_held():
    """join_ratio None (every other engine) takes the old path: the prompt joins as soon as
    it is visible, exactly as with a ratio whose min_size is 0 for this batch."""
    ends = _batch_ends(2, 40)
    at = _mid(ends, 5)
    off = simulate(COST, _trace(2, [at]), _pol(None))
    tiny = simulate(COST, _trace(2, [at]), _pol(0.3))     # floor(0.6) = 0
    assert off.first_s[2] == pytest.approx(ends[6] + _prefill(1), rel=1e-9)
    assert tiny.first_s[2] == off.first_s[2]


def test_concurrency_above_max_concurrent_requests_does_not_fit():
    r = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="tgi", prompt_tokens=128,
                  output_tokens=8, concurrencies=[128, 129], num_requests=129)
    ok, over = r.points
    assert ok.fits and not over.fits
    assert "429" in over.reason and "\n" not in over.reason
    v = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="vllm", prompt_tokens=128,
                  output_tokens=8, concurrencies=[129], num_requests=129)
    assert "429" not in v.points[0].reason


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 30), conc=st.integers(1, 40), prompt=st.integers(1, 1500),
       out=st.integers(1, 60), ratio=st.floats(0.05, 2.0), wait=st.integers(1, 40))
def test_random_closed_loops_finish_under_the_rule(n, conc, prompt, out, ratio, wait):
    req = Requests(send_s=None, prompt_tokens=np.full(n, float(prompt)),
                   output_tokens=np.full(n, float(out)), cached_tokens=np.zeros(n),
                   concurrency=conc)
    tr = simulate(COST, req, _pol(ratio, wait))
    assert np.all(np.isfinite(tr.first_s)) and np.all(np.isfinite(tr.finish_s))
    assert np.all(tr.first_s >= tr.send_s) and np.all(tr.finish_s >= tr.first_s)
    assert math.isfinite(tr.first_s.max())
