"""TensorRT-LLM batch waiting in the simulator (SchedulerSpec.batch_wait_timeout_iters /
batch_wait_max_tokens_ratio, Policy.batch_wait_iters / batch_wait_tokens).

TensorRT-LLM PyTorch backend, PyExecutor._schedule: when the scheduler's batch holds both
context and generation requests (and attention DP is off), `_waiting_requests` drops the context
requests unless `batch_wait_iters_count >= batch_wait_timeout_iters` or the scheduled tokens
(each context request's whole prompt, `len(get_tokens(0))`, plus one per generation request)
reach `batch_wait_max_tokens_ratio * max_num_tokens`; a held iteration adds 1 to the count, a
release resets it. Both default to 0 (llm_args.py): the ratio test `tokens >= 0` then always
passes, so nothing waits. InferenceMAX's Llama-70B TensorRT-LLM scripts set 20 / 0.9 at 1k/1k
below TP 8 (benchmarks/70b_fp8_h200_trt_slurm.sh)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import _batch_wait_tokens
from perfmodel.serving.workload import Requests
from two_requests import A_PROMPT, B_PROMPT, a_steps, a_then_b

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
BIG = 8192.0 * 0.9     # ratio 0.9 of an 8192-token budget: far above one prompt


def _pol(iters: int = 0, tokens: float = 0.0, **kw) -> Policy:
    """In-flight batching (synchronous loop, room for everything) with batch waiting."""
    base = dict(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=8192,
                total_blocks=100_000, block_tokens=1, reserve_output=False,
                request_overhead_s=0.0, batch_wait_iters=iters, batch_wait_tokens=tokens)
    base.update(kw)
    return Policy(**base)


def _joint(a_decodes: int) -> float:
    """The step that prefills B beside A's next decode, after A decoded `a_decodes` steps."""
    return COST.step_s(1, float(A_PROMPT + a_decodes), [B_PROMPT], [0.0], finishing=1)


def _b_send(at: int, frac: float = 0.5) -> float:
    ends = a_steps(COST, 200)
    return float(ends[at] + frac * (ends[at + 1] - ends[at]))


def test_a_lone_prompt_beside_decodes_waits_exactly_the_timeout_by_hand():
    """B arrives during A's 3rd decode step. Off: its prompt rides in the step after that one
    (tests/test_trtllm_scheduler.py). With 20 iterations and a threshold B's 300 tokens + A's
    one row never reach: 20 decode steps of A alone run first (count 0 -> 20), then B rides."""
    ends = a_steps(COST, 40)
    off = simulate(COST, a_then_b(_b_send(2)), _pol())
    on = simulate(COST, a_then_b(_b_send(2)), _pol(20, BIG))
    assert off.first_s[1] == pytest.approx(ends[3] + _joint(3), rel=1e-9)
    assert on.first_s[1] == pytest.approx(ends[23] + _joint(23), rel=1e-9)
    assert on.first_s[0] == off.first_s[0]


def test_enough_scheduled_tokens_release_at_once():
    """The threshold counts the prompt plus one token per decode row: B's 300 + A's 1 = 301
    releases at 301 and holds at 302."""
    off = simulate(COST, a_then_b(_b_send(2)), _pol())
    at = simulate(COST, a_then_b(_b_send(2)), _pol(20, B_PROMPT + 1))
    above = simulate(COST, a_then_b(_b_send(2)), _pol(20, B_PROMPT + 2))
    assert at.first_s[1] == off.first_s[1]
    assert above.first_s[1] > off.first_s[1]


def test_ratio_zero_or_nothing_decoding_means_no_wait():
    """TensorRT-LLM's default ratio 0 releases every batch (tokens >= 0), whatever the
    timeout; a prompt that finds no decode running (A at t = 0) is never held."""
    off = simulate(COST, a_then_b(_b_send(2)), _pol())
    zero = simulate(COST, a_then_b(_b_send(2)), _pol(20, _batch_wait_tokens(0.0, 8192)))
    assert zero.first_s[1] == off.first_s[1]
    assert simulate(COST, a_then_b(_b_send(2)), _pol(20, BIG)).first_s[0] == \
        pytest.approx(a_steps(COST, 0)[0], rel=1e-12)


