"""The lmdeploy-pytorch preset (core/engines_servers.py) and its step policy in the simulator
(SchedulerSpec.prefill_defer_share / prefill_interval / whole_prompts; Policy.defer_share /
defer_steps / whole_prompts; serving/sim_batch_wait.py _defer_held, scheduler.py _chunk).

Sources of the expected behaviour and values (InternLM/lmdeploy):
- lmdeploy/messages.py @0043859b and @9f134dc4, PytorchEngineConfig: max_batch_size None,
  cache_max_entry_count 0.8, prefill_interval 16, block_size 64, max_prefill_token_num 4096,
  eager_mode False; @9f134dc4 model_format "options: ['fp8']";
- lmdeploy/pytorch/engine/config_builder.py: max_batch_size None -> get_max_batch_size
  (lmdeploy/utils.py: 'a100' 384, 'h100'/'h800'/'h200' 1024, other CUDA devices 128);
- lmdeploy/pytorch/engine/inputs_maker.py @053945e0 do_prefill_default: no waiting -> decode
  (count reset); count >= prefill_interval -> prefill; waiting tokens >= max_prefill_token_num
  -> prefill; num_ready + num_running < max_batches x 0.5 -> prefill; else decode and count
  + 1; a forward that is not a decode resets the count. A prefill forward carries only the
  newly scheduled sequences;
- lmdeploy/pytorch/paging/scheduler.py @01eecaf6 _schedule_prefill: waiting sequences in
  arrival order while token_count + seq.num_token_ids <= max_prefill_token_num (the first
  always); a lone longer one is cut by the LongContextChunker into max_prefill_token_num
  pieces, each a forward of its own, nothing beside it.
So with max_batches 16 (threshold 8) and a running batch of 10, one 300-token arrival waits
16 decode steps; beside a batch of 7 it is prefilled at once.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cli import main
from perfmodel.core.engines import ENGINES, load_engine
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import usable_bytes
from perfmodel.core.resolve import resolve
from perfmodel.core.units import GB
from perfmodel.serving import stepcost
from perfmodel.serving.decode_epoch import POLICY_FIELDS
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="bf16", engine="lmdeploy-pytorch")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=4096, max_context=16384)
P = 300          # the running batch's prompts
OUT = 400        # the running batch's outputs: it outlives every case below


def _pol(share: float | None = 0.5, interval: int = 16, whole: bool = True) -> Policy:
    """LMDeploy-PyTorch-like: separate prefill steps, budget 4096, max_batches 16, room for all;
    a synchronous loop (overlap off) so that the step sequence is the policy's alone."""
    return Policy(static=False, mixed=False, chunked=True, max_seqs=16, token_budget=4096,
                  total_blocks=1_000_000, block_tokens=1, reserve_output=False,
                  request_overhead_s=0.0, defer_share=share,
                  defer_steps=interval if share else 0, whole_prompts=whole)


def _prefill(*prompts: float, ctx: float = 0.0, finishing: int | None = None) -> float:
    n = len(prompts)
    return COST.step_s(0, 0.0, [float(p) for p in prompts], [ctx] * n,
                       finishing=n if finishing is None else finishing)


def _batch_ends(n: int, k: int) -> np.ndarray:
    """End of the n-request prefill at t = 0 and of its first k decode steps (decode step j
    runs n rows of context P + j each)."""
    t0 = _prefill(*[P] * n)
    return t0 + np.concatenate([[0.0], np.cumsum([COST.step_s(n, n * (P + j) * 1.0)
                                                   for j in range(k)])])


def _trace(n: int, late: list[float], late_prompt: float, late_out: int = 5) -> Requests:
    m = len(late)
    return Requests(send_s=np.array([0.0] * n + late),
                    prompt_tokens=np.array([float(P)] * n + [late_prompt] * m),
                    output_tokens=np.array([OUT] * n + [late_out] * m, float),
                    cached_tokens=np.zeros(n + m), concurrency=None)


def _mid(ends: np.ndarray, j: int) -> float:
    """A time inside decode step j (between ends[j] and ends[j + 1])."""
    return float(0.5 * (ends[j] + ends[j + 1]))


# ------------------------------------------------------------------ the preset against its files
def test_preset_values_are_pytorch_engine_config_defaults():
    e = load_engine("lmdeploy-pytorch")
    s = e.scheduler
    assert s.max_num_batched_tokens == 4096             # max_prefill_token_num
    assert s.prefill_interval == 16                     # prefill_interval
    assert s.prefill_defer_share == 0.5                 # max_batches * 0.5
    assert s.whole_prompts and s.chunked_prefill        # LongContextChunker
    assert not s.mixed_prefill                          # prefill forwards of their own
    assert s.overlap_scheduler                          # prefetch_next_inputs
    assert e.kv_fraction_of == "free" and e.kv_memory_fraction == 0.8
    assert e.kv_block_tokens == 64                      # block_size
    assert e.decode_graph_max_batch is None             # graphs up to max_batches
    assert e.prefill_graph_max_tokens == 0              # prompt forwards eager
    assert e.supports_fp8 is True                       # model_format 'fp8'


