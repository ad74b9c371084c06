"""How rnnbench words what it prints: counted nouns and text shortened to fit.

Every count printed with its noun goes through `counted` ("1 check", "2 checks"), and every text
cut to a width goes through `shorten`, which cuts at a word boundary ("the rejections of wrong
ones..." rather than "the rejections of wrong ones prov...").
"""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, plural unless n is 1: counted(1, "check") == "1 check",
    counted(3, "cause") == "3 causes", counted(2, "process", "processes")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def shorten(text: str, width: int, placeholder: str = "...") -> str:
    """`text` on one line, at most `width` characters: whole words and `placeholder` where it
    had to be cut. Only a first word longer than the whole width is itself cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    room = max(width - len(placeholder), 0)
    cut = text.rfind(" ", 0, room + 1)
    head = text[:cut] if cut > 0 else text[:room]
    return head.rstrip(" ,;:") + placeholder
