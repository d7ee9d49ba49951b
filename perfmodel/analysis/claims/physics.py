"""The physical limit of a metric for a baseline's model on its GPUs, from the roofline floor.

A decode step must read the weights it touches and the KV cache at least once, so per user
    tok/s <= tokens per pass / max(bytes / (peak bandwidth), FLOPs / peak) per GPU
(roofline_floor_s, with the tensor-parallel share of each GPU). Tokens per pass is 1
without speculative decoding, gamma+1 with it (every draft token accepted). The floor is
taken at the most compact precision a claim could use (4-bit weights and KV cache, group
scales included), so a claim beyond it is beyond physics on that hardware for that model
whatever the software does; other hardware or a smaller model are levers of their own.
TTFT >= the prefill floor; E2E >= prefill floor + (O-1) decode floors; aggregate tok/s at
the largest batch that fits at 4-bit; $/Mtok >= price / that throughput.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.analysis.claims.scenario import Scenario, hardware, metric_info, model_spec
from perfmodel.core.cost import usd_per_mtok
from perfmodel.core.memory import estimate_memory
from perfmodel.core.roofline import roofline_floor_s
from perfmodel.core.specs import Deployment, Precision
from perfmodel.core.topology import nodes_domain
from perfmodel.core.units import GB

COMPACT = ("int4", "int4")   # the most compact weights and KV any lever range reaches


class Physics(BaseModel):
    """The claimed value against the physical limit on the baseline's GPUs and model."""

    model_config = ConfigDict(frozen=True)
    claimed_value: float
    limit_value: float
    beyond: bool
    statement: str


def limit(f: Scenario, metric: str, claimed_value: float) -> Physics:
    """Physical limit of `metric` for filled scenario f (see module docstring)."""
    unit, higher, _ = metric_info(metric)
    m, hw = model_spec(f.model), hardware(f.gpu)
    dep = Deployment(tp=f.tp, pp=f.pp, ep=f.ep, dp=f.dp or 1)
    if f.nodes is not None:      # the servers the GPUs are laid over, as the Query resolves them
        dep = dep.model_copy(update={"gpus_per_node": nodes_domain(hw, dep.num_gpus, f.nodes)})
    prec = Precision.of(COMPACT[0], COMPACT[1])
    B, P, O = f.width, f.prompt_tokens, f.output_tokens
    per_pass = f.speculative.draft_tokens + 1 if f.speculative is not None else 1
    if metric == "output_tok_s_total" or metric == "usd_per_mtok":
        mem = estimate_memory(m, hw, prec, batch=1, context=P + O, dep=dep)
        B = max(B, mem.max_batch)
    dec = float(roofline_floor_s(m, hw, prec, B, 1, P + O // 2, dep)) / per_pass
    pre = float(roofline_floor_s(m, hw, prec, B, P, 0, dep))
    e2e = pre + max(O - 1, 0) * dec
    gpus = dep.num_gpus
    values = {"decode_tok_s_per_user": 1.0 / dec, "tpot_s": dec, "ttft_s": pre, "e2e_s": e2e,
              "output_tok_s_total": B * O / e2e}
    if f.usd_per_gpu_hour is not None:
        values["usd_per_mtok"] = usd_per_mtok(f.usd_per_gpu_hour * gpus,
                                              values["output_tok_s_total"])
    lim = values.get(metric)
    if lim is None:
        return Physics(claimed_value=claimed_value, limit_value=0.0, beyond=False,
                       statement=f"no physical limit for {metric} without a price")
    beyond = claimed_value > lim if higher else claimed_value < lim
    where = (f"{gpus} x {hw.name} serving {m.id} at batch {B}, 4-bit weights and KV"
             + (f", up to {per_pass} tokens per pass" if per_pass > 1 else
                ", one token per pass (no speculative decoding)"))
    if metric in ("decode_tok_s_per_user", "tpot_s"):
        rate = claimed_value if higher else 1.0 / claimed_value
        need = rate * dec * hw.memory_bandwidth_bytes_per_s   # bytes/s per GPU at the floor
        text = (f"{rate:.4g} tok/s per user needs {need / GB:.4g} GB/s per GPU; the memory "
                f"delivers at most {hw.memory_bandwidth_bytes_per_s / GB:.4g} GB/s "
                f"(limit {1.0 / dec:.4g} tok/s on {where})")
    else:
        text = (f"claimed {claimed_value:.4g} {unit}; the roofline limit is {lim:.4g} {unit} "
                f"on {where}")
    return Physics(claimed_value=claimed_value, limit_value=lim, beyond=bool(beyond),
                   statement=("beyond physics: " if beyond else "within physics: ") + text)
