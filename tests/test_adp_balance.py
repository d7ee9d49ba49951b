"""TensorRT-LLM attention-DP balance in the simulator (SchedulerSpec.adp_balance_timeout_iters,
Policy.adp_wait_iters / adp_ranks) and the InferenceX DeepSeek-R1 TensorRT-LLM recipe that sets
it (analysis/validation/serving_recipe_dsr1.py).

TensorRT-LLM PyTorch backend, PyExecutor._balance_adp_requests (attention DP with
attention_dp_config.enable_balance): if every rank has a free slot and a scheduled context
request, they run (batching_wait_iters 0 in the InferenceX scripts); otherwise the count of
waiting iterations goes up by one and the context requests are dropped from the batch, unless
the count reaches timeout_iters or some rank has no generation request, which releases them and
resets the count. The simulator schedules all DP ranks as one: "every rank has one" is taken as
dp scheduled prompts (new requests go to the least-loaded rank), "some rank has no generation
request" as fewer decode rows than ranks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
A_PROMPT, B_PROMPT = 500, 300
IMAX = "db-dump/2026-04-27 measured 2026-02-03 image nvcr.io/nvidia/tensorrt-llm/release:x"


def _pol(adp_iters: int = 0, ranks: int = 1) -> Policy:
    """In-flight batching (synchronous loop, room for everything) with the ADP balance."""
    return Policy(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=8192,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, adp_wait_iters=adp_iters, adp_ranks=ranks)


def _two_then_b(b_send_s: float) -> Requests:
    """A1 and A2 (500 tokens each) sent at t = 0, B (300 tokens, 5 outputs) later."""
    return Requests(send_s=np.array([0.0, 0.0, b_send_s]),
                    prompt_tokens=np.array([A_PROMPT, A_PROMPT, B_PROMPT], float),
                    output_tokens=np.array([200, 200, 5], float), cached_tokens=np.zeros(3),
                    concurrency=None)


def _ends(k: int) -> np.ndarray:
    """End times of the A1+A2 prefill step and of their first k decode steps (2 rows over
    2 x (500 + j) cached tokens: step_s takes the rows' summed context)."""
    t1 = COST.step_s(0, 0.0, [A_PROMPT, A_PROMPT], [0.0, 0.0], finishing=2)
    return t1 + np.concatenate([[0.0], np.cumsum([COST.step_s(2, 2.0 * (A_PROMPT + j))
                                                  for j in range(k)])])


def _joint(j: int) -> float:
    """The step that prefills B beside A1's and A2's decode after j decode steps."""
    return COST.step_s(2, 2.0 * (A_PROMPT + j), [B_PROMPT], [0.0], finishing=1)


def _b_at(step: int) -> float:
    ends = _ends(60)
    return float(ends[step] + 0.5 * (ends[step + 1] - ends[step]))


def test_a_lone_prompt_on_two_ranks_waits_the_timeout_by_hand():
    """B arrives during the 3rd decode step of A1 and A2. Off (or 1 rank: every rank has B):
    it rides in the step after. On 2 ranks with timeout 20, B is one prompt for two ranks while
    both run decodes: 20 decode steps run first (count 0 -> 20), then B rides."""
    ends = _ends(40)
    off = simulate(COST, _two_then_b(_b_at(2)), _pol())
    one_rank = simulate(COST, _two_then_b(_b_at(2)), _pol(20, ranks=1))
    two = simulate(COST, _two_then_b(_b_at(2)), _pol(20, ranks=2))
    assert off.first_s[2] == pytest.approx(ends[3] + _joint(3), rel=1e-9)
    assert one_rank.first_s[2] == pytest.approx(off.first_s[2], rel=1e-12)
    assert two.first_s[2] == pytest.approx(ends[23] + _joint(23), rel=1e-9)


def test_a_rank_without_decodes_releases_at_once():
    """Three ranks but two decode rows: some rank has no generation request, so TensorRT-LLM
    releases the context requests in the same iteration (`not all_ranks_have_gen_requests`)."""
    off = simulate(COST, _two_then_b(_b_at(2)), _pol())
    three = simulate(COST, _two_then_b(_b_at(2)), _pol(20, ranks=3))
    assert three.first_s[2] == pytest.approx(off.first_s[2], rel=1e-12)


@given(st.integers(1, 12), st.integers(1, 60), st.integers(0, 30))
def test_the_hold_never_exceeds_the_timeout(ranks, timeout, at):
    """B waits at most `timeout` decode steps beyond the off run, and never less than off."""
    ends = _ends(at + timeout + 2)
    off = simulate(COST, _two_then_b(_b_at(at)), _pol())
    on = simulate(COST, _two_then_b(_b_at(at)), _pol(timeout, ranks))
    assert on.first_s[2] >= off.first_s[2] - 1e-12
    assert on.first_s[2] <= ends[at + 1 + timeout] + _joint(at + 1 + timeout) + 1e-9


# --- the InferenceX DeepSeek-R1 TensorRT-LLM recipe -------------------------------------------
# dsr1_fp8_h200_trt.sh / dsr1_fp4_b200_trt.sh / dsr1_fp8_b200_trt.sh:
#   MAX_NUM_TOKENS=$(( (CONC + ISL + 64 + 63) / 64 * 64 )), at least 8192; attention_dp_config
#   timeout_iters 60 with enable_balance when DP_ATTENTION; no enable_chunked_prefill.

@pytest.mark.parametrize("prompt,conc,dp,budget", [
    (1024, 4, 1, 8192),            # (4 + 1024 + 127) // 64 * 64 = 1152 < 8192 -> 8192
    (8192, 64, 1, 8320),           # (64 + 8192 + 127) // 64 * 64 = 130 * 64 = 8320
    (8192, 256, 1, 8512),          # (256 + 8192 + 127) // 64 * 64 = 133 * 64 = 8512
    (1024, 128, 8, 8 * 8192),      # per attention-DP rank, eight ranks
])
def test_dsr1_trtllm_budget_by_hand(prompt, conc, dp, budget):
    r = recipe_for(IMAX, "trtllm", prompt, concurrency=conc, gpu="b200", output=1024, dp=dp,
                   model="deepseek-v3", weights="fp4")
    assert r.max_num_batched_tokens == budget
    assert r.chunked_prefill is False
    assert r.adp_balance_timeout_iters == (60 if dp > 1 else None)
    assert r.batch_wait_timeout_iters is None


def test_dsr1_fp8_b200_batch_waiting_only_where_the_script_sets_it():
    """DELAY_BATCHING in dsr1_fp8_b200_trt.sh: 1k/1k from CONC 64 (40 iterations, ratio 0.8);
    not at 1k/8k, not below 64, not fp4, not on H200, not under attention DP."""
    def r(**kw):
        base = dict(concurrency=64, gpu="b200", output=1024, dp=1, model="deepseek-v3",
                    weights="fp8")
        return recipe_for(IMAX, "trtllm", 1024, **{**base, **kw})
    on = r()
    assert (on.batch_wait_timeout_iters, on.batch_wait_max_tokens_ratio) == (40, 0.8)
    for off in (r(output=8192), r(concurrency=32), r(weights="fp4"), r(gpu="h200-sxm"),
                r(dp=8)):
        assert off.batch_wait_timeout_iters is None


def test_other_models_and_engines_keep_the_presets():
    for kw in (dict(model="llama-3.1-70b"), dict(model=None)):
        r = recipe_for(IMAX, "trtllm", 1024, concurrency=64, gpu="b200", output=1024, dp=8,
                       weights="fp8", **kw)
        assert (r.max_num_batched_tokens, r.adp_balance_timeout_iters) == (None, None)
    s = recipe_for(IMAX, "sglang", 1024, concurrency=64, gpu="b200", output=1024, dp=8,
                   model="deepseek-v3", weights="fp8")
    assert (s.max_num_batched_tokens, s.adp_balance_timeout_iters) == (None, None)


def test_dsr1_sglang_h200_prefill_budget():
    """dsr1_fp8_h200.sh: --chunked-prefill-size 32768 --max-prefill-tokens 32768 (SGLang's own
    default on a 141 GB GPU is an 8192-token chunk); the B200 scripts' 16384 is the default."""
    h = recipe_for(IMAX, "sglang", 1024, concurrency=4, gpu="h200-sxm", output=1024,
                   model="deepseek-v3", weights="fp8")
    assert h.max_num_batched_tokens == 32768 and h.chunked_prefill is None
    for kw in (dict(gpu="b200"), dict(model="qwen3.5-397b-a17b")):
        r = recipe_for(IMAX, "sglang", 1024, **{**dict(concurrency=4, gpu="h200-sxm",
                       output=1024, model="deepseek-v3", weights="fp8"), **kw})
        assert r.max_num_batched_tokens is None
