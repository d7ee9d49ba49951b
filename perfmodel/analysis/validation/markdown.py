"""Markdown pieces shared by the accuracy reports (formatting only)."""

from __future__ import annotations


def pct(x: float | None) -> str:
    """0.153 -> '15.3%'; None -> '-'."""
    return "-" if x is None else f"{100 * x:.1f}%"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table; '|' and newlines inside cells are escaped."""
    esc = [[str(c).replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(r) + " |" for r in esc]
