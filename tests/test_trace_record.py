"""`perfmodel serve --trace run.json`: a bench-endpoint record replayed, one point per measured
level (serving/trace_record.py). The records are built by the real bench-endpoint code
(RequestSample, summarize, build_record, BenchmarkRun) and written as `--out` writes them."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.analysis.endpoint import (BenchmarkRun, EndpointConfig, LevelResult, RequestSample,
                                         ServerInfo, find_knee, summarize)
from perfmodel.analysis.endpoint.record import build_record
from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import make_query
from perfmodel.serving.trace_record import MEASURED_KEYS
from perfmodel.serving.workload import load_trace, serve_workloads

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
CONFIG_PROMPT = 300           # the config's prompt_tokens: used where usage is missing


def sample(i: int, *, ok: bool = True, prompt: int | None = 200, output: int = 40,
           ttft_s: float = 0.05, tpot_s: float = 0.01) -> RequestSample:
    """One request as stream_request records it (times from the level's start)."""
    if not ok:
        return RequestSample(index=i, ok=False, error_kind="timeout", error="read timeout",
                             start_s=0.1 * i, end_s=0.1 * i + 1.0)
    end = 0.1 * i + ttft_s + tpot_s * max(output - 1, 0)
    return RequestSample(index=i, ok=True, start_s=0.1 * i, end_s=end, ttft_s=ttft_s,
                         output_tokens=output, prompt_tokens=prompt,
                         tokens_source="usage" if prompt is not None else "chunks",
                         finish_reason="length")


def record(levels: dict[int, list[RequestSample]]) -> BenchmarkRun:
    cfg = EndpointConfig(url="http://127.0.0.1:8000/v1", model=MODEL, concurrency=tuple(levels),
                         requests=max(len(s) for s in levels.values()),
                         prompt_tokens=CONFIG_PROMPT, max_tokens=64)
    results = [LevelResult(concurrency=c, requests_planned=cfg.requests, stats=summarize(s),
                           requests=s) for c, s in levels.items()]
    rec = build_record(cfg, ServerInfo(model_ids=[MODEL], owned_by="vllm", server_header=None),
                       date="2026-12-01T00:00:00+00:00", levels=results, total_time_s=5.0,
                       gpus=None)
    return BenchmarkRun(config=cfg, record=rec, levels=results, knee=find_knee(results))


# two levels with known lengths: at concurrency 2, one request failed, one has no usage
# count (-> the config's 300) and one produced no token (-> 1)
LEVEL_1 = [sample(0, prompt=100, output=10), sample(1, prompt=120, output=20),
           sample(2, prompt=140, output=30)]
LEVEL_2 = [sample(0, prompt=500, output=50), sample(1, ok=False),
           sample(2, prompt=None, output=25), sample(3, prompt=80, output=0),
           sample(4, prompt=60, output=5)]


@pytest.fixture(scope="module")
def run_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "run.json"
    path.write_text(record({1: LEVEL_1, 2: LEVEL_2}).model_dump_json(indent=1))
    return path


def test_each_level_is_a_closed_loop_over_its_own_lengths_in_order(run_file):
    wls = serve_workloads(trace=str(run_file))
    assert [w.arrival for w in wls] == ["closed", "closed"]
    assert [w.concurrency for w in wls] == [1, 2]
    assert [w.n_requests for w in wls] == [3, 4]          # the failed request is left out
    r1, r2 = wls[0].requests(), wls[1].requests()
    assert r1.prompt_tokens.tolist() == [100, 120, 140] and r1.output_tokens.tolist() == [10, 20, 30]
    assert r2.prompt_tokens.tolist() == [500, CONFIG_PROMPT, 80, 60]
    assert r2.output_tokens.tolist() == [50, 25, 1, 5]
    assert r1.send_s is None and r2.concurrency == 2


def test_serve_gives_one_point_per_level_with_the_measured_stats(run_file):
    rep = api.serve(MODEL, GPU, weights="fp8", trace=str(run_file))
    assert rep.arrival == "record" and rep.prompt_tokens is None
    assert [(p.concurrency, p.num_requests) for p in rep.points] == [(1, 3), (2, 4)]
    assert all(p.fits and 0 < p.ttft_p50_s < p.e2e_p50_s for p in rep.points)
    stats = [summarize(LEVEL_1), summarize(LEVEL_2)]
    for measured, s in zip(rep.measured, stats):
        assert measured["ttft_p50_s"] == s.ttft_p50_s
        assert measured["output_tok_s_total"] == s.output_tok_s   # renamed to the point's key
        assert measured["request_rate_rps"] == s.requests_s
    notes = " | ".join(rep.warnings)
    assert "concurrency 2: 1 failed request(s) left out" in notes
    assert f"a prompt of {CONFIG_PROMPT} tokens" in notes and "0 output tokens replayed as 1" in notes
    assert "concurrency 1:" not in notes


def test_a_uniform_level_replays_as_the_same_closed_loop(tmp_path):
    """Identity: a record level of n identical requests at concurrency C is the closed loop
    api.serve runs at C with those lengths and n requests."""
    path = tmp_path / "run.json"
    path.write_text(record({4: [sample(i, prompt=256, output=32) for i in range(8)]}).model_dump_json())
    got = api.serve(MODEL, GPU, trace=str(path)).points[0]
    want = api.serve(MODEL, GPU, prompt_tokens=256, output_tokens=32, concurrencies=[4],
                     num_requests=8).points[0]
    assert got.model_dump() == want.model_dump()


def test_longer_requests_replay_slower(tmp_path):
    """The replay uses each request's own output length: doubling every output doubles the
    tokens decoded, so E2E p50 grows (decode dominates at 16 prompt tokens)."""
    def e2e(out):
        p = tmp_path / f"r{out}.json"
        p.write_text(record({2: [sample(i, prompt=16, output=out) for i in range(4)]}).model_dump_json())
        return api.serve(MODEL, GPU, trace=str(p)).points[0].e2e_p50_s
    assert e2e(64) > 1.8 * e2e(32)


def test_a_given_prompt_replaces_the_config_length_only_where_usage_is_missing(run_file, capsys):
    """A server without usage counts (llama-cpp-python's stream): the caller's prompt length
    replaces the config's approximate one for those requests, and only for those."""
    wls = api.serve(MODEL, GPU, trace=str(run_file), prompt_tokens=777)
    assert any("a prompt of 777 tokens (given)" in w for w in wls.warnings)
    replay = load_trace(run_file, prompt_tokens=777)
    assert [p for p, _ in replay.levels[1].lengths] == [500, 777, 80, 60]
    assert [p for p, _ in replay.levels[0].lengths] == [100, 120, 140]      # usage kept
    base = ["serve", "--model", MODEL, "--gpu", GPU, "--trace", str(run_file)]
    assert main(base + ["--prompt-tokens", "777"]) == 0
    assert "a prompt of 777 tokens (given)" in capsys.readouterr().out
    assert main(base) == 0
    assert f"a prompt of {CONFIG_PROMPT} tokens (the config's" in capsys.readouterr().out


def test_a_level_with_no_success_is_skipped_with_a_note(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(record({1: [sample(0)], 8: [sample(0, ok=False)]}).model_dump_json())
    rep = api.serve(MODEL, GPU, trace=str(path))
    assert [p.concurrency for p in rep.points] == [1]
    assert any("concurrency 8: no successful request, not replayed" in w for w in rep.warnings)


def test_the_query_and_evaluate_take_a_record(run_file):
    ev = api.evaluate(make_query(model=MODEL, gpu=GPU, trace=str(run_file)))
    assert ev.serving.concurrency == 1 and ev.serving.num_requests == 3   # the first level


def test_csv_traces_still_replay_open_loop(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,5\n")
    assert load_trace(f) == ((0.0, 100, 10), (0.5, 200, 5))
    rep = api.serve(MODEL, GPU, trace=str(f))
    assert rep.arrival == "trace" and rep.measured is None and rep.points[0].concurrency is None


def test_cli_json_and_table(run_file, capsys):
    base = ["serve", "--model", MODEL, "--gpu", GPU, "--trace", str(run_file)]
    assert main(base + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["concurrency"] for p in out["points"]] == [1, 2] and len(out["measured"]) == 2
    assert main(base) == 0
    table = capsys.readouterr().out
    assert "bench-endpoint record" in table and "TTFT meas. ms" in table


def test_bench_endpoint_predict_simulates_the_level_as_serve_trace_replays_it(run_file):
    """--predict's `simulated` is the same replay: each level's values equal the point
    `serve --trace` gives for it (one code path, serving/trace_record.py)."""
    from perfmodel.analysis.endpoint import PredictSpec, with_predictions
    from perfmodel.analysis.endpoint.fit import load_run

    run = with_predictions(load_run(run_file), PredictSpec(model=MODEL, gpu=GPU))
    rep = api.serve(MODEL, GPU, trace=str(run_file))
    for lv, p in zip(run.levels, rep.points):
        sim = lv.prediction.simulated
        assert sim and all(sim[k] == getattr(p, k) for k in sim), lv.concurrency


def test_a_replay_brings_its_own_levels(run_file):
    replay = load_trace(run_file)
    with pytest.raises(PerfModelError, match="its own levels"):
        api.serve(MODEL, GPU, replay=replay, concurrencies=[1])
    with pytest.raises(PerfModelError, match="replay must be a Replay"):
        api.serve(MODEL, GPU, replay={"levels": []})
    assert len(api.serve(MODEL, GPU, replay=replay).points) == 2


# --------------------------------------------------------------------------- bad records


def _doc(run_file) -> dict:
    return json.loads(run_file.read_text())


def _set(doc, path, value):
    *head, last = path
    for k in head:
        doc = doc[k]
    doc[last] = value


BAD = [
    (None, "{not json", "not valid JSON"),
    (None, "[1, 2]", "not a bench-endpoint record"),
    (None, '{"schema_version": "perfmodel.bench-endpoint/2"}', "not a bench-endpoint record"),
    (("levels", 1, "concurrency"), 0, "concurrency must be an integer"),
    (("levels", 0, "concurrency"), "four", "concurrency must be an integer"),
    (("levels", 0, "requests", 1, "output_tokens"), "x", "output_tokens must be an integer"),
    (("levels", 0, "requests", 1, "output_tokens"), 2.5, "output_tokens must be an integer"),
    (("levels", 0, "requests", 0, "prompt_tokens"), True, "prompt_tokens must be an integer"),
    (("levels", 0, "requests", 0, "ok"), "yes", "boolean 'ok'"),
    (("levels", 0, "stats", "ttft_p50_s"), "fast", "stats.ttft_p50_s"),
    (("config", "prompt_tokens"), None, "config.prompt_tokens"),
    (("levels",), [], "non-empty list"),
]


@pytest.mark.parametrize("path,value,msg", BAD)
def test_bad_records_are_one_line_errors_and_exit_2(run_file, tmp_path, capsys, path, value, msg):
    f = tmp_path / "bad.json"
    if path is None:
        f.write_text(value)
    else:
        doc = _doc(run_file)
        _set(doc, path, value)
        f.write_text(json.dumps(doc))
    with pytest.raises(PerfModelError, match=msg) as exc:
        load_trace(f)
    assert "\n" not in str(exc.value)
    assert main(["serve", "--model", MODEL, "--gpu", GPU, "--trace", str(f)]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_a_record_without_a_successful_request_is_an_error(run_file, tmp_path):
    doc = _doc(run_file)
    for lv in doc["levels"]:
        for r in lv["requests"]:
            r["ok"] = False
    f = tmp_path / "none.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(PerfModelError, match="no successful request"):
        api.serve(MODEL, GPU, trace=str(f))


junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(10**6, 10**12),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                 st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.text(max_size=2),
                                                                          st.integers(), max_size=2))
WHOLE = [("schema_version",), ("config",), ("config", "prompt_tokens"), ("levels",),
         ("levels", 0), ("levels", 1, "requests"), ("levels", 1, "requests", 0),
         ("levels", 0, "stats")]
LEAVES = [("levels", 1, "concurrency"), ("levels", 0, "concurrency"),
          ("levels", 0, "requests", 2, "ok"), ("levels", 1, "requests", 1, "ok"),
          ("levels", 0, "requests", 1, "prompt_tokens"), ("levels", 1, "requests", 2, "prompt_tokens"),
          ("levels", 1, "requests", 4, "output_tokens"), ("levels", 0, "requests", 0, "output_tokens"),
          ("levels", 1, "stats", "tpot_p50_s"), ("levels", 1, "stats", "output_tok_s")]
FIELDS = WHOLE + 3 * LEAVES      # the leaves more often: most records are nearly right


plausible = st.one_of(st.integers(1, 600), st.floats(0, 10), st.booleans())


@given(st.lists(st.tuples(st.sampled_from(FIELDS), st.one_of(plausible, junk)), max_size=3),
       st.one_of(st.none(), plausible, junk))
def test_random_records_give_points_or_a_clean_error(changes, prompt):
    """Random values at the record's documented keys (and a random given prompt): api.serve
    gives one finite point per level that kept a successful request, or one PerfModelError
    line."""
    base = record({1: LEVEL_1, 2: LEVEL_2}).model_dump(mode="json")
    doc = copy.deepcopy(base)
    for path, value in changes:
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(doc, path, value)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "run.json"
        f.write_text(json.dumps(doc))
        try:
            rep = api.serve(MODEL, GPU, trace=str(f), prompt_tokens=prompt)
        except PerfModelError as exc:
            assert str(exc) and "\n" not in str(exc)
            return
    assert rep.arrival == "record" and len(rep.points) == len(rep.measured) >= 1
    for p in rep.points:
        assert p.concurrency >= 1 and p.num_requests >= 1
        for k, v in p.model_dump(exclude={"timeline"}).items():
            assert not (isinstance(v, float) and not math.isfinite(v)), k
    assert all(set(m) <= set(MEASURED_KEYS.values()) for m in rep.measured)
    assert np.all([v >= 0 for m in rep.measured for v in m.values()])


def test_a_trace_refuses_the_fields_it_would_ignore(tmp_path):
    # each request of a trace brings its lengths (and a CSV its arrivals): a length, count or
    # arrival shape set beside it would be silently unused, so it is one clean error
    csv_trace = tmp_path / "t.csv"
    csv_trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    for extra in ({"output_tokens": 50}, {"prompt_tokens": 300}, {"num_requests": 7},
                  {"range_ratio": 0.5}, {"burstiness": 2.0}):
        with pytest.raises(PerfModelError, match=next(iter(extra)) + ".* not used with a trace"):
            api.serve("llama-3.1-8b", "h100-sxm", trace=str(csv_trace), **extra)
    assert len(api.serve("llama-3.1-8b", "h100-sxm", trace=str(csv_trace)).points) == 1
