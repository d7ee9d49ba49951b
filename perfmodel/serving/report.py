"""A Query's serving workload, simulated: the one path from a Query (and its resolved Scenario)
to the simulator's points. `api.serve` returns the whole `ServeReport`; `api.evaluate` puts its
point in `Evaluation.serving`.

The levels come from the Query (its one concurrency, rate_rps or trace) unless a caller
lists several (`concurrencies=[...]` or `rate_rps=[...]`, as `perfmodel serve` does). A trace
that is a bench-endpoint record gives one point per measured level (serving/trace_record.py),
with the level's measured stats beside it in `measured`; a prompt_tokens given in the Query
is the prompt of the record's requests that have no usage count.
"""

from __future__ import annotations

from pydantic import Field

from perfmodel.core.errors import PerfModelError
from perfmodel.core.predict import Scenario
from perfmodel.core.query import Query
from perfmodel.serving.curve import Served
from perfmodel.serving.simulate import ServePoint, on_server, simulate_points, with_scheduler
from perfmodel.serving.trace_record import Replay
from perfmodel.serving.workload import (DEFAULT_PROMPTS_PER_SLOT, ServeWorkload, load_trace,
                                        serve_workloads)


class ServeReport(Served):
    """A simulated serving benchmark (perfmodel.serving.simulate), one point per level."""

    arrival: str = Field(description="closed, poisson, gamma, trace (CSV rows: open loop) or "
                         "record (a bench-endpoint record: a closed loop per level)")
    prompt_tokens: int | None
    output_tokens: int | None
    range_ratio: float
    prefix_hit: float
    scheduler: str = Field(description="the engine's scheduler limits and their source")
    max_num_seqs: int | None = Field(description="sequences the engine runs at once (None: KV decides)")
    max_num_batched_tokens: int | None = Field(description="token budget of one step (None: unlimited)")
    points: list[ServePoint]
    measured: list[dict[str, float]] | None = Field(
        default=None, description="a replayed bench-endpoint record: each point's measured "
        "level, its LevelStats under the points' key names (output_tok_s -> output_tok_s_total, "
        "requests_s -> request_rate_rps)")
    warnings: list[str]
    assumptions: list[str]


def query_workloads(q: Query, *, concurrencies=None, rate_rps=None,
                    trace=None) -> list[ServeWorkload]:
    """One workload per level: the listed levels, else the Query's own level (`trace`: the
    Query's trace already read, e.g. a Replay)."""
    if concurrencies is None and rate_rps is None:
        concurrencies = None if q.concurrency is None else [q.concurrency]
        rate_rps = None if q.rate_rps is None else [q.rate_rps]
    elif q.concurrency is not None or q.rate_rps is not None:
        raise PerfModelError("give the levels either in the Query (concurrency, rate_rps) or as "
                             "concurrencies / rate_rps lists, not both")
    return serve_workloads(prompt_tokens=q.prompt_tokens, output_tokens=q.output_tokens,
                           concurrencies=concurrencies, rate_rps=rate_rps,
                           trace=q.trace if trace is None else trace,
                           num_requests=q.num_requests, range_ratio=q.range_ratio,
                           prefix_hit=q.prefix_hit, burstiness=q.burstiness, seed=q.seed)


TRACE_SETS = ("output_tokens", "num_requests", "range_ratio", "burstiness")
"""Query fields a trace replaces (each request's output and the arrivals come from it)."""


def _refuse_ignored(q: Query, *, traced: bool, record: bool) -> None:
    """A trace brings its requests: a length or arrival field set beside it would be silently
    unused, so it is refused (prompt_tokens is kept for a bench-endpoint record: the prompt of
    its requests without a usage count)."""
    if not traced:
        return
    unused = [f for f in TRACE_SETS if f in q.model_fields_set
              and getattr(q, f) != type(q).model_fields[f].default]
    if not record and "prompt_tokens" in q.model_fields_set and q.prompt_tokens is not None:
        unused.insert(0, "prompt_tokens")
    if unused:
        raise PerfModelError(f"{', '.join(unused)} not used with a trace: its requests bring "
                             "their own lengths and arrivals (drop them)")


