"""The accelerator database from files: a bad card file names its file and field, user
directories add and override cards in their order, and `perfmodel gpus` lists them."""

import json
import os

import pytest
import yaml

from perfmodel.cli import main
from perfmodel.core.errors import PerfModelError, SpecFileError
from perfmodel.core.hardware import (ENV_VAR, builtin_dir, hardware_dirs, list_gpus, load_gpu,
                                     load_gpu_file)

from test_hardware import REQUIRED_IDS, _no_user_dirs  # noqa: F401 (an autouse fixture)


# --------------------------------------------------------------------------- bad files


def card_yaml(**changes) -> str:
    data = yaml.safe_load((builtin_dir() / "h100-sxm.yaml").read_text())
    data.update(changes)
    return yaml.safe_dump(data)


@pytest.mark.parametrize("change, field", [
    ({"memory_bytes": 0}, "memory_bytes"),
    ({"memory_type": "hbm9"}, "memory_type"),
    ({"vendor": "acme"}, "vendor"),
    ({"peak_flops_per_s": {"bf17": 1.0}}, "peak_flops_per_s"),
    ({"warp_drive": True}, "warp_drive"),
])
def test_schema_error_names_file_and_field(tmp_path, change, field):
    bad = tmp_path / "x.yaml"
    bad.write_text(card_yaml(id="x", **change))
    with pytest.raises(SpecFileError) as exc:
        list_gpus(tmp_path)
    assert "x.yaml" in str(exc.value) and field in str(exc.value)


def test_memory_bytes_message(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text(card_yaml(id="x", memory_bytes=0))
    with pytest.raises(SpecFileError, match=r"x\.yaml: memory_bytes: Input should be greater than 0"):
        load_gpu_file(bad)


@pytest.mark.parametrize("text", ["id: [unclosed\n", "- just\n- a list\n", "id: x\n\tname: tab\n"])
def test_malformed_yaml_names_the_file(tmp_path, text):
    bad = tmp_path / "broken.yaml"
    bad.write_text(text)
    with pytest.raises(SpecFileError, match="broken.yaml"):
        load_gpu_file(bad)


def test_duplicate_id_in_one_directory_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(card_yaml(id="dup"))
    (tmp_path / "b.yaml").write_text(card_yaml(id="dup"))
    with pytest.raises(SpecFileError, match="dup"):
        list_gpus(tmp_path)


# --------------------------------------------------------------------------- user directories


def test_env_var_adds_a_card_and_overrides_a_builtin(tmp_path, monkeypatch):
    (tmp_path / "my-card.yaml").write_text(card_yaml(id="my-card", name="My Card"))
    (tmp_path / "h100-sxm.yaml").write_text(card_yaml(name="H100 as measured here"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    ids = [g.id for g in list_gpus()]
    assert "my-card" in ids and ids == sorted(ids) and ids.count("h100-sxm") == 1
    assert load_gpu("my-card").name == "My Card"
    assert load_gpu("h100-sxm").name == "H100 as measured here"
    monkeypatch.delenv(ENV_VAR)
    assert load_gpu("h100-sxm").name == "NVIDIA H100 SXM5 80GB"


def test_hardware_dir_comes_before_the_env_var(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "t4.yaml").write_text(card_yaml(id="t4", name="from --hardware-dir"))
    (second / "t4.yaml").write_text(card_yaml(id="t4", name="from the env var"))
    monkeypatch.setenv(ENV_VAR, str(second))
    assert hardware_dirs(first) == [first, second, builtin_dir()]
    assert load_gpu("t4", first).name == "from --hardware-dir"
    assert load_gpu("t4").name == "from the env var"


def test_env_var_holds_several_directories(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "card-b.yaml").write_text(card_yaml(id="card-b"))
    monkeypatch.setenv(ENV_VAR, f"{a}{os.pathsep}{b}")
    assert load_gpu("card-b").id == "card-b"


def test_missing_user_directory_is_an_error(tmp_path):
    with pytest.raises(PerfModelError, match="does not exist"):
        list_gpus(tmp_path / "nope")


def test_edited_file_is_reread(tmp_path):
    path = tmp_path / "edit-me.yaml"
    path.write_text(card_yaml(id="edit-me", tdp_w=100))
    assert load_gpu_file(path).tdp_w == 100
    path.write_text(card_yaml(id="edit-me", tdp_w=250))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert load_gpu_file(path).tdp_w == 250


# --------------------------------------------------------------------------- CLI


def test_cli_gpus_json_lists_every_card(capsys):
    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) >= 33
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and set(REQUIRED_IDS) <= set(ids)
    h100 = next(r for r in rows if r["id"] == "h100-sxm")
    assert h100["peak_flops_per_s"]["bf16"] == pytest.approx(989.4e12)


def test_cli_gpus_table(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    for column in ("id", "mem GiB", "BW TB/s", "bf16 TFLOPS", "fp8 TFLOPS", "TDP W", "$/h"):
        assert column in header
    line = next(l for l in out.splitlines() if l.startswith("h100-sxm "))
    assert "3.35" in line and "989" in line and "1979" in line and "2.49" in line


def test_cli_gpus_selected_ids_and_user_dir(tmp_path, capsys):
    (tmp_path / "my-card.yaml").write_text(card_yaml(id="my-card"))
    assert main(["gpus", "my-card", "l4", "--hardware-dir", str(tmp_path), "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["my-card", "l4"]


def test_cli_unknown_flag_exits_2(capsys):
    assert main(["gpus", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--no-such-flag" in err


def test_cli_unknown_id_exits_2_with_close_ids(capsys):
    assert main(["gpus", "h100"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU 'h100'" in err and "h100-sxm" in err and len(err.splitlines()) == 1


def test_cli_bad_hardware_dir_exits_2(tmp_path, capsys):
    assert main(["gpus", "--hardware-dir", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
