"""`perfmodel serve`: a table, one JSON object with the LevelStats keys, one-line errors."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import shutil
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main

BASE = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--weights", "fp8"]
KEYS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "itl_p50_s",
        "itl_p99_s", "e2e_p50_s", "e2e_p90_s", "output_tok_s_total", "request_rate_rps", "fits",
        "preemptions")


def test_json_has_a_point_per_level_with_the_bench_endpoint_keys(capsys):
    rc = main(BASE + ["--prompt", "512", "--output", "64", "--concurrency", "1,4", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [p["concurrency"] for p in out["points"]] == [1, 4]
    for p in out["points"]:
        assert all(k in p for k in KEYS)
        assert p["ttft_p50_s"] > 0


def test_table_and_trace(tmp_path, capsys):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.1,300,20\n")
    assert main(BASE + ["--trace", str(f)]) == 0
    assert "TTFT p50 ms" in capsys.readouterr().out


@pytest.mark.parametrize("extra,msg", [
    (["--prompt", "10", "--output", "10", "--rate", "0"], "positive"),
    (["--prompt", "10", "--output", "10", "--concurrency", "0"], "positive"),
    (["--prompt", "10", "--concurrency", "2"], "--prompt-tokens and --output-tokens"),
    (["--prompt", "10", "--output", "10", "--concurrency", "2", "--prefix-hit", "1"], "less than 1"),
    (["--prompt", "10", "--output", "10", "--concurrency", "2", "--rate", "1"], "not allowed"),
    (["--prompt", "200000", "--output", "10", "--concurrency", "2"], "context"),
])
def test_bad_input_is_one_line_and_exit_2(extra, msg, capsys):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_bad_trace_is_one_line(tmp_path, capsys):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\nx,1,1\n")
    assert main(BASE + ["--trace", str(f)]) == 2
    assert "non-numeric" in capsys.readouterr().err


tokens = st.one_of(st.integers(-3, 3000).map(str), st.text(max_size=4))
RECORD_DIR = tempfile.mkdtemp(prefix="serve-records-")
atexit.register(shutil.rmtree, RECORD_DIR, True)


def _record_file(conc, prompt, output, ok, cut) -> str:
    """A bench-endpoint record (its documented keys only) with these values, its JSON text
    cut at `cut` characters when given: the path."""
    doc = {"schema_version": "perfmodel.bench-endpoint/1", "config": {"prompt_tokens": 64},
           "levels": [{"concurrency": conc, "requests": [
               {"ok": ok, "prompt_tokens": prompt, "output_tokens": output},
               {"ok": True, "prompt_tokens": None, "output_tokens": 8}]}]}
    text = json.dumps(doc)
    fd, path = tempfile.mkstemp(suffix=".json", dir=RECORD_DIR)
    with os.fdopen(fd, "w") as f:
        f.write(text if cut is None else text[:cut])
    return path


junk = st.one_of(st.integers(-2, 3000), st.none(), st.booleans(), st.text(max_size=3),
                 st.floats(allow_nan=True, allow_infinity=True))
records = st.builds(_record_file, junk, junk, junk, junk, st.one_of(st.none(), st.integers(0, 200)))


@settings(max_examples=30)
@given(tokens, tokens, st.one_of(st.sampled_from(["--concurrency", "--rate"]), st.just("--trace")),
       st.one_of(tokens, records))
def test_random_arguments_exit_0_or_2(prompt, output, kind, level):
    """Random levels, lengths and traces (a path, or a bench-endpoint record file with random
    values): exit 0, or 2 with one line."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(BASE + ["--prompt", prompt, "--output", output, kind, level, "--requests", "4"])
    assert rc in (0, 2)
    if rc == 2:
        assert err.getvalue().count("\n") == 1
