"""TensorRT-LLM scheduling in the simulator: the overlap scheduler (SchedulerSpec.overlap_scheduler,
Policy.overlap) and AIConfigurator's deployments without chunked prefill (Recipe.chunked_prefill).

TensorRT-LLM PyTorch backend, PyExecutor._executor_loop_overlap: each host iteration fetches
new requests (blocking only when nothing is active), schedules and launches step n+1, and only
then processes step n's outputs (docs features/overlap-scheduler.md: "At step n, the system
launches GPU computation for step n+1 without waiting for CPU tasks ... from step n"). The fetch
for step n+1 happens when step n begins on the GPU, so a request that arrives while step n runs
starts in step n+2: one step later than in a synchronous loop ("introduces one extra decoding
step", same doc). An idle engine blocks on its queue and schedules a request at once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.analysis.validation.serving_predict import _with_recipe
from perfmodel.analysis.validation.serving_recipe import recipe_for
from perfmodel.core.engines import ENGINES
from perfmodel.core.resolve import resolve
from perfmodel.core.specs import SchedulerSpec
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.simulate import _policy, on_server
from perfmodel.serving.workload import Requests, ServeWorkload
from two_requests import A_PROMPT, B_PROMPT, a_steps, a_then_b, disagg_with_overlap_off

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)


def _trtllm(overlap: bool) -> Policy:
    """In-flight batching: prompts ride with the running decodes; room for everything."""
    return Policy(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=8192,
                  total_blocks=100_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, overlap=overlap)


def _joint(a_decodes: int) -> float:
    """The step that prefills B beside A's next decode, after A decoded `a_decodes` steps."""
    return COST.step_s(1, float(A_PROMPT + a_decodes), [B_PROMPT], [0.0], finishing=1)


def test_arrival_during_a_step_joins_one_step_later_by_hand():
    """A alone decodes; B arrives half-way through A's 3rd decode step. Synchronous loop: B's
    prompt rides in the step right after it (A's 4th decode). Overlap: that step was scheduled
    when the 3rd began, without B; B rides in the next one (A's 5th decode)."""
    ends = a_steps(COST, 12)
    b_send = ends[2] + 0.5 * (ends[3] - ends[2])
    sync = simulate(COST, a_then_b(b_send), _trtllm(False))
    over = simulate(COST, a_then_b(b_send), _trtllm(True))
    assert sync.first_s[1] == pytest.approx(ends[3] + _joint(3), rel=1e-9)
    assert over.first_s[1] == pytest.approx(ends[4] + _joint(4), rel=1e-9)
    assert sync.first_s[0] == over.first_s[0] == pytest.approx(ends[0], rel=1e-12)


def test_an_idle_engine_takes_a_request_at_once():
    """Nothing running: _fetch_new_requests blocks on the queue (timeout None when no request
    is active), so the overlap does not delay a request that finds the engine idle."""
    req = a_then_b(10.0, a_out=3)        # A is long done when B arrives
    sync, over = (simulate(COST, req, _trtllm(o)) for o in (False, True))
    assert over.first_s == pytest.approx(sync.first_s, rel=1e-12)


@given(frac=st.floats(0.0, 0.999), at=st.integers(0, 50))
def test_overlap_delays_an_arrival_by_one_decode_step(frac, at):
    """B arriving during A's decodes starts exactly one of A's decode steps later than in a
    synchronous loop (never earlier, never by more than the longest such step)."""
    ends = a_steps(COST, 100)
    b_send = ends[at] + frac * (ends[at + 1] - ends[at])
    base = simulate(COST, a_then_b(b_send), _trtllm(False)).first_s[1]
    got = simulate(COST, a_then_b(b_send), _trtllm(True)).first_s[1]
    longest = float(np.max(np.diff(ends)))
    assert base < got
    assert got - base <= longest * (1 + 1e-6)


def test_closed_loop_epochs_match_the_general_loop_and_finite():
    """A closed loop with the overlap gives the same first tokens with decode epochs as in the
    general loop alone (the epochs keep the one-step-late admission) and gives a finite time to every request, no earlier than the synchronous loop's mean."""
    req = Requests(send_s=None, prompt_tokens=np.full(24, 700.0), output_tokens=np.full(24, 60.0),
                   cached_tokens=np.zeros(24), concurrency=8)
    a = simulate(COST, req, _trtllm(True), epochs=True)
    b = simulate(COST, req, _trtllm(True), epochs=False)
    s = simulate(COST, req, _trtllm(False))
    assert a.first_s == pytest.approx(b.first_s, rel=1e-12)
    assert np.all(np.isfinite(a.finish_s))
    assert np.mean(a.first_s - a.send_s) >= np.mean(s.first_s - s.send_s)


# ------------------------------------------------------------------ where it is set

