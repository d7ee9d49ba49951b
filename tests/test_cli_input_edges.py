"""Input edges a new user meets on the command line (the audit of the fresh clone): device
files and byte-order marks in user files, flags that would otherwise be silently ignored, and
output paths that are folders. Each is a typed result or one line on stderr with exit code 2."""

from __future__ import annotations

import os

import pytest

from perfmodel.cli import main

SERVE = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
TRACE = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.1,300,20\n"


def one_line_error(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_file_as_trace_is_one_line_not_a_read_without_end(capsys):
    # before: Path.read_text read /dev/zero until MemoryError (a traceback, exit code 1)
    err = one_line_error(capsys, SERVE + ["--trace", "/dev/zero"])
    assert "not a regular file" in err


def test_a_trace_over_the_data_size_cap_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    from perfmodel.core import files
    f = tmp_path / "t.csv"
    f.write_text(TRACE)
    monkeypatch.setattr(files, "DATA_MAX_BYTES", 10)
    monkeypatch.setattr("perfmodel.serving.workload.DATA_MAX_BYTES", 10)
    assert "limit" in one_line_error(capsys, SERVE + ["--trace", str(f)])


def test_a_trace_saved_with_a_byte_order_mark_reads_its_first_column(tmp_path, capsys):
    # Excel's "CSV UTF-8" starts the file with U+FEFF; before, arrival_s was reported missing
    f = tmp_path / "t.csv"
    f.write_bytes(b"\xef\xbb\xbf" + TRACE.encode())
    assert main(SERVE + ["--trace", str(f), "--json"]) == 0
    assert '"num_requests": 2' in capsys.readouterr().out


def test_a_measurement_table_with_a_byte_order_mark_is_read(tmp_path, capsys):
    from conftest import ROOT
    text = (ROOT / "data" / "public_measurements.csv").read_text(encoding="utf-8")
    f = tmp_path / "m.csv"
    f.write_bytes(b"\xef\xbb\xbf" + "\n".join(text.splitlines()[:3]).encode() + b"\n")
    assert main(["validate", "--no-serving", "--data", str(f)]) == 0


LOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--concurrency", "2"]


@pytest.mark.parametrize("extra,flag", [
    (["--prefill-workers", "2"], "--prefill-workers"),
    (["--decode-tp", "4"], "--decode-tp"),
    (["--layerwise-transfer"], "--layerwise-transfer"),
])
def test_pool_flags_without_disagg_are_refused_not_ignored(extra, flag, capsys):
    # before: the aggregated run ignored them and printed a table as if they applied
    err = one_line_error(capsys, SERVE + LOAD + extra)
    assert flag in err and "--disagg" in err


@pytest.mark.parametrize("flag", ["--tp", "--pp", "--dp"])
def test_aggregated_layout_flags_with_disagg_are_refused_not_ignored(flag, capsys):
    err = one_line_error(capsys, SERVE + LOAD + ["--disagg", "--prefill-workers", "1",
                                                 "--decode-workers", "1", flag, "2"])
    assert flag in err and "--prefill-tp" in err


def test_timeline_without_json_is_refused_not_ignored(capsys):
    # before: the table printed and the timeline was dropped without a word
    assert "--json" in one_line_error(capsys, SERVE + LOAD + ["--timeline"])


def test_a_trace_level_is_labelled_trace_not_none(tmp_path, capsys):
    f = tmp_path / "t.csv"
    f.write_text(TRACE)
    assert main(SERVE + ["--trace", str(f)]) == 0
    level = capsys.readouterr().out.splitlines()[2].split()[0]
    assert level == "trace"


def test_a_trace_over_the_request_cap_says_to_shorten_it(tmp_path, capsys):
    # before: 'lower num_requests', which a trace refuses
    from perfmodel.serving.simulate import MAX_SIM_REQUESTS
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n"
                 + "".join(f"{i * 0.01},8,1\n" for i in range(MAX_SIM_REQUESTS + 1)))
    err = one_line_error(capsys, SERVE + ["--trace", str(f)])
    assert "shorten the trace" in err and "num_requests" not in err


def test_a_folder_as_profile_out_is_refused_and_leaves_no_stray_file(tmp_path, capsys):
    # before: the fit wrote '<folder>.tmp' beside the folder, then failed to rename it
    from conftest import ROOT
    raw = sorted((ROOT / "calibrate" / "data").glob("raw-h200-sxm-*.json"))[0]
    out = tmp_path / "profiles"
    out.mkdir()
    err = one_line_error(capsys, ["calibrate", "fit", str(raw), "--profile-out", str(out)])
    assert "folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profiles"]


