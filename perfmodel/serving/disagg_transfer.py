"""Moving a request's KV cache from its prefill worker to its decode worker.

One request's prompt KV (P tokens) lives on the tp x pp GPUs of one prefill attention group;
each GPU sends its own shard over its own link, in parallel, so one transfer takes
    t = latency + bytes_per_gpu / (link bandwidth x link efficiency)
with bytes_per_gpu = kv_cache_bytes(batch 1, context P) on the prefill layout (heads split over
tp, layers over pp; an MLA latent replicated on every tp rank is sent by each rank).
The link: NVLink (HardwareSpec.intra_node_link) when every GPU of both pools sits in one
scale-up domain (HardwareSpec.scale_up_gpus: 72 on GB200 NVL72, 8 on an HGX board), else the
scale-out network (HardwareSpec.inter_node_link, a per-GPU NIC).

Overlap (assumption, stated in every report): the default connectors send after the prefill
forward completes (vLLM NixlConnector: the decode worker pulls the finished blocks; SGLang PD
with Mooncake/NIXL: the transfer starts after the prefill batch; TensorRT-LLM's cache
transceiver: after the context phase), so the whole transfer is exposed. With
`layerwise=True` (Mooncake's layer-wise store, Qin et al. 2024, "Mooncake", section 5.2) each
layer's KV leaves while the next layer computes and only the last layer's share plus the
latency is exposed. Transfers out of one prefill worker share its links: they go one at a
time, in completion order.
"""

from __future__ import annotations

import numpy as np

from perfmodel.core.errors import PerfModelError
from perfmodel.core.memory import kv_cache_bytes
from perfmodel.core.parallel import domain_gpus
from perfmodel.core.predict import Scenario
from perfmodel.core.specs import Deployment, LinkSpec


def pool_link(sc: Scenario, total_gpus: int) -> tuple[LinkSpec, str]:
    """The link between the pools and which one it is ('scale-up' or 'scale-out')."""
    hw = sc.hw
    g = domain_gpus(hw, sc.dep)
    if total_gpus <= g and hw.intra_node_link is not None:
        return hw.intra_node_link, "scale-up"
    if hw.inter_node_link is None:
        raise PerfModelError(f"the disaggregated layout uses {total_gpus} GPUs, more than one "
                             f"scale-up domain of {g}, and {hw.id} has no inter-node link in "
                             "hardware_db to move the KV cache between the pools")
    return hw.inter_node_link, "scale-out"


def transfer_bytes_per_gpu(sc: Scenario, prompt_tokens: float) -> float:
    """KV bytes one prefill GPU sends for one request of `prompt_tokens` (its attention group:
    tp x pp GPUs; attention DP does not split one request)."""
    d = sc.dep
    group = Deployment(tp=d.tp, pp=d.pp, gpus_per_node=d.gpus_per_node)
    return float(kv_cache_bytes(sc.model, sc.precision, batch=1, context=int(prompt_tokens),
                                dep=group))


def transfer_s(sc: Scenario, link: LinkSpec, prompt_tokens: np.ndarray,
               layerwise: bool = False) -> np.ndarray:
    """Exposed seconds of each request's KV transfer (prompt_tokens: array)."""
    uniq = np.unique(prompt_tokens)
    per_len = np.array([transfer_bytes_per_gpu(sc, p) for p in uniq.tolist()])
    nbytes = per_len[np.searchsorted(uniq, prompt_tokens)] if uniq.size else np.zeros(0)
    wire = nbytes / (link.bandwidth_bytes_per_s * sc.eff.link)
    if layerwise:
        wire = wire / sc.model.num_layers                 # only the last layer is exposed
    return link.latency_s + wire


def schedule_transfers(done_s: np.ndarray, worker: np.ndarray, xfer_s: np.ndarray) -> np.ndarray:
    """Arrival at the decode pool: each prefill worker sends one transfer at a time, in the
    order its prefills complete."""
    arrive = np.empty_like(done_s)
    for w in np.unique(worker):
        idx = np.flatnonzero(worker == w)
        idx = idx[np.argsort(done_s[idx], kind="stable")]
        free = -np.inf
        for i in idx:
            start = max(done_s[i], free)
            free = start + xfer_s[i]
            arrive[i] = free
    return arrive
