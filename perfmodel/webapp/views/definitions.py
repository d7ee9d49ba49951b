"""Definitions: every metric, the bound regimes, the assumptions, the engine presets and
the default efficiencies, in one place (the tooltips of the other pages quote this text)."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.efficiency import default_efficiency, sustained_clock_fraction
from perfmodel.core.engines import ENGINES
from perfmodel.core.hardware import list_gpus
from perfmodel.core.units import MiB, MS, US
from perfmodel.webapp import inputs
from perfmodel.webapp.texts import ASSUMPTIONS, DEFINITIONS

BOUNDS = {
    "memory": "Bytes / (bandwidth x efficiency) exceeds FLOPs / (peak x efficiency): weights and "
              "KV cache must stream from device memory every step. Decode at small batch.",
    "compute": "FLOPs / achievable peak dominates: large batches, long prompts (prefill), "
               "speculative verification at large batch.",
    "communication": "Tensor/pipeline/expert-parallel collectives take the largest share of the step.",
    "overhead": "The CPU (Python, scheduler, kernel launches) cannot issue the step's kernels as "
                "fast as the GPU runs them: eager PyTorch at small batch. CUDA graphs remove most of it.",
}


def engines_table() -> dict[str, list]:
    rows = list(ENGINES.values())
    return {
        "engine": [e.id for e in rows], "name": [e.name for e in rows],
        "kernels / layer": [e.kernels_per_layer for e in rows],
        "launch (us / kernel)": [e.launch_s / US for e in rows],
        "graph replay (us / step)": [e.graph_launch_s / US for e in rows],
        "prompt steps in graphs up to (tokens)": [e.prefill_graph_max_tokens for e in rows],
        "eager prompt-step launch (us / kernel)": [e.eager_launch_s / US for e in rows],
        "eager issue hidden by the GPU": [e.eager_issue_overlap for e in rows],
        "decode graphs up to (sequences)": [e.decode_graph_max_batch for e in rows],
        "all-reduce on NVLink SHARP (MiB)": [_nvls_window(e) for e in rows],
        "CPU overhead (ms / step)": [e.cpu_overhead_per_step_s / MS for e in rows],
        "per request (ms)": [e.per_request_overhead_s / MS for e in rows],
        "host per sequence (us / step)": [e.host_per_seq_s / US for e in rows],
        "host work overlapped": [e.host_overlap for e in rows],
        "attention": [e.attention for e in rows], "batching": [e.batching for e in rows],
        "KV memory fraction": [e.kv_memory_fraction for e in rows],
        "KV block (tokens)": [e.kv_block_tokens for e in rows],
        "low-bit kernel eff.": [e.quant_kernel_efficiency for e in rows],
        "fp8": [e.supports_fp8 for e in rows], "source": [e.source for e in rows],
    }


def _nvls_window(e) -> str:
    """The engine's NVLS all-reduce window as text: 'never', 'above a', 'a - b' (MiB)."""
    lo, hi = e.allreduce_nvls_window
    if hi == 0:
        return "never"
    return f"above {lo / MiB:.3g}" if hi is None else f"{lo / MiB:.3g} - {hi / MiB:.3g}"


_EFF_COLUMNS = (("memory bw", "mem_bw_fraction", 1.0), ("GEMM max", "gemm_max", 1.0),
                ("GEMM half-M (rows)", "gemm_half_m", 1.0),
                ("fused-MoE kernel fraction", "grouped_kernel_fraction", 1.0),
                ("attention compute", "attn_compute", 1.0), ("attention KV read", "attn_mem", 1.0),
                ("kernel (us)", "kernel_s", 1 / US), ("link", "link_fraction", 1.0))

SUSTAINED_COLUMN = "compute clock under load (x burst)"   # core/efficiency.sustained_clock_fraction


def efficiency_table() -> dict[str, list]:
    """One row per vendor, memory type and set of default efficiencies (cards of one memory
    type can differ: datacenter Blackwell's fused-MoE kernel fraction, core/efficiency.py)."""
    seen: dict[tuple, list[str]] = {}
    for hw in list_gpus():
        e = default_efficiency(hw)
        vals = (tuple(getattr(e, f) * scale for _, f, scale in _EFF_COLUMNS)
                + (sustained_clock_fraction(hw, e),))
        seen.setdefault((hw.vendor, hw.memory_type, vals), []).append(hw.id)
    cols: dict[str, list] = {k: [] for k in ("vendor", "memory", "cards")}
    cols.update({name: [] for name, _, _ in _EFF_COLUMNS})
    cols[SUSTAINED_COLUMN] = []
    for (vendor, mem, vals), ids in sorted(seen.items()):
        cols["vendor"].append(vendor)
        cols["memory"].append(mem)
        cols["cards"].append(", ".join(ids))
        for name, v in zip([n for n, _, _ in _EFF_COLUMNS] + [SUSTAINED_COLUMN], vals):
            cols[name].append(v)
    return cols


def render() -> None:
    inputs.keep_url("definitions")
    st.title("Definitions")
    st.subheader("Metrics")
    st.table({"metric": [v[0] for v in DEFINITIONS.values()],
              "unit": [v[1] or "label" for v in DEFINITIONS.values()],
              "definition": [v[2] for v in DEFINITIONS.values()]})
    st.subheader("Bound regimes")
    for name, text in BOUNDS.items():
        st.markdown(f"- **{name}**: {text}")
    st.subheader("Assumptions")
    for text in ASSUMPTIONS:
        st.markdown(f"- {text}")
    st.subheader("Engine presets (perfmodel/core/engines.py)")
    st.dataframe(engines_table(), hide_index=True)
    st.subheader("Default efficiencies (perfmodel/core/efficiency.py)")
    st.caption("Achievable fractions of the datasheet per vendor and memory type; a calibrated "
               "profile replaces them. GEMM efficiency at M token rows = GEMM max x M / (M + half-M).")
    st.dataframe(efficiency_table(), hide_index=True)


if __name__ == "__main__":
    render()
