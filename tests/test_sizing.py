"""Sizing search: constraints met, monotone in GPUs and targets, cost arithmetic, bad input, CLI."""

import contextlib
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.core.cost import joules_per_token, usd_per_mtok
from perfmodel.core.errors import PerfModelError
from perfmodel.core.hardware import load_gpu
from perfmodel.core.memory import estimate_memory
from perfmodel.api import predict_request, resolve
from perfmodel.analysis.sizing import ENERGY_UTILIZATION, SizingResult, size

FEW_GPUS = ["h100-sxm", "l40s", "a100-sxm-80gb", "mi300x", "rtx-4090"]
models = st.sampled_from(["llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-3.2-1b"])
gpus = st.sampled_from(FEW_GPUS)
precisions = st.sampled_from(["bf16", "fp8", "int4"])


@pytest.fixture(scope="module")
def answer() -> SizingResult:
    return size("llama-3.1-70b", rate_rps=4.0, prompt=1000, output=300, ttft_slo_s=1.0,
                tpot_slo_s=0.05, gpus=FEW_GPUS + ["h200-sxm", "l4"])


def test_cheapest_answer_meets_every_constraint(answer):
    assert answer.deployments and answer.infeasible_reason is None
    d = answer.deployments[0]
    q = answer.request
    assert d.meets and d.count <= q.max_gpus and d.count == d.replicas * d.tp * d.dp * d.pp
    assert d.ttft_s <= q.ttft_slo_s and d.tpot_s <= q.tpot_slo_s
    assert d.goodput_rps >= q.rate_rps and d.headroom >= 0
    assert d.concurrency <= d.max_concurrency
    w, _, kv = d.precision.partition("/")
    # the operating concurrency fits by the memory model on its own
    sc, _, _ = resolve(q.model, d.gpu, weights=w, kv=kv or None, engine=d.engine, tp=d.tp,
                       pp=d.pp, ep=d.ep, dp=d.dp)
    mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=d.concurrency,
                          context=q.prompt_tokens + q.output_tokens, engine=sc.engine, dep=sc.dep)
    assert mem.fits
    # serving under load is never faster per token than one request alone
    alone = predict_request(q.model, d.gpu, weights=w, kv=kv or None, engine=d.engine,
                            tp=d.tp, pp=d.pp, ep=d.ep, dp=d.dp, batch=1, prompt=q.prompt_tokens,
                            output=q.output_tokens)
    assert d.tpot_s >= alone.tpot_s * (1 - 1e-9)


def test_ranked_cheapest_first_and_cost_is_price_over_throughput(answer):
    costs = [d.usd_per_hour for d in answer.deployments if d.usd_per_hour is not None]
    assert costs == sorted(costs)
    for d in answer.deployments:
        hw = load_gpu(d.gpu)
        if hw.price is None:
            assert d.usd_per_hour is None
            continue
        assert d.usd_per_hour == pytest.approx(hw.price.usd_per_hour * d.count)
        # $/Mtok = $/h / (3600 s/h x tok/s) x 1e6
        assert d.usd_per_mtok == pytest.approx(d.usd_per_hour / (3600 * d.output_tok_s_total) * 1e6)
        assert d.joules_per_token == pytest.approx(
            hw.tdp_w * ENERGY_UTILIZATION * d.count / d.output_tok_s_total)
        assert d.binding in ("memory", "TTFT", "TPOT", "rate")


def test_one_deployment_per_gpu_precision_engine(answer):
    keys = [(d.gpu, d.precision, d.engine) for d in answer.deployments]
    assert len(keys) == len(set(keys))


def test_price_override_reorders():
    kw = dict(rate_rps=2.0, prompt=512, output=128, ttft_slo_s=1.0, tpot_slo_s=0.05,
              gpus=["h100-sxm", "l40s"], precisions=["fp8"])
    base = size("llama-3.1-8b", **kw)
    cheap = size("llama-3.1-8b", prices={"h100-sxm": 0.01}, **kw)
    assert cheap.deployments[0].gpu == "h100-sxm"
    assert cheap.deployments[0].price_source == "user override (--price)"
    assert base.deployments[0].price_source.startswith("hardware_db")


