"""Scheduler limits per attention-DP rank (serving/simulate.py _dp_limits, Policy.rank_tokens).

Each DP rank runs its own scheduler. vLLM: one engine core per DP rank, each with the server's
max_num_seqs and max_num_batched_tokens; TensorRT-LLM: up to tp_size x max_num_active_requests
over the attention-DP ranks, each rank scheduling its own max_num_tokens. SGLang divides the
server's --chunked-prefill-size and --max-running-requests by dp_size. The one simulated
scheduler holds all ranks' limits, and a request (on one rank) gets at most its rank's budget
in a step."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.core.engines import SGLANG_SCHEDULER, TRTLLM_SERVER_SCHEDULER, VLLM_SCHEDULER
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.disagg_bundle import bundled_policy
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import _dp_limits
from perfmodel.serving.workload import Requests


def test_vllm_engine_cores_each_apply_the_limits():
    # 4 engine cores x (1024 sequences, 8192 tokens); a request gets one core's 8192
    assert _dp_limits(VLLM_SCHEDULER, 4, 1024, 8192) == (4096, 32768, 8192)


def test_trtllm_attention_dp_ranks_each_apply_the_limits():
    # 8 ranks x max_batch_size 128, max_num_tokens 8192 each
    assert _dp_limits(TRTLLM_SERVER_SCHEDULER, 8, 128, 8192) == (1024, 65536, 8192)


def test_sglang_divides_the_server_limits_among_the_ranks():
    # --chunked-prefill-size 16384 at dp 8: 2048 per rank, 8 x 2048 = 16384 in all;
    # --max-running-requests 50 at dp 8: 50 // 8 = 6 per rank, 48 in all
    assert _dp_limits(SGLANG_SCHEDULER, 8, 50, 16384) == (48, 16384, 2048)
    # unset max running requests (KV-limited) stays unset
    assert _dp_limits(SGLANG_SCHEDULER, 8, None, 16384) == (None, 16384, 2048)


@pytest.mark.parametrize("sched", [VLLM_SCHEDULER, SGLANG_SCHEDULER, TRTLLM_SERVER_SCHEDULER])
def test_one_rank_changes_nothing(sched):
    assert _dp_limits(sched, 1, 256, 8192) == (256, 8192, None)


SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="vllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=8, max_chunk=2048, max_context=4096)


def _pol(budget: int, rank: int | None) -> Policy:
    return Policy(static=False, mixed=True, chunked=True, max_seqs=8, token_budget=budget,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, rank_tokens=rank)


def _lone(prompt: int) -> Requests:
    return Requests(send_s=np.array([0.0]), prompt_tokens=np.array([float(prompt)]),
                    output_tokens=np.array([3.0]), cached_tokens=np.zeros(1), concurrency=None)


def test_a_lone_prompt_is_chunked_at_its_rank_budget():
    # 1000 tokens, step budget 4096 over the ranks, 400 on its rank: chunks of 400, 400, 200
    # (contexts 0, 400, 800), the first token after the third
    hand = (COST.step_s(0, 0.0, [400.0], [0.0]) + COST.step_s(0, 0.0, [400.0], [400.0])
            + COST.step_s(0, 0.0, [200.0], [800.0], finishing=1))
    capped = simulate(COST, _lone(1000), _pol(4096, 400))
    assert capped.first_s[0] == pytest.approx(hand, rel=1e-9)
    whole = simulate(COST, _lone(1000), _pol(4096, None))
    assert whole.first_s[0] == pytest.approx(COST.step_s(0, 0.0, [1000.0], [0.0], finishing=1),
                                             rel=1e-9)


def test_a_bundled_prefill_pool_keeps_a_whole_prompt_per_step():
    # bundles of 4 (serving/disagg_bundle.py): the prefill pool's bundle prompt fits one step
    pol = bundled_policy(_pol(8192, 2048), 4, prompt=3000)
    assert (pol.token_budget, pol.rank_tokens, pol.max_seqs) == (3000, 3000, 2)


@pytest.mark.parametrize("engine,dp,expect", [("trtllm", 8, 512), ("vllm", 8, 512),
                                              ("sglang", 8, 512)])
def test_a_disagg_worker_batch_counts_all_its_ranks(engine, dp, expect):
    # serving/disagg._plan: the pool's max_batch (512 here) is the worker's over its DP ranks:
    # TensorRT-LLM and vLLM 8 ranks x (512 // 8 = 64 each) = 512; SGLang (512 // 8) x 8 = 512
    from perfmodel.serving.disagg import _plan
    sc, _, _ = resolve("deepseek-v3", "b200", weights="fp8", kv="fp8", engine=engine, tp=1,
                       dp=dp, ep=dp)
    pol, _, _, _ = _plan(sc, 64, prompt=1024, output=16, share=640, overhead=True,
                         max_batch=512)
    assert pol.max_seqs == expect
