"""Built-in model architectures: one YAML file per model in this folder, plus the
Hugging Face config.json importer (hf_config.py).

Look-ups are exact: a short id (`llama-3.1-8b`) or a Hugging Face repo id
(`meta-llama/Llama-3.1-8B`), case-insensitive, a fine-tune alias stated in aliases.py
(`vicuna-7b` -> llama-2-7b), or a path to a config.json / .yaml spec.
Anything else raises UnknownIdError listing the closest ids; nothing is picked by substring.
"""

from __future__ import annotations

import functools
from pathlib import Path


from perfmodel.core.catalog.aliases import ALIASES, alias_of
from perfmodel.core.catalog.hf_config import load_hf_config
from perfmodel.core.files import load_spec
from perfmodel.core.errors import SpecFileError, UnknownIdError
from perfmodel.core.specs import ModelSpec

__all__ = ["ALIASES", "alias_of", "catalog_dir", "list_models", "load_model", "load_spec_file",
           "load_hf_config"]

_YAML_SUFFIXES = (".yaml", ".yml")


def catalog_dir() -> Path:
    """The folder holding the built-in `<id>.yaml` files."""
    return Path(__file__).resolve().parent


def list_models() -> list[ModelSpec]:
    """Every built-in model, sorted by id."""
    return sorted(_catalog().values(), key=lambda m: m.id)


def load_model(query: str) -> ModelSpec:
    """Exact short id or hf_repo (case-insensitive), else a path to a config.json, a folder
    holding one, or a .yaml spec file. Raises UnknownIdError with close ids otherwise."""
    q = str(query).strip()
    key = q.lower()
    catalog = _catalog()
    if key in catalog:
        return catalog[key]
    by_repo = {m.hf_repo.lower(): m for m in catalog.values() if m.hf_repo}
    if key in by_repo:
        return by_repo[key]
    alias = alias_of(key)
    if alias is not None:
        return catalog[alias[0]]
    path = Path(q)
    if q and (_exists(path) or path.suffix.lower() in (".json",) + _YAML_SUFFIXES):
        return _load_path(path)
    raise UnknownIdError("model", q, sorted(catalog) + sorted(ALIASES))


def load_spec_file(path: str | Path) -> ModelSpec:
    """Parse one YAML spec file (cached by path and modification time)."""
    p = Path(path)
    try:
        mtime = p.stat().st_mtime_ns
    except (OSError, ValueError) as exc:
        raise SpecFileError(f"{p}: cannot read ({exc})") from None
    return _parse_yaml(str(p.resolve()), mtime)


@functools.lru_cache(maxsize=256)
def _parse_yaml(path: str, mtime_ns: int) -> ModelSpec:  # noqa: ARG001 - mtime keys the cache
    return load_spec(Path(path), ModelSpec, what="model spec", fmt="yaml")


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelSpec]:
    """id -> spec for every YAML file in catalog_dir(); the file name must be the id."""
    out: dict[str, ModelSpec] = {}
    for f in sorted(catalog_dir().glob("*.yaml")):
        spec = load_spec_file(f)
        if spec.id != f.stem:
            raise SpecFileError(f"{f}: id: {spec.id!r} must equal the file name {f.stem!r}")
        if spec.id != spec.id.lower():
            raise SpecFileError(f"{f}: id: {spec.id!r} must be lowercase")
        out[spec.id] = spec
    return out


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _load_path(path: Path) -> ModelSpec:
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SpecFileError(f"{path}: a folder without config.json")
        return load_hf_config(path)
    suffix = path.suffix.lower()
    if suffix in _YAML_SUFFIXES:
        return load_spec_file(path)
    if suffix == ".json":
        return load_hf_config(path)
    raise SpecFileError(f"{path}: expected a Hugging Face config.json or a .yaml spec file")