@settings(max_examples=15)
@given(models, gpus, precisions, st.sampled_from([1, 2, 4]), st.floats(0.1, 40),
       st.sampled_from([(128, 128), (1000, 300), (2000, 50)]))
def test_throughput_never_falls_as_gpus_are_added(model, gpu, prec, n, rate, shape):
    kw = dict(rate_rps=rate, prompt=shape[0], output=shape[1], ttft_slo_s=2.0, tpot_slo_s=0.1,
              gpus=[gpu], precisions=[prec])
    fewer = size(model, counts=[n], **kw)
    more = size(model, counts=[2 * n], **kw)
    if fewer.deployments:
        assert more.deployments
        assert more.deployments[0].output_tok_s_total >= fewer.deployments[0].output_tok_s_total


@settings(max_examples=15)
@given(models, st.floats(0.2, 60), st.floats(0.05, 3), st.floats(0.005, 0.2),
       st.floats(1, 3), st.floats(1, 3))
def test_looser_targets_never_cost_more(model, rate, ttft, tpot, f1, f2):
    kw = dict(rate_rps=rate, prompt=512, output=256, gpus=FEW_GPUS, precisions=["bf16", "fp8"])
    tight = size(model, ttft_slo_s=ttft, tpot_slo_s=tpot, **kw)
    loose = size(model, ttft_slo_s=ttft * f1, tpot_slo_s=tpot * f2, **kw)
    if tight.deployments:
        assert loose.deployments
        assert loose.deployments[0].usd_per_hour <= tight.deployments[0].usd_per_hour


# ------------------------------------------------------------------ impossible requests


def test_zero_rate_says_so_with_the_nearest_miss():
    r = size("llama-3.1-8b", rate_rps=0, prompt=512, output=128, ttft_slo_s=1, tpot_slo_s=0.05,
             gpus=["l40s", "h100-sxm"])
    assert r.deployments == [] and "0 requests/s" in r.infeasible_reason
    assert r.nearest_miss is not None and r.nearest_miss.ttft_s <= 1


@pytest.mark.parametrize("rate", [0, 1e-12])
def test_a_trickle_on_a_fast_replica_needs_one_replica(rate):
    # llama-3.2-1b on an H200 serves thousands of requests/s: rate / goodput rounds to 0
    # replicas unless a trickle is given one (regression: division by zero)
    r = size("llama-3.2-1b", rate_rps=rate, prompt=64, output=16, ttft_slo_s=1,
             tpot_slo_s=0.05, gpus=["h200-sxm"], precisions=["fp8"])
    best = r.deployments[0] if r.deployments else r.nearest_miss
    assert best.replicas == 1 and best.count == 1 and best.goodput_rps > 1000


def test_a_rate_whose_demand_overflows_is_a_clean_error():
    with pytest.raises(PerfModelError, match="overflows"):
        size("llama-3.1-8b", rate_rps=1e308, prompt=512, output=128, ttft_slo_s=1,
             tpot_slo_s=0.05, gpus=["h100-sxm"])


def test_cost_and_energy_per_token_by_hand():
    # $2/h at 1000 tok/s: 2 / 3600 s per 1000 tok = 5.556e-7 $/tok = $0.5556 per Mtok;
    # 700 W at 1000 tok/s = 0.7 J per token
    assert usd_per_mtok(2.0, 1000.0) == pytest.approx(2 / 3.6)
    assert joules_per_token(700.0, 1000.0) == pytest.approx(0.7)


def test_unmeetable_targets_name_the_constraint():
    r = size("llama-3.1-8b", rate_rps=1, prompt=512, output=128, ttft_slo_s=1,
             tpot_slo_s=1e-4, gpus=["h100-sxm", "l40s"])
    assert r.deployments == [] and "TPOT" in r.infeasible_reason
    assert r.nearest_miss.binding == "TPOT" and r.nearest_miss.tpot_s > 1e-4


def test_too_high_a_rate_names_the_best_capacity():
    r = size("llama-3.1-8b", rate_rps=1e5, prompt=512, output=128, ttft_slo_s=1,
             tpot_slo_s=0.05, gpus=["h100-sxm"])
    assert r.deployments == [] and "serves" in r.infeasible_reason
    assert r.nearest_miss.binding == "rate" and 0 < r.nearest_miss.goodput_rps < 1e5