def test_only_the_pytorch_backend_of_trtllm_overlaps():
    """TensorRT-LLM docs (overlap-scheduler.md): "Enabled by default"; the 0.x C++ runtime
    (trtllm-trt) has no such loop; vLLM's async scheduling is on by default since 0.14.0
    (vllm#27614); SGLang's event_loop_overlap since v0.4 (tests/test_sglang_overlap.py);
    LMDeploy's PyTorch engine loop prefetches the next forward (engine_loop.py @0434b937,
    tests/test_lmdeploy_pytorch.py); the other presets model none."""
    assert ENGINES["vllm"].scheduler.overlap_scheduler and ENGINES["sglang"].scheduler.overlap_scheduler
    trt = ENGINES["trtllm"]
    assert trt.scheduler.overlap_scheduler and trt.server_scheduler.overlap_scheduler
    old = ENGINES["trtllm-trt"]
    assert not old.scheduler.overlap_scheduler and not old.server_scheduler.overlap_scheduler
    others = [e for k, e in ENGINES.items()
              if not k.startswith("trtllm") and k not in ("vllm", "sglang", "lmdeploy-pytorch")
              and e.scheduler]
    assert ENGINES["lmdeploy-pytorch"].scheduler.overlap_scheduler
    assert others and not any(e.scheduler.overlap_scheduler for e in others)
    assert SchedulerSpec().overlap_scheduler is False


def test_the_policy_carries_the_engine_flag():
    wl = ServeWorkload(arrival="closed", prompt_tokens=1024, output_tokens=128, concurrency=4)
    pol, _, _ = _policy(on_server(SC), wl)
    assert pol.overlap is True
    old, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm-trt")
    assert _policy(on_server(old), wl)[0].overlap is False     # the 0.x C++ runtime: none


# ------------------------------------------------------------------ a wave without chunking

def test_unchunked_wave_of_prompts_by_hand():
    """AIConfigurator's TRT-LLM deployments: max_num_tokens = 512 + ISL + 1500 rounded up to 32
    (rule_plugin/trtllm.rule; 3040 at ISL 1024) and no chunked prefill (template default).
    Eight 1024-token prompts at once: a step holds the running decodes (one token each) and
    then whole prompts while they fit, 2 + 2048 <= 3040 < 2 + 3072, so 2 prompts a step:
    4 steps, first tokens in pairs at their ends. The overlap does not delay them (they were
    all waiting when each step was planned)."""
    n, isl, budget = 8, 1024, 3040
    req = Requests(send_s=np.zeros(n), prompt_tokens=np.full(n, float(isl)),
                   output_tokens=np.full(n, 50.0), cached_tokens=np.zeros(n), concurrency=None)
    pol = Policy(static=False, mixed=True, chunked=False, max_seqs=64, token_budget=budget,
                 total_blocks=100_000, block_tokens=1, reserve_output=False,
                 request_overhead_s=0.0, overlap=True)
    tr = simulate(COST, req, pol)
    t, want = 0.0, []
    for k in range(4):
        # decoders: the 2j prompts done before, each 1024 + (steps since its prefill) long
        ctx = sum(2 * (isl + (k - 1 - j)) for j in range(k))
        t += COST.step_s(2 * k, float(ctx), [isl, isl], [0.0, 0.0], finishing=2)
        want += [t, t]
    assert tr.first_s == pytest.approx(np.array(want), rel=1e-9)
    chunked = simulate(COST, req, Policy(**{**pol.__dict__, "chunked": True}))
    # with chunks the first step also carries 992 tokens of the 3rd prompt: the first pair waits
    assert chunked.first_s[0] == pytest.approx(COST.step_s(0, 0.0, [isl, isl, budget - 2 * isl],
                                                           [0.0, 0.0, 0.0], finishing=2), rel=1e-9)
    assert chunked.first_s[0] > tr.first_s[0]


def test_aic_trtllm_recipe_runs_prompts_whole():
    """AIConfigurator's TRT-LLM template: enable_chunked_prefill default false; its vLLM rows and
    InferenceMAX's TRT-LLM rows (flags not in the file) keep the preset's default."""
    aic = recipe_for("aic gap analysis", "trtllm", 1024)
    assert aic.chunked_prefill is False and aic.max_num_batched_tokens == 3040
    assert recipe_for("aic gap analysis", "vllm", 1024).chunked_prefill is None
    imax = "db-dump/2026-04-27 measured 2026-02-03 image nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"
    assert recipe_for(imax, "trtllm", 1024, gpu="b200").chunked_prefill is None
    assert aic.key() != aic.model_copy(update={"chunked_prefill": None}).key()
    sched = _with_recipe(SC, aic).engine.scheduler
    assert (sched.chunked_prefill, sched.max_num_batched_tokens, sched.overlap_scheduler) == (False, 3040, True)
    assert _with_recipe(SC, recipe_for(imax, "trtllm", 1024, gpu="b200")).engine.scheduler.chunked_prefill


def test_disaggregated_context_servers_run_without_the_overlap_scheduler():
    """TensorRT-LLM's context servers run with `disable_overlap_scheduler: True` ("not yet
    supported in disaggregated context server architectures", examples/disaggregated/README.md),
    so a prefill pool of the `trtllm` preset prices exactly as one whose scheduler has the
    overlap off, while its decode pool keeps it."""
    a, b, c = disagg_with_overlap_off(on_server(SC))
    assert a.ttft_p50_s == b.ttft_p50_s and a.ttft_p90_s == b.ttft_p90_s
    assert c.tpot_p50_s != a.tpot_p50_s or c.ttft_p50_s != a.ttft_p50_s  # decode keeps it
