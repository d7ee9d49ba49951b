"""`perfmodel serve` stays bounded and never escapes with a scheduler stall (fuzz findings):
- a preempted request's cached prefix held KV blocks while it waited, so waiting requests
  could fill the pool and nothing could start ("scheduler stalled" RuntimeError);
- without chunked prefill a preempted request recomputing prompt + output could exceed the
  token budget and never run again;
- steps priced at inf (absurd hardware numbers) made the clock NaN and the loop never ended;
- many requests, levels or decode steps took minutes: capped per call (simulate.MAX_SIM_REQUESTS,
  sim_state.MAX_SIM_STEPS, sim_state.MAX_PRICED_DECODE_STEPS); long timelines down-sampled.
Outcomes only: the fuzz test and scripts/fuzz_cli.py guard the time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fuzz_harness import assert_clean, call, new_pools
from perfmodel.core.resolve import resolve
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, StepBudget, simulate
from perfmodel.serving.simulate import (MAX_SIM_REQUESTS, MAX_TIMELINE_SEGMENTS, _downsample,
                                        simulate_points)
from perfmodel.serving.workload import Requests, ServeWorkload

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
POOLS = new_pools()
TINY = next(g for g in POOLS.files["gpu"] if g.endswith("gpu_tiny.yaml"))
HWDIR = POOLS.files["hwdir"][0]


def _policy(**kw) -> Policy:
    base = dict(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=1000,
                total_blocks=10_000, block_tokens=16, reserve_output=False, request_overhead_s=0.0)
    base.update(kw)
    return Policy(**base)


def test_preempted_requests_with_cached_prefixes_do_not_stall_the_pool():
    """Found by a random search of the scheduler: raised 'scheduler stalled' before."""
    req = Requests(send_s=np.array([0.0023635, 0.01087711, 0.01223551, 0.02191596]),
                   prompt_tokens=np.array([137.0, 74, 168, 80]),
                   output_tokens=np.array([206.0, 161, 108, 103]),
                   cached_tokens=np.array([123.0, 66, 151, 72]), concurrency=None)
    tr = simulate(COST, req, _policy(max_seqs=21, token_budget=1820, total_blocks=547,
                                     block_tokens=1))
    assert np.all(np.isfinite(tr.finish_s))
    assert tr.preemptions >= 1


def test_unchunked_recompute_past_the_budget_runs_alone():
    req = Requests(send_s=np.array([0.0076765, 0.02799225, 0.0447503]),
                   prompt_tokens=np.full(3, 702.0), output_tokens=np.full(3, 297.0),
                   cached_tokens=np.zeros(3), concurrency=None)
    tr = simulate(COST, req, _policy(mixed=False, chunked=False, max_seqs=61, token_budget=702,
                                     total_blocks=41, block_tokens=64))
    assert np.all(np.isfinite(tr.finish_s))
    assert tr.preemptions >= 1


def test_unchunked_prompt_over_the_budget_reports_fits_false():
    sched = SC.engine.scheduler.model_copy(update={"chunked_prefill": False,
                                                   "max_num_batched_tokens": 512,
                                                   "small_gpu_max_num_batched_tokens": 512})
    sc = replace(SC, engine=SC.engine.model_copy(update={"scheduler": sched,
                                                         "server_scheduler": None}))
    wl = ServeWorkload(arrival="closed", prompt_tokens=1000, output_tokens=10, concurrency=2)
    (pt,) = simulate_points(sc, [wl])
    assert not pt.fits and "token budget" in pt.reason


def test_step_budget_stops_with_one_clean_error():
    from perfmodel.core.errors import PerfModelError
    req = Requests(send_s=None, prompt_tokens=np.full(50, 500.0), output_tokens=np.full(50, 5.0),
                   cached_tokens=np.zeros(50), concurrency=4)
    with pytest.raises(PerfModelError, match="scheduler steps"):
        simulate(COST, req, _policy(token_budget=1), StepBudget(steps=100))
    with pytest.raises(PerfModelError, match="decode steps"):
        simulate(COST, req, _policy(), StepBudget(decode_steps=10))


def test_timeline_is_down_sampled_for_display():
    seg = np.column_stack([np.arange(10_000.0), np.ones(10_000), np.full(10_000, 2.0),
                           np.full(10_000, 3.0), np.zeros(10_000), np.arange(10_000.0),
                           np.linspace(0, 1, 10_000)])
    d = _downsample(seg, MAX_TIMELINE_SEGMENTS)
    assert d.shape == (MAX_TIMELINE_SEGMENTS, 7)
    assert d[:, 1].sum() == pytest.approx(10_000.0)          # durations kept
    assert d[:, 2].sum() == pytest.approx(20_000.0)          # steps kept
    assert np.all(d[:, 3] == 3.0) and d[-1, 5] == 9_999.0


# the fuzz harness's failing argv lists (files from fuzz_harness.new_pools); their
# --burstiness 1e-9 dropped, which a closed loop never used and now refuses
STALLED = [
    ["serve", "--max-num-seqs", "131072", "--tp", "1", "--seed", "1024", "--concurrency", "3,5",
     "--max-num-batched-tokens", "32768", "--ttft-slo-s", "0.5", "--kv", "fp16", "--hardware-dir",
     HWDIR, "--prompt-tokens", "1024", "--engine", "llama-cpp",
     "--weights", "fp4", "--output-tokens", "8", "--tpot-slo-s", "1", "--ep", "1", "--gpu", TINY,
     "--model", "llama-1-7b"],
    ["serve", "--model", "llama-1-7b", "--max-num-batched-tokens", "1", "--tp", "1", "--seed",
     "1024", "--engine", "llama-cpp", "--concurrency", "1,2,4", "--ttft-slo-s", "1", "--ep", "1",
     "--prompt-tokens", "1024", "--output-tokens", "8", "--weights", "fp16", "--hardware-dir",
     HWDIR, "--kv", "fp16", "--tpot-slo-s", "1e-9", "--gpu", TINY],
]


@pytest.mark.parametrize("argv", STALLED)
def test_inf_step_times_end_in_one_clean_line(argv):
    o = call(argv, limit_s=120.0, wall_s=300.0)
    assert_clean(argv, o)
    assert o.kind == "clean_error" and "not finite" in o.stderr


def test_too_many_requests_name_the_cap():
    argv = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "128",
            "--output-tokens", "128", "--rate", "3,5", "--num-requests", "131072", "--timeline",
            "--json"]
    o = call(argv, limit_s=120.0, wall_s=300.0)
    assert o.kind == "clean_error" and str(MAX_SIM_REQUESTS) in o.stderr


def test_long_decode_runs_hit_the_decode_cap_cleanly():
    argv = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "16",
            "--output-tokens", "100000", "--concurrency", "1", "--num-requests", "400", "--json"]
    o = call(argv, limit_s=120.0, wall_s=300.0)
    assert o.kind == "clean_error" and "decode steps" in o.stderr