def test_a_model_that_fits_nowhere():
    r = size("llama-3.1-405b", rate_rps=1, prompt=512, output=128, ttft_slo_s=2,
             tpot_slo_s=0.1, gpus=["l4", "t4"])
    # 405B parameters at 4 bits are ~200 GB; 8 x 24 GB is 192 GB
    assert r.deployments == [] and "weights alone" in r.infeasible_reason
    assert r.nearest_miss.binding == "memory"


def test_bad_input_is_a_clean_error():
    kw = dict(prompt=512, output=128, ttft_slo_s=1, tpot_slo_s=0.05, gpus=["l4"])
    for bad in (dict(rate_rps=-1), dict(rate_rps=float("nan")), dict(rate_rps=1, max_gpus=0),
                dict(rate_rps=1, prices={"h100-sxm": 1.0}), dict(rate_rps=1, precisions=["fp9"]),
                dict(rate_rps=1, prompt=10 ** 7)):
        with pytest.raises(PerfModelError):
            size("llama-3.1-8b", **{**kw, **bad})


junk = st.one_of(st.integers(-3, 3000), st.floats(allow_nan=True, allow_infinity=True),
                 st.none(), st.text(max_size=3), st.booleans())


@settings(max_examples=30)
@given(st.sampled_from(["llama-3.2-1b", "mixtral-8x7b", "bogus"]), junk, junk, junk, junk, junk,
       st.one_of(st.none(), st.lists(st.sampled_from(["fp8", "int4", "bf16/fp8", "x", "fp4"]),
                                     max_size=2)),
       st.one_of(junk, st.sampled_from([1, 2, 8])),
       st.one_of(st.none(), st.lists(st.integers(-1, 9), max_size=2)))
def test_size_returns_a_typed_result_or_a_clean_error(model, rate, prompt, output, ttft, tpot,
                                                      precs, max_gpus, counts):
    try:
        r = size(model, rate_rps=rate, prompt=prompt, output=output, ttft_slo_s=ttft,
                 tpot_slo_s=tpot, gpus=["l4", "h100-sxm"], precisions=precs, max_gpus=max_gpus,
                 counts=counts)
    except PerfModelError:
        return
    assert isinstance(r, SizingResult)
    assert bool(r.deployments) != bool(r.infeasible_reason)
    json.dumps(r.model_dump(mode="json"), allow_nan=False)      # no NaN or inf anywhere


# ------------------------------------------------------------------ CLI


