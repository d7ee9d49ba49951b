"""Every web page's inputs fuzzed through streamlit's AppTest (issue 17): junk URL query
values and random widget settings (every number input at its bounds, every select at a random
option, text inputs with junk). No exception box, no internal-error message, and no NaN or inf
in any metric. Pages are listed from perfmodel/webapp/views/, so a new page is fuzzed too.
Buttons are not pressed: they start a load test or a calibration fit (covered elsewhere)."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1.errors import AppTestError

from perfmodel.webapp import state

from conftest import ROOT
from test_webapp import clean, run, uploads  # noqa: F401 - fixture

PAGES = sorted(p.stem for p in (ROOT / "perfmodel" / "webapp" / "views").glob("*.py")
               if p.stem != "__init__")
JUNK_TEXT = ["", " ", "nan", "inf", "-1", "0", "1e308", "é模型", "x" * 200, ",,", "upload:zz",
             "http://127.0.0.1:9/v1", "../../etc/passwd", "14x", "0.0x", "1e400%"]
JUNK_QUERY = st.dictionaries(
    st.sampled_from(sorted(state.FIELDS)),
    st.one_of(st.text(max_size=10), st.sampled_from(JUNK_TEXT + ["999999999", "fp8", "int4-g7"])),
    max_size=5)
NON_FINITE = re.compile(r"(?<![A-Za-z])-?(nan|inf)(?![A-Za-z])", re.IGNORECASE)


def _choose(data, w, kind: str) -> None:
    p = w.proto
    if kind == "number_input":
        lo = p.min if p.has_min else -1e12
        hi = p.max if p.has_max else 1e12
        v = data.draw(st.sampled_from([lo, hi, lo + (hi - lo) / 3]))
        w.set_value(int(v) if p.data_type == 0 else float(v))
    elif kind == "slider":
        w.set_value(data.draw(st.sampled_from([p.min, p.max])))
    elif kind in ("selectbox", "radio", "select_slider"):
        opts = list(p.options)
        if opts and str(w.value) in opts:   # AppTest cannot set a select with a format_func
            i = data.draw(st.integers(0, len(opts) - 1))
            if kind == "selectbox":
                w.select_index(i)
            else:
                w.set_value(opts[i])
    elif kind == "multiselect":
        opts = list(p.options)
        w.set_value(data.draw(st.lists(st.sampled_from(opts), unique=True, max_size=4))
                    if opts else [])
    elif kind == "text_input":
        w.set_value(data.draw(st.sampled_from(JUNK_TEXT)))
    elif kind in ("checkbox", "toggle"):
        w.set_value(data.draw(st.booleans()))


KINDS = ("number_input", "slider", "select_slider", "selectbox", "radio", "multiselect",
         "text_input", "checkbox", "toggle")


def _no_non_finite_metric(at) -> None:
    bad = [(m.label, m.value) for m in at.metric if NON_FINITE.search(str(m.value))]
    assert not bad, bad


@pytest.mark.parametrize("page", PAGES)
@settings(max_examples=max(2, settings().max_examples // 20), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), query=JUNK_QUERY)
def test_page_inputs_fuzzed(page, data, query):
    at = run(None if page == "calculator" else page, **query)
    clean(at)
    _no_non_finite_metric(at)
    for kind in KINDS:
        for w in list(getattr(at, kind)):
            if getattr(w.proto, "disabled", False) or \
                    not data.draw(st.booleans(), label=f"set {kind} {w.key}"):
                continue
            try:
                _choose(data, w, kind)
            except (AppTestError, ValueError, TypeError, IndexError, AttributeError):
                continue   # AppTest refused the value itself (not the app)
    at.run()
    clean(at)
    _no_non_finite_metric(at)
