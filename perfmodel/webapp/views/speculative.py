"""Speculative decoding: speed-up vs batch and gamma, the break-even batch, and the
acceptance a target speed-up needs (perfmodel.analysis.speculative)."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.units import MS
from perfmodel.webapp import charts_spec, data, inputs
from perfmodel.webapp.texts import num

GAMMAS = tuple(range(1, 9))


def render() -> None:
    scn = inputs.sidebar("speculative")
    st.title("Speculative decoding")
    from perfmodel.analysis.drafts import METHODS

    st.caption(f"Target: the sidebar's scenario at batch {scn.batch}, context {scn.prompt} tokens "
               "(the prompt length). Speed-up = tokens per target step x plain step / "
               "(verification + drafting + proposer overhead), every step from the same op list.")
    c = st.columns(5)
    methods = list(METHODS) + ([scn.spec_method] if scn.spec_method not in METHODS else [])
    c[0].selectbox("Method", methods, key="w_spec_method",
                   help="draft: a separate small model; eagle/eagle3/medusa/mtp: heads on the target; "
                        "ngram: prompt lookup, no draft model.")
    models = inputs.model_ids() + ([scn.spec_draft] if scn.spec_draft not in inputs.model_ids() else [])
    c[1].selectbox("Draft model", models, key="w_spec_draft", disabled=scn.spec_method != "draft",
                   help="Only for method 'draft'.")
    c[2].number_input("gamma (draft tokens)", 1, 64, step=1, key="w_spec_gamma",
                      help="Draft tokens proposed per target step (tree depth for tree methods).")
    c[3].slider("acceptance alpha", 0.0, 0.99, step=0.01, key="w_spec_alpha",
                help="Per-token probability that the target accepts a draft token.")
    c[4].number_input("target speed-up (x)", 0.1, 100.0, step=0.1, key="w_spec_target",
                      help="Solve for the acceptance this speed-up needs.")
    key = inputs.current().key(*data.SPEC_FIELDS)
    e = inputs.call(data.speculative, key, scn.spec_gamma)
    if e is None:
        return
    for w in e.warnings:
        st.warning(w)
    m = st.columns(5)
    m[0].metric("Speed-up", f"x{num(e.speedup)}", help="Plain decode step x tokens per step / speculative step.")
    m[1].metric("Tokens per target step", num(e.tokens_per_step),
                help="E = (1 - alpha^(gamma+1)) / (1 - alpha), bonus token included (Leviathan et al. 2023).")
    m[2].metric("TPOT", f"{num(e.tpot_s / MS)} ms", delta=f"{num(e.baseline_tpot_s / MS)} ms plain",
                delta_color="off", delta_arrow="off",
                help="Speculative step / tokens per step, vs one plain decode step.")
    m[3].metric("Break-even batch", str(e.breakeven_batch) if e.breakeven_batch else "none",
                help=f"Smallest batch where speculation is slower than plain decoding. {e.breakeven_note}")
    req = e.required_acceptance
    m[4].metric(f"alpha for x{num(scn.spec_target)}", num(req) if req is not None else "unreachable",
                help=f"Acceptance needed for the target speed-up at this batch. {e.required_note}")
    st.caption(f"Verification bound: {e.verify_bound} · optimal gamma at this alpha: {e.optimal_gamma} "
               f"(x{num(e.optimal_speedup)}) · drafter: {e.drafter} ({e.draft_precision}) · "
               f"{e.breakeven_note}")

    rows, fits = [], []
    heat_key = scn.key(*(f for f in data.SPEC_FIELDS if f != "spec_target"))   # target not needed
    for g in GAMMAS:
        eg = inputs.call(data.speculative, heat_key, g, False)
        if eg is None:
            return
        rows.append([p.speedup for p in eg.batch_curve])
        fits.append([p.fits for p in eg.batch_curve])
    batches = [p.batch for p in e.batch_curve]
    st.plotly_chart(charts_spec.speedup_heatmap(batches, GAMMAS, rows, fits), width="stretch")
    st.plotly_chart(charts_spec.speedup_vs_batch(batches, [p.speedup for p in e.batch_curve],
                                                 e.breakeven_batch, e.gamma),
                    width="stretch")


if __name__ == "__main__":
    render()
