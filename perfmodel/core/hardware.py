"""The accelerator database: one YAML file per card (hardware_db/*.yaml), exact-id look-up.

Search order: the --hardware-dir argument, then the directories in the
PERFMODEL_HARDWARE_DIR environment variable (os.pathsep-separated), then the built-in
hardware_db/. $PERFMODEL_PRICES names a YAML file of gpu id -> USD per GPU-hour that replaces
the built-in prices (one basis: PRICE_BASIS at PRICE_DATE). A card id found in an earlier directory overrides the same id later, so a
user can add a card or correct one without editing the repository.

Look-ups are exact (case-insensitive) and never pick a card by substring: an unknown id
raises UnknownIdError listing the closest ids (CONVENTIONS.md, rule 6).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path


from perfmodel.core.files import parse_text, read_text, validate_spec
from perfmodel.core.errors import PerfModelError, SpecFileError, UnknownIdError
from perfmodel.core.specs import HardwareSpec, PriceSpec

ENV_VAR = "PERFMODEL_HARDWARE_DIR"
PRICES_ENV_VAR = "PERFMODEL_PRICES"   # a YAML file of gpu id -> USD per GPU-hour
SUFFIXES = (".yaml", ".yml")

# One price basis for every card, so a ranking by $ compares like with like (issue 15 item 7):
# every hardware_db price.source starts with PRICE_BASIS and every price.date is PRICE_DATE.
PRICE_BASIS = ("neocloud on-demand USD per GPU-hour (specialty and long-tail GPU clouds, no "
               "hyperscaler list prices; mid value of the range read)")
PRICE_DATE = "2026-09"   # when the table was collected; each source names its own reading


def builtin_dir() -> Path:
    """The repository's hardware_db/ directory."""
    return Path(__file__).resolve().parents[2] / "hardware_db"


def hardware_dirs(extra: str | Path | None = None) -> list[Path]:
    """Directories to search, highest priority first: `extra` (the --hardware-dir value),
    then $PERFMODEL_HARDWARE_DIR, then the built-in directory.

    Each of `extra` and the variable may hold several directories separated by os.pathsep.
    A named directory that does not exist is an error, not silently skipped.
    """
    named: list[tuple[Path, str]] = []
    if extra is not None and str(extra).strip():
        named += [(p, "--hardware-dir") for p in _split(extra)]
    named += [(p, ENV_VAR) for p in _split(os.environ.get(ENV_VAR, ""))]
    dirs: list[Path] = []
    for path, origin in named:
        if not path.is_dir():
            raise PerfModelError(f"hardware directory {str(path)!r} (from {origin}) "
                                 "does not exist or is not a directory")
        dirs.append(path)
    dirs.append(builtin_dir())
    unique: dict[Path, Path] = {}  # by resolved path, first occurrence wins
    for d in dirs:
        unique.setdefault(d.resolve(), d)
    return list(unique.values())


def _split(value: str | Path) -> list[Path]:
    if isinstance(value, Path):
        return [value.expanduser()]
    return [Path(part).expanduser() for part in str(value).split(os.pathsep) if part.strip()]