def test_threshold_is_ratio_of_the_budget():
    assert _batch_wait_tokens(0.9, 2048) == pytest.approx(1843.2)
    assert _batch_wait_tokens(0.9, None) == np.inf
    assert _batch_wait_tokens(0.0, None) == 0.0


@given(at=st.integers(0, 60), frac=st.floats(0.0, 0.999), iters=st.integers(1, 40))
def test_a_held_prompt_starts_exactly_iters_decode_steps_later(at, frac, iters):
    """Wherever B arrives, holding shifts its prompt by exactly `iters` of A's decode steps."""
    ends = a_steps(COST, 200)
    off = simulate(COST, a_then_b(_b_send(at, frac)), _pol()).first_s[1]
    j = int(np.argmin(np.abs(ends[:150] + np.array([_joint(k) for k in range(150)]) - off)))
    assert off == pytest.approx(ends[j] + _joint(j), rel=1e-9)
    got = simulate(COST, a_then_b(_b_send(at, frac)), _pol(iters, BIG)).first_s[1]
    assert got == pytest.approx(ends[j + iters] + _joint(j + iters), rel=1e-9)


@given(n=st.integers(2, 40), conc=st.integers(1, 16), prompt=st.integers(1, 1500),
       out=st.integers(1, 80), iters=st.integers(0, 30), ratio=st.floats(0.0, 1.0),
       chunked=st.booleans(), overlap=st.booleans())
def test_random_closed_loops_finish_and_wait_no_less(n, conc, prompt, out, iters, ratio,
                                                     chunked, overlap):
    """Every request finishes with finite, ordered times; a lone closed loop's first request
    (nothing decoding) is never held."""
    req = Requests(send_s=None, prompt_tokens=np.full(n, float(prompt)),
                   output_tokens=np.full(n, float(out)), cached_tokens=np.zeros(n),
                   concurrency=conc)
    tr = simulate(COST, req, _pol(iters, _batch_wait_tokens(ratio, 2048), token_budget=2048,
                                  chunked=chunked, overlap=overlap))
    base = simulate(COST, req, _pol(token_budget=2048, chunked=chunked, overlap=overlap))
    assert np.all(np.isfinite(tr.first_s)) and np.all(np.isfinite(tr.finish_s))
    assert np.all(tr.first_s >= tr.send_s) and np.all(tr.finish_s >= tr.first_s)
    assert tr.first_s[0] == base.first_s[0]


def test_the_70b_trtllm_recipe_sets_the_flags_at_1k1k_below_tp8():
    """benchmarks/70b_fp8_h200_trt_slurm.sh: `if [[ "$ISL" == "1024" && "$OSL" == "1024" &&
    ${TP} -lt 8 ]]` writes batch_wait_max_tokens_ratio 0.9 and batch_wait_timeout_iters 20."""
    src = "aic silicon measured 2025-10-29"
    r = recipe_for(src, "trtllm", 1024, concurrency=4, gpu="h200-sxm", output=1024, tp=4)
    assert (r.batch_wait_timeout_iters, r.batch_wait_max_tokens_ratio) == (20, 0.9)
    for prompt, output, tp in ((1024, 1024, 8), (1024, 8192, 4), (8192, 1024, 2)):
        r = recipe_for(src, "trtllm", prompt, concurrency=4, gpu="b200", output=output, tp=tp)
        assert r.batch_wait_timeout_iters is None and r.batch_wait_max_tokens_ratio is None
    assert recipe_for(src, "vllm", 1024, concurrency=4, gpu="h200-sxm", output=1024,
                      tp=4).batch_wait_timeout_iters is None
    # the DeepSeek-R1 TensorRT-LLM scripts (dsr1_*_trt*.sh) set neither flag
    ds = recipe_for("db-dump/2025-11 measured 2025-11-02", "trtllm", 1024, concurrency=4,
                    gpu="b200", output=1024, tp=4)
    assert ds.batch_wait_timeout_iters is None
    a = recipe_for(src, "trtllm", 1024, concurrency=4, gpu="h200-sxm", output=1024, tp=4)
    b = recipe_for(src, "trtllm", 1024, concurrency=4, gpu="h200-sxm", output=1024, tp=8)
    assert a.key() != b.key()
