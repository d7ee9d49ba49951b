"""HTTP side of the load test: prompts, the /models probe, and one streamed request.

Prompts are built from a fixed word list, one word per requested prompt token. Common
English words are about one token each in BPE vocabularies, so the length is approximate;
the record uses the server's `usage` counts when the server reports them
(stream_options.include_usage), and says so.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
from pydantic import BaseModel, ConfigDict

from perfmodel.analysis.endpoint.config import (EndpointConfig, EndpointError, EndpointUnreachableError,
                                       ModelNotServedError, NotOpenAIEndpointError)
from perfmodel.analysis.endpoint.stats import RequestSample
from perfmodel.core.errors import closest

PROBE_TIMEOUT_S = 10.0
ERROR_TEXT_CHARS = 200
ERROR_BODY_BYTES = 4096

WORDS = ("the of and to in is it that for on with as was at by be this from or have an are "
         "not but what all were when we there can more if out so up said about than into them "
         "only new some could time these two may then first any like over such our also most "
         "people other know year work back good well way even want because day many well").split()


def build_prompt(index: int, n_tokens: int) -> str:
    """About n_tokens words from WORDS, rotated by the request index (defeats prefix caching)."""
    start = (index * 7) % len(WORDS)
    return " ".join(WORDS[(start + j) % len(WORDS)] for j in range(n_tokens))


class ServerInfo(BaseModel):
    """What /models and the response headers say about the server."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_ids: list[str]
    owned_by: str | None  # of the requested model: vllm, sglang, llamacpp, ...
    server_header: str | None


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def redact(text: str, secret: str | None) -> str:
    """Short, single-line error text with the secret removed."""
    if secret:
        text = text.replace(secret, "***")
    return " ".join(text.split())[:ERROR_TEXT_CHARS]


def probe_server(cfg: EndpointConfig, api_key: str | None) -> ServerInfo:
    """GET {url}/models; raises a one-line EndpointError unless the model is served."""
    url = cfg.models_url
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S,
                          follow_redirects=False, trust_env=False) as client:
            resp = client.get(url, headers=auth_headers(api_key))
    except httpx.HTTPError as exc:
        raise EndpointUnreachableError(
            f"cannot reach {url}: {redact(str(exc) or type(exc).__name__, api_key)}") from None
    if resp.status_code in (401, 403):
        raise EndpointError(f"{url} refused the request (HTTP {resp.status_code}); "
                            "check the key named by --api-key-env")
    if resp.status_code != 200:
        raise NotOpenAIEndpointError(f"{url} answered HTTP {resp.status_code}; "
                                     "is this an OpenAI-compatible API base URL (…/v1)?")
    try:
        data = resp.json()["data"]
        models = {str(m["id"]): m.get("owned_by") for m in data}
    except (ValueError, KeyError, TypeError):
        raise NotOpenAIEndpointError(f"{url} did not return an OpenAI model list "
                                     "({'data': [{'id': ...}]})") from None
    if cfg.model not in models:
        ids = sorted(models)
        hint = closest(cfg.model, ids) or ids[:8]
        raise ModelNotServedError(f"model {cfg.model!r} is not served at {cfg.url}; "
                                  f"it serves: {', '.join(hint) or '(none)'}")
    owned = models[cfg.model]
    return ServerInfo(model_ids=sorted(models), owned_by=str(owned) if owned else None,
                      server_header=resp.headers.get("server"))


def request_body(cfg: EndpointConfig, prompt: str) -> dict:
    body: dict = {"model": cfg.model, "max_tokens": cfg.max_tokens, "temperature": cfg.temperature,
                  "stream": True, "stream_options": {"include_usage": True}}
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


class _Failure(Exception):
    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind = kind


def _chunk_text(obj: dict, api: str) -> tuple[str, str | None]:
    """(content text, finish_reason) of the first choice of a stream chunk."""
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return "", None
    c = choices[0]
    reason = c.get("finish_reason")
    reason = str(reason) if reason else None
    if api == "chat":
        delta = c.get("delta") or {}
        if not isinstance(delta, dict):
            return "", reason
        return str(delta.get("reasoning_content") or "") + str(delta.get("content") or ""), reason
    return str(c.get("text") or ""), reason


