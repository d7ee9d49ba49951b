"""CLI: memory, predict, sweep — JSON contracts, one-line errors, fuzzing."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.api import RequestEstimate
from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError

MEMORY_KEYS = {"weight_bytes", "kv_bytes_per_token", "kv_cache_bytes", "activation_bytes",
               "reserve_bytes", "total_bytes", "capacity_bytes", "fits", "max_batch", "max_context"}
PREDICT_KEYS = {"decode_step_s", "prefill_s", "ttft_s", "tpot_s", "e2e_s", "decode_tok_s_per_user",
                "output_tok_s_total", "mbu", "mfu", "bound", "warnings", "fits"} | MEMORY_KEYS


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_memory_json_has_the_documented_keys(capsys):
    out = run_json(capsys, ["memory", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--weights",
                            "fp8", "--kv", "fp8", "--batch", "32", "--context", "8192", "--json"])
    assert MEMORY_KEYS <= set(out)
    assert out["fits"] is False and out["capacity_bytes"] < out["total_bytes"]


def test_predict_json_has_the_documented_keys(capsys):
    out = run_json(capsys, ["predict", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h200-sxm",
                            "--weights", "fp8", "--kv", "fp8", "--batch", "8", "--prompt", "512",
                            "--output", "128", "--engine", "vllm", "--json"])
    assert PREDICT_KEYS <= set(out)
    assert out["decode_tok_s_total"] == pytest.approx(8 * out["decode_tok_s_per_user"])
    assert out["output_tok_s_total"] == pytest.approx(8 * out["output_tokens"] / out["e2e_s"])


def test_predict_new_tokens_is_a_verification_step(capsys):
    base = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "4", "--prompt",
            "256", "--output", "64", "--context", "1000", "--json"]
    one = run_json(capsys, base)
    five = run_json(capsys, base + ["--new-tokens", "5"])
    # memory-bound at batch 4: five new tokens cost more than one but far less than five steps
    assert one["decode_step_s"] < five["decode_step_s"] < 2 * one["decode_step_s"]


def test_attention_override_changes_the_step(capsys):
    base = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "16", "--prompt",
            "4096", "--output", "16", "--engine", "hf-eager", "--json"]
    naive = run_json(capsys, base)
    flash = run_json(capsys, base + ["--attention", "flash"])
    assert flash["decode_step_s"] < naive["decode_step_s"]


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--model", "llama-9", "--gpu", "h100-sxm", "--batch", "1", "--prompt", "1",
      "--output", "1"], "closest"),
    (["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "0", "--prompt", "1",
      "--output", "1"], "positive"),
    (["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "1", "--prompt",
      "200000", "--output", "1"], "exceed"),
    (["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "1", "--prompt", "8",
      "--output", "8", "--tp", "3"], "divide"),
    (["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--weights", "int3", "--batch", "1",
      "--context", "8"], "precision"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_sweep_agrees_with_predict(capsys, tmp_path):
    out = tmp_path / "s.json"
    assert main(["sweep", "--model", "llama-3.1-8b", "--gpu", "h100-sxm,l40s", "--batch", "1,16",
                 "--weights", "bf16,fp8", "--format", "json", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * 2 * 2
    r = next(x for x in rows if x["gpu"] == "l40s" and x["batch"] == 16 and x["weights"] == "fp8")
    single = api.predict_request("llama-3.1-8b", "l40s", weights="fp8", kv="bf16", batch=16)
    assert r["tpot_s"] == pytest.approx(single.tpot_s)
    assert r["ttft_s"] == pytest.approx(single.ttft_s)
    # one meaning per name: the sweep's throughput columns are predict's
    assert r["output_tok_s_total"] == pytest.approx(single.output_tok_s_total)
    assert r["decode_tok_s_total"] == pytest.approx(single.decode_tok_s_total)


words = st.one_of(st.sampled_from(["llama-3.1-8b", "h100-sxm", "bf16", "fp8", "int4-g64", "0", "-3",
                                   "1", "64", "nan", "inf", "vllm", "x", "", "1e9", "mixtral-8x7b",
                                   "deepseek-v3", "a100-sxm-80gb", "naive"]), st.text(max_size=6))
flags = st.sampled_from(["--model", "--gpu", "--weights", "--kv", "--batch", "--prompt", "--output",
                         "--context", "--tp", "--pp", "--ep", "--dp", "--engine", "--attention",
                         "--new-tokens", "--activations", "--json"])


@given(st.sampled_from(["predict", "memory", "sweep"]), st.lists(st.tuples(flags, words), max_size=8))
def test_cli_fuzz_exits_0_or_2_without_traceback(command, pairs):
    argv = [command] + [x for pair in pairs for x in pair]
    assert main(argv) in (0, 2)


@given(st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-27b", "nope"]),
       st.sampled_from(["h100-sxm", "rtx-4090", "mi300x", "tpu-v5e", "apple-m4-max", "t4", "zzz"]),
       st.sampled_from(["bf16", "fp8", "int8", "int4", "fp4", "fp32", "q4"]),
       st.integers(-2, 300), st.integers(-1, 40000), st.integers(-1, 5000),
       st.sampled_from([1, 2, 3, 8]),
       st.sampled_from(["hf-eager", "vllm", "llama-cpp", "tgi", "lmdeploy", "bad"]))
def test_predict_api_fuzz_returns_typed_result_or_clean_error(model, gpu, w, B, P, O, tp, eng):
    try:
        r = api.predict_request(model, gpu, weights=w, batch=B, prompt=P, output=O, tp=tp, engine=eng)
    except PerfModelError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(r, RequestEstimate)
    for k, v in r.model_dump().items():
        if isinstance(v, float):
            assert math.isfinite(v), k
    assert r.e2e_s >= r.ttft_s > 0


def test_memory_takes_ep_and_dp(capsys):
    """DeepSeek-V3 fp8 (~671 GB of weights) on 8 x H200 with attention DP 8 and EP 8: each GPU
    holds 1/8 of the routed experts and a whole copy of the rest (attention, dense layers,
    shared experts, embeddings), so its weights lie strictly between total/8 (TP8) and the
    total; TP1 alone does not fit on one 141 GB card."""
    argv = ["memory", "--model", "deepseek-v3", "--gpu", "h200-sxm", "--weights", "fp8",
            "--batch", "8", "--context", "4096", "--json"]
    one = run_json(capsys, argv)
    tp8 = run_json(capsys, argv + ["--tp", "8", "--ep", "8"])
    dp8 = run_json(capsys, argv + ["--dp", "8", "--ep", "8"])
    assert one["fits"] is False
    assert one["weight_bytes"] / 8 == pytest.approx(tp8["weight_bytes"], rel=0.02)
    assert tp8["weight_bytes"] < dp8["weight_bytes"] < one["weight_bytes"] / 2
    assert main(argv + ["--dp", "8", "--ep", "3"]) == 2
    assert "does not divide" in capsys.readouterr().err
