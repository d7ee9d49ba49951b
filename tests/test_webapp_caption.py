"""The Calculator's headline caption counts every GPU of the layout (the audit: with DP 2 it
read 'x1', the TP x PP GPUs only, while the CLI and the memory figures used TP x DP x PP)."""

from test_webapp import clean, run, uploads  # noqa: F401 - fixture


def test_calculator_caption_counts_the_dp_groups():
    at = run(None, model="llama-3.1-8b", gpu="h100-sxm", tp=2, dp=2, batch=4)
    clean(at)
    caption = next(c.value for c in at.caption if "llama-3.1-8b on h100-sxm" in c.value)
    assert "h100-sxm x4 (TP 2, PP 1, EP 1, DP 2)" in caption, caption