@pytest.mark.parametrize("gpu, seqs", [("a100-sxm-80gb", 384), ("h100-sxm", 1024),
                                       ("h200-sxm", 1024), ("l40s", 128), ("mi300x", 128)])
def test_max_batch_follows_the_device_name(gpu, seqs):
    assert load_engine("lmdeploy-pytorch").scheduler.limits(load_gpu(gpu))[0] == seqs


def test_kv_share_is_taken_of_free_memory():
    """20 GB loaded: 20 GB + 0.8 x the rest ("percentage of FREE GPU memory")."""
    hw = load_gpu("a100-sxm-80gb")
    free = hw.memory_bytes - 20 * GB
    assert usable_bytes(hw, load_engine("lmdeploy-pytorch"), 20 * GB) == \
        pytest.approx(20 * GB + 0.8 * free)


def test_no_other_preset_carries_the_rule():
    for eid, e in ENGINES.items():
        s = e.scheduler
        if eid != "lmdeploy-pytorch":
            assert s.prefill_defer_share is None and s.prefill_interval is None
            assert s.whole_prompts is False


def test_the_decode_epoch_knows_the_new_fields():
    """A Policy field the epoch does not list would send every engine's iterations to the
    general loop (decode_epoch._modelled)."""
    assert {"defer_share", "defer_steps", "whole_prompts"} <= POLICY_FIELDS


# ------------------------------------------------------------------ hand-timed step sequences
def test_one_short_arrival_beside_a_large_batch_waits_16_decodes():
    ends = _batch_ends(10, 40)
    at = _mid(ends, 2)
    on = simulate(COST, _trace(10, [at], P), _pol())
    off = simulate(COST, _trace(10, [at], P), _pol(None))
    # visible when decode step 3 is planned; without the rule it is prefilled then
    assert off.first_s[10] == pytest.approx(ends[3] + _prefill(P), rel=1e-9)
    # 10 running >= 16 x 0.5, 300 tokens < 4096: decode steps 3..18 (count 1..16), then prefill
    assert on.first_s[10] == pytest.approx(ends[19] + _prefill(P), rel=1e-9)
    assert on.first_s[0] == off.first_s[0] == pytest.approx(ends[0], rel=1e-12)


def test_below_half_of_max_batches_the_arrival_is_prefilled_at_once():
    ends = _batch_ends(7, 40)
    tr = simulate(COST, _trace(7, [_mid(ends, 2)], P), _pol())
    assert tr.first_s[7] == pytest.approx(ends[3] + _prefill(P), rel=1e-9)


def test_a_shorter_interval_releases_the_prompt_sooner():
    ends = _batch_ends(10, 40)
    tr = simulate(COST, _trace(10, [_mid(ends, 2)], P), _pol(interval=4))
    assert tr.first_s[10] == pytest.approx(ends[7] + _prefill(P), rel=1e-9)


def test_waiting_tokens_at_the_budget_force_a_prefill_of_whole_prompts():
    """Two 2100-token arrivals beside 10 running: 4200 >= 4096 waiting tokens, so a prefill
    runs at once, but 2100 + 2100 > 4096 takes only the first; the second (2100 < 4096
    tokens, 11 running) then waits 16 decode steps of the 11 after that prefill reset the
    count."""
    L = 2100.0
    ends = _batch_ends(10, 40)
    at = _mid(ends, 2)
    tr = simulate(COST, _trace(10, [at, at], L, late_out=OUT), _pol())
    t1 = ends[3] + _prefill(L)
    assert tr.first_s[10] == pytest.approx(t1, rel=1e-9)
    decodes = sum(COST.step_s(11, 10.0 * (P + 3 + i) + L + i) for i in range(16))
    assert tr.first_s[11] == pytest.approx(t1 + decodes + _prefill(L), rel=1e-9)


def test_whole_prompts_are_packed_without_splitting():
    """Five 1000-token prompts at t = 0: 4 x 1000 fit 4096, the fifth waits for the next
    prefill forward (4 running < 8: at once); a splitting scheduler gives it 96 tokens in the
    first step and its other 904 in the next."""
    req = Requests(send_s=np.zeros(5), prompt_tokens=np.full(5, 1000.0),
                   output_tokens=np.full(5, 50.0), cached_tokens=np.zeros(5), concurrency=None)
    tr = simulate(COST, req, _pol())
    first4 = _prefill(1000, 1000, 1000, 1000)
    assert np.allclose(tr.first_s[:4], first4, rtol=1e-9)
    assert tr.first_s[4] == pytest.approx(first4 + _prefill(1000), rel=1e-9)
    split = simulate(COST, req, _pol(whole=False))
    assert split.first_s[4] != pytest.approx(tr.first_s[4], rel=1e-6)


