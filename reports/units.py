"""Numbers as people read them: times with their unit, bytes in binary units."""
from __future__ import annotations


def seconds(value: float | None) -> str:
    """1.5e-3 -> '1.5 ms'; None -> ''."""
    if value is None:
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def percent(fraction: float | None, signed: bool = False, digits: int = 1) -> str:
    """0.0523 -> '5.2%' ('+5.2%' signed); None -> ''."""
    if fraction is None:
        return ""
    return f"{fraction:+.{digits}%}" if signed else f"{fraction:.{digits}%}"


def binary_bytes(value: float | None) -> str:
    """3 * 2**20 -> '3 MiB'; None -> ''."""
    if value is None:
        return ""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"
