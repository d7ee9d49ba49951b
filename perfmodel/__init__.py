"""perfmodel: an analytical cost and performance model of LLM inference."""

__version__ = "0.1.0"
