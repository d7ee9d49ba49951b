"""bench-endpoint against a real llama.cpp server (llama-cpp-python[server]) on a tiny GGUF.

The server runs on 127.0.0.1 with an API key; every sweep is a few requests of a few tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

sys.path.insert(0, str(Path(__file__).parent))
from gguf_tiny import write_tiny_llama  # noqa: E402
from servers import free_port, stop, wait_until_up  # noqa: E402

from perfmodel.cli import main  # noqa: E402
from perfmodel.analysis.endpoint import EndpointConfig, run_benchmark  # noqa: E402

SECRET = "pm-test-key-6f1d2c9e"  # the server's key; must never appear in our output
KEY_ENV = "PM_BENCH_TEST_KEY"
START_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Start `python -m llama_cpp.server` on a free loopback port; stop it afterwards."""
    tmp = tmp_path_factory.mktemp("llama")
    model = write_tiny_llama(tmp / "tiny.gguf")
    port = free_port()
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--model_alias", "tiny", "--api_key", SECRET, "--n_ctx", "2048",
         "--interrupt_requests", "False"],  # queue concurrent requests instead of cutting them off
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    auth = {"Authorization": f"Bearer {SECRET}"}
    try:
        wait_until_up(proc, lambda: httpx.get(f"{url}/models", headers=auth, timeout=2,
                                              trust_env=False).status_code == 200,
                      name="llama_cpp.server", log=tmp / "server.log", timeout_s=START_TIMEOUT_S,
                      errors=(httpx.HTTPError,))
        yield url
    finally:
        stop(proc)
        log.close()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def bench(url: str, *extra: str) -> list[str]:
    return ["bench-endpoint", "--url", url, "--model", "tiny", "--concurrency", "1,2",
            "--requests", "6", "--prompt-tokens", "32", "--max-tokens", "8",
            "--api-key-env", KEY_ENV, *extra]


