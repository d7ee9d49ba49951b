"""The web calculator (Streamlit + plotly).

app.py routes with st.navigation to one page per module in views/. Pages read the shared
scenario from state.py (URL query parameters, JSON download/upload, uploads kept by content
hash), call perfmodel through cached wrappers (state.py, data.py) and hand typed results to
the pure figure builders in charts_*.py. No formula lives here: every number comes from
perfmodel.
"""
