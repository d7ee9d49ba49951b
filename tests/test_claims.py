"""Claim checker: scenarios, attribution identities, Shapley, explain, inverse, bad input
(random input and the CLI: test_claims_fuzz.py)."""

import importlib
import itertools
import json
import math

import pytest

from perfmodel import api
from perfmodel.analysis import speculative
from perfmodel.analysis.claims import (Attribution, Evaluation, Explanation, Inverse, Scenario, attribute,
                              evaluate, explain, fill, load_scenario, parse_claim, solve)
from perfmodel.analysis.claims.attribute import check_pair
from perfmodel.analysis.claims.scenario import oriented, revise
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import PerfModelError, SpecFileError

BASE = Scenario(name="8B bf16 vllm", model="llama-3.1-8b", gpu="h100-sxm", engine="vllm",
                batch=1, prompt_tokens=512, output_tokens=128)
HF = Scenario(name="8B fp16 hf", model="llama-3.1-8b", gpu="h100-sxm", weights="fp16",
              activations="fp16", kv="fp16", engine="hf-eager", batch=1, prompt_tokens=256,
              output_tokens=128)
MANY = revise(HF, name="many levers", weights="fp8", activations="fp8", kv="fp8",
              engine="vllm", batching="continuous", batch=8, paged_kv=True,
              speculative={"method": "draft", "draft_model": "llama-3.2-1b"},
              routing={"small_model": "llama-3.2-1b", "share": 0.3})
METRICS = ["decode_tok_s_per_user", "ttft_s", "e2e_s", "output_tok_s_total", "usd_per_mtok"]


def value(sc, metric):
    return evaluate(sc).value(metric)


# --------------------------------------------------------------------------- attribution


@pytest.mark.parametrize("metric", METRICS)
def test_ordered_and_shapley_factors_multiply_to_the_total(metric):
    att = attribute(HF, MANY, metric)
    assert isinstance(att, Attribution) and len(att.factors) == 8
    assert math.prod(s.factor for s in att.factors) == pytest.approx(att.total, rel=1e-9)
    assert math.prod(att.shapley.values()) == pytest.approx(att.total, rel=1e-9)
    assert set(att.shapley) == {s.lever for s in att.factors}
    # the total is the plain ratio of the two scenarios, oriented so better is > 1
    assert att.total == pytest.approx(oriented(metric, value(MANY, metric), value(HF, metric)))


def test_shapley_beyond_the_exact_limit_is_sampled_and_still_exact_in_product(monkeypatch):
    mod = importlib.import_module("perfmodel.analysis.claims.attribute")
    monkeypatch.setattr(mod, "EXACT_SHAPLEY_MAX", 3)
    att = attribute(HF, MANY, "e2e_s")
    assert "random orders" in att.shapley_method
    assert math.prod(att.shapley.values()) == pytest.approx(att.total, rel=1e-9)


def test_shapley_is_the_geometric_mean_of_the_factor_over_all_orders():
    improved = revise(BASE, name="3 levers", weights="fp8", activations="fp8", batch=64, tp=2)
    levers = [s.lever for s in attribute(BASE, improved, "output_tok_s_total").factors]
    assert sorted(levers) == ["activations", "batching", "parallelism", "weights"]
    logs = {n: [] for n in levers}
    for order in itertools.permutations(levers):
        att = attribute(BASE, improved, "output_tok_s_total", order=list(order))
        assert [s.lever for s in att.factors] == list(order)
        for s in att.factors:
            logs[s.lever].append(math.log(s.factor))
    shap = attribute(BASE, improved, "output_tok_s_total").shapley
    for n in levers:
        assert shap[n] == pytest.approx(math.exp(sum(logs[n]) / len(logs[n])), rel=1e-9)


def test_a_scenario_against_itself_is_one_with_no_levers():
    att = attribute(MANY, MANY, "decode_tok_s_per_user")
    assert att.total == 1.0 and att.factors == [] and att.shapley == {}
    # defaults written out explicitly are the same scenario
    filled, notes = fill(BASE)
    assert notes and attribute(BASE, filled, "e2e_s").factors == []


