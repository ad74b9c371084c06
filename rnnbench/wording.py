"""How rnnbench words what it prints: counted nouns, lists cut short and text shortened to fit.

Every count printed with its noun goes through `counted` ("1 check", "2 checks"), every list of
names cut to its first few through `listed` ("a, b, c, d and 3 more"), and every text cut to a
width goes through `shorten`, which cuts at a word boundary ("the rejections of wrong
ones..." rather than "the rejections of wrong ones prov...").
"""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, plural unless n is 1: counted(1, "check") == "1 check",
    counted(3, "cause") == "3 causes", counted(2, "process", "processes")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def with_article(noun: str) -> str:
    """The noun with its indefinite article: "a list", "an int"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def listed(names, limit: int = 4) -> str:
    """The first `limit` names, comma-separated, and how many more there are:
    listed(["a", "b", "c"], 2) == "a, b and 1 more"."""
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


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
