"""Steps that carry prompt tokens run outside the serving engines' CUDA graphs (issue 13):
EngineProfile.prefill_graph_max_tokens and eager_launch_s, one rule in core/roofline.issue_s,
seen the same by predict (TTFT), the serving step cost and the simulator.

Golden numbers: SGLang PR #13094 (Llama-3.1-8B-Instruct-FP8, TP8, 1024-token random prompts,
concurrency 1, sglang.bench_serving): mean TTFT 29.97 ms eager, 19.66 ms with piecewise CUDA
graphs for prefill, so running that prefill eagerly costs 10.3 ms more. vLLM V1 captures
piecewise graphs up to min(2 x max_num_seqs, 512) tokens (vllm/config/vllm.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError
from perfmodel.core.host_cost import prompt_issue_s
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import issue_s, step_time
from perfmodel.serving import stepcost


def _graphed(sc):
    """The same scenario priced as if every step replayed a graph (the pre-issue-13 rule)."""
    return replace(sc, engine=sc.engine.model_copy(update={"eager_launch_s": 0.0}))


def _ttft(sc, prompt=1024):
    return float(np.asarray(api.request_times(sc, 1, prompt, 16).ttft_s))


def test_sglang_eager_prefill_costs_what_pr_13094_measured():
    sc, _, _ = resolve("llama-3.1-8b", "h200-sxm", weights="fp8", tp=8, engine="sglang")
    extra = _ttft(sc) - _ttft(_graphed(sc))
    # 10.3 ms measured (the parameter comes from it: this checks kernels x launch - GPU holds)
    assert extra == pytest.approx(10.3e-3, abs=3e-3)


def test_decode_steps_stay_graph_replays():
    for name in ("sglang", "trtllm", "vllm"):
        e = ENGINES[name]
        assert issue_s(e, 1000.0) == pytest.approx(e.graph_launch_s)
        assert issue_s(e, 1000.0, 1024.0) == pytest.approx(1000.0 * e.eager_launch_s)


def test_vllm_graphs_prompt_steps_up_to_512_tokens():
    e = ENGINES["vllm"]
    assert issue_s(e, 1000.0, 512.0) == pytest.approx(e.graph_launch_s)
    assert issue_s(e, 1000.0, 513.0) == pytest.approx(1000.0 * 14e-6)


def test_eager_engines_are_unchanged():
    for name in ("hf-eager", "torch-eager", "torch-graph", "torch-compile", "llama-cpp"):
        e = ENGINES[name]
        assert e.eager_launch_s == 0.0
        assert issue_s(e, 500.0, 4096.0) == pytest.approx(500.0 * e.launch_s + e.graph_launch_s)


def test_an_eager_moe_prefill_pays_gpu_plus_issue_at_any_length():
    # SGLang and TRT-LLM run the issue in series with the GPU work (eager_issue_overlap False,
    # engines.py): a short prompt and a long one both pay GPU + kernels x eager_launch_s
    sc, _, _ = resolve("deepseek-v3", "b200", weights="fp4", kv="fp8", tp=8, engine="trtllm")
    assert not sc.engine.eager_issue_overlap
    args = (sc.model, sc.hw, sc.precision, sc.engine, sc.eff, np.array([1.0, 1.0]),
            np.array([256.0, 32768.0]), np.array([0.0, 0.0]))
    est = step_time(*args, dep=sc.dep, attention=sc.attention, prefill=True)
    # kernels x eager_launch_s plus the MLA/MoE blocks' sourced launches (tests/test_eager_blocks)
    issue = (float(np.max(est.kernels)) * sc.engine.eager_launch_s
             + prompt_issue_s(sc.model, sc.engine, sc.attention))
    gpu = np.asarray(est.gpu_s)
    assert gpu[0] < issue < gpu[1]          # 256 tokens: more issue than GPU work; 32K: less
    t = np.asarray(est.time_s)
    assert t == pytest.approx(gpu + issue + sc.engine.cpu_overhead_per_step_s, rel=1e-6)
    # an engine that overlaps the two (plain eager PyTorch, no host sync) pays the larger one only
    overlap = sc.engine.model_copy(update={"eager_issue_overlap": True})
    est = step_time(*args[:3], overlap, *args[4:], dep=sc.dep, attention=sc.attention,
                    prefill=True)
    host = sc.engine.host_per_seq_s                 # one sequence's host work
    assert np.asarray(est.time_s) == pytest.approx(
        np.maximum(gpu, issue + host) + sc.engine.cpu_overhead_per_step_s, rel=1e-6)


SC, _, _ = resolve("qwen3-32b", "h100-sxm", weights="fp8", kv="fp8", tp=2, engine="trtllm")
COST = stepcost.build(SC, max_rows=4096, max_seqs=128, max_chunk=2048, max_context=4096)
GRAPHED = stepcost.build(_graphed(SC), max_rows=4096, max_seqs=128, max_chunk=2048,
                         max_context=4096)


@given(d=st.integers(0, 128), chunk=st.integers(1, 2048), ctx=st.floats(0, 3000))
def test_a_step_with_a_prompt_chunk_never_costs_less_than_its_eager_issue(d, chunk, ctx):
    t = COST.step_s(d, d * ctx, [float(chunk)], [0.0], 1)
    assert t >= COST.eager_cpu_s + SC.engine.cpu_overhead_per_step_s - 1e-12
    assert t >= GRAPHED.step_s(d, d * ctx, [float(chunk)], [0.0], 1) - 1e-12
    if d:        # the same rows without the chunk: a graph replay, no eager issue
        assert COST.step_s(d, d * ctx) == pytest.approx(GRAPHED.step_s(d, d * ctx))


def test_the_simulator_prices_a_lone_prefill_as_predict_does():
    # concurrency 1: each request runs alone, so its TTFT is the request overhead plus one
    # eager prefill step, as api.request_times has it (one rule, core/roofline.issue_s)
    q = api.make_query(model="qwen3-32b", gpu="h100-sxm", weights="fp8", kv="fp8", tp=2,
                       engine="trtllm", prompt_tokens=1024, output_tokens=32)
    rep = api.serve(q, concurrencies=[1])
    sc = api.resolve(q)[0]
    want = _ttft(sc)      # 5 ms request overhead + 34 ms GPU + 13.5 ms issue + 0.25 ms
    assert rep.points[0].ttft_p50_s == pytest.approx(want, rel=0.02)
    # a 256-token prompt pays its 519 kernels x 26 us = 13.5 ms of issue too
    assert _ttft(sc, 256) - _ttft(_graphed(sc), 256) > 5e-3


def test_serve_with_a_query_refuses_lengths_it_would_ignore():
    q = api.make_query(model="llama-3.1-8b", gpu="h100-sxm")
    with pytest.raises(PerfModelError, match="lengths"):
        api.serve(q, concurrencies=[1], prompt_tokens=2048)


# --------------------------------------------------------------------------- decode batches
# above the largest captured graph (SGLang server_args.py cuda_graph_max_bs: H200 256 at
# tp < 4, 512 at tp >= 4, B200 512; TRT-LLM DecodeCudaGraphConfig default 128; vLLM 512)


def test_sglang_graph_sizes_follow_its_server_args():
    from perfmodel.core.hardware import load_gpu
    e = ENGINES["sglang"]
    assert e.graph_max_batch(load_gpu("h200-sxm").memory_bytes, 1) == 256
    assert e.graph_max_batch(load_gpu("h200-sxm").memory_bytes, 8) == 512
    assert e.graph_max_batch(load_gpu("h100-sxm").memory_bytes, 2) == 256
    assert e.graph_max_batch(load_gpu("b200").memory_bytes, 1) == 512
    assert e.graph_max_batch(load_gpu("a100-sxm-40gb").memory_bytes, 1) == 32
    assert ENGINES["trtllm"].graph_max_batch(load_gpu("b200").memory_bytes, 8) == 128
    assert ENGINES["vllm"].graph_max_batch(load_gpu("h100-sxm").memory_bytes, 1) == 512


def test_a_decode_batch_past_the_graphs_pays_the_eager_issue():
    sc, _, _ = resolve("llama-3.1-8b", "h200-sxm", weights="fp8", kv="fp8", engine="sglang")
    B = np.array([256.0, 257.0])
    est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, B, 1.0, 1000.0,
                    dep=sc.dep, attention=sc.attention)
    kernels = float(np.max(est.kernels))
    issue = np.asarray(est.cpu_s) - np.asarray(est.host_s) - sc.engine.cpu_overhead_per_step_s
    assert issue[0] == pytest.approx(sc.engine.graph_launch_s)          # 256: one replay
    eager = kernels * sc.engine.eager_launch_s
    assert issue[1] == pytest.approx(eager)                             # 257: ~391 x 26 us
    t = np.asarray(est.time_s)
    gpu = np.asarray(est.gpu_s)
    host = 257 * sc.engine.host_per_seq_s
    # the eager issue is exposed beyond what the replayed 256-row step's GPU time covers
    assert t[1] - t[0] >= eager + host - gpu[0] - 1e-9 and t[1] - t[0] > 0.25 * eager
    # an eager decode step keeps the max (the series rule is measured on prompt steps only)
    assert t[1] == pytest.approx(max(gpu[1], eager + host) + sc.engine.cpu_overhead_per_step_s)


def test_the_decode_fast_path_sees_the_same_graph_limit():
    sc, _, _ = resolve("llama-3.1-8b", "h200-sxm", weights="fp8", kv="fp8", engine="sglang")
    cost = stepcost.build(sc, max_rows=1024, max_seqs=512, max_chunk=1024, max_context=2048)
    for d in (200, 256, 257, 400):
        run = cost.decode_run_s(d, 1000.0, 3)
        each = [cost.step_s(d, d * (1000.0 + j)) for j in range(3)]
        assert run == pytest.approx(each, rel=1e-9)
    # past the captured batches the ~391 kernels are issued eagerly (~10 ms at 26 us each, the
    # test above), partly hidden behind the GPU's ~11 ms
    eager = 391 * sc.engine.eager_launch_s
    assert cost.step_s(257, 257e3) - cost.step_s(256, 256e3) > 0.25 * eager


def test_the_steady_state_curve_prices_prefill_off_the_graphs_too():
    # serving/batching.py (the quick estimate) takes the same issue rule: its prefill at C=1 on
    # SGLang (separate prefill steps) is predict's eager prefill step, not a graph replay
    from perfmodel.core.predict import step
    from perfmodel.serving.batching import curve, limits
    sc, _, _ = resolve("qwen3-32b", "h100-sxm", weights="fp8", kv="fp8", tp=2, engine="sglang")
    cv = curve(sc, [1.0], 256, 64, limits(sc, 256, 64))
    eager = float(step(sc, 1, 256, 0.0, prefill=True).time_s)
    graphed = float(step(_graphed(sc), 1, 256, 0.0, prefill=True).time_s)
    assert eager - graphed > 5e-3                    # a 256-token prompt is host-bound
    assert float(cv.prefill_s[0]) == pytest.approx(eager, rel=1e-9)
