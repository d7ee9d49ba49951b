"""Cached calls for the serving, sizing and accuracy pages (plain hashable arguments,
perfmodel's typed results back)."""

from __future__ import annotations


import streamlit as st

from perfmodel.webapp.data import CACHE, api_kwargs, ui_query
from perfmodel.webapp.state import UIScenario, profile_target, target


@st.cache_data(**CACHE)
def serve(key: str, concurrencies: tuple[int, ...]):
    """perfmodel.api.serve (the simulated closed-loop benchmark) at these concurrencies, and
    its knee by the one rule (perfmodel.serving.knee), read on p50 latencies as for measured
    curves (None when fewer than two levels ran)."""
    from perfmodel import api
    from perfmodel.serving.knee import KneePoint, find_knee

    scn = UIScenario.from_key(key)
    rep = api.serve(ui_query(scn), concurrencies=list(concurrencies))
    ran = [KneePoint(concurrency=p.concurrency, output_tok_s_total=p.output_tok_s_total,
                     e2e_s=p.e2e_p50_s, ttft_s=p.ttft_p50_s, tpot_s=p.tpot_p50_s)
           for p in rep.points if p.fits and p.output_tok_s_total and p.e2e_p50_s is not None]
    return rep, (find_knee(ran) if len(ran) >= 2 else None)


SIZING_FIELDS = ("size_rate", "size_ttft_slo_s", "size_tpot_slo_s", "size_gpus", "size_precisions",
                 "size_engines", "size_max_gpus")


@st.cache_data(**CACHE, ttl=3600)
def sizing(key: str):
    """perfmodel.analysis.sizing.size for the scenario's model and lengths and the page's targets."""
    from perfmodel.analysis.sizing import size

    scn = UIScenario.from_key(key)
    return size(target(scn.model, "model"), rate_rps=scn.size_rate, prompt=scn.prompt,
                output=scn.output, ttft_slo_s=scn.size_ttft_slo_s, tpot_slo_s=scn.size_tpot_slo_s,
                gpus=list(scn.size_gpus) or None, precisions=list(scn.size_precisions) or None,
                engines=list(scn.size_engines) or None, max_gpus=scn.size_max_gpus,
                profile=profile_target(scn.profile))


@st.cache_data(show_spinner="Validating against the measurement tables...", ttl=3600)
def validation():
    """perfmodel.analysis.validation.run.validate() over the repository's tables and committed profiles."""
    from perfmodel.analysis.validation.run import validate

    return validate()


@st.cache_data(show_spinner="Running the preset (attribution and lever search)...", ttl=3600)
def preset(preset_id: str):
    """perfmodel.analysis.claims.run_preset: a seed document's numbers beside the model's."""
    from perfmodel.analysis.claims import run_preset

    return run_preset(preset_id)


def claim_baseline(scn: UIScenario):
    """The sidebar's scenario as a perfmodel.analysis.claims Scenario (the claim's baseline),
    on the sidebar's whole layout: tp, pp, ep, attention dp and nodes, as ui_query names them."""
    from perfmodel.analysis.claims import Scenario

    kw = api_kwargs(scn)
    return Scenario(name="sidebar scenario", batch=scn.batch, prompt_tokens=scn.prompt,
                    output_tokens=scn.output,
                    **{k: kw[k] for k in ("model", "gpu", "tp", "pp", "ep", "dp", "nodes", "weights",
                                          "kv", "activations", "engine", "profile")})


@st.cache_data(show_spinner="Searching lever combinations...", ttl=3600)
def explain_claim(key: str):
    """perfmodel.analysis.claims.explain for the page's claim against the sidebar's scenario."""
    from perfmodel.analysis.claims import explain

    scn = UIScenario.from_key(key)
    return explain(scn.claim_text, scn.claim_metric, claim_baseline(scn))


@st.cache_data(show_spinner="Fitting the profile (least squares on log time)...", ttl=3600,
               max_entries=16)
def calibration(raw_ref: str, gpu: str):
    """perfmodel.analysis.calibration.fit_profile on a raw bench result -> (Profile, FitReport, the
    profile stored as an upload ref so every page can use it)."""
    import tempfile
    from pathlib import Path

    from perfmodel.analysis.calibration import fit_profile, read_raw
    from perfmodel.core.profile import save_profile
    from perfmodel.webapp.state import raw_target, save_upload

    prof, report = fit_profile(read_raw(raw_target(raw_ref)), target(gpu, "gpu") if gpu else None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.yaml"
        save_profile(prof, path)
        ref = save_upload("profile", path.read_bytes(), "profile.yaml")
    return prof, report, ref


@st.cache_data(**CACHE)
def profile_file(ref: str) -> tuple[str, object]:
    """A stored profile's text and its parsed Profile."""
    from pathlib import Path

    from perfmodel.core.profile import load_profile

    path = profile_target(ref)
    return Path(path).read_text(encoding="utf-8"), load_profile(path)


@st.cache_data(**CACHE)
def simulate(key: str, levels: tuple[int, ...], num_requests: int, range_ratio: float,
             prefix_hit: float):
    """perfmodel.api.serve: a simulated closed-loop benchmark at each level, with timelines."""
    from perfmodel import api

    scn = UIScenario.from_key(key)
    q = ui_query(scn).with_(num_requests=num_requests or None, range_ratio=range_ratio,
                            prefix_hit=prefix_hit)
    return api.serve(q, concurrencies=list(levels), timeline=True)


@st.cache_data(**CACHE)
def measured_serving(key: str):
    """Measured serving points (data/serving) of exactly the scenario's configuration."""
    from perfmodel.analysis.validation.serving_run import measured_points

    scn = UIScenario.from_key(key)
    return measured_points(scn.model, scn.gpu, scn.engine, scn.weights, tp=scn.tp, pp=scn.pp,
                           ep=scn.ep, dp=scn.dp, prompt=scn.prompt, output=scn.output)