def test_save_profile_refuses_a_folder(tmp_path):
    from perfmodel.core.errors import PerfModelError
    from perfmodel.core.profile import Profile, save_profile
    with pytest.raises(PerfModelError, match="folder"):
        save_profile(Profile(gpu="h100-sxm"), tmp_path)
    assert list(tmp_path.parent.glob(tmp_path.name + ".tmp")) == []


def test_bench_endpoint_checks_a_folder_out_before_the_load_test(tmp_path, capsys):
    # before: checked only after every level had run (here the unreachable server came first)
    err = one_line_error(capsys, ["bench-endpoint", "--url", "http://127.0.0.1:9/v1", "--model",
                                  "m", "--requests", "1", "--concurrency", "1", "--no-progress",
                                  "--out", str(tmp_path)])
    assert "folder" in err


def test_attribute_refuses_a_lever_named_twice_in_the_order(capsys):
    # before: 'weights' became two Shapley players, which changed every lever's share
    # (engine 1.769x -> 1.884x on these two examples)
    from conftest import ROOT
    ex = ROOT / "examples"
    err = one_line_error(capsys, ["attribute", "--from", str(ex / "rtx4090-fp16.yaml"), "--to",
                                  str(ex / "rtx4090-int8-draft.yaml"), "--order", "weights,weights"])
    assert "more than once" in err and "weights" in err


@pytest.mark.parametrize("model,weights,module", [
    ("llama-3.1-8b", "experts=fp4", "experts"),         # a dense model has no routed experts
    ("llama-3.1-8b", "bf16,experts=fp4", "experts"),
    ("mixtral-8x7b", "bf16,mlp=fp8", "mlp"),            # every layer MoE, no shared experts
])
def test_a_module_format_for_a_module_the_model_lacks_is_refused(model, weights, module, capsys):
    # before: the format was ignored (llama-3.1-8b's TPOT stayed the bf16 one) while a warning
    # said its weights were 'still stored in fp4'
    err = one_line_error(capsys, ["predict", "--model", model, "--gpu", "h100-sxm", "--batch",
                                  "1", "--prompt-tokens", "64", "--output-tokens", "4",
                                  "--weights", weights])
    assert module in err and model in err


def test_module_formats_the_model_has_still_apply():
    from perfmodel import api
    base = api.evaluate(api.make_query(model="mixtral-8x7b", gpu="h100-sxm", batch=1,
                                       prompt_tokens=64, output_tokens=4))
    fp4 = api.evaluate(api.make_query(model="mixtral-8x7b", gpu="h100-sxm", batch=1,
                                      prompt_tokens=64, output_tokens=4, weights="bf16,experts=fp4"))
    assert fp4.memory.weight_bytes < base.memory.weight_bytes     # the experts shrink


@pytest.mark.parametrize("gpu,engine,warned", [
    ("mi300x", "trtllm", True),           # TensorRT-LLM: NVIDIA GPUs only (its README)
    ("apple-m2-max", "trtllm-trt", True),
    ("h100-sxm", "trtllm", False),
    ("mi300x", "vllm", False),
])
def test_tensorrt_llm_on_another_vendor_is_warned(gpu, engine, warned):
    # before: a TensorRT-LLM prediction on an AMD card came without a word
    from perfmodel import api
    ev = api.evaluate(api.make_query(model="llama-3.1-8b", gpu=gpu, engine=engine, batch=1,
                                     prompt_tokens=64, output_tokens=4))
    assert any("NVIDIA GPUs only" in w for w in ev.warnings) == warned


def test_bench_endpoint_temperature_nan_is_named_not_finite(capsys):
    # before: 'temperature: Input should be less than or equal to 2', though nan is no number
    err = one_line_error(capsys, ["bench-endpoint", "--url", "http://127.0.0.1:9/v1", "--model",
                                  "m", "--temperature", "nan"])
    assert "finite" in err


def test_a_validator_message_reads_without_pydantic_wording(capsys):
    # before: 'workload: (root): Value error, 1000000 requests: at most ...'
    err = one_line_error(capsys, SERVE + ["--prompt-tokens", "5", "--output-tokens", "5",
                                          "--concurrency", "100000"])
    assert "at most" in err and "Value error" not in err and "(root)" not in err


