"""What a load test of an OpenAI-compatible endpoint is allowed to do, and its errors.

Every bound a user could get wrong lives here, so the runner never has to re-check:
only http(s) URLs without credentials in them, at most MAX_REQUESTS requests per level,
MAX_CONCURRENCY in flight, MAX_SECONDS of wall time, a timeout per request. The API key
itself is never stored: the config names the environment variable that holds it.
"""

from __future__ import annotations

import os
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perfmodel.core.errors import PerfModelError

MAX_REQUESTS = 10_000      # per concurrency level
MAX_CONCURRENCY = 1024     # requests in flight at once
MAX_LEVELS = 16            # concurrency levels in one sweep
MAX_SECONDS = 86_400.0     # wall time of a whole sweep
MAX_REQUEST_TIMEOUT_S = 3_600.0

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EndpointError(PerfModelError):
    """The endpoint cannot be benchmarked (base class; the CLI prints one line, exit 2)."""


class EndpointUnreachableError(EndpointError):
    """Connection refused, DNS failure or timeout while probing the server."""


class NotOpenAIEndpointError(EndpointError):
    """The server answered, but not like an OpenAI-compatible API (/models)."""


class ModelNotServedError(EndpointError):
    """The requested model id is not in the server's /models list."""


class ApiKeyError(EndpointError):
    """--api-key-env names a variable that is not set (its value is never printed)."""


class EndpointConfig(BaseModel):
    """One sweep: the server, the request shape, the concurrency levels and the bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(min_length=1, max_length=256, description="Model id as the server lists it in /models")
    api: Literal["completions", "chat"] = Field("completions", description="/completions or /chat/completions")
    concurrency: tuple[int, ...] = Field(description="Requests in flight, one level each, ascending")
    requests: int = Field(80, ge=1, le=MAX_REQUESTS, description="Requests sent at each level")
    prompt_tokens: int = Field(512, ge=1, le=131_072, description="Approximate prompt length (word count)")
    max_tokens: int = Field(128, ge=1, le=32_768, description="max_tokens of every request")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (0 = greedy)")
    ignore_eos: bool = Field(False, description="Send ignore_eos=true (vLLM/SGLang extension)")
    request_timeout_s: float = Field(120.0, gt=0, le=MAX_REQUEST_TIMEOUT_S,
                                     description="Wall-time limit of one request, streaming included")
    max_seconds: float = Field(1800.0, gt=0, le=MAX_SECONDS,
                               description="Wall-time limit of the whole sweep; later requests are not sent")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the API key")
    framework: str | None = Field(None, max_length=64, description="Serving framework, when known")
    framework_version: str | None = Field(None, max_length=64, description="Its version, when known")
    quantization: str | None = Field(None, max_length=64, description="Weight/KV quantization as deployed")
    gpu_name: str | None = Field(None, max_length=128, description="GPU model serving the endpoint")
    gpu_count: int | None = Field(None, ge=1, le=4096, description="Number of GPUs serving the endpoint")
    samples_per_level: int = Field(2, ge=0, le=10, description="Outputs kept per level for a quality spot check")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        v = v.strip()
        try:
            parts = urlsplit(v)
            port = parts.port  # raises ValueError on a malformed port
        except ValueError as exc:
            raise ValueError(f"malformed URL {v!r}: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"only http(s) URLs are allowed, got {v!r}")
        if not parts.hostname:
            raise ValueError(f"URL {v!r} has no host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("credentials in the URL are not allowed; use --api-key-env")
        if parts.query or parts.fragment:
            raise ValueError(f"URL {v!r} must not have a query or fragment")
        if port == 0:
            raise ValueError(f"URL {v!r} has port 0")
        return v.rstrip("/")

    @field_validator("model")
    @classmethod
    def _model_text(cls, v: str) -> str:
        if not v.strip() or any(ord(c) < 32 for c in v):
            raise ValueError("model must be non-blank printable text")
        return v

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v:
            raise ValueError("at least one concurrency level is needed")
        if len(v) > MAX_LEVELS:
            raise ValueError(f"at most {MAX_LEVELS} concurrency levels, got {len(v)}")
        for c in v:
            if not 1 <= c <= MAX_CONCURRENCY:
                raise ValueError(f"concurrency {c} is outside 1..{MAX_CONCURRENCY}")
        if len(set(v)) != len(v):
            raise ValueError(f"concurrency levels repeat: {list(v)}")
        return tuple(sorted(v))

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not an environment variable name")
        return v

    @model_validator(mode="after")
    def _timeout_fits(self) -> "EndpointConfig":
        if self.request_timeout_s > self.max_seconds:
            raise ValueError(f"request_timeout_s={self.request_timeout_s:g} exceeds "
                             f"max_seconds={self.max_seconds:g}")
        return self

    @property
    def completion_url(self) -> str:
        return f"{self.url}/{'chat/completions' if self.api == 'chat' else 'completions'}"

    @property
    def models_url(self) -> str:
        return f"{self.url}/models"

    def api_key(self) -> str | None:
        """The key from the environment, read at run time; raises if the variable is unset."""
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ApiKeyError(f"environment variable {self.api_key_env} (from --api-key-env) is not set")
        return key