def test_quantization_gains_shrink_at_large_batch():
    """Levers interact: fp8 weights matter at batch 1 (memory-bound), less at batch 256."""
    improved = revise(BASE, name="fp8, batch 256", weights="fp8", activations="fp8", batch=256)
    metric = "output_tok_s_total"
    first = attribute(BASE, improved, metric, order=["weights", "activations", "batching"])
    last = attribute(BASE, improved, metric, order=["batching", "weights", "activations"])
    at_b1 = first.factors[0]
    at_b256 = last.factors[1]
    assert at_b1.lever == at_b256.lever == "weights"
    assert at_b1.factor > 1.3 and at_b1.regime_before == "memory"
    assert at_b256.factor < at_b1.factor


def test_regimes_name_the_bound_before_and_after():
    att = attribute(HF, revise(HF, name="vllm", engine="vllm"), "decode_tok_s_per_user",
                    order=["engine"])
    # the engine's batching policy and KV layout are levers of their own
    assert [s.lever for s in att.factors] == ["engine", "batching", "paged_kv"]
    step = att.factors[0]
    assert step.lever == "engine" and step.regime_before == "overhead"
    assert step.regime_after in ("memory", "compute")


def test_lower_is_better_metrics_are_inverted_and_said_so():
    att = attribute(HF, MANY, "ttft_s")
    assert "baseline / improved" in att.direction
    assert att.total == pytest.approx(value(HF, "ttft_s") / value(MANY, "ttft_s"))


# --------------------------------------------------------------------------- scenario physics


def test_kv_cache_off_recomputes_the_prefix():
    """Without a cache the single decode step after the prompt is a prefill of P+2 tokens."""
    P = 300
    off = evaluate(revise(BASE, kv_cache=False, prompt_tokens=P, output_tokens=2))
    on = evaluate(revise(BASE, prompt_tokens=P + 2, output_tokens=1))
    overhead = ENGINES["vllm"].per_request_overhead_s
    assert off.value("tpot_s") == pytest.approx(on.value("ttft_s") - overhead, rel=1e-6)
    # O(n^2): without the cache the time per token grows with the length, with it barely
    def tpot(kv_cache, n):
        return value(revise(BASE, kv_cache=kv_cache, prompt_tokens=50, output_tokens=n), "tpot_s")
    assert tpot(False, 4000) / tpot(False, 1000) > 2.5
    assert tpot(True, 4000) / tpot(True, 1000) < 1.3


def test_routing_is_the_request_weighted_mixture():
    small = revise(BASE, name="1b", model="llama-3.2-1b")
    none = evaluate(revise(BASE, routing={"small_model": "llama-3.2-1b", "share": 0.0}))
    everything = evaluate(revise(BASE, routing={"small_model": "llama-3.2-1b", "share": 1.0}))
    half = evaluate(revise(BASE, routing={"small_model": "llama-3.2-1b", "share": 0.5}))
    big_e2e, small_e2e = value(BASE, "e2e_s"), value(small, "e2e_s")
    assert none.value("e2e_s") == pytest.approx(big_e2e)
    assert everything.value("e2e_s") == pytest.approx(small_e2e)
    assert half.value("e2e_s") == pytest.approx((big_e2e + small_e2e) / 2)
    harmonic = 2 / (1 / value(BASE, "output_tok_s_total") + 1 / value(small, "output_tok_s_total"))
    assert half.value("output_tok_s_total") == pytest.approx(harmonic)
    assert half.memory_bytes > evaluate(BASE).memory_bytes   # both models resident


