"""A misbehaving HTTP server on 127.0.0.1: every fault becomes a recorded error or a clean
one-line exit 2, never a hang or a traceback. The path prefix picks the fault."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from perfmodel.cli import main
from perfmodel.analysis.endpoint import EndpointConfig, NotOpenAIEndpointError, run_benchmark

MODELS = json.dumps({"object": "list", "data": [{"id": "fake", "owned_by": "vllm"}]}).encode()


class Faulty(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, code: int, ctype: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/html/"):
            self._send(200, "text/html", b"<html>hello</html>")
        else:
            self._send(200, "application/json", MODELS)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        fault = self.path.split("/")[1]
        if fault == "json":      # not streamed
            self._send(200, "application/json", b'{"choices": [{"text": "hi"}]}')
        elif fault == "garbage":  # an event stream of non-JSON
            self._send(200, "text/event-stream", b"data: <<not json>>\n\n")
        elif fault == "e500":
            self._send(500, "text/plain", b"internal error")
        elif fault == "empty":    # a valid stream without content
            self._send(200, "text/event-stream", b"data: [DONE]\n\n")
        elif fault == "slow":     # first byte far later than the timeout
            time.sleep(1.5)
            self._send(200, "text/event-stream", b"data: [DONE]\n\n")
        elif fault == "good":     # two chunks, usage in the last one, like vLLM
            chunks = [{"choices": [{"text": "a"}]}, {"choices": [{"text": "b", "finish_reason": "length"}]},
                      {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}]
            body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
            self._send(200, "text/event-stream", body + b"data: [DONE]\n\n")


class QuietServer(ThreadingHTTPServer):
    """The fake server keeps its own tracebacks off stderr: a client that hangs up mid-answer
    (the CLI stops reading a bad answer) made socketserver print one into the captured
    stderr of the CLI under test, depending on thread timing."""

    def handle_error(self, request, client_address):  # noqa: ARG002
        pass


@pytest.fixture(scope="module")
def faulty():
    httpd = QuietServer(("127.0.0.1", 0), Faulty)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def sweep(base: str, fault: str, **kw):
    cfg = EndpointConfig(url=f"{base}/{fault}/v1", model="fake", concurrency=(1, 2), requests=2,
                         prompt_tokens=4, max_tokens=2, **kw)
    return run_benchmark(cfg)


@pytest.mark.parametrize("fault, kind", [("json", "protocol"), ("garbage", "protocol"),
                                         ("e500", "http_500"), ("empty", "empty")])
def test_faults_are_recorded_per_request(faulty, fault, kind):
    run = sweep(faulty, fault)
    for lv in run.levels:
        assert (lv.stats.ok, lv.stats.errors) == (0, {kind: 2})
        assert all(r.error for r in lv.requests)


def test_slow_server_times_out_without_hanging(faulty):
    started = time.monotonic()
    run = sweep(faulty, "slow", request_timeout_s=0.3)
    assert time.monotonic() - started < 6
    assert all(lv.stats.errors == {"timeout": 2} for lv in run.levels)


def test_usage_from_the_final_chunk_is_preferred(faulty):
    run = sweep(faulty, "good")
    s = run.levels[0].stats
    assert (s.ok, s.tokens_source, s.output_tokens_total) == (2, "usage", 4)
    assert (s.prompt_tokens_min, s.prompt_tokens_max) == (7, 7)
    assert run.record.input_tokens_source == "usage"
    assert (run.record.framework, run.record.framework_source) == ("vLLM", "owned_by")


def test_non_openai_models_answer_is_a_clean_error(faulty, capsys):
    with pytest.raises(NotOpenAIEndpointError):
        sweep(faulty, "html")
    rc = main(["bench-endpoint", "--url", f"{faulty}/html/v1", "--model", "fake"])
    err = capsys.readouterr().err
    assert rc == 2 and "OpenAI model list" in err and len(err.strip().splitlines()) == 1


def test_run_json_round_trips(faulty):
    from perfmodel.cli.common import to_jsonable
    from perfmodel.analysis.endpoint import BenchmarkRun

    run = sweep(faulty, "good")
    again = BenchmarkRun.model_validate_json(json.dumps(to_jsonable(run)))
    assert again.levels[0].stats == run.levels[0].stats and again.record == run.record