def load_gpu_file(path: str | Path) -> HardwareSpec:
    """Parse one hardware YAML file. Cached on (path, modification time).

    Raises SpecFileError naming the file and the field on malformed YAML or a schema error.
    """
    p = Path(path).expanduser()
    try:
        stat = p.stat()
    except (OSError, ValueError) as exc:  # ValueError: e.g. an embedded NUL byte
        raise SpecFileError(f"{_display(p)}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not p.is_file():
        raise SpecFileError(f"{_display(p)}: not a file")
    return _parse(str(p.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _parse(resolved: str, mtime_ns: int, size: int) -> HardwareSpec:
    """The cached parse; mtime and size are part of the key so an edited file is re-read."""
    p = Path(resolved)
    where = _display(p)
    data = parse_text(read_text(p, what="hardware file"), where=where, fmt="yaml")
    return validate_spec(data, HardwareSpec, where=where)


def _display(p: Path) -> str:
    """The path relative to the working directory when it is below it, else as given."""
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(p)


def _files(directory: Path) -> list[Path]:
    return sorted(f for f in directory.iterdir() if f.suffix.lower() in SUFFIXES and f.is_file())


def _index(hardware_dir: str | Path | None) -> dict[str, HardwareSpec]:
    """id -> spec over all directories; the first directory holding an id wins.

    Two files with the same id in one directory are an error (which one would win?).
    Cached on every file's (path, mtime, size), so a look-up costs one directory scan.
    """
    dirs = hardware_dirs(hardware_dir)
    return dict(_index_cached(tuple((str(d), _signature(d)) for d in dirs)))


def _signature(directory: Path) -> tuple:
    try:
        with os.scandir(directory) as it:
            return tuple(sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in it
                                if e.name.lower().endswith(SUFFIXES)))
    except OSError as exc:
        raise PerfModelError(f"hardware directory {str(directory)!r}: {exc.strerror or exc}") \
            from None


@functools.lru_cache(maxsize=64)
def _index_cached(signature: tuple) -> tuple[tuple[str, HardwareSpec], ...]:
    index: dict[str, HardwareSpec] = {}
    for directory in (Path(d) for d, _ in signature):
        seen_here: dict[str, Path] = {}
        for f in _files(directory):
            spec = load_gpu_file(f)
            key = spec.id.lower()
            if key in seen_here:
                raise SpecFileError(f"{_display(f)}: id {spec.id!r} is also defined in "
                                    f"{_display(seen_here[key])}")
            seen_here[key] = f
            index.setdefault(key, spec)
    return tuple(index.items())


def price_overrides() -> dict[str, float]:
    """gpu id -> USD per GPU-hour from the YAML file named by $PERFMODEL_PRICES ({} if unset).
    A missing, malformed or non-positive entry is a PerfModelError naming the file."""
    path = os.environ.get(PRICES_ENV_VAR, "").strip()
    if not path:
        return {}
    p = Path(path).expanduser()
    try:
        stat = p.stat()
    except (OSError, ValueError) as exc:
        raise PerfModelError(f"{PRICES_ENV_VAR}={path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return dict(_read_prices(str(p.resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _read_prices(resolved: str, mtime_ns: int, size: int) -> tuple[tuple[str, float], ...]:  # noqa: ARG001
    where = f"{PRICES_ENV_VAR}={resolved}"
    data = parse_text(read_text(resolved, what=PRICES_ENV_VAR), where=where, fmt="yaml",
                      mapping=False)     # the one safe reader: size, depth and tag caps
    if not isinstance(data, dict) or not data:
        raise PerfModelError(f"{where}: expected a mapping of gpu id -> USD per GPU-hour, "
                             "e.g. 'h100-sxm: 2.49'")
    out = []
    for gid, usd in data.items():
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not usd > 0 \
                or usd == float("inf"):
            raise PerfModelError(f"{where}: price of {gid!r} must be a positive number of "
                                 f"USD per GPU-hour, got {usd!r}")
        out.append((str(gid).strip().lower(), float(usd)))
    return tuple(out)


def _with_prices(index: dict[str, HardwareSpec]) -> dict[str, HardwareSpec]:
    """The cards with $PERFMODEL_PRICES applied; an id the file names but no card has is an error."""
    overrides = price_overrides()
    if not overrides:
        return index
    path = os.environ.get(PRICES_ENV_VAR, "")
    out = dict(index)
    for gid, usd in overrides.items():
        if gid not in out:
            raise UnknownIdError(f"GPU in {PRICES_ENV_VAR}", gid, sorted(out))
        price = PriceSpec(usd_per_hour=usd, date=time.strftime("%Y-%m"),
                          source=f"user override ({PRICES_ENV_VAR}={path})")
        out[gid] = out[gid].model_copy(update={"price": price})
    return out


def list_gpus(hardware_dir: str | Path | None = None) -> list[HardwareSpec]:
    """Every card in the search path (user cards override built-in ones), sorted by id, with
    $PERFMODEL_PRICES applied."""
    return sorted(_with_prices(_index(hardware_dir)).values(), key=lambda s: s.id)


def load_gpu(gpu_id: str, hardware_dir: str | Path | None = None) -> HardwareSpec:
    """A card by exact id (case-insensitive), or by a path to a .yaml file.

    Raises UnknownIdError listing close ids; never picks a card by substring.
    """
    query = str(gpu_id).strip()
    if query.lower().endswith(SUFFIXES):
        return load_gpu_file(query)
    index = _with_prices(_index(hardware_dir))
    spec = index.get(query.lower())
    if spec is None:
        raise UnknownIdError("GPU", query, sorted(s.id for s in index.values()))
    return spec