def test_speculative_settings_use_perfmodel_speculative():
    spec = revise(BASE, speculative={"method": "draft", "draft_model": "llama-3.2-1b",
                                     "draft_tokens": 4, "acceptance": 0.8})
    ev = evaluate(spec)
    ref = speculative.speculative_estimate("llama-3.1-8b", "h100-sxm", method="draft",
                                           draft="llama-3.2-1b", gamma=4, acceptance=0.8,
                                           batch=1, context=512 + 64)
    assert ev.speculative_speedup == pytest.approx(ref.speedup, rel=1e-9)
    assert ev.value("decode_tok_s_per_user") == pytest.approx(
        value(BASE, "decode_tok_s_per_user") * ref.speedup, rel=1e-9)
    assert ev.value("ttft_s") == pytest.approx(value(BASE, "ttft_s"))


def test_concurrency_uses_the_serving_simulation():
    # issue 13: the claim checker's batching lever runs the step-level simulation (a closed
    # loop of 10 x C requests), the same one `perfmodel serve` runs
    sc = revise(BASE, batch=None, concurrency=16)
    ev = evaluate(sc)
    rep = api.serve("llama-3.1-8b", "h100-sxm", engine="vllm", prompt_tokens=512,
                    output_tokens=128, concurrencies=[16])
    (pt,) = rep.points
    assert ev.value("tpot_s") == pytest.approx(pt.tpot_mean_s, rel=1e-9)
    assert ev.value("ttft_s") == pytest.approx(pt.ttft_mean_s, rel=1e-9)
    assert ev.value("e2e_s") == pytest.approx(pt.e2e_mean_s, rel=1e-9)
    # Little's law: 16 users, each with one request in the system at all times
    assert ev.value("output_tok_s_total") == pytest.approx(16 * 128 / pt.e2e_mean_s, rel=1e-9)
    assert any("simulated step by step" in a for a in ev.assumptions)
    static = evaluate(revise(sc, batching="static", longest_output_tokens=512))
    assert static.value("output_tok_s_total") < ev.value("output_tok_s_total")
    assert any("maximum-entropy" in a for a in static.assumptions)


def test_static_mixed_load_waits_for_the_longest_request():
    # a static batch of 16 holds its slots until its longest output ends: with outputs of
    # mean 100 drawn up to 400 (16 draws: the batch's longest is ~300+ steps, 3x the mean),
    # mean E2E is more than twice continuous batching's, where a slot frees at its own end
    sc = revise(BASE, batch=None, concurrency=16, batching="static", prompt_tokens=200,
                output_tokens=100, longest_output_tokens=400)
    ev = evaluate(sc)
    cont = evaluate(revise(sc, batching="continuous"))
    assert ev.value("e2e_s") > 2.0 * cont.value("e2e_s")
    assert ev.value("output_tok_s_total") == pytest.approx(16 * 100 / ev.value("e2e_s"),
                                                           rel=1e-9)


def test_every_default_is_listed():
    ev = evaluate(Scenario(model="llama-3.1-8b", gpu="h100-sxm"))
    text = " ".join(ev.assumptions)
    for field in ("weights", "kv", "activations", "engine", "batch", "prompt_tokens",
                  "output_tokens", "mem_bw_utilization", "usd_per_gpu_hour", "kv_cache"):
        assert f"{field} =" in text


# --------------------------------------------------------------------------- explain, inverse


@pytest.mark.parametrize("text,factor", [("14x", 14.0), ("14", 14.0), ("2.5×", 2.5),
                                         ("50%", 1.5), ("+20%", 1.2), (3, 3.0)])
def test_claims_parse(text, factor):
    assert parse_claim(text) == pytest.approx(factor)


@pytest.mark.parametrize("text", ["0.5x", "-3", "abc", "", "1e9", True, "nan", float("inf"),
                                  "2000000x", "1x", "0%", 1])   # 1x: the baseline itself
def test_bad_claims_are_refused(text):
    with pytest.raises(PerfModelError):
        parse_claim(text)


