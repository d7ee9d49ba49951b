"""The serving simulator: step sequences worked by hand, identities with the one op list,
Little's law for static batching, physical bounds as properties, clean errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.core.errors import PerfModelError
from perfmodel.core.predict import step
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import roofline_floor_s
from perfmodel.serving import stepcost
from perfmodel.serving.scheduler import Policy, simulate
from perfmodel.serving.workload import Requests, ServeWorkload, read_trace, serve_workloads

SC, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8")
COST = stepcost.build(SC, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)


def _policy(**kw) -> Policy:
    base = dict(static=False, mixed=True, chunked=True, max_seqs=64, token_budget=1000,
                total_blocks=10_000, block_tokens=16, reserve_output=False, request_overhead_s=0.0)
    base.update(kw)
    return Policy(**base)


def _two(prompt=600.0, output=3.0) -> Requests:
    n = 2
    return Requests(send_s=None, prompt_tokens=np.full(n, prompt), output_tokens=np.full(n, output),
                    cached_tokens=np.zeros(n), concurrency=2)


# --------------------------------------------------------------------------- the surface


@pytest.mark.parametrize("d,ctx", [(1, 1000), (7, 1500), (40, 3000), (64, 512)])
def test_decode_step_matches_the_op_list(d, ctx):
    want = float(step(SC, d, 1, ctx).time_s)
    assert COST.step_s(d, d * ctx) == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("prompt", [100, 700, 2000])
def test_prefill_step_matches_the_op_list(prompt):
    want = float(step(SC, 1, prompt, 0, prefill=True).time_s)
    assert COST.step_s(0, 0.0, [prompt], [0.0], finishing=1) == pytest.approx(want, rel=0.01)


def test_decode_run_is_the_sum_of_its_steps():
    run = COST.decode_run_s(8, 1000.0, 5)
    each = [COST.step_s(8, 8 * (1000.0 + j)) for j in range(5)]
    assert run == pytest.approx(each, rel=1e-9)


# --------------------------------------------------------------------------- worked by hand


def test_mixed_chunked_two_requests_by_hand():
    """Budget 1000, two 600-token prompts, 3 output tokens (vLLM V1 order: decodes first,
    then running prompts, then waiting ones):
      1: A 600 + B 400 (A's first token)      2: A decodes (ctx 600), B 200 at ctx 400 (B first)
      3: A (601) + B (600) decode: A ends       4: B decodes alone (601): B ends"""
    tr = simulate(COST, _two(), _policy())
    t1 = COST.step_s(0, 0.0, [600, 400], [0, 0], finishing=1)
    t2 = t1 + COST.step_s(1, 600.0, [200], [400.0], finishing=1)
    t3 = t2 + COST.step_s(2, 1201.0)
    t4 = t3 + COST.step_s(1, 601.0)
    assert tr.first_s == pytest.approx([t1, t2], rel=1e-12)
    assert tr.finish_s == pytest.approx([t3, t4], rel=1e-12)
    assert tr.preemptions == 0


def test_separate_prefill_steps_by_hand():
    """SGLang order (prefill batches apart, prefill first): 1: A 600 + B 400; 2: B's last 200
    alone (A waits); 3: A, B decode (600, 600); 4: A, B decode (601, 601): both end."""
    tr = simulate(COST, _two(), _policy(mixed=False))
    t1 = COST.step_s(0, 0.0, [600, 400], [0, 0], finishing=1)
    t2 = t1 + COST.step_s(0, 0.0, [200], [400.0], finishing=1)
    t3 = t2 + COST.step_s(2, 1200.0)
    t4 = t3 + COST.step_s(2, 1202.0)
    assert tr.first_s == pytest.approx([t1, t2], rel=1e-12)
    assert tr.finish_s == pytest.approx([t4, t4], rel=1e-12)


def test_kv_exhaustion_preempts_the_newest_and_recomputes():
    """80 blocks of 16 tokens = 1280 tokens; two requests of 600 + 200 tokens need 1600:
    the second admitted is preempted, recomputed later, and every token still comes out."""
    req = _two(prompt=600.0, output=200.0)
    tr = simulate(COST, req, _policy(total_blocks=80, token_budget=2048))
    assert tr.preemptions >= 1
    assert np.all(np.isfinite(tr.finish_s))
    assert tr.finish_s[1] > tr.finish_s[0]


def test_static_batch_by_hand():
    """Static batching: both prompts prefilled together, 2 decode steps, returned together."""
    tr = simulate(COST, _two(), _policy(static=True, token_budget=None))
    t1 = COST.step_s(0, 0.0, [600, 600], [0, 0], finishing=2)
    t3 = t1 + float(np.sum(COST.decode_run_s(2, 600.0, 2)))
    assert tr.first_s == pytest.approx([t1, t1], rel=1e-12)
    assert tr.finish_s == pytest.approx([t3, t3], rel=1e-12)


# --------------------------------------------------------------------------- laws and bounds


@pytest.mark.parametrize("engine", ["hf-eager", "torch-compile"])
@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_static_batching_satisfies_littles_law(engine, ratio):
    """Closed loop, N a multiple of C: requests in the system = throughput x mean E2E = C."""
    r = api.serve("llama-3.1-8b", "h100-sxm", engine=engine, prompt_tokens=256, output_tokens=64,
                  concurrencies=[1, 3, 8], num_requests=24, range_ratio=ratio)
    for p in r.points:
        assert p.request_rate_rps * p.e2e_mean_s == pytest.approx(p.concurrency, rel=1e-9)


def _max_prefill_tok_s(sc, prompt: int, budget: int) -> float:
    """Fastest rate (prompt tokens per second) at which any prompt-only step of up to `budget`
    tokens prefills prompts of this length, from the op list: B prompts (B fractional: a
    share of a prompt's tokens and of its attention pairs) in one step of B x P rows."""
    B = np.geomspace(1.0 / prompt, max(budget / prompt, 1.0), 80)
    return float(np.max(B * prompt / np.asarray(step(sc, B, prompt, 0).time_s)))


engines = st.sampled_from(["vllm", "sglang", "trtllm", "llama-cpp", "tgi", "lmdeploy"])


@given(engines, st.integers(1, 48), st.integers(64, 4096), st.integers(2, 48))
def test_a_wave_waits_for_the_prompts_ahead(engine, C, P, O):
    """The k-th first token needs k whole prompts prefilled: TTFT p50 >= (C/2) P / r_max and
    p99 >= (C-1) P / r_max, r_max the fastest prefill rate of any step. 10% slack: the first
    chunk of a prompt has fewer attention pairs per token than the prompt's average."""
    r = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine=engine, prompt_tokens=P,
                  output_tokens=O, concurrencies=[C], num_requests=C)
    sc, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine=engine)
    _, budget = sc.engine.scheduler.limits(sc.hw)
    rate = _max_prefill_tok_s(sc, P, max(budget or P, P))
    p = r.points[0]
    assert p.ttft_p50_s >= 0.9 * 0.5 * C * P / rate
    assert p.ttft_p99_s >= 0.9 * (C - 1) * P / rate


