"""Laying a deployment's GPUs over servers (nodes): which GPUs share the scale-up link.

The hardware YAML states a server's GPUs (`gpus_per_node`: 8 on an HGX board, 4 on a GB200
compute tray) and the GPUs of one scale-up (NVLink) domain (`scale_up_gpus`: 8 on HGX, 72 on
GB200 NVL72, where 18 trays share one NVLink switch fabric). A layout of G = tp x dp x pp
GPUs placed on N nodes puts G / N GPUs in each node; the GPUs that reach each other over
NVLink are then the node's share times the nodes of one NVLink domain:

    domain = (G / N) x min(N, scale_up_gpus / gpus_per_node)

Collectives of groups larger than `domain` cross the inter-node link (core/parallel.py
`domain_gpus`, `link_for`, `group_allreduce_s`, `alltoall_s`). Spreading tp 8 over two HGX
nodes (4 + 4) thus moves its all-reduces onto the NIC, while on an NVL72 rack it stays on
NVLink.
"""

from __future__ import annotations

from perfmodel.core.errors import PerfModelError
from perfmodel.core.specs import HardwareSpec

DEFAULT_NODE_GPUS = 8
"""GPUs of one server when the hardware YAML states neither gpus_per_node nor scale_up_gpus
(an HGX board: the common multi-GPU server)."""


def node_gpus(hw: HardwareSpec) -> int:
    """GPUs one server of this accelerator holds (hardware YAML)."""
    return hw.gpus_per_node or hw.scale_up_gpus or DEFAULT_NODE_GPUS


def nodes_domain(hw: HardwareSpec, gpus: int, nodes: int) -> int:
    """GPUs sharing the scale-up link when `gpus` GPUs are laid evenly over `nodes` nodes;
    a one-line PerfModelError naming the constraint when they cannot be."""
    per_server = node_gpus(hw)
    if nodes > gpus:
        raise PerfModelError(f"--nodes {nodes} is more nodes than the layout's {gpus} GPUs "
                             "(tp x dp x pp): each node needs at least one")
    if gpus % nodes:
        raise PerfModelError(f"the layout's {gpus} GPUs (tp x dp x pp) do not divide evenly over "
                             f"--nodes {nodes}")
    per_node = gpus // nodes
    if per_node > per_server:
        raise PerfModelError(f"the layout's {gpus} GPUs over --nodes {nodes} put {per_node} on "
                             f"each node; a {hw.id} node holds {per_server} (hardware_db "
                             f"gpus_per_node): use at least {-(-gpus // per_server)} nodes")
    nodes_per_domain = max(1, (hw.scale_up_gpus or per_server) // per_server)
    return per_node * min(nodes, nodes_per_domain)
