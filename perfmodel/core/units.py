"""The only place with scale factors. Everything inside perfmodel is in base SI units
(bytes, seconds, FLOP, FLOP/s, bytes/s, watts); conversion happens here, at the edges.

Vendor capacities and rates are decimal (GB = 1e9 bytes, TB/s = 1e12 bytes/s).
GiB appears only where people expect nvidia-smi numbers.
"""

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2.0**10
MiB = 2.0**20
GiB = 2.0**30

GIGA = 1e9
TERA = 1e12
PETA = 1e15

MS = 1e-3  # seconds in a millisecond
US = 1e-6  # seconds in a microsecond
MILLION = 1e6
SECONDS_PER_HOUR = 3600.0

BITS_PER_BYTE = 8.0


def gb(n_bytes: float) -> float:
    """Bytes -> decimal gigabytes."""
    return n_bytes / GB


def gib(n_bytes: float) -> float:
    """Bytes -> binary gibibytes (nvidia-smi style)."""
    return n_bytes / GiB


def tflops(flops_per_s: float) -> float:
    """FLOP/s -> TFLOP/s."""
    return flops_per_s / TERA


def ms(seconds: float) -> float:
    """Seconds -> milliseconds."""
    return seconds / MS


def fmt_bytes(n_bytes: float) -> str:
    """Human string in decimal units: 17.2 GB, 512 kB."""
    for unit, scale in (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.3g} B"


def fmt_seconds(seconds: float) -> str:
    """Human string: 1.23 s, 45.6 ms, 7.8 us."""
    if abs(seconds) >= 1.0:
        return f"{seconds:.3g} s"
    if abs(seconds) >= MS:
        return f"{seconds / MS:.3g} ms"
    return f"{seconds / US:.3g} us"


def fmt_rate(per_s: float, what: str = "tok") -> str:
    """Human string of a rate: 31.8 tok/s."""
    return f"{per_s:.4g} {what}/s"