@settings(max_examples=15)
@given(engines, st.integers(128, 2048), st.integers(2, 256))
def test_ttft_does_not_fall_as_a_wave_grows(engine, P, O):
    """One wave (N = C) of equal requests: TTFT p50 non-decreasing in C."""
    levels = [1, 2, 4, 8, 16, 32, 64]
    ttft = [api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine=engine, prompt_tokens=P,
                      output_tokens=O, concurrencies=[c], num_requests=c).points[0].ttft_p50_s
            for c in levels]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(ttft, ttft[1:])), ttft


@settings(max_examples=15)
@given(engines, st.integers(64, 2048), st.integers(2, 512), st.sampled_from([1, 8, 64, 256]))
def test_throughput_never_beats_the_roofline(engine, P, O, C):
    """Output tok/s <= max over batch d of d / roofline floor of a decode step at context P."""
    r = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine=engine, prompt_tokens=P,
                  output_tokens=O, concurrencies=[C], num_requests=2 * C)
    sc, _, _ = resolve("llama-3.1-8b", "h100-sxm", weights="fp8", engine=engine)
    d = np.arange(1, C + 1, dtype=float)
    best = float(np.max(d / np.asarray(roofline_floor_s(sc.model, sc.hw, sc.precision, d, 1, P))))
    assert r.points[0].output_tok_s_total <= best


