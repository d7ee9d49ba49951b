"""The Calculator's tornado chart data: perfmodel.analysis.sensitivity for the page's
scenario, cached by its key. The what-if analysis itself lives in perfmodel/analysis."""

from __future__ import annotations

import streamlit as st

from perfmodel.analysis.sensitivity import Sensitivity, Variation
from perfmodel.analysis.sensitivity import sensitivity as _sensitivity
from perfmodel.webapp.data import CACHE, ui_query
from perfmodel.webapp.state import UIScenario

__all__ = ["Sensitivity", "Variation", "sensitivity"]


@st.cache_data(**CACHE)
def sensitivity(key: str, metric: str) -> Sensitivity:
    """The metric at the scenario and with each input moved down and up."""
    return _sensitivity(ui_query(UIScenario.from_key(key)), metric)