def test_explain_finds_combinations_that_reach_the_claim():
    ex = explain("3x", "decode_tok_s_per_user", BASE, max_levers=2, inverse=False)
    assert isinstance(ex, Explanation) and ex.verdict == "plausible"
    assert ex.combinations
    for c in ex.combinations:
        assert c.factor >= 3.0 - 1e-9
        ref = revise(BASE, **c.baseline_changes) if c.baseline_changes else BASE
        got = oriented("decode_tok_s_per_user",
                       evaluate(revise(fill(BASE)[0], **c.changes)).value("decode_tok_s_per_user"),
                       evaluate(ref, strict=False).value("decode_tok_s_per_user"))
        assert got == pytest.approx(c.factor, rel=1e-9)
        assert (c.verdict == "plausible") == (c.stretch <= 1 and not c.weak_baseline)
    plain = [c.stretch for c in ex.combinations if c.verdict == "plausible"]
    assert plain == sorted(plain)
    assert math.prod(ex.shapley.values()) == pytest.approx(
        math.prod(s.factor for s in ex.factors), rel=1e-9)


def test_a_rate_beyond_the_memory_bandwidth_is_beyond_physics():
    ex = explain("1000x", "decode_tok_s_per_user", BASE, max_levers=2, inverse=False)
    assert ex.verdict == "beyond physics" and ex.physics.beyond
    # 8B at 4 bits is > 4 GB per token; 1000x the baseline's ~150 tok/s needs > 500 TB/s
    assert ex.physics.claimed_value > ex.physics.limit_value
    assert "GB/s" in ex.physics.statement


def test_a_weak_baseline_is_named():
    ex = explain("3x", "decode_tok_s_per_user", HF, max_levers=2, inverse=False)
    weak = [c for c in ex.combinations if c.weak_baseline]
    assert weak and all("hf-eager" in " ".join(c.weak_baseline) for c in weak)
    assert all(c.verdict != "plausible" for c in weak)


def test_inverse_acceptance_makes_the_claim_true():
    spec = revise(BASE, speculative={"method": "draft", "draft_model": "llama-3.2-1b"})
    res = solve(1.5, "decode_tok_s_per_user", BASE, spec, assumption="acceptance")
    assert isinstance(res, Inverse) and 0 < res.value < 1
    at = revise(spec, speculative={"method": "draft", "draft_model": "llama-3.2-1b",
                                   "acceptance": res.value})
    assert value(at, "decode_tok_s_per_user") / value(BASE, "decode_tok_s_per_user") == \
        pytest.approx(1.5, rel=1e-3)


def test_inverse_batch_and_bandwidth_and_no_solution():
    res = solve(20, "output_tok_s_total", BASE, assumption="batch")
    b = int(res.value)
    base_thr = value(BASE, "output_tok_s_total")
    assert value(revise(BASE, batch=b), "output_tok_s_total") / base_thr >= 20
    assert value(revise(BASE, batch=b - 1), "output_tok_s_total") / base_thr < 20
    bw = solve(1.1, "decode_tok_s_per_user", BASE, assumption="mem_bw_utilization")
    assert fill(BASE)[0].mem_bw_utilization < bw.value <= 1.0
    none = solve(50, "decode_tok_s_per_user", BASE, assumption="weight_bits")
    assert none.value is None and "no weight format" in none.statement


def test_check_pair_verdict():
    imp = revise(BASE, name="fp8", weights="fp8", activations="fp8")
    ok = check_pair(1.2, "decode_tok_s_per_user", BASE, imp, solve_for=())
    no = check_pair(10, "decode_tok_s_per_user", BASE, imp, solve_for=("mem_bw_utilization",))
    assert ok.verdict.startswith("supported") and no.verdict.startswith("not supported")
    assert no.inverse[0].value is None


# --------------------------------------------------------------------------- bad input


def test_scenarios_on_different_metrics_are_refused():
    with pytest.raises(PerfModelError, match="different metrics"):
        attribute(revise(BASE, metric="ttft_s"), revise(BASE, metric="output_tok_s_total"), "ttft_s")
    with pytest.raises(PerfModelError, match="states metric"):
        attribute(revise(BASE, metric="ttft_s"), BASE, "e2e_s")