@settings(max_examples=10)
@given(st.integers(0, 2**31), st.sampled_from(["closed", "rate"]), st.floats(0.5, 1.0))
def test_deterministic_for_a_seed(seed, kind, ratio):
    kw = dict(prompt_tokens=512, output_tokens=64, range_ratio=ratio, seed=seed, num_requests=40)
    kw.update(concurrencies=[8]) if kind == "closed" else kw.update(rate_rps=[5.0])
    a = api.serve("llama-3.1-8b", "h100-sxm", **kw)
    b = api.serve("llama-3.1-8b", "h100-sxm", **kw)
    assert a == b


def test_open_loop_light_load_is_one_request_alone():
    """At a trickle every request runs alone: TTFT ~ overhead + one prefill (op list)."""
    r = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", prompt_tokens=1024,
                  output_tokens=16, rate_rps=[0.01], num_requests=20)
    alone = SC.engine.per_request_overhead_s + float(step(SC, 1, 1024, 0, prefill=True).time_s)
    assert r.points[0].ttft_p50_s == pytest.approx(alone, rel=0.01)


def test_prefix_hits_skip_their_prefill():
    """A lone request with 3/4 of a 4096-token prompt cached prefills 1024 tokens over 3072
    cached ones (op list); under load the cached run is faster too."""
    alone = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", prompt_tokens=4096,
                      output_tokens=4, rate_rps=[0.01], num_requests=5, prefix_hit=0.75)
    want = SC.engine.per_request_overhead_s + float(step(SC, 1, 1024, 3072, prefill=True).time_s)
    assert alone.points[0].ttft_p50_s == pytest.approx(want, rel=0.01)
    kw = dict(prompt_tokens=4096, output_tokens=16, concurrencies=[16], num_requests=32)
    cold = api.serve("llama-3.1-8b", "h100-sxm", **kw).points[0]
    warm = api.serve("llama-3.1-8b", "h100-sxm", prefix_hit=0.75, **kw).points[0]
    assert warm.ttft_p50_s < cold.ttft_p50_s and warm.wall_s < cold.wall_s


def test_too_much_concurrency_says_why():
    r = api.serve("llama-3.1-70b", "h100-sxm", weights="fp8", tp=2, prompt_tokens=4096,
                  output_tokens=1024, concurrencies=[4, 4096], num_requests=64)
    assert r.points[0].fits
    assert not r.points[1].fits and "queue" in r.points[1].reason


def test_a_model_that_does_not_fit_gives_no_numbers():
    r = api.serve("llama-3.1-70b", "h100-sxm", prompt_tokens=512, output_tokens=64, concurrencies=[1])
    p = r.points[0]
    assert not p.fits and p.ttft_p50_s is None and "KV" in p.reason


# --------------------------------------------------------------------------- inputs


def test_trace_csv(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,5\n0.25,50,8\n")
    rows = read_trace(f)
    assert rows == ((0.0, 100, 10), (0.5, 200, 5), (0.25, 50, 8))
    r = api.serve("llama-3.1-8b", "h100-sxm", trace=str(f), prompt_tokens=None, output_tokens=None)
    assert r.points[0].num_requests == 3 and r.arrival == "trace"


@pytest.mark.parametrize("body,msg", [
    ("arrival_s,prompt_tokens,output_tokens\n0,abc,10\n", "non-numeric"),
    ("arrival_s,prompt_tokens,output_tokens\n-1,10,10\n", "arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,-3\n", "output_tokens"),
    ("arrival_s,prompt\n0,10\n", "missing column"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no rows"),
])
def test_bad_traces_are_one_line_errors(tmp_path, body, msg):
    f = tmp_path / "t.csv"
    f.write_text(body)
    with pytest.raises(PerfModelError, match=msg):
        read_trace(f)


def test_lengths_follow_the_range_ratio():
    wl = ServeWorkload(arrival="closed", prompt_tokens=1000, output_tokens=100, concurrency=4,
                       num_requests=2000, range_ratio=0.8, seed=3)
    req = wl.requests()
    assert req.prompt_tokens.min() >= 800 and req.prompt_tokens.max() <= 1000
    assert abs(req.prompt_tokens.mean() - 900) < 10     # uniform on [800, 1000]


def test_poisson_gaps_have_the_rate():
    wl = ServeWorkload(arrival="poisson", prompt_tokens=10, output_tokens=10, rate_rps=4.0,
                       num_requests=20000, seed=1)
    gaps = np.diff(wl.requests().send_s)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)


values = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=4), st.lists(st.integers(-3, 3), max_size=3))


