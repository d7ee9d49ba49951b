"""A `perfmodel bench-endpoint --out` record read back as the load it measured (issue 13:
`perfmodel serve --trace run.json`).

Replay semantics (what a serving engineer compares a record with):
- each measured level becomes one simulated point: a closed loop at that level's
  concurrency, as bench-endpoint ran it (analysis/endpoint/run.py: C workers, each sending
  its next request when its previous one ends), over that level's successful requests
  with their own lengths, in the order they were sent (request index);
- prompt tokens: the server's usage count when it reported one, else the prompt length the
  caller gives (`serve --trace run.json --prompt-tokens N`), else the config's prompt_tokens
  (the requested length, an approximate word count); a note says which;
- output tokens: what the request actually produced (usage, else content chunks); a
  successful request that produced none is replayed as 1 (its prefill still ran and
  yielded the end-of-sequence token: said in a note);
- failed requests (ok false) are left out and counted in a note; a level where none
  succeeded is not replayed (a note says so); a record where none succeeded is an error.
Closed-loop replay rather than open-loop replay of start_s: the record's send times are an
outcome of the measured server's speed (a request is sent when a slot frees), so replaying
them as arrivals would feed the model the measured latencies back.

The record is parsed by its documented keys only (schema "perfmodel.bench-endpoint/1":
config.prompt_tokens, levels[].concurrency, levels[].requests[].ok / prompt_tokens /
output_tokens, levels[].stats); other keys are ignored, so a run with predictions reads the
same. serving/ cannot import analysis/ (tests/test_layers.py): the schema id lives here and
analysis/endpoint/run.py takes it from here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from perfmodel.core.errors import PerfModelError
from perfmodel.core.query import MAX_COUNT

RECORD_SCHEMA = "perfmodel.bench-endpoint/1"

MEASURED_KEYS = {
    "ttft_p50_s": "ttft_p50_s", "ttft_p90_s": "ttft_p90_s", "ttft_p99_s": "ttft_p99_s",
    "tpot_p50_s": "tpot_p50_s", "tpot_p90_s": "tpot_p90_s", "itl_p50_s": "itl_p50_s",
    "itl_p90_s": "itl_p90_s", "itl_p99_s": "itl_p99_s", "e2e_p50_s": "e2e_p50_s",
    "e2e_p90_s": "e2e_p90_s", "e2e_mean_s": "e2e_mean_s", "wall_s": "wall_s",
    "output_tok_s": "output_tok_s_total", "requests_s": "request_rate_rps"}
"""LevelStats key -> the ServePoint key it is measured as (same definitions: stats.py, simulate.py)."""


@dataclass(frozen=True)
class RecordLevel:
    """One measured level as it is replayed."""

    concurrency: int
    lengths: tuple[tuple[int, int], ...]
    """(prompt_tokens, output_tokens) of each successful request, in send order."""
    failed: int
    measured: dict[str, float]
    """The level's LevelStats under the ServePoint key names (None values left out)."""


@dataclass(frozen=True)
class Replay:
    """A bench-endpoint record read for replay: the levels with a successful request, and
    notes on what was left out or assumed."""

    name: str
    levels: tuple[RecordLevel, ...]
    notes: tuple[str, ...]


def is_record_text(name: str, text: str) -> bool:
    """A trace file is read as a record when it is JSON (a .json name, or text opening with
    '{' or '['); anything else is the CSV trace."""
    return name.lower().endswith(".json") or text.lstrip().startswith(("{", "["))


