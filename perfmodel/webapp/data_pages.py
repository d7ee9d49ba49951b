"""Cached calls for the serving, sizing and accuracy pages (plain hashable arguments,
perfmodel's typed results back)."""

from __future__ import annotations

import streamlit as st

from perfmodel.units import MS
from perfmodel.webapp.data import CACHE, api_kwargs
from perfmodel.webapp.state import UIScenario, profile_target, target


@st.cache_data(**CACHE)
def serve(key: str, concurrencies: tuple[int, ...]):
    """perfmodel.serving.serve_curve at these concurrencies, and its knee."""
    from perfmodel.serving import find_knee, serve_curve

    scn = UIScenario.from_key(key)
    curve = serve_curve(**api_kwargs(scn), prompt=scn.prompt, output=scn.output,
                        concurrencies=list(concurrencies))
    return curve, find_knee(curve)


@st.cache_data(**CACHE, ttl=3600)
def sizing(key: str):
    """perfmodel.sizing.size for the scenario's model and lengths and the page's targets."""
    from perfmodel.sizing import size

    scn = UIScenario.from_key(key)
    return size(target(scn.model, "model"), rate_rps=scn.size_rate, prompt=scn.prompt,
                output=scn.output, ttft_slo_s=scn.size_ttft_ms * MS, tpot_slo_s=scn.size_tpot_ms * MS,
                gpus=list(scn.size_gpus) or None, precisions=list(scn.size_precisions) or None,
                engines=list(scn.size_engines) or None, max_gpus=scn.size_max_gpus,
                profile=profile_target(scn.profile))


@st.cache_data(show_spinner="Validating against the measurement tables...", ttl=3600)
def validation():
    """perfmodel.validate.validate() over the repository's tables and committed profiles."""
    from perfmodel.validate import validate

    return validate()
