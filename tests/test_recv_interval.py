"""SGLang's --scheduler-recv-interval in the simulator (Policy.recv_interval_steps) and the
InferenceMAX recipes that set it (analysis/validation/serving_recipe.py).

SGLang SchedulerRecvSkipper (python/sglang/srt/managers/scheduler_recv_skipper.py): the
counter adds 1 per decode step and 1000 per prefill (extend) step and the scheduler polls
its request socket once the counter reaches the interval, then resets it. A request that
arrives during decodes is therefore prefilled at the first poll after it, every n steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_map import map_serving_row
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.analysis.validation.serving_table import rows_from_dicts
from perfmodel.core.engines import ENGINES
from perfmodel.core.resolve import resolve
from perfmodel.core.specs import SchedulerSpec
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests
from two_requests import A_PROMPT, B_PROMPT, a_steps, a_then_b

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
IMAX = "db-dump/2026-04-27 measured 2026-04-17 image lmsysorg/sglang:v0.5.9-cu130"


def _sglang(n: int) -> Policy:
    """SGLang's order: prompt-only steps, prefill first; room for everything."""
    return Policy(static=False, mixed=False, chunked=True, max_seqs=64, token_budget=16384,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, recv_interval_steps=n)


def test_arrival_waits_for_the_next_poll_by_hand():
    """A alone decodes; B arrives half-way through A's 3rd decode step. Interval 1: B is
    prefilled after that step (3 steps); interval 10: the prefill of A made the scheduler
    poll at once (counter 1000 >= 10, reset), so the next poll is after A's 10th step."""
    ends = a_steps(COST, 12)
    b_send = ends[2] + 0.5 * (ends[3] - ends[2])
    b_prefill = COST.step_s(0, 0.0, [B_PROMPT], [0.0], finishing=1)
    one = simulate(COST, a_then_b(b_send), _sglang(1))
    ten = simulate(COST, a_then_b(b_send), _sglang(10))
    assert one.first_s[1] == pytest.approx(ends[3] + b_prefill, rel=1e-9)
    assert ten.first_s[1] == pytest.approx(ends[10] + b_prefill, rel=1e-9)
    assert one.first_s[0] == ten.first_s[0] == pytest.approx(ends[0], rel=1e-12)


def test_an_idle_engine_takes_a_request_at_once():
    """Nothing running: SGLang's idle loop polls every iteration (the counter's None weight),
    so the interval does not delay a request that finds the engine idle."""
    req = a_then_b(10.0, a_out=3)        # A is long done when B arrives
    one, ten = (simulate(COST, req, _sglang(n)) for n in (1, 10))
    assert ten.first_s == pytest.approx(one.first_s, rel=1e-12)


@given(frac=st.floats(0.0, 0.999), at=st.integers(0, 50), n=st.integers(1, 40))
def test_poll_delay_is_at_most_the_interval(frac, at, n):
    """B's first token comes no earlier than with polling every step, and at most n - 1 decode
    steps later (it is seen within n steps of the step it arrived in)."""
    ends = a_steps(COST, 100)
    b_send = ends[at] + frac * (ends[at + 1] - ends[at])
    base = simulate(COST, a_then_b(b_send), _sglang(1)).first_s[1]
    got = simulate(COST, a_then_b(b_send), _sglang(n)).first_s[1]
    longest = float(np.max(np.diff(ends)))
    assert base <= got * (1 + 1e-12)
    assert got - base <= (n - 1) * longest * (1 + 1e-9)


def test_epochs_and_general_loop_agree_with_an_interval():
    req = Requests(send_s=None, prompt_tokens=np.full(12, 700.0), output_tokens=np.full(12, 60.0),
                   cached_tokens=np.zeros(12), concurrency=4)
    a = simulate(COST, req, _sglang(10), epochs=True)
    b = simulate(COST, req, _sglang(10), epochs=False)
    assert a.first_s == pytest.approx(b.first_s, rel=1e-12)
    assert a.finish_s == pytest.approx(b.finish_s, rel=1e-12)


# ------------------------------------------------------------------ where the interval is set

def test_presets_poll_every_iteration():
    """SGLang server_args.py: scheduler_recv_interval = 1; the other engines have no such rule."""
    assert all(e.scheduler.recv_interval_steps == 1 for e in ENGINES.values())
    with pytest.raises(ValueError):
        SchedulerSpec(recv_interval_steps=0)


@pytest.mark.parametrize("engine, conc, gpu, disagg, want", [
    # InferenceMAX Qwen3.5-397B B200 SGLang script: "Low latency (conc 4,8): recv interval 10;
    # max throughput (conc 16+): recv interval 30"; dsr1_fp4_b200_docker.sh: the same rule
    ("sglang", 4, "b200", False, 10), ("sglang", 8, "b200", False, 10),
    ("sglang", 15, "b200", False, 10), ("sglang", 16, "b200", False, 30),
    ("sglang", 128, "b300", False, 30),
    ("sglang", 4, "h200-sxm", False, None),   # dsr1_fp8_h200_slurm.sh sets no interval
    # disaggregated recipes are other scripts: Dynamo's slurm_jobs SGLang worker scripts pass
    # --scheduler-recv-interval 10 to both roles at every concurrency
    ("sglang", 4, "b200", True, 10), ("sglang", 512, "gb200", True, 10),
    ("sglang", 512, "h200-sxm", True, None),
    ("vllm", 4, "b200", False, None), ("trtllm", 64, "b200", False, None)])
def test_inferencemax_recipes_set_the_interval(engine, conc, gpu, disagg, want):
    r = recipe_for(IMAX, engine, 1024, concurrency=conc, gpu=gpu, disagg=disagg)
    assert r.recv_interval_steps == want
    # the recv interval is the only scheduler flag that differs (key()[3] is the CUDA-graph
    # decode size some scripts set: test_serving_recipe.py)
    assert (want is None) == (r.key()[:3] == recipe_for(IMAX, "vllm", 1024).key()[:3])


def test_aic_rows_keep_the_default():
    aic = "aic gap analysis measured 2026-03-20 image lmsysorg/sglang:v0.5.1"
    assert recipe_for(aic, "sglang", 1024, concurrency=4, gpu="b200").recv_interval_steps is None


def test_a_mapped_row_carries_the_interval_and_splits_its_group():
    # the file's row dsr1_b200_sglang_fp4_agg_1024x1024_c4_cfg202, and the same at C=32
    base = dict(id="t", backend="sglang", backend_version="0.5.9",
                model_path="deepseek-ai/DeepSeek-V3", system="b200_sxm", precision="fp4",
                mode="agg", isl="1024", osl="1024", gemm_quant_mode="nvfp4",
                moe_quant_mode="nvfp4", batch_size="4", tp_size="16", pp_size="1",
                attention_dp_size="1", moe_tp_size="4", moe_ep_size="4", silicon_ttft_ms="208",
                silicon_tpot_ms="9", source=IMAX)
    rows = rows_from_dicts("t", [base, {**base, "batch_size": "32"}])
    low, high = (map_serving_row(r) for r in rows)
    assert (low.recipe.recv_interval_steps, high.recipe.recv_interval_steps) == (10, 30)
    assert low.config() != high.config()
    assert any("--scheduler-recv-interval 10" in a for a in low.assumptions)
