"""Claim checker: random and invalid input to every entry point (attribute, evaluate, explain,
solve, parse_claim, load_scenario, check_pair, presets) and the `claim` / `attribute` CLI."""

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.analysis.claims import (Scenario, attribute, explain, load_scenario, parse_claim,
                                       solve)
from perfmodel.analysis.claims.attribute import check_pair
from perfmodel.analysis.claims.scenario import revise
from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError

METRICS = ["decode_tok_s_per_user", "ttft_s", "e2e_s", "output_tok_s_total", "usd_per_mtok"]

# --------------------------------------------------------------------------- fuzzing

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-3.2-1b", "deepseek-v3",
          "no-such-model"]
GPUS = ["h100-sxm", "rtx-4090", "l4", "mi300x", "b100", "t4", "gpu9000"]
junk_float = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([1e-300, 1e300, 0.0, -1.0]))
scenarios = st.builds(
    dict, model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
    weights=st.sampled_from(["bf16", "fp8", "int8", "int4", "fp4", "int3", None]),
    kv=st.sampled_from(["bf16", "fp8", "int4", None]),
    engine=st.sampled_from(["hf-eager", "vllm", "trtllm", "torch-compile", "nope", None]),
    batch=st.one_of(st.none(), st.integers(-2, 4096)),
    prompt_tokens=st.one_of(st.none(), st.integers(-1, 300_000)),
    output_tokens=st.one_of(st.none(), st.integers(-1, 5000)),
    tp=st.sampled_from([None, 1, 2, 3, 8]), ep=st.sampled_from([None, 1, 2, 8, 0]),
    dp=st.sampled_from([None, 1, 2, 3, 0]), nodes=st.sampled_from([None, 1, 2, 3, 0]),
    kv_cache=st.sampled_from([None, True, False]),
    concurrency=st.one_of(st.none(), st.none(), st.integers(-1, 5000)),
    mem_bw_utilization=st.one_of(junk_float, st.floats(0.01, 1.0)),
    usd_per_gpu_hour=junk_float,
    speculative=st.sampled_from([None, {"method": "ngram"}, {"method": "draft"},
                                 {"method": "eagle", "acceptance": 0.9},
                                 {"method": "eagle", "acceptance": 0.999999, "draft_tokens": 16},
                                 {"method": "mtp", "acceptance": 0.0, "draft_tokens": 1}]),
    routing=st.sampled_from([None, {"small_model": "llama-3.2-1b", "share": 0.5},
                             {"small_model": "llama-3.2-1b", "share": 1.0}]))


def _scenario(d):
    try:
        return Scenario.model_validate({k: v for k, v in d.items() if v is not None})
    except ValueError:
        return None


@settings(max_examples=25)
@given(a=scenarios, b=scenarios, metric=st.sampled_from(METRICS + ["bogus"]))
def test_fuzz_attribute_and_evaluate(a, b, metric):
    sa, sb = _scenario(a), _scenario(b)
    if sa is None or sb is None:
        return
    try:
        att = attribute(sa, sb, metric)
    except PerfModelError:
        return
    assert math.isfinite(att.total) and att.total > 0
    assert math.prod(s.factor for s in att.factors) == pytest.approx(att.total, rel=1e-6)


@settings(max_examples=10)
@given(a=scenarios, claim=st.one_of(st.floats(-5, 50), st.sampled_from(["14x", "0x", "x"])),
       metric=st.sampled_from(METRICS))
def test_fuzz_explain_and_solve(a, claim, metric):
    sa = _scenario(a)
    if sa is None:
        return
    try:
        ex = explain(claim, metric, sa, max_levers=1, inverse=False)
    except PerfModelError:
        return
    assert ex.verdict in ("plausible", "plausible only with a weak baseline",
                          "plausible only by changing the model", "beyond physics",
                          "implausible")
    res = solve(ex.claim, metric, sa, assumption="mem_bw_utilization")
    assert res.value is None or 0 < res.value <= 1


@settings(max_examples=40)
@given(text=st.one_of(st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True),
                      st.integers(-10, 10**9)))
def test_fuzz_parse_claim(text):
    try:
        f = parse_claim(text)
    except PerfModelError:
        return
    assert math.isfinite(f) and f > 1


