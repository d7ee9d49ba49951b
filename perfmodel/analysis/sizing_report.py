"""Sentences of a sizing result: why nothing fits, where prices come from, what is assumed."""

from __future__ import annotations

from perfmodel.core.memory import weight_bytes_by_group
from perfmodel.core.specs import Deployment, HardwareSpec, Precision
from perfmodel.core.units import GB, ms


def describe(d) -> str:
    par = f"tp={d.tp}" + (f" pp={d.pp}" if d.pp > 1 else "") + (f" ep={d.ep}" if d.ep > 1 else "")
    par += f" dp={d.dp}" if d.dp > 1 else ""
    return f"{d.count} x {d.gpu} ({par}), {d.precision}, {d.engine}"


def price_source(hw: HardwareSpec, prices: dict[str, float]) -> str | None:
    if hw.id not in prices:
        return None
    if hw.price is not None and prices[hw.id] == hw.price.usd_per_hour:
        if hw.price.source.startswith("user override"):   # $PERFMODEL_PRICES
            return hw.price.source
        return f"hardware_db ({hw.price.date}): {hw.price.source}"
    return "user override (--price)"


def _smallest_weights(m, precisions: list[str]) -> tuple[float, str]:
    best = (float("inf"), "")
    for text in precisions:
        w, _, kv = str(text).partition("/")
        try:
            p = Precision.of(w, kv or None)
        except ValueError:
            continue
        total = sum(weight_bytes_by_group(m, p, Deployment()).values())
        best = min(best, (total, text))
    return best


def infeasible_reason(ctx, nearest, hws: list[HardwareSpec], precisions: list[str]) -> str:
    """One sentence: which requirement no deployment meets, and the closest one."""
    if nearest is None:
        return (f"no valid deployment of {ctx.m.id} on the GPUs, precisions and engines searched "
                "(parallelism, precision or links not supported)")
    if nearest.binding == "memory":
        weights, prec = _smallest_weights(ctx.m, precisions)
        largest = max(hws, key=lambda h: h.memory_bytes)
        if weights > ctx.max_gpus * largest.memory_bytes:
            return (f"the weights alone ({weights / GB:.0f} GB at {prec}) exceed "
                    f"{ctx.max_gpus} x {largest.memory_bytes / GB:.0f} GB ({largest.id}); "
                    "allow more GPUs (--max-gpus) or a smaller precision")
        return (f"{ctx.m.id} with {ctx.prompt + ctx.output}-token sequences fits on no "
                f"deployment of at most {ctx.max_gpus} GPUs: the nearest, {describe(nearest)}, "
                "lacks room for the weights plus one sequence's KV cache")
    if nearest.binding in ("TPOT", "TTFT"):
        slo = ctx.tpot if nearest.binding == "TPOT" else ctx.ttft
        got = nearest.tpot_s if nearest.binding == "TPOT" else nearest.ttft_s
        return (f"no deployment meets {nearest.binding} {ms(slo):.4g} ms even at light load: "
                f"the nearest, {describe(nearest)}, reaches {ms(got or 0.0):.4g} ms")
    return (f"no deployment of at most {ctx.max_gpus} GPUs serves {ctx.rate:.4g} requests/s "
            f"within the targets: the nearest, {describe(nearest)}, serves "
            f"{nearest.goodput_rps:.4g} requests/s")


def assumptions(utilization: float) -> list[str]:
    return [
        "prices: on-demand USD per GPU-hour from hardware_db (dated, sourced) unless overridden",
        f"energy: TDP x {utilization} mean utilization x GPUs / output tok/s (GPU boards only)",
        "$/Mtok and J/token at the deployment's SLO-meeting capacity (fully used)",
        "Poisson arrivals, fixed prompt and output lengths; TTFT and TPOT targets on the mean",
        "admission wait: M/D/1 queue at the replica's peak rate",
    ]

