"""Claim checker: the seed documents as presets (their numbers beside the model's) and
free-form claims against the sidebar's scenario (perfmodel.analysis.claims): lever waterfall,
combinations with verdicts, the physical limit and the assumptions a claim needs."""

from __future__ import annotations

import streamlit as st

from perfmodel.webapp import charts_claims, data_pages, inputs
from perfmodel.webapp.texts import num


def unit_of(metric: str) -> str:
    from perfmodel.analysis.claims import METRICS

    return METRICS[metric][0] if metric in METRICS else ""


def verdict_box(text: str) -> None:
    low = text.lower()
    if "implausible" in low or "not supported" in low or "beyond" in low:
        st.error(text)
    elif "changing the model" in low or "weak baseline" in low:
        st.warning(text)
    elif "plausible" in low or "supported" in low:
        st.success(text)
    else:
        st.info(text)


def regimes(steps) -> None:
    """What bounds the step before and after each lever (memory, compute, overhead...)."""
    if steps:
        st.caption("Bound regime, lever by lever: " + " · ".join(
            f"{s.lever}: {s.regime_before} → {s.regime_after}" for s in steps))


def combinations_table(combos) -> None:
    st.dataframe({"levers": [" + ".join(c.levers) for c in combos],
                  "moves": [" · ".join(c.moves) for c in combos],
                  "factor (x)": [num(c.factor) for c in combos],
                  "stretch": [num(c.stretch) for c in combos],
                  "verdict": [c.verdict for c in combos],
                  "kind": [("changes the model: " + ", ".join(c.changes_output))
                           if c.changes_output else "system" for c in combos],
                  "weak baseline": [", ".join(c.weak_baseline) for c in combos]}, hide_index=True)


def notes(assumptions, warnings) -> None:
    for w in warnings:
        st.warning(w)
    if assumptions:
        with st.expander(f"Assumptions ({len(assumptions)})"):
            for a in assumptions:
                st.markdown(f"- {a}")


def show_preset(pid: str) -> None:
    rep = inputs.call(data_pages.preset, pid)
    if rep is None:
        return
    st.subheader(rep.title)
    st.caption(f"Seed: {rep.seed}. {rep.summary}")
    verdict_box(rep.verdict)
    supported = sum(r.verdict == "supported" for r in rep.source_vs_model)
    judged = sum(r.verdict in ("supported", "not supported") for r in rep.source_vs_model)
    m = st.columns(3)
    m[0].metric("Model's factor", f"x{num(rep.total)}",
                help=f"The headline comparison on {rep.metric} (> 1: better; latency and cost as "
                     "baseline / improved).")
    m[1].metric("Source numbers supported", f"{supported} / {judged}",
                help="Within 25% of the model (ranges and bounds widened by 25%).")
    m[2].metric("Lever combinations found", str(len(rep.combinations)),
                help="Combinations of levers moved from the baseline that reach the source's claim, "
                     "ranked by how far each lever is stretched (1.0: the edge of its range).")
    left, right = st.columns(2)
    left.plotly_chart(charts_claims.lever_waterfall(rep.factors, rep.metric, unit_of(rep.metric)),
                      width="stretch")
    right.plotly_chart(charts_claims.shapley_bars(rep.shapley), width="stretch")
    regimes(rep.factors)
    st.markdown("**The source's numbers beside the model's**")
    rows = rep.source_vs_model
    st.dataframe({"step": [r.step for r in rows], "quantity": [r.quantity for r in rows],
                  "unit": [r.unit for r in rows],
                  "source": [("-".join(num(v) for v in r.source) if isinstance(r.source, list)
                              else num(r.source) if r.source is not None else "") for r in rows],
                  "model": [num(r.model) if r.model is not None else "n/a" for r in rows],
                  "verdict": [r.verdict for r in rows], "why": [r.why for r in rows]}, hide_index=True)
    for c in rep.source_checks:
        if not c.consistent:
            st.warning(f"The source contradicts itself: {c.step}, {c.quantity}: {c.why}")
    st.markdown("**Lever combinations that reach the claim**")
    combinations_table(rep.combinations)
    notes(rep.assumptions, rep.warnings)


def show_free(scn) -> None:
    from perfmodel.analysis.claims import METRICS

    with st.form("claim"):
        c = st.columns([1, 2])
        c[0].text_input("Claimed factor", key="w_claim_text", help="14x, 2.5, or 50% (= 1.5x).")
        metrics = list(METRICS) + ([scn.claim_metric] if scn.claim_metric not in METRICS else [])
        c[1].selectbox("On which metric", metrics, key="w_claim_metric",
                       format_func=lambda k: f"{k}: {METRICS[k][2]}" if k in METRICS else k)
        st.form_submit_button("Check the claim")
    scn = inputs.current()
    st.caption("Baseline: the sidebar's scenario, on its whole layout (TP, PP, EP, DP, Nodes). "
               "The search moves levers (precision, batching, engine, parallelism, speculation, "
               "model, hardware, routing) from it.")
    ex = inputs.call(data_pages.explain_claim, scn.key("claim_text", "claim_metric"))
    if ex is None:
        return
    verdict_box(f"{ex.verdict}: {ex.reason}")
    m = st.columns(3)
    m[0].metric("Baseline", f"{num(ex.baseline_value)} {ex.unit}", help=ex.direction)
    m[1].metric("Claimed", f"{num(ex.claimed_value)} {ex.unit}", help=f"x{num(ex.claim)} the baseline")
    m[2].metric("Physical limit", f"{num(ex.physics.limit_value)} {ex.unit}", help=ex.physics.statement)
    if ex.physics.beyond:
        st.error(ex.physics.statement)
    else:
        st.caption(ex.physics.statement)
    left, right = st.columns(2)
    left.plotly_chart(charts_claims.lever_waterfall(ex.factors, ex.metric, ex.unit,
                                                    "Top combination, lever by lever"), width="stretch")
    right.plotly_chart(charts_claims.shapley_bars(ex.shapley), width="stretch")
    regimes(ex.factors)
    for line in ex.lever_notes:       # levers that cannot keep the layout, or were not evaluated
        st.info(line)
    combinations_table(ex.combinations)
    if ex.inverse:
        st.markdown("**What would have to be true**")
        for i in ex.inverse:
            st.markdown(f"- {i.statement}")
    notes(ex.assumptions, ex.warnings)


def render() -> None:
    scn = inputs.sidebar("claims")
    st.title("Claim checker")
    from perfmodel.analysis import claims
    st.radio("Check", ["preset", "free"], key="w_claim_mode", horizontal=True,
             format_func=lambda k: {"preset": "a seed document (preset)",
                                    "free": "my own claim against the sidebar scenario"}[k])
    if scn.claim_mode == "preset":
        presets = dict(claims.list_presets())
        ids = list(presets) + ([scn.claim_preset] if scn.claim_preset and scn.claim_preset not in presets else [])
        if not scn.claim_preset and ids:
            st.session_state["w_claim_preset"] = ids[0]
        st.selectbox("Preset", ids, key="w_claim_preset", format_func=lambda k: presets.get(k, k))
        show_preset(st.session_state["w_claim_preset"])
    else:
        show_free(scn)


if __name__ == "__main__":
    render()
