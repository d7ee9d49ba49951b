"""EndpointConfig bounds and the bench-endpoint parser: a typed result or a clean error.

No network: every CLI input here is invalid before a request could be made.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.cli import main
from perfmodel.analysis.endpoint import (MAX_CONCURRENCY, MAX_REQUESTS, ApiKeyError, EndpointConfig,
                                build_prompt)

GOOD = dict(url="http://127.0.0.1:8000/v1", model="m", concurrency=(1, 2))


def test_defaults_and_normalisation():
    cfg = EndpointConfig(**{**GOOD, "url": "https://example.test:8443/v1/", "concurrency": (4, 1, 2)})
    assert cfg.url == "https://example.test:8443/v1"
    assert cfg.concurrency == (1, 2, 4)
    assert cfg.completion_url == "https://example.test:8443/v1/completions"
    assert EndpointConfig(**GOOD, api="chat").completion_url.endswith("/v1/chat/completions")
    with pytest.raises(ValidationError):
        cfg.requests = 5  # frozen


@pytest.mark.parametrize("change, words", [
    ({"url": "ftp://h/v1"}, "only http(s)"),
    ({"url": "file:///etc/passwd"}, "only http(s)"),
    ({"url": "http:///v1"}, "no host"),
    ({"url": "http://u:p@h/v1"}, "credentials"),
    ({"url": "http://h:99999/v1"}, "malformed"),
    ({"url": "http://h/v1?x=1"}, "query"),
    ({"concurrency": (0,)}, "outside"),
    ({"concurrency": (MAX_CONCURRENCY + 1,)}, "outside"),
    ({"concurrency": ()}, "at least one"),
    ({"concurrency": (1, 1)}, "repeat"),
    ({"requests": MAX_REQUESTS + 1}, "less than or equal"),
    ({"request_timeout_s": 10, "max_seconds": 5}, "exceeds"),
    ({"api_key_env": "NOT-A-NAME"}, "environment variable name"),
    ({"model": "  "}, "non-blank"),
    ({"api": "embeddings"}, "completions"),
    ({"surprise": 1}, "Extra inputs"),
])
def test_invalid_configs_say_what_is_wrong(change, words):
    with pytest.raises(ValidationError, match=re.escape(words)):
        EndpointConfig(**{**GOOD, **change})


def test_api_key_is_read_from_the_environment_only(monkeypatch):
    cfg = EndpointConfig(**GOOD, api_key_env="PM_TEST_KEY")
    monkeypatch.delenv("PM_TEST_KEY", raising=False)
    with pytest.raises(ApiKeyError, match="PM_TEST_KEY"):
        cfg.api_key()
    monkeypatch.setenv("PM_TEST_KEY", "s3cr3t-value")
    assert cfg.api_key() == "s3cr3t-value"
    assert "s3cr3t" not in cfg.model_dump_json()


def test_prompts_have_the_requested_word_count_and_differ():
    assert len(build_prompt(0, 512).split()) == 512
    assert build_prompt(0, 32) != build_prompt(1, 32)
    assert build_prompt(3, 32) == build_prompt(3, 32)


anything = st.one_of(st.none(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                     st.text(max_size=30), st.lists(st.integers(-5, 2000), max_size=20),
                     st.booleans())
urls = st.one_of(st.sampled_from(["http://127.0.0.1:8000/v1", "https://h/v1", "ftp://h",
                                  "http://", "localhost:8000", "", "http://a b/"]),
                 st.text(max_size=40))


@settings(max_examples=300, deadline=None)
@given(url=urls, concurrency=anything, requests=anything, max_tokens=anything,
       timeout=anything, max_seconds=anything, api=anything)
def test_config_is_typed_or_a_clean_validation_error(url, concurrency, requests, max_tokens,
                                                      timeout, max_seconds, api):
    kwargs = dict(url=url, model="m", concurrency=concurrency, requests=requests,
                  max_tokens=max_tokens, request_timeout_s=timeout, max_seconds=max_seconds, api=api)
    try:
        cfg = EndpointConfig(**{k: v for k, v in kwargs.items() if v is not None or k == "url"})
    except ValidationError:
        return
    assert cfg.url.split("://")[0] in ("http", "https")
    assert all(1 <= c <= MAX_CONCURRENCY for c in cfg.concurrency)
    assert list(cfg.concurrency) == sorted(set(cfg.concurrency))
    assert 1 <= cfg.requests <= MAX_REQUESTS
    assert 0 < cfg.request_timeout_s <= cfg.max_seconds


def _not_http(text: str) -> bool:
    return not text.strip().lower().startswith(("http://", "https://"))


bad_urls = st.one_of(st.sampled_from(["ftp://127.0.0.1/v1", "127.0.0.1:8000", "file:///x", "",
                                      "javascript:alert(1)", "ws://127.0.0.1/v1"]),
                     st.text(max_size=30).filter(_not_http))
values = st.one_of(st.sampled_from(["0", "-1", "1,0,2", "abc", "", "1e9", "nan", "2000",
                                    "100000", "1,,2", "chat", "x"]),
                   st.text(max_size=12))
flags = st.sampled_from(["--concurrency", "--requests", "--prompt-tokens", "--max-tokens",
                         "--timeout", "--max-seconds", "--api", "--api-key-env", "--model",
                         "--gpu-count", "--samples", "--temperature", "--tp", "--pp", "--ep",
                         "--dp", "--nodes", "--activations"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=bad_urls, extra=st.lists(st.tuples(flags, values), max_size=6))
def test_cli_rejects_bad_input_with_one_line_and_exit_2(url, extra, capsys):
    argv = ["bench-endpoint", "--model", "m", "--no-progress"]
    for flag, value in extra:
        argv += [flag, value]
    argv += ["--url", url]  # last, so it wins: never a valid http(s) URL, so no request is made
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse usage errors
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "error" in err
    assert "Traceback" not in err


def test_cli_concurrency_zero_is_a_one_line_error(capsys):
    assert main(["bench-endpoint", "--url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--concurrency", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--concurrency" in err


def test_cli_out_directory_must_exist(capsys, tmp_path):
    rc = main(["bench-endpoint", "--url", "http://127.0.0.1:9/v1", "--model", "m",
               "--out", str(tmp_path / "missing" / "run.json")])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
