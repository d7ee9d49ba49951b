"""Session glue: the scenario widgets in the sidebar, the URL, JSON download/upload, and
the guard that turns perfmodel's input errors into one readable line on the page.

The scenario lives in st.session_state["scenario"] (it survives page switches); widgets
are keyed "w_<field>" and seeded from it whenever Streamlit has dropped their state. Each
run writes the scenario back to st.query_params, so the address bar always reproduces it.
"""

from __future__ import annotations

import contextlib
import functools

import streamlit as st
from pydantic import ValidationError

from perfmodel.core.catalog import list_models
from perfmodel.core.engines import ENGINES
from perfmodel.core.query import field_help, field_label
from perfmodel.core.errors import PerfModelError, pydantic_message
from perfmodel.core.hardware import list_gpus
from perfmodel.webapp import state
from perfmodel.webapp.state import FIELDS, LIST_FIELDS, UIScenario

WEIGHT_CHOICES = ["bf16", "fp16", "fp8", "int8", "int4", "int4-g64", "fp4", "fp32"]
ACT_CHOICES = ["auto", "bf16", "fp16", "fp8", "int8", "fp4", "fp32"]
KV_CHOICES = ["bf16", "fp16", "fp8", "int8", "int4", "fp32"]
_UPLOADS = "uploaded_refs"


@functools.lru_cache(maxsize=1)
def model_ids() -> list[str]:
    return [m.id for m in list_models()]


@functools.lru_cache(maxsize=1)
def gpu_ids() -> list[str]:
    return [g.id for g in list_gpus()]


def current() -> UIScenario:
    """The session's scenario; on a session's first run, the one in the URL."""
    if "scenario" not in st.session_state:
        scn, notes = state.from_query(st.query_params.to_dict())
        st.session_state["scenario"] = scn
        st.session_state["scenario_notes"] = notes
    return st.session_state["scenario"]


def publish(scn: UIScenario) -> None:
    """Keep the scenario for the next page and put it in the address bar."""
    st.session_state["scenario"] = scn
    query = state.to_query(scn)
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)


def _seed(scn: UIScenario, page: str) -> None:
    """Give the widgets the scenario's values where Streamlit has no state for them, and
    always after a page switch (widget ids include the page, so their state starts over)."""
    switched = st.session_state.get("_page") != page
    st.session_state["_page"] = page
    for name in FIELDS:
        key = f"w_{name}"
        if switched or key not in st.session_state:
            st.session_state[key] = _widget_value(scn, name)


def _widget_value(scn: UIScenario, name: str):
    value = getattr(scn, name)
    return list(value) if name in LIST_FIELDS else value


def _set_all(scn: UIScenario) -> None:
    st.session_state["scenario"] = scn
    for name in FIELDS:
        st.session_state[f"w_{name}"] = _widget_value(scn, name)


def uploaded(kind: str) -> list[str]:
    """Upload refs of this kind seen in this session."""
    return list(st.session_state.get(_UPLOADS, {}).get(kind, []))


def remember(kind: str, ref: str) -> None:
    """Offer an upload ref in this session's selectboxes of that kind."""
    _remember(kind, ref)


def _remember(kind: str, ref: str) -> None:
    refs = st.session_state.setdefault(_UPLOADS, {})
    refs.setdefault(kind, [])
    if ref not in refs[kind]:
        refs[kind].append(ref)


def store_upload(kind: str, upload_key: str) -> str | None:
    """The uploader's file saved as an upload ref of `kind` (state.save_upload), or None (no
    file, or a bad one: its one-line error is shown on the next run)."""
    f = st.session_state.get(upload_key)
    if f is None:
        return None
    try:
        return state.save_upload(kind, f.getvalue(), f.name)
    except PerfModelError as exc:
        st.session_state["upload_error"] = str(exc)
        return None


def _on_file(kind: str) -> None:
    """Callback of the config.json / GPU YAML / profile uploaders (runs before the script)."""
    ref = store_upload(kind, f"up_{kind}")
    if ref is None:
        return
    _remember(kind, ref)
    st.session_state[f"w_{kind}"] = ref


def _on_scenario_file() -> None:
    f = st.session_state.get("up_scenario")
    if f is None:
        return
    try:
        scn = state.from_json(f.getvalue())
    except PerfModelError as exc:
        st.session_state["upload_error"] = str(exc)
        return
    for kind in state.UPLOAD_FIELDS:
        if state.is_upload(getattr(scn, kind)):
            _remember(kind, getattr(scn, kind))
    _set_all(scn)


def _options(base: list[str], kind: str, value: str) -> list[str]:
    extra = list(st.session_state.get(_UPLOADS, {}).get(kind, []))
    out = base + [r for r in extra if r not in base]
    if value not in out:
        out.append(value)          # an unknown id from a URL: perfmodel will say what is wrong
    return out


def sidebar(page: str, show_scenario: bool = True) -> UIScenario:
    """Seed the widgets, draw the scenario widgets in the sidebar (unless show_scenario is
    False), read every widget back into the scenario and publish it; returns it."""
    scn = current()
    _seed(scn, page)
    for note in st.session_state.pop("scenario_notes", []):
        st.sidebar.warning(note)
    if err := st.session_state.pop("upload_error", None):
        st.sidebar.error(err)
    if show_scenario:
        _scenario_widgets(st.sidebar)
    new = _collect(scn)
    publish(new)
    if show_scenario:
        with st.sidebar.expander("Scenario: link and JSON"):
            st.caption("The address bar holds the whole scenario: copy it to share this view.")
            st.download_button("Download scenario JSON", state.to_json(new),
                               file_name="perfmodel-scenario.json", mime="application/json")
            st.file_uploader("Load scenario JSON", type=["json"], key="up_scenario",
                             on_change=_on_scenario_file)
    return new


