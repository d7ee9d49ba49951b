"""perfmodel web calculator: routing only. Run: streamlit run app.py"""

import streamlit as st

from perfmodel.webapp.inputs import safety_net

st.set_page_config(page_title="perfmodel calculator", layout="wide")
V = "perfmodel/webapp/views/"
pages = [
    # served at the root URL; the url_path of a default page is reserved but never served
    st.Page(V + "calculator.py", title="Calculator", url_path="home", default=True),
    st.Page(V + "sweep.py", title="Sweep", url_path="sweep"),
    st.Page(V + "serving.py", title="Serving run", url_path="serving"),
    st.Page(V + "compare.py", title="Compare GPUs / sizing", url_path="compare"),
    st.Page(V + "speculative.py", title="Speculative decoding", url_path="speculative"),
    st.Page(V + "claims.py", title="Claim checker", url_path="claims"),
    st.Page(V + "calibration.py", title="Calibration", url_path="calibration"),
    st.Page(V + "accuracy.py", title="Accuracy", url_path="accuracy"),
    st.Page(V + "measure.py", title="Measure", url_path="measure"),
    st.Page(V + "definitions.py", title="Definitions", url_path="definitions"),
    # the calculator at its own URL too, so a shared /calculator link opens without a
    # "Page not found" dialog (every page is reachable by its URL: tests/test_browser.py)
    st.Page(V + "calculator.py", title="Calculator", url_path="calculator", visibility="hidden"),
]
with safety_net():
    st.navigation(pages).run()