def serve_report(q: Query, sc: Scenario, warnings: list[str], assumptions: list[str], *,
                 concurrencies=None, rate_rps=None, timeline: bool = False,
                 replay: Replay | None = None) -> ServeReport:
    """Simulate the Query's serving workload on its resolved Scenario (api.resolve); with
    `replay` (a bench-endpoint record already read), that record's levels instead."""
    sc = with_scheduler(on_server(sc), max_num_seqs=q.max_num_seqs,
                        max_num_batched_tokens=q.max_num_batched_tokens)
    if replay is not None and not isinstance(replay, Replay):
        raise PerfModelError(f"replay must be a Replay (serving.trace_record.replay_of), got "
                             f"{type(replay).__name__}")
    if replay is not None and (q.has_serving_workload or concurrencies is not None
                               or rate_rps is not None):
        raise PerfModelError("a replayed record brings its own levels: give no concurrency, "
                             "rate_rps or trace with it")
    given = q.prompt_tokens if "prompt_tokens" in q.model_fields_set else None
    trace = replay if replay is not None else (
        load_trace(q.trace, prompt_tokens=given) if isinstance(q.trace, str) else q.trace)
    _refuse_ignored(q, traced=trace is not None, record=isinstance(trace, Replay))
    replay = trace if isinstance(trace, Replay) else None
    wls = query_workloads(q, concurrencies=concurrencies, rate_rps=rate_rps, trace=trace)
    longest = max(w.longest_prompt + w.longest_output for w in wls)
    if longest > sc.model.max_context:
        raise PerfModelError(f"prompt + output of {longest} tokens exceed the "
                             f"{sc.model.max_context}-token context of {sc.model.id}")
    points = simulate_points(sc, wls, ttft_slo_s=q.ttft_slo_s, tpot_slo_s=q.tpot_slo_s,
                             timeline=timeline)
    seqs, budget = sc.engine.scheduler.limits(sc.hw, sc.dep.pp)
    sched = (f"{sc.engine.batching} batching, max_num_seqs {seqs or 'KV-limited'}, token budget "
             f"{budget or 'unlimited'}; {sc.engine.scheduler.source or 'no source'}")
    assumptions, warnings = list(assumptions), list(warnings)
    short = [w.concurrency for w in wls if w.arrival == "closed" and w.n_requests < w.concurrency]
    if short and replay is None:   # a closed loop never holds more requests than it sends
        warnings.append(f"{q.num_requests} requests per level, fewer than concurrency "
                        f"{', '.join(map(str, short))}: at most {q.num_requests} are in flight")
    if replay is not None:
        warnings.extend(replay.notes)
        assumptions.append(f"{replay.name} replayed: each measured level a closed loop at its "
                           "concurrency over its successful requests' own lengths, in send order")
    elif wls[0].arrival == "closed" and q.num_requests is None:
        assumptions.append(f"{DEFAULT_PROMPTS_PER_SLOT} x concurrency requests per level "
                           "(InferenceMAX / vLLM bench serve recipe; set num_requests)")
    return ServeReport(
        model=sc.model.id, gpu=sc.hw.id, engine=sc.engine.id, precision=sc.precision.label,
        tp=q.tp, pp=q.pp, ep=q.ep, arrival="record" if replay else wls[0].arrival,
        prompt_tokens=None if replay else wls[0].prompt_tokens,
        output_tokens=None if replay else wls[0].output_tokens, range_ratio=q.range_ratio,
        prefix_hit=q.prefix_hit, scheduler=sched, max_num_seqs=seqs,
        max_num_batched_tokens=budget, points=points, warnings=warnings, assumptions=assumptions,
        measured=[lv.measured for lv in replay.levels] if replay else None)
