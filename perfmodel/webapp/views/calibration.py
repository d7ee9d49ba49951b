"""Calibration: fit a profile to a calibrate/bench.py result (perfmodel.analysis.calibration), show
fitted vs measured with residuals, download the profile, and use it on every page; or load
a profile YAML directly."""

from __future__ import annotations

import streamlit as st

from perfmodel.core.units import US
from perfmodel.webapp import charts_calib, data_pages, inputs, state
from perfmodel.webapp.texts import num


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _use(ref: str) -> None:
    """Button callback (runs before the script): make the profile the scenario's."""
    inputs.remember("profile", ref)
    inputs.set_field("profile", ref)


def _on_upload(kind: str, upload_key: str, field: str) -> None:
    """Uploader callback: store the file, remember it, make it the scenario's `field`."""
    ref = inputs.store_upload(kind, upload_key)
    if ref is None:
        return
    inputs.remember(field, ref)
    inputs.set_field(field, ref)


def fit_section(scn) -> None:
    res = inputs.call(data_pages.calibration, scn.calib_raw, scn.calib_gpu)
    if res is None:
        return
    prof, rep, ref = res
    m = st.columns(4)
    m[0].metric("Held-out median error", pct(rep.held_out.median_abs_err),
                delta=f"datasheet {pct(rep.held_out.datasheet_median_abs_err)}",
                delta_color="off", delta_arrow="off",
                help="Median |predicted / measured - 1| on the points the fit never saw, calibrated; "
                     "below it the same points predicted from the datasheet defaults.")
    m[1].metric("Fit-point median error", pct(rep.fit.median_abs_err),
                delta=f"datasheet {pct(rep.fit.datasheet_median_abs_err)}",
                delta_color="off", delta_arrow="off",
                help="The same on the points the least-squares fit used.")
    m[2].metric("Points", f"{rep.fit.points} + {rep.held_out.points}", help="Fit + held-out e2e points.")
    m[3].metric("Card", rep.gpu, help=f"Device: {rep.device}")
    left, right = st.columns(2)
    left.plotly_chart(charts_calib.fitted_vs_measured(rep.points), width="stretch")
    right.plotly_chart(charts_calib.residuals(rep.points), width="stretch")
    st.dataframe({"parameter": [p.name for p in rep.params], "value": [num(p.value) for p in rep.params],
                  "datasheet / preset": [num(p.datasheet) for p in rep.params],
                  "status": [p.status for p in rep.params], "source": [p.source for p in rep.params],
                  "note": [p.note for p in rep.params]}, hide_index=True)
    text, _ = data_pages.profile_file(ref)
    c = st.columns(2)
    c[0].download_button("Download the profile (YAML)", text, file_name=f"{rep.gpu}.yaml",
                         mime="application/x-yaml")
    active = scn.profile == ref
    c[1].button("In use on every page" if active else "Use this profile on every page",
                on_click=_use, args=(ref,), disabled=active)
    if rep.notes:
        with st.expander(f"Fit notes ({len(rep.notes)})"):
            for n in rep.notes:
                st.markdown(f"- {n}")


def profile_section(scn) -> None:
    if not scn.profile:
        st.info("No profile in use: every page predicts from datasheet efficiencies.")
        return
    res = inputs.call(data_pages.profile_file, scn.profile)
    if res is None:
        return
    _, prof = res
    err = (prof.meta or {}).get("fit_error", {}).get("held_out", {})
    st.success(f"In use on every page: {state.label(scn.profile)} — fitted on {prof.gpu or 'any card'}"
               + (f", held-out median error {pct(err.get('median_abs_err'))}" if err else "")
               + f"; engines: {', '.join(prof.engines) or 'none'}.")
    if prof.efficiency is not None:
        e = prof.efficiency
        st.caption(f"Efficiencies: memory bw {num(e.mem_bw_fraction)}, GEMM max {num(e.gemm_max)}, GEMM half-M "
                   f"{num(e.gemm_half_m)} rows, attention KV read {num(e.attn_mem)}, kernel "
                   f"{num(e.kernel_s / US)} us.")


def render() -> None:
    scn = inputs.sidebar("calibration")
    st.title("Calibration")
    st.caption("Run `perfmodel calibrate run` (or `python calibrate/bench.py`) on your GPU, then fit "
               "its raw JSON here; or load a profile YAML. The profile replaces the datasheet "
               "efficiencies and engine overheads on every page (sidebar: Calibration profile).")
    c = st.columns([2, 1])
    raws = [""] + state.list_raw()
    opts = raws + [r for r in inputs.uploaded("calib_raw") if r not in raws]
    if scn.calib_raw not in opts:
        opts.append(scn.calib_raw)
    c[0].selectbox("Raw bench result", opts, key="w_calib_raw",
                   format_func=lambda r: "choose one, or upload" if not r else state.label(r))
    gpus = [""] + inputs.gpu_ids()
    c[1].selectbox("Card", gpus + ([scn.calib_gpu] if scn.calib_gpu not in gpus else []),
                   key="w_calib_gpu", format_func=lambda g: g or "from the raw file")
    c = st.columns(2)
    c[0].file_uploader("Upload a raw bench JSON", type=["json"], key="up_raw", on_change=_on_upload,
                       args=("raw", "up_raw", "calib_raw"))
    c[1].file_uploader("...or a profile YAML", type=["yaml", "yml"], key="up_profile",
                       on_change=_on_upload,
                       args=("profile", "up_profile", "profile"))
    scn = inputs.current()
    if scn.calib_raw:
        fit_section(scn)
    st.subheader("Profile in use")
    profile_section(inputs.current())


if __name__ == "__main__":
    render()