@settings(max_examples=60)
@given(values, values, values, values, values, values)
def test_random_inputs_give_a_report_or_a_clean_error(conc, rate, prompt, output, ratio, hit):
    try:
        r = api.serve("llama-3.1-8b", "h100-sxm", concurrencies=conc, rate_rps=rate,
                      prompt_tokens=prompt, output_tokens=output, num_requests=8,
                      range_ratio=ratio if ratio is not None else 1.0,
                      prefix_hit=hit if hit is not None else 0.0)
    except PerfModelError as exc:
        assert "\n" not in str(exc)
        return
    for p in r.points:
        for k, v in p.model_dump(exclude={"timeline"}).items():
            assert not (isinstance(v, float) and not math.isfinite(v)), k


def test_exactly_one_arrival_kind():
    with pytest.raises(PerfModelError, match="exactly one"):
        serve_workloads(prompt_tokens=10, output_tokens=10, concurrencies=[1], rate_rps=[1.0])
    with pytest.raises(PerfModelError, match="rate_rps"):
        api.serve("llama-3.1-8b", "h100-sxm", rate_rps=[0.0])


@settings(max_examples=60)
@given(st.sampled_from(["closed", "poisson", "gamma", "trace", "other"]),
       st.one_of(st.none(), st.integers(-2, 10**7)), st.one_of(st.none(), st.integers(-2, 5000)),
       st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
       st.one_of(st.floats(-1, 2), st.just(float("nan"))),
       st.one_of(st.floats(-1, 2), st.just(float("nan"))))
def test_workload_validates_once_with_one_line(arrival, conc, n, rate, ratio, hit):
    try:
        wl = ServeWorkload.make(arrival=arrival, prompt_tokens=128, output_tokens=16,
                                concurrency=conc, num_requests=n, rate_rps=rate,
                                range_ratio=ratio, prefix_hit=hit,
                                trace=((0.0, 10, 2),) if arrival == "trace" else None)
    except PerfModelError as exc:
        assert "\n" not in str(exc)
        return
    req = wl.requests()
    assert req.prompt_tokens.size == wl.n_requests <= 200_000
    assert np.all(req.cached_tokens < req.prompt_tokens)


# --------------------------------------------------------------------------- server limits

def test_trtllm_server_budget_splits_a_wave_into_8192_token_steps():
    # trtllm-serve defaults (BuildConfig: max_num_tokens 8192, max_batch_size 2048), not the
    # trtllm-bench tuning (32768 / 4096): a wave of 16 x 1024-token prompts to the idle engine,
    # by hand: it wakes with one request (idle_takes_one) and prefills its 1024 tokens alone;
    # then its decode takes 1 token of the 8192 and prompt chunks the other 8191 (7 prompts +
    # 1023 tokens of the 9th); then the 7 new decodes take 7 and the rest, 1 + 7 x 1024 = 7169
    rep = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm",
                    prompt_tokens=1024, output_tokens=2, concurrencies=[16], num_requests=16,
                    timeline=True)
    assert (rep.max_num_batched_tokens, rep.max_num_seqs) == (8192, 2048)
    prefills = [p for p in rep.points[0].timeline.prefill_tokens if p > 0]
    assert prefills == [1024.0, 8191.0, 7169.0]
    # an explicit limit still wins over the server default
    big = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", engine="trtllm",
                    prompt_tokens=1024, output_tokens=2, concurrencies=[16], num_requests=16,
                    timeline=True, max_num_batched_tokens=32768)
    assert [p for p in big.points[0].timeline.prefill_tokens if p > 0] == [1024.0, 15360.0]


