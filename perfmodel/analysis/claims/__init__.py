"""Claim checking: scenarios, levers, attribution (ordered and Shapley), lever-combination
search with verdicts, inverse solving, and the seed documents as presets.

    from perfmodel.analysis.claims import Scenario, attribute, explain, solve, run_preset
    att = attribute(baseline, improved, "decode_tok_s_per_user")
    ex = explain("14x", "output_tok_s_total", baseline)
"""

from perfmodel.analysis.claims.attribute import Attribution, attribute, check_pair
from perfmodel.analysis.claims.explain import Explanation, explain, parse_claim
from perfmodel.analysis.claims.inverse import ASSUMPTIONS, Inverse, solve
from perfmodel.analysis.claims.levers import LEVER_NAMES, LEVERS
from perfmodel.analysis.claims.metrics import Evaluation, evaluate
from perfmodel.analysis.claims.presets import PresetReport, list_presets, run_preset
from perfmodel.analysis.claims.scenario import METRICS, Scenario, fill, load_scenario

__all__ = ["ASSUMPTIONS", "Attribution", "Evaluation", "Explanation", "Inverse", "LEVERS",
           "LEVER_NAMES", "METRICS", "PresetReport", "Scenario", "attribute", "check_pair",
           "evaluate", "explain", "fill", "list_presets", "load_scenario", "parse_claim",
           "run_preset", "solve"]