def test_a_metric_the_scenario_cannot_produce():
    with pytest.raises(PerfModelError, match="unknown metric"):
        attribute(BASE, BASE, "joules")
    no_price = revise(BASE, gpu="b100")
    with pytest.raises(PerfModelError, match="cannot produce usd_per_mtok"):
        evaluate(no_price).value("usd_per_mtok")
    with pytest.raises(PerfModelError, match="KV cache"):
        evaluate(revise(BASE, kv_cache=False, speculative={"method": "ngram"}))


@pytest.mark.parametrize("fields,needle", [
    ({"batch": 2, "concurrency": 2}, "not both"),
    ({"prompt_tokens": 200_000}, "exceed"),
    ({"tp": 3}, "divide"),
    ({"weights": "int3"}, "precision"),
    ({"speculative": {"acceptance": 1.5}}, "acceptance"),
    ({"longest_output_tokens": 600}, "concurrency"),
])
def test_bad_scenarios_are_clear_errors(fields, needle):
    with pytest.raises(PerfModelError, match=needle):
        evaluate(revise(BASE, **fields))


def test_scenario_files_round_trip_and_name_bad_fields(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(MANY.model_dump(mode="json", exclude_none=True)))
    assert load_scenario(p) == MANY
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: llama-3.1-8b\ngpu: h100-sxm\nbatchsize: 4\n")
    with pytest.raises(SpecFileError, match="batchsize"):
        load_scenario(bad)


def test_example_files_evaluate(root):
    files = sorted((root / "examples").glob("*.yaml"))
    assert len(files) >= 5
    filled_fields = ("tp", "pp", "ep", "weights", "kv", "activations", "engine", "batching",
                     "paged_kv", "kv_cache", "prompt_tokens", "output_tokens",
                     "mem_bw_utilization")
    for f in files:
        sc = load_scenario(f)
        ev = evaluate(sc)
        assert isinstance(ev, Evaluation)
        assert all(math.isfinite(v) and v > 0 for v in ev.values.values()), f.name
        text = " ".join(ev.assumptions)
        for name in filled_fields:   # every field the file leaves out is listed as a default
            if getattr(sc, name) is None:
                assert f"{name} =" in text, (f.name, name)


# --------------------------------------------------------------------------- honesty (issue 15)


def test_a_model_swap_is_never_called_a_plausible_system_speedup():
    # 70B -> a 1B route or a smaller model changes what the user gets; such combinations are
    # told apart (changes_output) and never carry the verdict "plausible"
    from perfmodel.analysis.claims.explain import MODEL_SWAP, PLAUSIBLE, _verdict
    base = Scenario(name="70B int4 vllm", model="llama-3.1-70b", gpu="h100-sxm", engine="vllm",
                    weights="int4", batch=1, prompt_tokens=512, output_tokens=128)
    ex = explain("6x", "decode_tok_s_per_user", base, max_levers=1, inverse=False)
    swaps = [c for c in ex.combinations if {"model", "routing"} & set(c.levers)]
    assert swaps
    for c in ex.combinations:
        assert bool(c.changes_output) == bool({"model", "routing"} & set(c.levers))
        assert c.verdict != PLAUSIBLE or not c.changes_output
    only_swaps = [(c, ()) for c in swaps if c.verdict == MODEL_SWAP]
    verdict, reason = _verdict(only_swaps, ex.physics.model_copy(update={"beyond": False}), 6.0)
    assert verdict == MODEL_SWAP and "changes what the user gets" in reason


def test_check_pair_separates_the_model_swap_from_system_gains():
    # the same engine, GPU and precision, 70B -> 8B: every bit of the ratio is the model
    base = Scenario(name="70B", model="llama-3.1-70b", gpu="h100-sxm", engine="vllm",
                    weights="int4", batch=1, prompt_tokens=512, output_tokens=128)
    att = check_pair(4.0, "decode_tok_s_per_user", base, revise(base, model="llama-3.1-8b",
                                                                 name="8B"))
    assert att.system_factor == pytest.approx(1.0)
    assert att.output_factor == pytest.approx(att.total)
    assert att.verdict.startswith("supported only by changing the model")
    assert att.caveats and att.factors[0].changes_output
