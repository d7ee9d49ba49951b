import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# One OpenMP thread for torch here and in the calibrate/ benches the tests start as
# subprocesses: on a loaded 2-core machine multi-threaded CPU ops jump from ms to seconds
# (OpenMP barriers spinning while another process holds the core; see
# test_calibrate_pipeline.py). Set before anything imports torch; an explicit value is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# ci: the same examples on every run, so a green suite stays green; deep: a wider random
# search for local bug hunting (HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest).
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def _scan_streamlit_components_once():
    """Every AppTest scans the metadata of all installed distributions for Streamlit v2
    components (~0.85 s a test here); the installed set does not change during a session, so
    the scan runs once. Only where a collected test module already imported streamlit."""
    if "streamlit" not in sys.modules:
        yield
        return
    import functools

    from streamlit.components.v2 import manifest_scanner

    mp = pytest.MonkeyPatch()
    mp.setattr(manifest_scanner, "scan_component_manifests",
               functools.cache(manifest_scanner.scan_component_manifests))
    yield
    mp.undo()
