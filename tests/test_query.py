"""The one Query and api.evaluate (issue 16): validated once, one typed result, and the
vectorized call agrees with the scalar one entry by entry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from perfmodel import api
from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import Query, make_query

BASE = dict(model="llama-3.1-8b", gpu="h100-sxm")


@pytest.mark.parametrize("bad", [dict(batch=0), dict(batch=2.5), dict(batch=True),
                                 dict(prompt_tokens="512"), dict(context_tokens=-1),
                                 dict(rate_rps=float("inf")), dict(ttft_slo_s=0.0),
                                 dict(attention="xformers"), dict(prompt=512)])
def test_a_bad_field_is_one_clean_error_naming_it(bad):
    with pytest.raises(PerfModelError) as exc:
        make_query(**BASE, **bad)
    assert next(iter(bad)) in str(exc.value) and "\n" not in str(exc.value)


def test_the_query_is_frozen_and_copies_revalidate():
    q = make_query(**BASE, batch=4)
    with pytest.raises(Exception):
        q.batch = 8  # type: ignore[misc]
    assert q.with_(batch=8).batch == 8 and q.batch == 4
    with pytest.raises(PerfModelError):
        q.with_(batch=-1)
    assert q.context == q.prompt_tokens          # the reported step's KV length defaults to the prompt


def test_every_field_documents_itself():
    assert all(f.description for f in Query.model_fields.values())


def test_vectorized_evaluation_equals_scalar_evaluations_entry_by_entry():
    q = make_query(**BASE, weights="fp8", prompt_tokens=1024, output_tokens=64)
    batches = np.array([1, 4, 64, 4096])
    vec = api.evaluate(q, batch=batches)
    assert vec.vectorized and vec.memory is None and vec.decode_ops == []
    for i, b in enumerate(batches):
        one = api.evaluate(q.with_(batch=int(b)))
        for k in ("ttft_s", "tpot_s", "e2e_s", "output_tok_s_total", "mbu", "roofline_floor_s"):
            assert math.isclose(vec.__dict__[k][i], getattr(one, k), rel_tol=1e-12), k
        assert bool(vec.fits[i]) == one.fits
        assert vec.bound[i] == one.bound


def test_a_scalar_evaluation_carries_both_breakdowns_and_the_memory():
    ev = api.evaluate(make_query(**BASE, batch=8))
    assert ev.prefill_ops and ev.decode_ops
    # identity: the op shares of each step sum to the whole step's GPU time
    assert math.isclose(sum(o.share for o in ev.prefill_ops), 1.0, rel_tol=1e-9)
    assert math.isclose(sum(o.share for o in ev.decode_ops), 1.0, rel_tol=1e-9)
    assert ev.fits == (ev.memory.total_bytes <= ev.memory.capacity_bytes)
    # prefill of 512 tokens x 8 sequences moves far more FLOPs than one decode step
    assert sum(o.flops for o in ev.prefill_ops) > 100 * sum(o.flops for o in ev.decode_ops)


def test_vectorized_entries_past_the_context_do_not_fit_instead_of_raising():
    q = make_query(**BASE, output_tokens=128)
    ev = api.evaluate(q, prompt_tokens=np.array([512, 10**6]))
    assert bool(ev.fits[0]) and not bool(ev.fits[1])
    with pytest.raises(PerfModelError, match="context"):
        api.evaluate(q.with_(prompt_tokens=10**6))


@pytest.mark.parametrize("arrays", [dict(batch=np.array([])), dict(batch=np.array([1.5])),
                                    dict(batch=np.array([0, 1])), dict(tp=np.array([1, 2])),
                                    dict(prompt_tokens=np.array([np.nan]))])
def test_bad_arrays_are_clean_errors(arrays):
    with pytest.raises(PerfModelError):
        api.evaluate(make_query(**BASE), **arrays)


@given(st.sampled_from(["llama-3.1-8b", "qwen2.5-14b", "mixtral-8x7b", "nope"]),
       st.sampled_from(["h100-sxm", "a10g", "h200-sxm", "x"]),
       st.sampled_from(["bf16", "fp8", "int4", "fp4", "int3", ""]),
       st.one_of(st.integers(-2, 10**5), st.floats(allow_nan=True), st.none(), st.text(max_size=3)),
       st.one_of(st.integers(-1, 200_000), st.just(2.0)),
       st.lists(st.integers(-1, 10**6), max_size=4),
       st.sampled_from([1, 2, 3, 8]), st.one_of(st.none(), st.integers(-1, 300)))
def test_evaluate_returns_a_finite_result_or_a_clean_error(model, gpu, w, batch, prompt, arr, tp,
                                                           conc):
    try:
        q = make_query(model=model, gpu=gpu, weights=w, batch=batch, prompt_tokens=prompt, tp=tp,
                       concurrency=conc)
        ev = api.evaluate(q, **({"output_tokens": np.array(arr)} if arr else {}))
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for k in api.METRIC_FIELDS:
        v = np.asarray(getattr(ev, k), dtype=float)
        assert np.all(np.isfinite(v)) and np.all(v >= 0), k
    if ev.steady_state is not None:
        assert all(math.isfinite(p.tpot_s) for p in ev.steady_state.points)
    if ev.serving is not None and ev.serving.fits:
        assert math.isfinite(ev.serving.ttft_p50_s) and ev.serving.ttft_p50_s > 0


# ------------------------------------------------------------------ sensitivity (analysis)

def test_sensitivity_moves_tpot_the_way_the_physics_says():
    from perfmodel.analysis.sensitivity import sensitivity

    s = sensitivity(make_query(**BASE, batch=1), "tpot_s")
    by = {v.name: v for v in s.variations}
    # decode at batch 1 streams the weights: more bandwidth is faster, narrower weights too
    assert by["Memory bandwidth"].high < s.base < by["Memory bandwidth"].low
    assert by["Weight precision"].low < s.base < by["Weight precision"].high
    assert by["Batch"].low is None and by["Batch"].high >= s.base


@given(st.sampled_from(list(api.METRIC_FIELDS) + ["nope", ""]), st.integers(-1, 5000),
       st.sampled_from(["bf16", "fp8", "int4-g64", "fp32", "int3"]))
def test_sensitivity_is_a_typed_result_or_a_clean_error(metric, batch, w):
    from perfmodel.analysis.sensitivity import Sensitivity, sensitivity

    try:
        s = sensitivity(make_query(**BASE, batch=batch, weights=w), metric)
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(s, Sensitivity) and math.isfinite(s.base)
    assert all(v.low is None or math.isfinite(v.low) for v in s.variations)


# ------------------------------------------------------------------ CLI flags from the Query

def test_cli_flags_come_from_the_query_and_old_spellings_still_work(capsys):
    import json

    from perfmodel.cli import build_parser, main

    help_text = build_parser()._subparsers._group_actions[0].choices["predict"].format_help()
    assert Query.model_fields["prompt_tokens"].description.split()[0] in help_text
    base = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "4", "--json"]
    outs = []
    for argv in (["--prompt-tokens", "300", "--output-tokens", "20", "--context-tokens", "900"],
                 ["--prompt", "300", "--output", "20", "--context", "900"]):
        assert main(base + argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert outs[0]["prompt_tokens"] == 300 and outs[0]["context_tokens"] == 900


def test_efficiency_fractions_are_named_as_fractions_and_old_keys_still_load(tmp_path):
    from perfmodel.core.profile import load_profile

    new = dict(mem_bw_fraction=0.8, gemm_max=0.7, gemm_half_m=16, attn_compute=0.5,
               attn_mem=0.8, kernel_s=1e-6, link_fraction=0.7)
    f = tmp_path / "old.yaml"
    f.write_text("gpu: h100-sxm\nefficiency: {mem_bw: 0.8, gemm_max: 0.7, gemm_half_m: 16, "
                 "attn_compute: 0.5, attn_mem: 0.8, kernel_s: 1.0e-6, link: 0.7}\n")
    old = load_profile(f).efficiency
    assert old.mem_bw_fraction == 0.8 and old.link_fraction == 0.7
    # a profile that does not state the fused-MoE kernel fraction takes the H200-measured 0.465
    assert old.model_dump(exclude={"source"}) == {**new, "gemm_half_m": 16.0, "gemm_by_dtype": {},
                                                  "grouped_kernel_fraction": 0.465,
                                                  "grouped_gemm_max": None,
                                                  "attn_compute_fa2": None,
                                                  "linear_attn_chunk_max": None,
                                                  # and the card's own sustained-load clock
                                                  "sustained_clock_fraction": None,
                                                  # no row-parallel shard law unless stated
                                                  "shard_depth_half_k": ()}
    # a copy under an old name changes the renamed field, never silently nothing
    assert old.model_copy(update={"mem_bw": 0.5}).mem_bw_fraction == 0.5


def test_old_sizing_links_in_milliseconds_load_as_seconds():
    from perfmodel.webapp.state import from_query

    scn, notes = from_query({"size_ttft_ms": "750", "size_tpot_ms": "40"})
    assert not notes
    assert scn.size_ttft_slo_s == pytest.approx(0.75) and scn.size_tpot_slo_s == pytest.approx(0.04)


def test_a_concurrency_in_the_query_brings_the_simulated_point_and_the_steady_state():
    from perfmodel.serving.curve import serve_curve

    q = make_query(**BASE, weights="fp8", prompt_tokens=512, output_tokens=128, concurrency=16,
                   ttft_slo_s=1.0, tpot_slo_s=0.05, num_requests=64)
    ev = api.evaluate(q)
    sim = api.serve("llama-3.1-8b", "h100-sxm", weights="fp8", prompt_tokens=512,
                    output_tokens=128, concurrencies=[16], ttft_slo_s=1.0, tpot_slo_s=0.05,
                    num_requests=64)
    assert ev.serving == sim.points[0] and ev.serving.concurrency == 16
    assert ev.serving.goodput_rps > 0
    # 16 sequences decode together: no faster than the roofline floor of a one-sequence step
    assert ev.serving.tpot_p50_s >= ev.roofline_floor_s
    direct = serve_curve("llama-3.1-8b", "h100-sxm", weights="fp8", prompt=512, output=128,
                         concurrencies=[16], ttft_slo_s=1.0, tpot_slo_s=0.05)
    assert ev.steady_state == direct
    none = api.evaluate(q.with_(concurrency=None))
    assert none.serving is None and none.steady_state is None


def test_a_rate_or_a_trace_in_the_query_is_simulated(tmp_path):
    q = make_query(**BASE, prompt_tokens=256, output_tokens=32, rate_rps=2.0, num_requests=20)
    ev = api.evaluate(q)
    assert ev.serving.rate_rps == 2.0 and ev.serving.num_requests == 20
    assert ev.steady_state is None and ev.serving.ttft_p50_s > 0
    rows = ((0.0, 100, 10), (0.5, 300, 20))
    tr = api.evaluate(make_query(**BASE, trace=rows))
    assert tr.serving.num_requests == 2 and tr.serving.e2e_p50_s > tr.serving.ttft_p50_s
    with pytest.raises(PerfModelError, match="exactly one"):
        api.evaluate(q.with_(concurrency=4))


def test_evaluate_on_a_given_scenario_is_the_same_path():
    from dataclasses import replace

    q = make_query(**BASE, weights="fp8", batch=4, prompt_tokens=512, output_tokens=64)
    sc, _, _ = api.resolve(q)
    same = api.evaluate(q, scenario=sc)
    ev = api.evaluate(q)
    for k in api.METRIC_FIELDS:
        assert getattr(same, k) == getattr(ev, k), k
    # the engine's CPU time per decode step adds to every step (predict.py): TPOT moves by it
    slow = sc.engine.model_copy(update={"cpu_overhead_per_step_s":
                                        sc.engine.cpu_overhead_per_step_s + 1e-3})
    moved = api.evaluate(q, scenario=replace(sc, engine=slow))
    assert moved.tpot_s - ev.tpot_s == pytest.approx(1e-3, rel=1e-6)
    with pytest.raises(PerfModelError, match="resolved Scenario"):
        api.evaluate(q, scenario="vllm")


junk = st.one_of(st.none(), st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=3), st.booleans())


@given(level=st.sampled_from(["concurrency", "rate_rps", "trace"]), value=junk,
       num_requests=st.one_of(st.none(), st.integers(-1, 12)), ratio=junk, hit=junk,
       burst=junk, seqs=junk, as_query=st.booleans())
def test_serving_queries_give_a_simulated_point_or_a_clean_error(level, value, num_requests,
                                                                ratio, hit, burst, seqs,
                                                                as_query):
    fields = {level: value if level != "trace" else ((0.0, 64, 8), (0.1, 32, value))}
    knobs = dict(num_requests=num_requests, range_ratio=ratio, prefix_hit=hit, burstiness=burst,
                 max_num_seqs=seqs)
    knobs = {k: v for k, v in knobs.items() if v is not None}
    try:
        q = make_query(**BASE, prompt_tokens=128, output_tokens=16, **fields, **knobs)
        points = api.serve(q).points if as_query else [api.evaluate(q).serving]
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    if not q.has_serving_workload:          # no load in the Query: nothing simulated
        assert points == [None]
        return
    assert len(points) == 1
    p = points[0]
    if p.fits:
        assert 0 < p.ttft_p50_s <= p.e2e_p50_s and math.isfinite(p.output_tok_s_total)
