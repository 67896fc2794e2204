"""Byte sizes as people write them ("1GiB", "512MB") and as they read them."""

from __future__ import annotations

import re

from .errors import AdvisorError

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")  # a sign, so '-1GiB' is named as negative


def parse_size(text: str) -> int:
    """Parse '1GiB', '1.5 GB', '800MiB' or a plain byte count into bytes."""
    match = _SIZE_RE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise AdvisorError(
            f"Cannot read the memory size {text!r}. Write a number with a unit, for example "
            "'1GiB', '800MiB' or '16GB' (GiB/MiB are powers of 1024, GB/MB powers of 1000)."
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise AdvisorError(f"The memory size {text!r} must be larger than zero.")
    if not unit and value < _UNITS["mib"]:  # "256" meant 256MiB: as bytes the probes would run and fit nothing
        number = str(text).strip()
        raise AdvisorError(
            f"The memory size {text!r} has no unit, so it reads as {value} bytes, less than any model needs. "
            f"Write the unit, for example '{number}MiB' or '{number}GiB' (a plain number counts bytes)."
        )
    return value


def format_bytes(n: float | None) -> str:
    """Human-readable size with binary units: 1536 -> '1.5 KiB'."""
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