QUERY_OF = {"model": "model", "gpu": "gpu", "tp": "tp", "pp": "pp", "ep": "ep", "dp": "dp",
            "nodes": "nodes",
            "weights": "weights", "activations": "activations", "kv": "kv", "engine": "engine",
            "batch": "batch", "prompt": "prompt_tokens", "output": "output_tokens",
            "profile": "profile"}
"""Sidebar widget (UIScenario field) -> the Query field whose title and description label it."""


def _bounds(name: str) -> tuple[int, int]:
    """(min, max) of a UIScenario count field, from its ge/le constraints."""
    meta = UIScenario.model_fields[name].metadata
    lo = next(m.ge for m in meta if hasattr(m, "ge"))
    hi = next(m.le for m in meta if hasattr(m, "le"))
    return lo, hi


def _number(where, name: str, step: int = 1, more_help: str = "") -> None:
    """A count input labelled and explained by its Query field; bounds from the UIScenario."""
    lo, hi = _bounds(name)
    q = QUERY_OF[name]
    where.number_input(field_label(q), lo, hi, step=step, key=f"w_{name}",
                       help=field_help(q) + more_help)


def _choice(where, name: str, options: list[str], more_help: str = "", **kw) -> None:
    """A selectbox labelled and explained by its Query field."""
    q, key = QUERY_OF[name], f"w_{name}"
    where.selectbox(field_label(q), _options(options, kw.pop("kind", ""), st.session_state[key]),
                    key=key, help=field_help(q) + more_help, **kw)


def _scenario_widgets(sb) -> None:
    ss = st.session_state
    sb.subheader("Model and hardware")
    _choice(sb, "model", model_ids(), " Or an uploaded config.json.", kind="model",
            format_func=state.label)
    _choice(sb, "gpu", gpu_ids(), " Or an uploaded YAML.", kind="gpu", format_func=state.label)
    for col, name in zip(sb.columns(3), ("tp", "pp", "ep")):
        _number(col, name)
    c1, c2 = sb.columns(2)
    _number(c1, "dp")
    _number(c2, "nodes", more_help=" 0: not given (the model places the GPUs).")
    gpus = int(ss["w_tp"]) * int(ss["w_dp"]) * int(ss["w_pp"])
    placed = f" over {int(ss['w_nodes'])} nodes" if int(ss["w_nodes"]) else ""
    sb.caption(f"GPUs per replica: {gpus} (TP x DP x PP){placed}")
    sb.subheader("Precision and engine")
    _choice(sb, "weights", WEIGHT_CHOICES, " int4 uses group-128 scales unless -gN is given.")
    _choice(sb, "activations", ACT_CHOICES, " auto: fp8 for fp8 weights (W8A8), else 16-bit.")
    _choice(sb, "kv", KV_CHOICES)
    _choice(sb, "engine", list(ENGINES),
            " Kernels, launch and CPU overheads, attention kernel, batching.")
    sb.subheader("Workload")
    _number(sb, "batch")
    c1, c2 = sb.columns(2)
    _number(c1, "prompt", step=128)
    _number(c2, "output", step=32)
    _choice(sb, "profile", [""] + state.list_profiles(), " Used on every page (Calibration page).",
            kind="profile",
            format_func=lambda r: "none (datasheet defaults)" if not r else state.label(r))
    with sb.expander("Upload a model or GPU file"):
        st.file_uploader("Hugging Face config.json or model YAML", type=["json", "yaml", "yml"],
                         key="up_model", on_change=_on_file, args=("model",))
        st.file_uploader("GPU YAML (hardware_db format)", type=["yaml", "yml"], key="up_gpu",
                         on_change=_on_file, args=("gpu",))


def _collect(old: UIScenario) -> UIScenario:
    values = {name: st.session_state.get(f"w_{name}", getattr(old, name)) for name in FIELDS}
    for name in LIST_FIELDS:
        values[name] = tuple(values[name])
    try:
        return UIScenario(**values)
    except ValidationError as exc:
        st.sidebar.error(f"input ignored: {pydantic_message(exc)}")
        return old


def keep_url(page: str) -> UIScenario:
    """For pages without the scenario widgets: their own inputs still go to the URL."""
    return sidebar(page, show_scenario=False)


def set_field(name: str, value) -> None:
    """Change one scenario field from a widget callback (e.g. use a fitted profile)."""
    st.session_state["scenario"] = UIScenario(**{**current().model_dump(), name: value})
    st.session_state[f"w_{name}"] = value


@contextlib.contextmanager
def guard(where=None):
    """Show a PerfModelError (bad input, does not fit, unknown id) as one line, never a traceback."""
    try:
        yield
    except PerfModelError as exc:
        (where or st).error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def call(fn, *args, where=None, **kw):
    """fn(*args, **kw), or None after showing its PerfModelError as one line."""
    try:
        return fn(*args, **kw)
    except PerfModelError as exc:
        (where or st).error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None


INTERNAL_ERROR = "internal error (please report it)"


@contextlib.contextmanager
def safety_net():
    """Last resort around a page: a defect shows as one line (the traceback goes to the
    server log), never as a traceback in the browser. Input errors never get here."""
    import logging

    try:
        yield
    except Exception as exc:  # noqa: BLE001 - Streamlit's stop/rerun are BaseException
        logging.getLogger("perfmodel.webapp").exception("page failed")
        st.error(f"{INTERNAL_ERROR}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
