"""Engine versions of the serving rows where a prediction depends on one (core/engines.py holds
the version rules), and the version assumed for rows that state none.

vLLM's prompt attention on datacenter Blackwell: FlashAttention-2-class kernels before 0.11.1
(core/engines.py vllm_prefill_attention; docs/blackwell_vllm.md). The image-less Llama-70B
import (serving_provenance.py: measured 2025-10-29, no backend_version) is
assumed to have run 0.11.0, the last release on that date (0.11.1 followed in November);
InferenceMAX's B200 Llama-70B fp4 script pins flashinfer-python 0.3.0post1, of August 2025.
"""

from __future__ import annotations

from perfmodel.core.engine_versions import vllm_prefill_attention

AIC_INFERENCEMAX_VLLM_ASSUMED_VERSION = "0.11.0"


def vllm_prefill_kernels(engine: str, version: str | None,
                         versionless_import: bool) -> tuple[str | None, str]:
    """('fa2', note) for a vLLM row of a release before its TRT-LLM-gen prefill kernels, stated
    or, for a row of the version-less import (`versionless_import`), assumed; else (None, '')."""
    if engine != "vllm":
        return None, ""
    assumed = not (version or "").strip() and versionless_import
    if assumed:
        version = AIC_INFERENCEMAX_VLLM_ASSUMED_VERSION
    if vllm_prefill_attention(version) != "fa2":
        return None, ""
    how = (f"assumed {version} (no version in the row; measured 2025-10-29, the last release "
           "then)" if assumed else f"{version}")
    return "fa2", (f"engine: vLLM {how}: prompt steps run FlashAttention-2-class attention on "
                   "datacenter Blackwell (TRT-LLM-gen prefill only from 0.11.1, vLLM PR #25998; "
                   "core/engines.py)")
