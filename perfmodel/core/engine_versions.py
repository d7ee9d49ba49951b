"""Engine release numbers and the behaviour that changes with them (core/engines.py presets
are version-less; the serving validation picks these per measured row)."""

from __future__ import annotations

import re

# vLLM's prefill attention on datacenter Blackwell, by version (EngineProfile.prefill_attention):
# FlashAttention 3 does not run on sm_100, so vLLM's prompt steps there ran FlashAttention-2-class
# kernels (vllm-flash-attn FA2, or the FlashInfer backend, vLLM's choice on Blackwell, whose
# prefill wrapper picks its fa2 backend on sm_100: flashinfer PR #5133) until its FlashInfer
# backend sent prompts to the TRT-LLM-gen kernels: those were used "only for <= 256 tokens
# despite being faster" until vllm-project/vllm PR #25998 (opened 2025-10-01, after the v0.11.0
# release branch; first release taken to be 0.11.1, an assumption: the stored thread has no
# merge date). The decode path has run TRT-LLM-gen kernels since PR #19825 (2025-07), which the
# default (native) rates price.
VLLM_NATIVE_PREFILL_SINCE = (0, 11, 1)


def release_of(version: str | None) -> tuple[int, int, int] | None:
    """An engine version's release number: '0.10.2' / 'v0.19.0' / '0.11.0rc1' -> (0, 10, 2) ...,
    '0.14' -> (0, 14, 0); None for nightlies and the unknown."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (version or "").strip().lower())
    return tuple(int(g or 0) for g in found.groups()) if found else None


def vllm_prefill_attention(version: str | None) -> str | None:
    """'fa2' for a vLLM release before VLLM_NATIVE_PREFILL_SINCE, 'native' from it, None when
    the version is not a release number (nightly builds, unknown): the preset's default."""
    release = release_of(version)
    if release is None:
        return None
    return "fa2" if release < VLLM_NATIVE_PREFILL_SINCE else "native"