@pytest.mark.parametrize("batch,dp,busiest", [(1, 2, 1), (12, 8, 2), (4, 2, None)])
def test_a_batch_that_does_not_split_over_dp_is_flagged(batch, dp, busiest):
    # before: batch 1 over dp 2 printed a TTFT 21% below batch 1 on one GPU (half a sequence
    # per group) without a word
    from perfmodel import api
    ev = api.evaluate(api.make_query(model="llama-3.1-8b", gpu="h100-sxm", dp=dp, batch=batch,
                                     prompt_tokens=64, output_tokens=4))
    notes = [w for w in ev.warnings if "busiest" in w]
    assert notes == ([] if busiest is None else [notes[0]])
    if busiest is not None:
        assert f"mean {batch / dp:g} sequences" in notes[0] and f"holds {busiest}" in notes[0]


def test_sweep_refuses_a_prompt_beyond_the_context_as_predict_does(capsys):
    # before: a row with TTFT 29.6 s and fits False, no reason given (predict: exit 2)
    err = one_line_error(capsys, ["sweep", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                                  "--prompt-tokens", "1000,200000"])
    assert "200000" in err and "131072-token context" in err


def test_fewer_requests_than_the_concurrency_is_said():
    # before: the level read 'conc 4' while its single request ran alone, without a word
    from perfmodel import api
    r = api.serve(api.make_query(**{"model": "llama-3.1-8b", "gpu": "h100-sxm",
                                    "prompt_tokens": 32, "output_tokens": 3, "num_requests": 2}),
                  concurrencies=[1, 2, 4])
    notes = [w for w in r.warnings if "in flight" in w]
    assert notes == ["2 requests per level, fewer than concurrency 4: at most 2 are in flight"]


def test_sweep_out_folder_is_refused_before_the_sweep(tmp_path, capsys):
    # before: '[Errno 21] Is a directory' after the whole sweep had run
    err = one_line_error(capsys, ["sweep", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                                  "--out", str(tmp_path)])
    assert "is a folder" in err


def test_size_counts_beyond_a_stated_max_gpus_is_refused(capsys):
    # before: --counts 3,5 --max-gpus 2 listed 3-GPU deployments, the stated cap ignored
    err = one_line_error(capsys, ["size", "--model", "llama-3.1-8b", "--rate", "5",
                                  "--prompt-tokens", "100", "--output-tokens", "10",
                                  "--ttft-slo-s", "1", "--tpot-slo-s", "0.05", "--gpus",
                                  "h100-sxm", "--counts", "3,5", "--max-gpus", "2"])
    assert "--counts 5" in err and "--max-gpus" in err


def test_burstiness_with_a_closed_loop_is_refused_not_ignored(capsys):
    # before: --concurrency 4 --burstiness 0.5 printed the plain closed-loop figures
    err = one_line_error(capsys, SERVE + ["--prompt-tokens", "64", "--output-tokens", "4",
                                          "--concurrency", "4", "--burstiness", "0.5"])
    assert "burstiness" in err and "open-loop" in err


def test_burstiness_with_a_closed_loop_is_refused_in_disaggregated_serving_too(capsys):
    err = one_line_error(capsys, SERVE + ["--prompt-tokens", "64", "--output-tokens", "4",
                                          "--disagg", "--prefill-workers", "1",
                                          "--decode-workers", "1", "--concurrency", "4",
                                          "--burstiness", "0.5"])
    assert "burstiness" in err


@pytest.mark.parametrize("argv", [
    ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "2",
     "--prompt", "256", "--output", "32", "--json"],
    ["serve-disagg", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt", "512",
     "--output", "32", "--concurrency", "2", "--prefill-workers", "1", "--decode-workers", "1",
     "--json"]])
def test_an_engine_id_ignores_case_as_model_and_gpu_ids_do(capsys, argv):
    # before: `--engine VLLM` was an argparse 'invalid choice' while `--gpu H100-SXM` worked
    assert main(argv + ["--engine", "vllm"]) == 0
    lower = capsys.readouterr().out
    assert main(argv + ["--engine", " VLLM"]) == 0
    assert capsys.readouterr().out == lower


def test_an_unknown_engine_id_is_still_refused(capsys):
    err = one_line_error(capsys, ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                                  "--engine", "VLLMX", "--batch", "1", "--prompt", "64",
                                  "--output", "8"])
    assert "invalid choice: 'vllmx'" in err