def _int(where: str, value, *, low: int) -> int:
    """An integer (an integral JSON number) in [low, MAX_COUNT] (the Query's bound on
    counts), else one error line."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(value) and low <= value <= MAX_COUNT and value == int(value))
    if not ok:
        raise PerfModelError(f"{where} must be an integer >= {low}, got {value!r:.40}")
    return int(value)


def _level(name: str, i: int, lv, default_prompt: int) -> tuple[RecordLevel, int, int]:
    """Level i (0-based; messages count from 1): (its replay, requests without a usage
    prompt, zero-output requests)."""
    where = f"record {name} level {i + 1}"
    if not isinstance(lv, dict):
        raise PerfModelError(f"{where} is not an object")
    conc = _int(f"{where}: concurrency", lv.get("concurrency"), low=1)
    reqs = lv.get("requests")
    if not isinstance(reqs, list):
        raise PerfModelError(f"{where}: requests must be a list of request samples")
    lengths, failed, no_usage, empty = [], 0, 0, 0
    for j, r in enumerate(reqs):
        w = f"{where} request {j + 1}"
        if not isinstance(r, dict) or not isinstance(r.get("ok"), bool):
            raise PerfModelError(f"{w}: needs a boolean 'ok'")
        if not r["ok"]:
            failed += 1
            continue
        out = _int(f"{w}: output_tokens", r.get("output_tokens"), low=0)
        prompt = r.get("prompt_tokens")
        if prompt is None:
            no_usage += 1
            prompt = default_prompt
        prompt = _int(f"{w}: prompt_tokens", prompt, low=1)
        empty += out == 0
        lengths.append((prompt, max(out, 1)))
    return RecordLevel(conc, tuple(lengths), failed, _measured(where, lv.get("stats"))), no_usage, empty


def _measured(where: str, stats) -> dict[str, float]:
    if stats is None:
        return {}
    if not isinstance(stats, dict):
        raise PerfModelError(f"{where}: stats is not an object")
    out = {}
    for key, as_key in MEASURED_KEYS.items():
        v = stats.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise PerfModelError(f"{where}: stats.{key} must be a finite number >= 0, got {v!r:.40}")
        out[as_key] = float(v)
    return out


def parse_record(name: str, text: str, *, prompt_tokens: int | None = None) -> Replay:
    """The record in `text` (the file's name for messages) as a Replay; one PerfModelError
    line for anything that is not a bench-endpoint record with a successful request.
    `prompt_tokens`: the prompt of requests without a usage count, when the caller knows it
    (else the config's requested length)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise PerfModelError(f"trace {name} is not valid JSON: {msg}") from None
    return replay_of(doc, name, prompt_tokens=prompt_tokens)


def replay_of(doc, name: str = "record", *, prompt_tokens: int | None = None) -> Replay:
    """A record already parsed from JSON (or dumped: BenchmarkRun.model_dump(mode="json"))
    as a Replay; the errors and `prompt_tokens` of parse_record."""
    if not isinstance(doc, dict) or doc.get("schema_version") != RECORD_SCHEMA:
        got = (f"schema_version {doc.get('schema_version')!r:.60}" if isinstance(doc, dict)
               else f"a JSON {type(doc).__name__}")
        raise PerfModelError(f"trace {name} is not a bench-endpoint record (an object with "
                             f"schema_version {RECORD_SCHEMA!r}; got {got})")
    cfg, levels = doc.get("config"), doc.get("levels")
    if not isinstance(cfg, dict):
        raise PerfModelError(f"record {name}: config must be an object")
    prompt = _int(f"record {name}: config.prompt_tokens", cfg.get("prompt_tokens"), low=1)
    source = "the config's prompt_tokens, approximate"
    if prompt_tokens is not None:
        prompt, source = _int("prompt_tokens", prompt_tokens, low=1), "given"
    if not isinstance(levels, list) or not levels:
        raise PerfModelError(f"record {name}: levels must be a non-empty list")
    kept, notes = [], []
    for i, lv in enumerate(levels):
        level, no_usage, empty = _level(name, i, lv, prompt)
        c = level.concurrency
        if level.failed:
            notes.append(f"concurrency {c}: {level.failed} failed request(s) left out of the replay")
        if no_usage:
            notes.append(f"concurrency {c}: {no_usage} request(s) without a server usage count "
                         f"replayed with a prompt of {prompt} tokens ({source})")
        if empty:
            notes.append(f"concurrency {c}: {empty} successful request(s) with 0 output tokens "
                         "replayed as 1")
        if level.lengths:
            kept.append(level)
        else:
            notes.append(f"concurrency {c}: no successful request, not replayed")
    if not kept:
        raise PerfModelError(f"record {name} has no successful request: nothing to replay")
    return Replay(name=name, levels=tuple(kept), notes=tuple(notes))