def test_cli_json_shape(capsys):
    rc = main(["size", "--model", "llama-3.1-8b", "--rate", "3", "--prompt", "512", "--output",
               "128", "--ttft-slo", "1", "--tpot-slo", "0.05", "--gpus", "l40s,h100-sxm,l4",
               "--price", "l4=0.5", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["infeasible_reason"] is None and out["deployments"]
    keys = {"gpu", "count", "tp", "pp", "ep", "precision", "engine", "concurrency", "replicas",
            "ttft_s", "tpot_s", "output_tok_s_total", "usd_per_hour", "usd_per_mtok",
            "joules_per_token", "binding"}
    for d in out["deployments"]:
        assert keys <= set(d)
    costs = [d["usd_per_hour"] for d in out["deployments"]]
    assert costs == sorted(costs)


def test_cli_infeasible_prints_a_reason(capsys):
    rc = main(["size", "--model", "llama-3.1-405b", "--rate", "1", "--prompt", "100", "--output",
               "100", "--ttft-slo", "1", "--tpot-slo", "0.05", "--gpus", "t4", "--max-gpus", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "no deployment:" in text and "weights alone" in text


argtext = st.one_of(st.sampled_from(["0", "1", "-3", "nan", "1e9", "0.001", "abc", ""]),
                    st.text(max_size=5))


@settings(max_examples=30)
@given(st.sampled_from(["llama-3.1-8b", "nope", "qwen2.5-7b"]), argtext, argtext, argtext,
       argtext, argtext, st.sampled_from(["l4", "h100-sxm", "l4,bogus", "t4,a10"]),
       st.booleans())
def test_cli_never_tracebacks(model, rate, prompt, output, ttft, tpot, gpu_list, as_json):
    argv = ["size", "--model", model, "--rate", rate, "--prompt", prompt, "--output", output,
            "--ttft-slo", ttft, "--tpot-slo", tpot, "--gpus", gpu_list, "--precisions", "fp8"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = main(argv + (["--json"] if as_json else []))
        except SystemExit as exc:   # argparse usage errors
            rc = exc.code
    out = buf.getvalue()
    assert rc in (0, 2)
    if rc == 0 and as_json:
        data = json.loads(out)
        assert "deployments" in data and "infeasible_reason" in data
        for d in data["deployments"]:
            assert all(not isinstance(v, float) or math.isfinite(v) for v in d.values())


def test_cheapest_deployments_are_checked_by_simulation():
    """The steady-state search is a quick estimate: the cheapest deployments carry simulated
    p90s, and a deployment that misses a target in simulation ranks below every one that meets."""
    from perfmodel.analysis import sizing, sizing_sim
    r = sizing.size("llama-3.1-8b", rate_rps=4.0, prompt=1000, output=200, ttft_slo_s=0.5,
                    tpot_slo_s=0.03, gpus=["h100-sxm", "l40s", "a100-sxm-80gb"],
                    precisions=["bf16", "fp8"])
    sim = [d for d in r.deployments if d.sim_meets is not None]
    assert sim and len(sim) <= sizing_sim.VERIFY_TOP
    for d in sim:
        assert d.sim_ttft_p90_s > 0 and d.sim_tpot_p90_s > 0
        assert d.sim_meets == (d.sim_ttft_p90_s <= 0.5 and d.sim_tpot_p90_s <= 0.03)
    flags = [d.sim_meets is False for d in r.deployments]
    assert flags == sorted(flags)          # misses after everything else


def test_70b_on_h200_is_not_sized_as_a_four_stage_pipeline():
    """Issue 14: `size` chose TP1xPP4 for Llama-3.1-70B on 4 x H200. The pipeline looked cheap
    because a mixed step's prompt rows were spread over the pp micro-batches as if a chunk
    could be cut in four; a chunk runs inside one micro-batch and the slowest micro-batch sets
    the pipeline's period (batching.heavy_prompt_rows), so with 1000-token prompts the pipeline
    pays each prompt's rows at full weight while TP4 pays the all-reduce on them. vLLM's
    distributed-serving docs recommend TP inside a node and PP across nodes."""
    for prec in ("bf16", "fp8"):
        res = size("llama-3.1-70b", rate_rps=2.0, prompt=1000, output=500, ttft_slo_s=2.0,
                   tpot_slo_s=0.05, gpus=["h200-sxm"], precisions=[prec], counts=[4])
        assert res.deployments, res.infeasible_reason
        best = res.deployments[0]
        assert best.meets and best.pp == 1, (prec, best.tp, best.pp)


def test_moe_models_are_also_sized_with_attention_dp():
    """DeepSeek-V3 (MLA: one latent KV head that TP replicates on every GPU) is served with
    attention DP x EP (SGLang --enable-dp-attention, TRT-LLM attention_dp): the search
    includes those shapes, counts their GPUs as tp x dp x pp, and the memory model holds
    their operating concurrency. Dense models get no dp shapes."""
    from perfmodel.analysis.sizing import shapes
    from perfmodel.core.catalog import load_model
    assert (1, 1, 8, 8) in shapes(load_model("deepseek-v3"), 8)
    assert all(s[3] == 1 for s in shapes(load_model("llama-3.1-70b"), 8))
    res = size("deepseek-v3", rate_rps=4.0, prompt=1000, output=500, ttft_slo_s=2.0,
               tpot_slo_s=0.05, gpus=["h200-sxm"], precisions=["fp8"], counts=[8])
    d = res.deployments[0]
    assert d.meets and d.count == 8 == d.replicas * d.tp * d.dp * d.pp
    if d.dp > 1:
        sc, _, _ = resolve("deepseek-v3", "h200-sxm", weights="fp8", tp=d.tp, ep=d.ep, dp=d.dp)
        mem = estimate_memory(sc.model, sc.hw, sc.precision, batch=d.concurrency,
                              context=1500, engine=sc.engine, dep=sc.dep)
        assert mem.fits
