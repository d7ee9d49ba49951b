"""Host-bound engine fields live per host in a profile (issue 15): `hosts[<CPU>][engine]`
applies after the card's `engines`, for the profile's own host unless another is named."""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

import pytest

from perfmodel.analysis.calibration.raw import host_key
from perfmodel.core.engines import ENGINES
from perfmodel.core.errors import SpecFileError
from perfmodel.core.profile import HOST_FIELDS, Profile, apply_engine, load_profile

XEON = "Intel(R) Xeon(R) Processor (family 6 model 207, 2100 MHz)"
EPYC = "AMD EPYC (family 26 model 2, 2596 MHz)"


def _profile() -> Profile:
    return Profile(gpu="h200-sxm", engines={"torch-eager": {"kernels_per_layer": 44.0}}, host=XEON,
                   hosts={XEON: {"torch-eager": {"launch_s": 13e-6}},
                          EPYC: {"torch-eager": {"launch_s": 30e-6}}})


def test_host_fields_follow_the_host_card_fields_stay():
    prof = _profile()
    own = apply_engine(ENGINES["torch-eager"], prof)
    other = apply_engine(ENGINES["torch-eager"], prof, EPYC)
    unknown = apply_engine(ENGINES["torch-eager"], prof, "some other CPU")
    assert (own.launch_s, other.launch_s) == (13e-6, 30e-6)
    assert unknown.launch_s == ENGINES["torch-eager"].launch_s          # the preset's
    assert own.kernels_per_layer == other.kernels_per_layer == unknown.kernels_per_layer == 44.0


def test_host_key_names_model_family_and_clock():
    env = {"cpu_name": "Intel(R) Xeon(R) Processor",
           "cpu": {"model_name": "Intel(R) Xeon(R) Processor", "family": "6", "model": "207",
                   "mhz_median": 2100.0}}
    assert host_key(env) == XEON
    assert host_key({"cpu_name": "Intel(R) Xeon(R) Processor"}) == "Intel(R) Xeon(R) Processor"


def test_a_card_field_under_hosts_is_refused(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"kind": "perfmodel-profile", "host": XEON,
                                 "hosts": {XEON: {"torch-eager": {"kernels_per_layer": 40}}}}))
    with pytest.raises(SpecFileError, match="not host fields: kernels_per_layer"):
        load_profile(p)


_VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**9),
                   st.text(max_size=5), st.none(), st.booleans())


@given(hosts=st.dictionaries(st.text(max_size=30),
                             st.dictionaries(st.sampled_from([*ENGINES, "nope"]),
                                             st.dictionaries(st.sampled_from([*HOST_FIELDS, "kernels_per_layer", "x"]),
                                                             _VALUE, max_size=3), max_size=2),
                             max_size=2),
       host=st.one_of(st.none(), st.text(max_size=30)))
def test_random_hosts_sections_load_or_fail_cleanly(tmp_path_factory, hosts, host):
    p = tmp_path_factory.mktemp("hosts") / "p.yaml"
    p.write_text(yaml.safe_dump({"kind": "perfmodel-profile", "host": host, "hosts": hosts}))
    try:
        prof = load_profile(p)
    except SpecFileError as exc:
        assert str(exc).startswith(str(p))
        return
    for h in [None, *prof.hosts]:
        for eid in ENGINES:
            eng = apply_engine(ENGINES[eid], prof, h)
            assert all(getattr(eng, f) >= 0 for f in HOST_FIELDS)
