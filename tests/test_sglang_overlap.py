"""SGLang's overlap scheduler in the simulator (SchedulerSpec.overlap_scheduler, Policy.overlap)
and the configurations where SGLang turns it off.

SGLang Scheduler.event_loop_overlap (python/sglang/srt/managers/scheduler.py; the default loop
since v0.4, LMSYS blog 2024-12-04, off only with --disable-overlap-schedule): each iteration
receives requests, schedules and launches batch k, then processes batch k-1's results, blocking
until batch k-1 finishes. The next iteration's receive therefore runs as batch k starts on the
GPU, and a request that arrives while batch k runs joins batch k+2: one step later than in the
synchronous event_loop_normal. server_args.py turns the overlap off for hybrid Mamba/GDN
models under the default mamba no_buffer strategy with the radix cache on
(_handle_mamba_radix_cache) and for pp_size > 1 (_handle_pipeline_parallelism); disaggregated
prefill workers run their own overlap loop (event_loop_overlap_disagg_prefill)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.core.engines import ENGINES
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import _policy, on_server
from perfmodel.serving.workload import ServeWorkload
from two_requests import B_PROMPT, a_steps, a_then_b, disagg_with_overlap_off

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="sglang")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
B_PREFILL = COST.step_s(0, 0.0, [B_PROMPT], [0.0], finishing=1)


def _sglang(overlap: bool, n: int = 1) -> Policy:
    """SGLang's order: prompt-only steps, prefill first; room for everything."""
    return Policy(static=False, mixed=False, chunked=True, max_seqs=64, token_budget=16384,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, recv_interval_steps=n, overlap=overlap)


def test_the_sglang_preset_overlaps_and_says_where_from():
    sched = ENGINES["sglang"].scheduler
    assert sched.overlap_scheduler and "event_loop_overlap" in sched.source
    wl = ServeWorkload.make(arrival="poisson", rate_rps=5.0, prompt_tokens=500,
                            output_tokens=50, num_requests=8)
    assert _policy(on_server(SC), wl)[0].overlap is True


def test_arrival_during_a_decode_step_by_hand():
    """A alone decodes; B arrives half-way through A's 3rd decode step (ends[2]..ends[3]).
    Synchronous loop: at ends[3] the scheduler sees B and runs its prompt-only step, so
    TTFT_B = ends[3] + prefill(B) - send. Overlap: the step after ends[3] (A's 4th decode) was
    scheduled when the 3rd began, without B; B's prompt runs after it:
    TTFT_B = ends[4] + prefill(B) - send, one decode step (ends[4] - ends[3]) more."""
    ends = a_steps(COST, 12)
    b_send = ends[2] + 0.5 * (ends[3] - ends[2])
    sync = simulate(COST, a_then_b(b_send), _sglang(False))
    over = simulate(COST, a_then_b(b_send), _sglang(True))
    assert sync.first_s[1] - b_send == pytest.approx(ends[3] + B_PREFILL - b_send, rel=1e-9)
    assert over.first_s[1] - b_send == pytest.approx(ends[4] + B_PREFILL - b_send, rel=1e-9)
    assert sync.first_s[0] == over.first_s[0] == pytest.approx(ends[0], rel=1e-12)


def test_with_a_recv_interval_the_overlap_only_costs_the_last_step_before_a_poll():
    """--scheduler-recv-interval 10 with the overlap: A's prefill made SGLang poll at once, the
    next poll plans the step after A's 10th decode and happens as the 10th begins (ends[9]).
    B sent during A's 3rd step is seen there, as without overlap (ends[10] + prefill); B sent
    during the 10th step misses it and waits for the poll 10 steps later (ends[20] + prefill)."""
    ends = a_steps(COST, 24)
    early = ends[2] + 0.5 * (ends[3] - ends[2])
    late = ends[9] + 0.5 * (ends[10] - ends[9])
    for b_send, want_sync, want_over in ((early, ends[10], ends[10]), (late, ends[10], ends[20])):
        sync = simulate(COST, a_then_b(b_send), _sglang(False, 10))
        over = simulate(COST, a_then_b(b_send), _sglang(True, 10))
        assert sync.first_s[1] == pytest.approx(want_sync + B_PREFILL, rel=1e-9)
        assert over.first_s[1] == pytest.approx(want_over + B_PREFILL, rel=1e-9)


