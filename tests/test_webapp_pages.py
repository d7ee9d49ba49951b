"""The pages beyond the Calculator through AppTest: each runs without an exception, shows
its key numbers, and they change when an input changes. The Measure page load-tests a tiny
fake OpenAI-compatible server on 127.0.0.1 (streamed tokens at a fixed pace)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from perfmodel.core.engines import ENGINES
from perfmodel.webapp.texts import DEFINITIONS

from test_webapp import clean, metrics, number, run, uploads  # noqa: F401 - fixture



def test_sweep_page_rows_follow_the_largest_batch():
    at = run("sweep")
    clean(at)
    rows = lambda: len(at.dataframe[0].value)
    assert rows() == 9                                  # 1, 2, ..., 256
    assert len(at.get("plotly_chart")) == 3
    peak = number(metrics(at)["Peak aggregate (fits)"])
    at.select_slider(key="w_sweep_max_batch").set_value(32).run()
    clean(at)
    assert rows() == 6
    assert number(metrics(at)["Peak aggregate (fits)"]) < peak       # fewer sequences, fewer tok/s
    assert set(at.dataframe[0].value["decode bound"]) <= {"memory", "compute", "communication",
                                                          "overhead"}
    df = at.dataframe[0].value
    assert list(df["batch"]) == [1, 2, 4, 8, 16, 32]


def test_speculative_page_follows_acceptance():
    pytest.importorskip("perfmodel.analysis.speculative")
    at = run("speculative")
    clean(at)
    s0 = number(metrics(at)["Speed-up"])
    at.slider(key="w_spec_alpha").set_value(0.9).run()
    clean(at)
    assert number(metrics(at)["Speed-up"]) > s0         # more accepted tokens, more speed-up
    assert len(at.get("plotly_chart")) == 2


def test_definitions_page_lists_metrics_and_every_engine():
    at = run("definitions")
    clean(at)
    table = at.table[0].value
    assert set(table["metric"]) == {label for label, _, _ in DEFINITIONS.values()}
    ttft = table[table["metric"] == "TTFT"]["definition"].iloc[0]
    assert "arrival to the first output token" in ttft
    engines = at.dataframe[0].value
    assert set(engines["engine"]) == set(ENGINES)
    body = " ".join(str(m.value) for m in at.markdown)
    assert all(f"**{b}**" in body for b in ("memory", "compute", "communication", "overhead"))


def test_efficiency_table_gives_every_card_its_own_fused_moe_fraction():
    """B200 and H200 share vendor and memory type (HBM3e) but not the fused-MoE GEMM fraction:
    0.25 on datacenter Blackwell (flashinfer PR #5301, calibrate/fit_moe_blackwell.py), 0.465
    measured on the H200 (calibrate/MOE_PREFILL_NOTES.md); the table must not merge them."""
    from perfmodel.webapp.views.definitions import efficiency_table
    t = efficiency_table()
    frac = {}
    for cards, f in zip(t["cards"], t["fused-MoE kernel fraction"]):
        for card in cards.split(", "):
            assert card not in frac                      # each card in exactly one row
            frac[card] = f
    assert frac["b200"] == pytest.approx(0.25) and frac["gb200"] == pytest.approx(0.25)
    assert frac["h200-sxm"] == pytest.approx(0.465) and frac["h100-sxm"] == pytest.approx(0.465)




def test_sweep_over_concurrency_uses_the_serving_model():
    pytest.importorskip("perfmodel.serving.simulate")
    at = run("sweep", sweep_over="concurrency", sweep_max_batch=64)
    clean(at)
    df = at.dataframe[0].value
    assert list(df["concurrency"]) == [1, 2, 4, 8, 16, 32, 64]
    assert any("Simulated closed-loop benchmark" in c.value and "Knee:" in c.value
               for c in at.caption)
    tpot = [float(v.replace(",", "")) for v in df["TPOT p50 (ms)"]]
    assert tpot[0] < tpot[-1]                            # more users share the GPU: slower each


def test_compare_page_ranks_deployments_and_follows_the_rate():
    pytest.importorskip("perfmodel.analysis.sizing")
    q = dict(size_gpus="h100-sxm,a100-sxm-80gb,l40s", size_precisions="bf16,fp8")
    at = run("compare", size_rate=2, **q)
    clean(at)
    assert len(at.get("plotly_chart")) == 2
    cap0 = at.dataframe[0].value["GPUs"].sum()
    assert set(metrics(at)) >= {"Cheapest", "Cost", "$ per Mtok", "Binding constraint"}
    at = run("compare", size_rate=100, **q)
    clean(at)
    assert at.dataframe[0].value["GPUs"].sum() > cap0   # 50x the rate needs more GPUs


def test_compare_page_says_when_nothing_fits():
    pytest.importorskip("perfmodel.analysis.sizing")
    at = run("compare", model="llama-3.1-405b", size_gpus="t4", size_precisions="bf16",
             size_max_gpus=2)
    clean(at)
    assert at.error and "\n" not in at.error[0].value


def test_accuracy_page_shows_errors_and_the_scatter():
    pytest.importorskip("perfmodel.analysis.validation.run")
    at = run("accuracy")
    clean(at)
    m = metrics(at)
    assert any(k.startswith("decode_tok_s_per_user") and v.endswith("%") for k, v in m.items())
    assert len(at.get("plotly_chart")) == 3     # the metric's scatter, serving TTFT and TPOT ratios
    title = lambda i=0: json.loads(at.get("plotly_chart")[i].proto.spec)["layout"]["title"]["text"]
    assert title().startswith("decode_tok_s_per_user")
    assert title(1).startswith("TTFT") and title(2).startswith("TPOT")
    assert any("Serving under load" in h.value for h in at.subheader)
    at.selectbox(key="w_acc_metric").set_value("ttft_ms").run()
    clean(at)
    assert title().startswith("ttft_ms")


# --------------------------------------------------------------------------- measure


class FakeOpenAI(BaseHTTPRequestHandler):
    """/v1/models lists 'tiny'; /v1/completions streams max_tokens tokens, 2 ms apart."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "tiny", "owned_by": "vllm"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        n = int(req.get("max_tokens", 8))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        time.sleep(0.01)
        for i in range(n):
            time.sleep(0.002)
            chunk = {"choices": [{"text": " a", "finish_reason": "length" if i == n - 1 else None}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": len(req.get("prompt", "").split()),
                                          "completion_tokens": n}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        self.close_connection = True


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


@pytest.fixture(scope="module")
def fake_server():
    httpd = QuietServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_measure_page_runs_a_sweep_and_follows_the_scenario(fake_server):
    pytest.importorskip("perfmodel.analysis.endpoint")
    at = run("measure", measure_url=fake_server, measure_model="tiny", measure_levels="1,2,4",
             measure_requests=6, measure_output=16)
    clean(at)
    assert at.info and not at.metric                        # nothing measured yet
    at.button[0].click().run()                              # the form's Run button
    clean(at)
    m = metrics(at)
    assert m["Peak measured"].endswith("tok/s") and number(m["Peak measured"]) > 0
    assert len(at.dataframe[0].value) == 3 and len(at.get("plotly_chart")) == 2
    pred_h100 = number(m["Predicted there"])
    at.sidebar.selectbox(key="w_gpu").set_value("a10").run()   # 0.6 vs 3.35 TB/s
    clean(at)
    assert number(metrics(at)["Predicted there"]) < pred_h100
    assert metrics(at)["Peak measured"] == m["Peak measured"]   # the measurement is kept


def test_measure_page_bad_inputs_are_one_line(fake_server):
    pytest.importorskip("perfmodel.analysis.endpoint")
    for query, words in ((dict(measure_model=""), "served model id"),
                         (dict(measure_model="tiny", measure_levels="1,,x"), "levels"),
                         (dict(measure_model="nope"), "nope"),
                         (dict(measure_model="tiny", measure_url="ftp://x"), "http")):
        at = run("measure", **{"measure_url": fake_server, **query})
        at.button[0].click().run()
        clean(at)
        assert at.error and words in at.error[0].value, (query, [e.value for e in at.error])


# --------------------------------------------------------------------------- claims


def test_claims_preset_shows_source_beside_model_and_follows_the_preset():
    claims = pytest.importorskip("perfmodel.analysis.claims")
    ids = [k for k, _ in claims.list_presets()]
    at = run("claims", claim_preset=ids[0])
    clean(at)
    f0 = metrics(at)["Model's factor"]
    assert f0.startswith("x") and "/" in metrics(at)["Source numbers supported"]
    tables = at.dataframe
    assert {"source", "model", "verdict"} <= set(tables[0].value.columns)
    assert {"moves", "factor (x)", "verdict"} <= set(tables[1].value.columns)
    assert len(at.get("plotly_chart")) == 2                  # waterfall and Shapley
    at.selectbox(key="w_claim_preset").set_value(ids[1]).run()
    clean(at)
    assert metrics(at)["Model's factor"] != f0


def test_free_claim_against_the_sidebar_scenario():
    pytest.importorskip("perfmodel.analysis.claims")
    q = dict(claim_mode="free", model="llama-3.2-1b", batch=1, prompt=256, output=64,
             claim_metric="decode_tok_s_per_user")
    at = run("claims", claim_text="2x", **q)
    clean(at)
    m = metrics(at)
    base, claimed = number(m["Baseline"]), number(m["Claimed"])
    assert claimed == pytest.approx(2 * base, rel=0.01)     # the page states what 2x means
    assert number(m["Physical limit"]) > 0 and m["Physical limit"].endswith("tok/s")
    at = run("claims", claim_text="50%", **q)
    clean(at)
    assert number(metrics(at)["Claimed"]) == pytest.approx(1.5 * base, rel=0.01)
    at = run("claims", claim_text="0.5x", **q)               # below 1: one readable line
    clean(at)
    assert at.error and "below 1" in at.error[0].value


# --------------------------------------------------------------------------- calibration

RAW = "raw-h200-sxm-20261129.json"      # calibrate/bench.py on an H200 (committed)


def test_calibration_fits_a_raw_result_and_the_profile_reaches_every_page(root):
    pytest.importorskip("perfmodel.analysis.calibration")
    if not (root / "calibrate" / "data" / RAW).exists():
        pytest.skip(f"calibrate/data/{RAW} is missing")
    at = run("calibration", calib_raw=RAW, gpu="h200-sxm")
    clean(at)
    m = metrics(at)
    assert m["Card"] == "h200-sxm" and m["Held-out median error"].endswith("%")
    assert len(at.get("plotly_chart")) == 2                   # fitted vs measured, residuals
    assert len(at.get("download_button")) >= 1
    at.switch_page("perfmodel/webapp/views/calculator.py").run()
    plain = metrics(at)["TPOT"]
    at.switch_page("perfmodel/webapp/views/calibration.py").run()
    use = next(b for b in at.button if b.label.startswith("Use this profile"))
    use.click().run()
    clean(at)
    ref = at.session_state["scenario"].profile
    assert ref.startswith("upload:") and at.success
    at.switch_page("perfmodel/webapp/views/calculator.py").run()
    clean(at)
    assert at.sidebar.selectbox(key="w_profile").value == ref
    assert metrics(at)["TPOT"] != plain                       # fitted efficiencies are used


def test_bad_raw_upload_is_one_line():
    pytest.importorskip("perfmodel.analysis.calibration")
    from perfmodel.core.errors import PerfModelError
    from perfmodel.webapp import state
    for data in (b"{}", b"[1, 2]", b"not json"):
        with pytest.raises(PerfModelError) as exc:
            state.save_upload("raw", data, "raw.json")
        assert "\n" not in str(exc.value)


# --------------------------------------------------------------------------- serving run


def test_serving_run_page_shows_timeline_and_percentiles_per_level():
    pytest.importorskip("perfmodel.serving.simulate")
    at = run("serving", serve_levels="1,8,32", prompt=512, output=64)
    clean(at)
    df = at.dataframe[0].value
    assert list(df["concurrency"]) == [1, 8, 32]
    assert len(at.get("plotly_chart")) == 3           # timeline, latency, throughput
    m = metrics(at)
    assert set(m) >= {"TTFT p50", "TPOT p50", "Output tok/s (all users)", "Preemptions"}
    assert at.selectbox(key="w_serve_level").value == 32          # default: the largest level
    ttft_32, total_32 = number(m["TTFT p50"]), number(m["Output tok/s (all users)"])
    at.selectbox(key="w_serve_level").set_value(1).run()
    clean(at)
    m = metrics(at)
    assert number(m["TTFT p50"]) < ttft_32               # one request waits for no other prefill
    assert number(m["Output tok/s (all users)"]) < total_32
    at.text_input(key="w_serve_levels").set_value("2,4").run()
    clean(at)
    assert list(at.dataframe[0].value["concurrency"]) == [2, 4]


def test_serving_run_page_bad_levels_are_one_line():
    pytest.importorskip("perfmodel.serving.simulate")
    at = run("serving", serve_levels="a,b")
    clean(at)
    assert at.error and "\n" not in at.error[0].value and "levels" in at.error[0].value


def test_serving_run_page_draws_measured_points_of_the_same_configuration():
    pytest.importorskip("perfmodel.serving.simulate")
    # data/serving holds trtllm Llama-3.1-70B fp8 on one H200 at 1024/1024 (concurrency 4..128)
    at = run("serving", model="llama-3.1-70b", gpu="h200-sxm", engine="trtllm", weights="fp8",
             kv="fp8", prompt=1024, output=1024, serve_levels="4,16")
    clean(at)
    spec = json.loads(at.get("plotly_chart")[1].proto.spec)
    names = [t.get("name") for t in spec["data"]]
    assert "TTFT measured mean" in names and "TPOT measured mean" in names
    assert any(c.value.startswith("Diamonds:") for c in at.caption)
    at.number_input(key="w_prompt").set_value(1000).run()     # no row at this prompt length
    clean(at)
    assert any(c.value.startswith("No measured serving point") for c in at.caption)
