"""Cost and energy per token: the one place these two formulas live (sizing and claims use it).

    $/Mtok   = USD per hour / (SECONDS_PER_HOUR x output tok/s) x MILLION
    J/token  = watts / output tok/s                     (a watt is a joule per second)
"""

from __future__ import annotations

from perfmodel.core.units import MILLION, SECONDS_PER_HOUR


def usd_per_mtok(usd_per_hour: float, output_tok_s: float) -> float:
    """USD per million output tokens at `output_tok_s` for a deployment costing usd_per_hour."""
    return (usd_per_hour              # USD per hour, all GPUs
            / SECONDS_PER_HOUR        # -> USD per second
            / output_tok_s            # -> USD per token
            * MILLION)                # -> USD per million tokens


def joules_per_token(power_w: float, output_tok_s: float) -> float:
    """Joules per output token at `output_tok_s` for a deployment drawing power_w watts."""
    return power_w / output_tok_s     # J/s over tok/s