def test_pipeline_step_is_paced_by_the_micro_batch_holding_the_chunk():
    """pp=4: a 1000-token chunk beside 64 decode rows runs in ONE micro-batch, so the step's
    body is at least body(64/4 + 1000 rows), never body((64 + 1000)/4) (GPipe balance; the
    scheduler places a chunk in one micro-batch). Decode-only steps are unchanged."""
    from dataclasses import replace as _replace
    from perfmodel.core.specs import Deployment
    from perfmodel.serving.batching import heavy_prompt_rows
    sc = _replace(SC, dep=Deployment(pp=4))
    cost = stepcost.build(sc, max_rows=4096, max_seqs=64, max_chunk=2048, max_context=4096)
    with_chunk = cost.step_s(64, 64 * 1000.0, [1000], [0.0])
    assert with_chunk >= float(cost.body(16.0 + 1000.0))
    assert with_chunk > float(cost.body((64.0 + 1000.0) / 4)) + cost.overhead_s
    assert heavy_prompt_rows(4 * 1000.0, 1000.0, 4) == 1000.0      # four prompts, one each
    assert heavy_prompt_rows(1000.0, 1000.0, 4) == 1000.0          # one prompt: whole
    assert heavy_prompt_rows(3000.0, 1000.0, 1) == 3000.0          # no pipeline: the sum


def test_hybrid_model_state_is_per_sequence_not_per_token():
    """Qwen3.5-397B-A17B (3 of 4 layers gated-DeltaNet with a constant recurrent state per
    sequence): 64 requests of 1024 + 1024 tokens in fp8 on 8 x B200 hold ~50 GB of weights per
    GPU and fit by the memory model; the simulator's KV pool must agree (it counted the state
    once per token and queued every request beyond a handful)."""
    from perfmodel.core.memory import estimate_memory
    sc, _, _ = resolve("qwen3.5-397b-a17b", "b200", weights="fp8", kv="fp8", engine="sglang", tp=8)
    assert sc.model.num_linear_attention_layers > 0
    mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=64, context=2048,
                          engine=sc.engine, dep=sc.dep)
    rep = api.serve("qwen3.5-397b-a17b", "b200", weights="fp8", kv="fp8", engine="sglang", tp=8,
                    prompt_tokens=1024, output_tokens=1024, concurrencies=[64])
    assert mem.fits and rep.points[0].fits, rep.points[0].reason


@given(st.floats(1.0, 4000.0), st.integers(1, 4000), st.integers(1, 400))
def test_mixed_lengths_keep_the_mean_and_the_range(mean, longest, n):
    # the maximum-entropy spread on [1, longest] with a given mean: every draw in range,
    # the sample mean within rounding (0.5) plus the quantile grid's error of the mean
    from perfmodel.serving.workload import mixed_lengths
    if mean > longest:
        with pytest.raises(PerfModelError):
            mixed_lengths(mean, longest, n)
        return
    x = mixed_lengths(mean, longest, n)
    assert x.shape == (n,) and x.min() >= 1 and x.max() <= longest
    assert np.all(x == np.rint(x))
    if n >= 100:
        assert abs(x.mean() - mean) <= 0.5 + 0.02 * longest


def test_mixed_lengths_by_hand():
    from perfmodel.serving.workload import mixed_lengths
    # the midpoint mean gives the uniform spread: 1 + (i + 1/2)/4 x 399 = 50.9, 150.6, 250.4,
    # 350.1 on [1, 400], rounded
    assert sorted(mixed_lengths(200.5, 400, 4)) == [51.0, 151.0, 250.0, 350.0]
    # mean 100 of at most 400 leans short: the median is below the mean (exponential-like)
    x = mixed_lengths(100, 400, 1000)
    assert np.median(x) < 90 and x.max() > 300


def test_closed_loop_lengths_are_cycled_and_checked():
    wl = ServeWorkload.make(arrival="closed", concurrency=2, prompt_tokens=150, output_tokens=20,
                            num_requests=5, lengths=((100, 10), (200, 30)))
    req = wl.requests()
    assert req.prompt_tokens.tolist() == [100, 200, 100, 200, 100]
    assert req.output_tokens.tolist() == [10, 30, 10, 30, 10]
    assert (wl.longest_prompt, wl.longest_output) == (200, 30)
    for bad in (dict(lengths=((0, 5),)), dict(lengths=(), ), dict(arrival="poisson", rate_rps=1.0)):
        kw = dict(arrival="closed", concurrency=2, prompt_tokens=150, output_tokens=20,
                  num_requests=5, lengths=((100, 10),))
        kw.update(bad)
        with pytest.raises(PerfModelError, match="lengths"):
            ServeWorkload.make(**kw)