def test_a_long_prompt_runs_alone_in_budget_chunks():
    """10000 tokens then a 300-token request, both at t = 0 on an idle engine: chunks of
    4096, 4096, 1808 (contexts 0, 4096, 8192), nothing beside them; the short one follows in
    a prefill of its own (1 running < 8)."""
    req = Requests(send_s=np.zeros(2), prompt_tokens=np.array([10000.0, float(P)]),
                   output_tokens=np.array([50.0, 5.0]), cached_tokens=np.zeros(2),
                   concurrency=None)
    tr = simulate(COST, req, _pol())
    long_first = (_prefill(4096, finishing=0) + _prefill(4096, ctx=4096, finishing=0)
                  + _prefill(1808, ctx=8192))
    assert tr.first_s[0] == pytest.approx(long_first, rel=1e-9)
    assert tr.first_s[1] == pytest.approx(long_first + _prefill(P), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 30), conc=st.integers(1, 40), prompt=st.integers(1, 6000),
       out=st.integers(1, 60), interval=st.integers(1, 40), share=st.floats(0.05, 1.0),
       room=st.integers(1, 4), bs=st.sampled_from([1, 16, 64]), gap=st.floats(0.0, 0.05),
       overlap=st.booleans())
def test_random_loops_finish_under_the_rule(n, conc, prompt, out, interval, share, room, bs,
                                            gap, overlap):
    """Closed loops (gap 0) and open ones (one arrival every `gap` s), with a KV pool of 1-4
    requests (preemption and recomputation), 64-token pages and the overlap loop."""
    send = None if gap == 0.0 else np.arange(n) * gap
    req = Requests(send_s=send, prompt_tokens=np.full(n, float(prompt)),
                   output_tokens=np.full(n, float(out)), cached_tokens=np.zeros(n),
                   concurrency=conc if send is None else None)
    blocks = room * math.ceil((prompt + out) / bs)
    pol = dataclasses.replace(_pol(share, interval), total_blocks=blocks, block_tokens=bs,
                              overlap=overlap)
    tr = simulate(COST, req, pol)
    assert np.all(np.isfinite(tr.first_s)) and np.all(np.isfinite(tr.finish_s))
    assert np.all(tr.first_s >= tr.send_s) and np.all(tr.finish_s >= tr.first_s)


# ------------------------------------------------------------------ API and CLI
def test_serve_api_gives_finite_points_above_half_of_max_batches():
    r = api.serve("llama-3.1-8b", "l40s", weights="bf16", engine="lmdeploy-pytorch",
                  prompt_tokens=512, output_tokens=64, concurrencies=[1, 100], num_requests=100)
    for p in r.points:
        assert p.fits and math.isfinite(p.ttft_p50_s) and p.ttft_p50_s > 0
        assert math.isfinite(p.tpot_p50_s) and p.tpot_p50_s > 0


def test_cli_serve_returns_points(capsys):
    assert main(["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine",
                 "lmdeploy-pytorch", "--prompt-tokens", "512", "--output-tokens", "64",
                 "--concurrency", "1,8", "--num-requests", "16", "--json"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    points = json.loads(text)["points"]
    assert len(points) == 2 and all(p["ttft_p50_s"] > 0 for p in points)


@pytest.mark.parametrize("args, needle", [
    (["--tp", "3"], "tp=3"),                            # 32 heads: not divisible
    (["--engine", "lmdeploy-pytorc"], "invalid choice")])
def test_cli_bad_combinations_are_one_line_errors(args, needle, capsys):
    base = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine",
            "lmdeploy-pytorch", "--prompt-tokens", "512", "--output-tokens", "64",
            "--concurrency", "1"]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert needle in err[-1]


def test_with_the_overlap_loop_the_arrival_is_seen_one_step_later():
    """engine_loop.py @0434b937 plans forward k + 1 (prefetch_next_inputs) before it reads
    forward k's output, so an arrival during decode step 2 is first seen when step 4 is
    planned: without the rule it is prefilled then; with it, after decode steps 4..19."""
    ends = _batch_ends(10, 40)
    at = _mid(ends, 2)
    on = simulate(COST, _trace(10, [at], P), dataclasses.replace(_pol(), overlap=True))
    off = simulate(COST, _trace(10, [at], P), dataclasses.replace(_pol(None), overlap=True))
    assert off.first_s[10] == pytest.approx(ends[4] + _prefill(P), rel=1e-9)
    assert on.first_s[10] == pytest.approx(ends[20] + _prefill(P), rel=1e-9)


@pytest.mark.parametrize("text, engine", [
    ("LMDeploy 0.7.2 (PyTorch engine)", "lmdeploy-pytorch"),
    ("lmdeploy --backend pytorch", "lmdeploy-pytorch"),
    ("LMDeploy v0.2.0 (TurboMind; benchmark/profile_generation.py static inference)", "lmdeploy")])
def test_framework_names_map_to_the_backend(text, engine):
    from perfmodel.analysis.validation.intervals import engine_family
    from perfmodel.analysis.validation.names import engine_id
    assert engine_id(text)[0] == engine
    assert engine_family(engine) == "serving"