async def _consume(resp: httpx.Response, api: str, clock: Callable[[], float]):
    """Read an SSE stream; returns (content chunk times, texts, usage or None, finish_reason)."""
    if resp.status_code != 200:
        head = b""
        async for part in resp.aiter_bytes():  # only the start of an error body
            head += part
            if len(head) >= ERROR_BODY_BYTES:
                break
        raise _Failure(f"http_{resp.status_code}",
                       head[:ERROR_BODY_BYTES].decode("utf-8", "replace") or resp.reason_phrase)
    ctype = resp.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise _Failure("protocol", f"expected a text/event-stream response, got {ctype or 'none'!r}")
    times: list[float] = []
    texts: list[str] = []
    usage = finish = None
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, comments, event:/id: lines
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            obj = json.loads(data)
        except ValueError:
            raise _Failure("protocol", f"stream chunk is not JSON: {data[:60]!r}") from None
        if not isinstance(obj, dict):
            raise _Failure("protocol", "stream chunk is not a JSON object")
        if obj.get("error"):
            raise _Failure("stream_error", str(obj["error"]))
        text, reason = _chunk_text(obj, api)
        finish = reason or finish
        if text:
            times.append(clock())
            texts.append(text)
        if isinstance(obj.get("usage"), dict):
            usage = obj["usage"]
    return times, texts, usage, finish


def _kind(exc: BaseException) -> str:
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "remote_protocol"
    if isinstance(exc, (httpx.NetworkError, httpx.TransportError)):
        return "network"
    if isinstance(exc, UnicodeDecodeError):
        return "protocol"
    return f"client_{type(exc).__name__}"


async def stream_request(client: httpx.AsyncClient, cfg: EndpointConfig, index: int, *,
                         t0: float, deadline: float, api_key: str | None,
                         clock: Callable[[], float] = time.perf_counter) -> RequestSample:
    """Send one streamed request; every failure becomes a RequestSample with an error kind."""
    start = clock()
    budget = max(0.0, min(cfg.request_timeout_s, deadline - start))
    deadline_bound = deadline - start < cfg.request_timeout_s
    body = request_body(cfg, build_prompt(index, cfg.prompt_tokens))
    try:
        async with asyncio.timeout(budget):
            async with client.stream("POST", cfg.completion_url, json=body) as resp:
                times, texts, usage, finish = await _consume(resp, cfg.api, clock)
    except TimeoutError:
        return _failed(index, start - t0, clock() - t0,
                       "deadline" if deadline_bound else "timeout",
                       f"no complete answer within {budget:.3g} s", api_key)
    except _Failure as exc:
        return _failed(index, start - t0, clock() - t0, exc.kind, str(exc), api_key)
    except Exception as exc:  # noqa: BLE001 - a bad server must not crash the sweep
        return _failed(index, start - t0, clock() - t0, _kind(exc),
                       str(exc) or type(exc).__name__, api_key)
    end = clock()
    if not times:
        return _failed(index, start - t0, end - t0, "empty", "stream ended without content", api_key)
    completion = usage.get("completion_tokens") if usage else None
    prompt = usage.get("prompt_tokens") if usage else None
    from_usage = isinstance(completion, int) and completion > 0
    return RequestSample(
        index=index, ok=True, start_s=start - t0, end_s=end - t0, ttft_s=times[0] - start,
        output_tokens=completion if from_usage else len(times),
        prompt_tokens=prompt if isinstance(prompt, int) and prompt >= 0 else None,
        tokens_source="usage" if from_usage else "chunks", finish_reason=finish,
        itl_s=tuple(b - a for a, b in zip(times, times[1:])), text="".join(texts))


def _failed(index: int, start_s: float, end_s: float, kind: str, text: str,
            api_key: str | None) -> RequestSample:
    return RequestSample(index=index, ok=False, error_kind=kind, error=redact(text, api_key),
                         start_s=max(0.0, start_s), end_s=max(start_s, end_s, 0.0))