@given(frac=st.floats(0.0, 0.999), at=st.integers(0, 40), n=st.integers(1, 12))
def test_overlap_delays_by_at_most_one_poll_interval(frac, at, n):
    """With the overlap B starts no earlier than without it (same interval), at most n of A's
    decode steps later (it misses at most one poll)."""
    ends = a_steps(COST, 80)
    b_send = ends[at] + frac * (ends[at + 1] - ends[at])
    base = simulate(COST, a_then_b(b_send), _sglang(False, n)).first_s[1]
    got = simulate(COST, a_then_b(b_send), _sglang(True, n)).first_s[1]
    longest = float(np.max(np.diff(ends)))
    assert base <= got * (1 + 1e-12)
    assert got - base <= n * longest * (1 + 1e-9)


def test_hybrid_linear_attention_models_run_synchronously():
    """Qwen3.5 (Gated DeltaNet layers): no_buffer + radix cache -> disable_overlap_schedule."""
    wl = ServeWorkload.make(arrival="poisson", rate_rps=5.0, prompt_tokens=500,
                            output_tokens=50, num_requests=8)
    hyb, _, _ = resolve("qwen3.5-397b-a17b", "b200", engine="sglang", tp=8)
    assert hyb.model.num_linear_attention_layers > 0
    assert _policy(on_server(hyb), wl)[0].overlap is False
    trt, _, _ = resolve("qwen3.5-397b-a17b", "b200", engine="trtllm", tp=8)
    assert _policy(on_server(trt), wl)[0].overlap is True       # an SGLang rule only


def test_pipeline_parallel_runs_synchronously():
    sched = ENGINES["sglang"].scheduler
    assert sched.overlaps(SC.model, pp=1) and not sched.overlaps(SC.model, pp=2)
    assert ENGINES["trtllm"].scheduler.overlaps(SC.model, pp=2)


def test_disaggregated_sglang_prefill_workers_keep_the_overlap():
    """Unlike TensorRT-LLM's context servers, an SGLang prefill worker runs
    event_loop_overlap_disagg_prefill: its prefill pool prices differently from one whose
    scheduler has the overlap off."""
    a, b, _ = disagg_with_overlap_off(on_server(SC))
    assert a.ttft_p50_s > b.ttft_p50_s


def _qwen35_row(source: str) -> dict:
    return dict(id="t", backend="sglang", backend_version="0.5.9",
                model_path="Qwen/Qwen3.5-397B-A17B", system="b200_sxm", precision="fp8",
                mode="agg", isl="1024", osl="1024", gemm_quant_mode="fp8", moe_quant_mode="fp8",
                batch_size="8", tp_size="8", pp_size="1", attention_dp_size="1",
                moe_tp_size="1", moe_ep_size="1", silicon_ttft_ms="100", silicon_tpot_ms="10",
                source=source)


def test_inferencemax_qwen35_rows_run_without_radix_cache_so_they_overlap():
    """InferenceX qwen3.5_fp8_{b200,b300,h200}.sh pass --disable-radix-cache: the no_buffer
    rule does not apply and the overlap stays on; an AIConfigurator row keeps the preset's
    radix cache and runs synchronously."""
    from perfmodel.analysis.validation.serving_map import map_serving_row
    from perfmodel.analysis.validation.serving_predict import _with_recipe
    from perfmodel.analysis.validation.serving_table import rows_from_dicts

    imax = "db-dump/2026-04-27 measured 2026-04-18 image lmsysorg/sglang:v0.5.10.post1-cu130"
    wl = ServeWorkload.make(arrival="closed", concurrency=8, prompt_tokens=1024,
                            output_tokens=64, num_requests=16)
    hyb, _, _ = resolve("qwen3.5-397b-a17b", "b200", engine="sglang", tp=8)
    got = {}
    for name, src in (("imax", imax), ("aic", "aic gap analysis")):
        t = map_serving_row(rows_from_dicts("t", [_qwen35_row(src)])[0])
        got[name] = t.recipe.radix_cache
        got[name + "_overlap"] = _policy(_with_recipe(hyb, t.recipe), wl)[0].overlap
    assert got == dict(imax=False, imax_overlap=True, aic=None, aic_overlap=False)