@settings(max_examples=30)
@given(body=st.one_of(st.text(max_size=80),
                      st.dictionaries(st.sampled_from(["model", "gpu", "batch", "weights", "kv",
                                                       "speculative", "routing", "zzz"]),
                                      st.one_of(st.text(max_size=8), st.integers(-3, 10),
                                                st.none(), st.booleans()), max_size=5)))
def test_fuzz_load_scenario(tmp_path_factory, body):
    p = tmp_path_factory.mktemp("sc") / ("s.json" if isinstance(body, dict) else "s.yaml")
    p.write_text(json.dumps(body) if isinstance(body, dict) else body)
    try:
        sc = load_scenario(p)
    except PerfModelError as exc:
        assert str(exc).startswith(str(p))
        return
    assert isinstance(sc, Scenario)


@settings(max_examples=10)
@given(a=scenarios, claim=st.floats(0.5, 30), metric=st.sampled_from(METRICS),
       what=st.sampled_from(["acceptance", "batch", "weight_bits", "mem_bw_utilization"]))
def test_fuzz_check_pair(a, claim, metric, what):
    sa = _scenario(a)
    if sa is None:
        return
    try:
        imp = revise(sa, name="fp8", weights="fp8")
        res = check_pair(claim, metric, sa, imp, solve_for=(what,))
    except PerfModelError:
        return
    assert res.verdict.split(":")[0] in ("supported", "not supported")
    (inv,) = res.inverse
    assert inv.value is None or math.isfinite(inv.value)


@pytest.mark.parametrize("preset", ["", "gpt6", "GPT6-50-PERCENT ", "../x"])
def test_unknown_presets_are_clean_errors(preset):
    from perfmodel.analysis.claims import run_preset
    with pytest.raises(PerfModelError):
        run_preset(preset)


# --------------------------------------------------------------------------- CLI


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_attribute_json(capsys, root):
    out = run_json(capsys, ["attribute", "--from", str(root / "examples/hf-baseline.yaml"),
                            "--to", str(root / "examples/vllm-concurrency8.yaml"), "--json"])
    assert {"metric", "total", "factors", "shapley", "combinations", "verdict", "assumptions",
            "warnings"} <= set(out)
    assert {"lever", "factor", "regime_before", "regime_after"} <= set(out["factors"][0])
    assert any("metric = decode_tok_s_per_user (default" in a for a in out["assumptions"])


def test_cli_claim_json(capsys, root):
    out = run_json(capsys, ["claim", "--claim", "14x", "--metric", "output_tok_s_total",
                            "--from", str(root / "examples/hf-baseline.yaml"),
                            "--max-levers", "2", "--json"])
    assert out["total"] == 14 and out["verdict"] == "plausible"
    assert {"levers", "factor", "stretch", "verdict"} <= set(out["combinations"][0])
    out = run_json(capsys, ["claim", "--claim", "2x", "--from",
                            str(root / "examples/rtx4090-fp16.yaml"), "--to",
                            str(root / "examples/rtx4090-int8-draft.yaml"), "--json"])
    assert out["verdict"].startswith("supported") and len(out["inverse"]) == 4


@pytest.mark.parametrize("argv,needle", [
    (["claim", "--claim", "0.5x", "--from", "examples/hf-baseline.yaml"], "below 1"),
    (["claim", "--claim", "2x"], "--from"),
    (["claim", "--preset", "gpt-7"], "unknown preset"),
    (["claim", "--claim", "2x", "--from", "examples/hf-baseline.yaml", "--max-levers", "9"],
     "1..8"),
    (["attribute", "--from", "examples/nope.yaml", "--to", "examples/hf-baseline.yaml"], "read"),
    (["attribute", "--from", "examples/hf-baseline.yaml", "--to", "examples/hf-baseline.yaml",
      "--order", "engine"], "do not differ"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, monkeypatch, root, argv, needle):
    monkeypatch.chdir(root)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "hf-baseline.yaml")


@settings(max_examples=15)
@given(argv=st.lists(st.sampled_from(["claim", "attribute", "--claim", "14x", "-1", "--metric",
                                      "ttft_s", "--from", "--to", EXAMPLE, "--json", "--solve",
                                      "batch", "--preset", "x", "--order", "zz"]), max_size=9))
def test_cli_fuzz_exits_0_or_2(argv):
    argv = argv + ["--max-levers", "1"] if argv[:1] == ["claim"] else argv
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(argv) in (0, 2)
    assert "Traceback" not in err.getvalue()