def test_sweep_records_the_experiment(server, key, tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(bench(server, "--out", str(out), "--json", "--framework", "llama-cpp-python",
                    "--framework-version", llama_cpp.__version__, "--quantization", "f32"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    run = json.loads(captured.out)
    assert json.loads(out.read_text()) == run
    for text in (captured.out, captured.err, out.read_text()):
        assert SECRET not in text

    assert [lv["concurrency"] for lv in run["levels"]] == [1, 2]
    for lv in run["levels"]:
        s = lv["stats"]
        assert (s["requests_sent"], s["ok"], s["failed"], s["errors"]) == (6, 6, 0, {})
        assert s["finish_reasons"] == {"length": 6}
        assert s["output_tokens_total"] == 6 * 8  # the tiny model never stops early
        assert s["tokens_source"] == "chunks"     # this server sends no usage in streams
        assert s["ttft_p50_s"] <= s["ttft_p90_s"] <= s["ttft_p99_s"]
        assert s["tpot_p50_s"] <= s["tpot_p90_s"] and s["e2e_p50_s"] <= s["e2e_p90_s"]
        assert 0 < s["ttft_p50_s"] <= s["e2e_p50_s"]
        assert s["output_tok_s"] > 0 and s["requests_s"] > 0
        for r in lv["requests"]:
            assert r["ok"] and 0 < r["ttft_s"] <= r["end_s"] - r["start_s"]
        assert len(lv["sampled_outputs"]) == 2 and all(o["text"] for o in lv["sampled_outputs"])

    rec = run["record"]
    datetime.fromisoformat(rec["date"])
    assert rec["endpoint"] == server and rec["model"] == "tiny" and rec["served_models"] == ["tiny"]
    assert (rec["framework"], rec["framework_source"]) == ("llama-cpp-python", "flag")
    assert rec["framework_version"] == llama_cpp.__version__ and rec["quantization"] == "f32"
    assert rec["owned_by"] == "me"  # what llama-cpp-python reports
    assert rec["concurrency"] == [1, 2] and rec["total_requests"] == 12 and rec["total_ok"] == 12
    assert (rec["input_tokens_min"], rec["input_tokens_max"], rec["input_tokens_source"]) == (32, 32, "estimated")
    assert rec["max_output_tokens"] == 8 and rec["total_output_tokens"] == 96
    assert 0 < rec["mean_latency_s"] < rec["total_time_s"]
    assert len(rec["sampled_outputs"]) == 4
    assert run["knee"]["min_gain_per_doubling"] == pytest.approx(0.10)
    assert run["stopped_early"] is None


def test_human_table_and_chat_api(server, key, capsys):
    assert main(bench(server, "--api", "chat", "--no-progress")) == 0
    out = capsys.readouterr().out
    assert "ttft_p50_ms" in out and "knee:" in out and SECRET not in out


def test_library_call_and_progress(server, key):
    seen = []
    cfg = EndpointConfig(url=server, model="tiny", concurrency=(2,), requests=3, prompt_tokens=16,
                         max_tokens=4, api_key_env=KEY_ENV)
    run = run_benchmark(cfg, progress=lambda *a: seen.append(a))
    assert run.levels[0].stats.ok == 3
    assert seen[-1] == (2, 3, 3, 0)


@pytest.mark.parametrize("args, words", [
    (["--model", "llama-70b"], "is not served"),                      # model the server lacks
    (["--url", "http://127.0.0.1:{free}/v1"], "cannot reach"),       # nothing listens there
    (["--url", "{root}"], "OpenAI-compatible"),                      # /models is 404 without /v1
    (["--concurrency", "0"], "--concurrency"),
])
def test_bad_input_is_one_line_and_exit_2(server, key, capsys, args, words):
    args = [a.format(free=free_port(), root=server.removesuffix("/v1")) for a in args]
    try:
        rc = main(bench(server, *args))
    except SystemExit as exc:  # argparse errors exit directly
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and words in err
    assert len(err.strip().splitlines()) == 1 and SECRET not in err


def test_wrong_key_is_refused_without_echoing_it(server, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "wrong-key-1234")
    assert main(bench(server)) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "wrong-key-1234" not in err


def test_timeouts_and_wall_time_are_recorded_not_raised(server, key):
    timed_out = run_benchmark(EndpointConfig(
        url=server, model="tiny", concurrency=(1, 2), requests=2, prompt_tokens=8, max_tokens=4,
        api_key_env=KEY_ENV, request_timeout_s=0.0005))
    for lv in timed_out.levels:
        assert lv.stats.ok == 0 and lv.stats.errors == {"timeout": 2}
    assert timed_out.knee.concurrency is None and timed_out.record.mean_latency_s is None

    started = time.monotonic()
    bounded = run_benchmark(EndpointConfig(
        url=server, model="tiny", concurrency=(1, 2), requests=5000, prompt_tokens=8, max_tokens=4,
        api_key_env=KEY_ENV, request_timeout_s=0.5, max_seconds=0.5))
    assert time.monotonic() - started < 10
    assert bounded.stopped_early and "max_seconds" in bounded.stopped_early
    assert bounded.levels[0].stats.requests_sent < 5000


def test_predictions_beside_measurements(server, key, capsys):
    pytest.importorskip("perfmodel.api")
    rc = main(bench(server, "--json", "--predict", "--predict-model", "qwen2.5-0.5b",
                    "--gpu", "l4", "--engine", "llama-cpp", "--weights", "bf16"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    run = json.loads(captured.out)
    assert run["predict"]["gpu"] == "l4"
    for lv in run["levels"]:
        p = lv["prediction"]
        assert p["batch"] == lv["concurrency"] and p["output_tokens"] == 8
        assert 0 < p["ttft_s"] <= p["e2e_s"] and p["output_tok_s_total"] > 0
        assert p["ratios"]["e2e_p50"] == pytest.approx(lv["stats"]["e2e_p50_s"] / p["e2e_s"])
    assert main(bench(server, "--predict", "--gpu", "no-such-gpu", "--predict-model",
                      "qwen2.5-0.5b")) == 2
    assert "no-such-gpu" in capsys.readouterr().err
