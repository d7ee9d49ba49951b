"""Disaggregated serving as a front-door call: resolve the two pools' layouts (core/resolve.py),
build the load (serving/workload.py), simulate both pools (serving/disagg.py) and report the
points with api.serve's keys. perfmodel.api re-exports serve_disagg and DisaggReport."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.resolve import resolve as _resolve_ids
from perfmodel.serving.curve import check_slo
from perfmodel.serving.disagg import PoolLayout, simulate_disagg
from perfmodel.serving.disagg_transfer import pool_link
from perfmodel.serving.simulate import ServePoint, on_server, with_scheduler
from perfmodel.serving.workload import serve_workloads


class DisaggReport(BaseModel):
    """A simulated disaggregated serving benchmark (perfmodel.serving.disagg): P prefill workers
    and D decode workers, the KV cache moved between them; the point keys are api.serve's."""

    model_config = ConfigDict(frozen=True)
    model: str
    gpu: str
    engine: str
    precision: str
    prefill: PoolLayout
    decode: PoolLayout
    num_gpus: int = Field(description="GPUs of both pools")
    kv_link: str = Field(description="the link moving the KV cache: scale-up or scale-out, and its name")
    arrival: str = Field(description="closed, poisson, gamma or trace")
    prompt_tokens: int | None
    output_tokens: int | None
    points: list[ServePoint]
    warnings: list[str]
    assumptions: list[str]


def _layout(name: str, value) -> PoolLayout:
    if isinstance(value, PoolLayout):
        return value
    if not isinstance(value, dict):
        raise PerfModelError(f"{name} must be a PoolLayout or a dict of workers, tp, pp, ep, dp")
    try:
        return PoolLayout(**value)
    except (ValidationError, TypeError) as exc:
        msg = pydantic_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise PerfModelError(f"{name} layout: {msg}") from None


def serve_disagg(model, gpu, *, prefill, decode, weights: str = "bf16", kv: str | None = None,
                 activations: str | None = None, engine: str = "vllm", profile=None,
                 prompt_tokens: int | None = 1024, output_tokens: int | None = 1024,
                 concurrencies=None, rate_rps=None, trace=None, num_requests: int | None = None,
                 range_ratio: float = 1.0, prefix_hit: float = 0.0, burstiness: float = 1.0,
                 layerwise_transfer: bool = False, ttft_slo_s: float | None = None,
                 tpot_slo_s: float | None = None, seed: int = 0,
                 recv_interval_steps: int | None = None,
                 hardware_dir: str | None = None) -> DisaggReport:
    """Simulate disaggregated serving: `prefill` and `decode` are PoolLayouts (or dicts of
    workers, tp, pp, ep, dp). Loads as api.serve. `recv_interval_steps`: SGLang's
    --scheduler-recv-interval as the deployment set it on both roles (None: the preset's),
    applied to the pools without attention DP (_recv_pools). Raises PerfModelError on bad
    input, naming the constraint (a layout that does not divide, KV that does not fit, no link)."""
    pl, dl = _layout("prefill", prefill), _layout("decode", decode)
    check_slo(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    _check_recv(recv_interval_steps)
    common = dict(weights=weights, kv=kv, activations=activations, engine=engine,
                  profile=profile, hardware_dir=hardware_dir)
    pre, warnings, assumptions = _resolve_ids(model, gpu, tp=pl.tp, pp=pl.pp, ep=pl.ep, dp=pl.dp,
                                              **common)
    dec, w2, _ = _resolve_ids(pre.model, pre.hw, tp=dl.tp, pp=dl.pp, ep=dl.ep, dp=dl.dp, **common)
    pre, dec = on_server(pre), on_server(dec)     # a serving benchmark talks to a server
    pre, dec, recv_note = _recv_pools(pre, dec, pl, dl, recv_interval_steps)
    warnings += [w for w in w2 if w not in warnings]
    wls = serve_workloads(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          concurrencies=concurrencies, rate_rps=rate_rps, trace=trace,
                          num_requests=num_requests, range_ratio=range_ratio,
                          prefix_hit=prefix_hit, burstiness=burstiness, seed=seed)
    longest = wls[0].longest_prompt + wls[0].longest_output
    if longest > pre.model.max_context:
        raise PerfModelError(f"prompt + output of {longest} tokens exceed the "
                             f"{pre.model.max_context}-token context of {pre.model.id}")
    points, kind = simulate_disagg(pre, dec, pl, dl, wls, layerwise=layerwise_transfer,
                                   ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
    link = pool_link(pre, pl.num_gpus + dl.num_gpus)[0]
    assumptions += [
        "requests go round robin to the prefill workers, then (in KV arrival order) to the "
        "decode workers",
        "TTFT = prefill queue + prefill + KV transfer + the decode worker's admission and first "
        "step (the client's stream comes from the decode worker: Dynamo, SGLang PD, vLLM P/D)",
        ("KV transfer layer-wise, overlapped with prefill (Mooncake): only the last layer's "
         "share is exposed" if layerwise_transfer else
         "KV transfer starts after the prefill completes (vLLM NIXL, SGLang PD, TRT-LLM "
         "cache transceiver defaults); one transfer at a time per prefill worker")]
    if recv_note:
        assumptions.append(recv_note)
    if wls[0].arrival == "closed":
        assumptions.append("closed loop: send times found by fixed-point iteration over both pools")
    return DisaggReport(
        model=pre.model.id, gpu=pre.hw.id, engine=pre.engine.id, precision=pre.precision.label,
        prefill=pl, decode=dl, num_gpus=pl.num_gpus + dl.num_gpus,
        kv_link=f"{kind}: {link.name}", arrival=wls[0].arrival,
        prompt_tokens=wls[0].prompt_tokens, output_tokens=wls[0].output_tokens, points=points,
        warnings=warnings, assumptions=assumptions)


def _check_recv(n) -> None:
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
        raise PerfModelError(f"recv_interval_steps must be an integer from 1 to 10000, got {n!r}")


def _recv_pools(pre, dec, pl: PoolLayout, dl: PoolLayout, n: int | None):
    """The pools with SGLang's --scheduler-recv-interval n, and the assumption that says so.
    Only pools without attention DP take it: SGLang's SchedulerRecvSkipper asserts
    `not server_args.enable_dp_attention` (managers/scheduler_recv_skipper.py, v0.5.x), so a
    DP-attention worker polls for requests every step. The decode worker's polling gates the
    PD handshake (its KV pre-allocation, without which the prefill worker keeps the request in
    its bootstrap queue: disaggregation/prefill.py); the simulation charges that wait at the
    decode worker's admission instead of before the prefill (the same sum while the decode
    worker's step time is steady)."""
    if n is None or n == 1:
        return pre, dec, ""
    roles = [name for name, lay in (("prefill", pl), ("decode", dl)) if lay.dp == 1]
    if pl.dp == 1:
        pre = with_scheduler(pre, recv_interval_steps=n)
    if dl.dp == 1:
        dec = with_scheduler(dec, recv_interval_steps=n)
    if not roles:
        return pre, dec, (f"SGLang --scheduler-recv-interval {n} not applied: both pools run "
                          "attention DP, which polls for new requests every step")
    return pre, dec, (f"SGLang --scheduler-recv-interval {n} on the {' and '.join(roles)} "
                      "workers (a busy worker polls for new requests every n decode steps; "
                      "attention-DP workers poll every step)")
