"""TensorRT-LLM's idle fetch in the simulator (SchedulerSpec.idle_takes_one, Policy.idle_takes_one).

PyExecutor._fetch_new_requests fetches with timeout None when no request is active, and
_get_from_request_queue, finding the queue empty, blocks on request_queue.get() and returns that
one item; only a queue that already holds requests is drained (tensorrt_llm/_torch/pyexecutor/
py_executor.py from the first PyExecutor through 1.0, executor_request_queue.py since, with the
default batch_wait_timeout_ms 0). A closed-loop wave sent at once to an idle engine (the start
of a run, or every wave of a run whose requests all finish in one step) runs its first prompt
alone; the rest were queued meanwhile and join the next step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.engines import ENGINES
from perfmodel.core.resolve import resolve
from perfmodel.core.specs import SchedulerSpec
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import _policy, on_server
from perfmodel.serving.workload import Requests, ServeWorkload

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
SEEN_S = 1e-3     # a request reaches the scheduler 1 ms after it is sent


def _pol(idle_takes_one: bool, overlap: bool = True) -> Policy:
    """In-flight batching with room for everything (budget, KV)."""
    return Policy(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=8192,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=SEEN_S, overlap=overlap, idle_takes_one=idle_takes_one)


def _wave(n: int, prompt: int, out: int, total: int | None = None) -> Requests:
    total = total or n
    return Requests(send_s=None, prompt_tokens=np.full(total, float(prompt)),
                    output_tokens=np.full(total, float(out)), cached_tokens=np.zeros(total),
                    concurrency=n)


def test_a_wave_to_an_idle_engine_runs_its_first_prompt_alone_by_hand():
    """Three 300-token prompts sent at t = 0, seen at 1 ms. The engine was idle, so it wakes
    with A and runs A's prompt alone: A's first token at 1 ms + step(0 decodes, [300]). B and
    C were queued when the next step was planned (overlap: as A's step began), so they ride
    beside A's first decode (context 300): first tokens at A's + step(1 decode over 300,
    [300, 300]). Without the rule the three prompts share the first step."""
    p = 300
    t1 = SEEN_S + COST.step_s(0, 0.0, [p], [0.0], finishing=1)
    t2 = t1 + COST.step_s(1, float(p), [p, p], [0.0, 0.0], finishing=2)
    tr = simulate(COST, _wave(3, p, 5), _pol(True))
    assert tr.first_s == pytest.approx([t1, t2, t2], rel=1e-9)
    together = SEEN_S + COST.step_s(0, 0.0, [p, p, p], [0.0, 0.0, 0.0], finishing=3)
    assert simulate(COST, _wave(3, p, 5), _pol(False)).first_s == pytest.approx([together] * 3,
                                                                                 rel=1e-9)
    # a synchronous loop plans the second step after the first: B and C are there as well
    assert simulate(COST, _wave(3, p, 5), _pol(True, overlap=False)).first_s == pytest.approx(
        [t1, t2, t2], rel=1e-9)


def test_requests_already_queued_when_the_engine_idles_are_drained_together():
    """Seen at t = 0 (no overhead): the queue is not empty when the idle engine fetches, so
    _get_from_request_queue drains it and the three prompts share the first step."""
    pol = Policy(**{**_pol(True).__dict__, "request_overhead_s": 0.0})
    tr = simulate(COST, _wave(3, 300, 5), pol)
    together = COST.step_s(0, 0.0, [300.0] * 3, [0.0] * 3, finishing=3)
    assert tr.first_s == pytest.approx([together] * 3, rel=1e-9)


@given(n=st.integers(2, 10), prompt=st.integers(16, 1500), out=st.integers(2, 30))
def test_only_the_first_prompt_of_an_idle_wave_is_alone(n, prompt, out):
    """A closed-loop wave of n equal requests: exactly one first token at the end of the lone
    prompt step; the lone request is served no later, and the last of its wave no earlier, than
    the drained wave (a prompt step's cost grows with its prompts and is subadditive); epochs
    give the same trace. (The mean is not ordered: with step cost a + b x prompts the split
    wave's mean exceeds the drained one's by (n - 1)(a - b) / n, negative when b > a.)"""
    req = _wave(n, prompt, out, total=2 * n)
    got = simulate(COST, req, _pol(True))
    lone = SEEN_S + COST.step_s(0, 0.0, [prompt], [0.0], finishing=1)
    assert np.count_nonzero(np.isclose(got.first_s[:n], lone, rtol=1e-9)) == 1
    base = simulate(COST, req, _pol(False))
    assert np.min(got.first_s[:n]) <= base.first_s[0] * (1 + 1e-9)
    assert np.max(got.first_s[:n]) >= base.first_s[0] * (1 - 1e-9)
    slow = simulate(COST, req, _pol(True), epochs=False)
    assert got.first_s == pytest.approx(slow.first_s, rel=1e-9)
    assert np.all(np.isfinite(got.finish_s))


def test_only_the_pytorch_backend_of_trtllm_fetches_one_when_idle():
    """The PyExecutor rule (module docstring); vLLM's EngineCore drains its input queue after
    the blocking get (_process_input_queue), SGLang polls without blocking (recv_requests), and
    the 0.x C++ runtime (trtllm-trt) is not modelled with it."""
    trt = ENGINES["trtllm"]
    assert trt.scheduler.idle_takes_one and trt.server_scheduler.idle_takes_one
    old = ENGINES["trtllm-trt"]
    assert not old.scheduler.idle_takes_one and not old.server_scheduler.idle_takes_one
    others = [e for k, e in ENGINES.items() if not k.startswith("trtllm") and e.scheduler]
    assert others and not any(e.scheduler.idle_takes_one for e in others)
    assert SchedulerSpec().idle_takes_one is False
    wl = ServeWorkload(arrival="closed", prompt_tokens=1024, output_tokens=128, concurrency=4)
    assert _policy(on_server(SC), wl)[0].idle_takes_one is True
