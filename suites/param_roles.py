"""The torch.nn family's parameter inference: which spec parameter each state_dict key of a module
that names or lays them out its own way holds, from shapes, with names only to break ties.

A *role* for every state_dict key is learnt once per kind on a probe module whose sizes make
shapes tell the blocks apart (input != hidden), then applied by key name to every
configuration. It is accepted only when it is unique; otherwise `MappingError` says what could
not be placed. One matrix per gate (W_ii, W_if, ... or U_z, U_r, ...) is recognised too, the gate
read from the name and the pieces stacked in torch.nn's gate order, whether each gate's matrix
is one side's or one over the concatenated [x, h]. Layers and directions of stacked modules are
told apart by torch's suffixes or by the numbers (and "reverse"/"backward" markers) in the keys.
What shapes cannot tell (the order of x and h in a matrix over both, of the gates in a stacked
matrix of the module's own) is a `Reading`, which the kind's suite settles by running the probe
module (`rnnbench.suites.torch_nn`).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

from rnnbench.reference import Config, param_shapes, param_suffix
from rnnbench.suites.layers import blocks
from rnnbench.suites.parammap import MappingError, ParamMap, Piece, vector_layout

_DIGITS = re.compile(r"\d+")


def _marker(words: str, letter: str) -> re.Pattern:
    """A direction marker: one of `words` between separators, or `letter` alone as a dotted
    component before another ("cells.b.weight"), never the "b" of "b_ih", a bias named "b"
    ("layers.0.b") or the "f" of a forget gate's "W_f"."""
    return re.compile(rf"(^|[._])({words})($|[._])|(^|\.)({letter})(\.)", re.IGNORECASE)


_REVERSE = _marker("reverse|backward|bwd|bw|back|rev", "b")
_FORWARD = _marker("forward|fwd|fw", "f")
# Name fragments that say which side a parameter belongs to (lower case, after "W_"/"b_").
_INPUT_SIDE = ("ih", "xh", "x2h", "i2h", "input", "inp", "wx", "w_x", "kernel")
_HIDDEN_SIDE = ("hh", "h2h", "hidden", "recurrent", "rec", "wh", "w_h", "u")
# The same, with digits as a key's template writes them ("x2h" as "x#h").
_SIDES = {side: tuple(_DIGITS.sub("#", alias) for alias in aliases)
          for side, aliases in (("input", _INPUT_SIDE), ("hidden", _HIDDEN_SIDE))}


def template(key: str) -> str:
    """A key with its layer numbers and direction markers taken out: the same for every layer
    and direction, whether both directions are marked ("fwd.w", "bwd.w") or the reverse one
    alone (torch.nn's "w_l0", "w_l0_reverse")."""
    return _DIGITS.sub("#", _FORWARD.sub(_separator, _REVERSE.sub(_separator, key)))


def _separator(match: re.Match) -> str:
    """A marker's match without the marker and one of its separators: the separator between
    the parts it stood between, none at either end of the key."""
    before, after = match[1] or match[4], match[3] or match[6]
    return before if before and after else ""


def learn_roles(cfg: Config, shapes: dict[str, tuple], linear: frozenset[str] = frozenset(),
                norms: frozenset[str] = frozenset(),
                buffers: frozenset[str] = frozenset()) -> dict[str, tuple[str, str]]:
    """`_learn_roles`, with the keys in `buffers` (a zero initial state kept as `h0`) left out
    as no parameter of the recurrence, unless the keys cannot be matched without them (torch.nn's
    weights held as buffers, an inference engine's way). Where the keys cannot be matched and
    some are named as an output layer's (`_readout_named`: min-char-rnn's Why, vocab x H, has
    weight_ih's shape transposed where the vocabulary is the input), matched without those, and
    with them otherwise (b_y, W_xy are the state's own where the state is named y). The error
    is the first reading's."""
    readouts = frozenset(key for key in shapes if _readout_named(key))
    left_out = [norms | buffers, norms] if buffers else [norms]
    tries = [skipped for base in left_out
             for skipped in ((base, base | readouts) if readouts else (base,))]
    first = None
    for skipped in tries:
        try:
            return _learn_roles(cfg, shapes, linear, skipped)
        except MappingError as exc:
            first = first or exc
    raise first


def _learn_roles(cfg: Config, shapes: dict[str, tuple], linear: frozenset[str],
                 outside: frozenset[str]) -> dict[str, tuple[str, str]]:
    """For a one-layer, one-direction module's state_dict shapes: template -> (block, layout),
    where block is a spec block ("weight_ih", ...) or "combined" (one matrix over [x, h]), and
    layout "plain" or "T" (stored transposed). What shapes cannot tell, the order of x and h in a
    combined matrix and of the gates in a stacked one, is a `Reading`; a square matrix is stored
    as the module's other matrices are, unless `linear` holds its key (an nn.Linear's weight).
    The keys in `outside` (a normalisation layer's gain and shift, a buffer, an output layer's
    matrix) are none of the recurrence's blocks, whatever their shape: they are left for the
    checks, as any parameter outside the spec's. MappingError when the keys cannot be matched
    uniquely."""
    spec = {blocks(cfg)[name]: shape for name, shape in param_shapes(cfg).items()}
    rows = spec["weight_ih"][0]
    inputs, width = cfg.input_size, cfg.output_size
    roles: dict[str, tuple[str, str]] = {}
    torch_names = blocks(cfg)
    for key, shape in shapes.items():
        if key in outside:
            continue
        if key in torch_names:  # torch.nn's own name: its own block, stored x @ W's way maybe
            want = spec[torch_names[key]]
            transposed = len(want) == 2 and tuple(shape) == tuple(want[::-1])
            layout = ("?" if want[0] == want[1] else "T") if transposed else "plain"
            roles[template(key)] = (torch_names[key], layout)
            continue
        candidates = [(block, layout) for block, want in spec.items()
                      for layout, got in (("plain", want), ("T", want[::-1]), ("row", (1, *want)),
                                          ("column", (*want, 1)))
                      if tuple(shape) == tuple(got) and (layout == "plain" or len(got) == 2)
                      and (layout in ("plain", "T") or _bias_named(key))]
        if tuple(shape) in ((rows, inputs + width), (inputs + width, rows)):
            candidates.append(("combined", "plain" if shape[0] == rows else "T"))
        if not candidates:
            continue  # not a recurrent parameter (an output layer, say): left for the checks
        roles[template(key)] = _choose(key, candidates)
    if not {"weight_ih", "combined"} & {block for block, _ in roles.values()}:
        unplaced = {k: v for k, v in shapes.items()
                    if template(k) not in roles and k not in outside}
        _per_gate(cfg, unplaced, roles)
    for key in linear:  # an nn.Linear computes x @ W^T: its weight is stored as torch.nn's
        if roles.get(template(key), ("", ""))[1] == "?":
            roles[template(key)] = (roles[template(key)][0], "plain")
    _settle_orientation(roles)
    _settle_biases(roles, shapes, cfg)
    for name in roles:
        same = [key for key in shapes if template(key) == name]
        if len(same) > 1:  # roles go by template, where numbers stand for layers
            raise MappingError(f"{same[0]} and {same[1]} differ only in a number or a direction "
                               "marker (fw/bw), read as layers and directions, on a module built "
                               "with one layer and one direction")
    gates_found: dict[str, list] = {}
    for block, _ in roles.values():
        base, _, gates = block.partition(":")
        gates_found.setdefault(base, []).extend(gates)
    for base, found in gates_found.items():
        if found and sorted(found) != sorted(cfg.gates):
            what = "a matrix over [x, h]" if base == "combined" else base
            raise MappingError(f"the names give {what} for gates {', '.join(sorted(found))} only, "
                               f"of {', '.join(cfg.gates)} ({_listed(shapes)})")
    covered = {block.partition(":")[0] for block, _ in roles.values()}
    if "combined" in covered:
        covered |= {"weight_ih", "weight_hh"}
    lacking = [b for b in ("weight_ih", "weight_hh", "weight_hr") if b in spec and b not in covered]
    if lacking:
        raise MappingError(f"no parameter found for {', '.join(lacking)} among the keys of "
                           f"{cfg.describe()}, built to tell them apart ({_listed(shapes)})")
    seen: dict[str, str] = {}
    for name, (block, _) in roles.items():
        if block in seen:
            raise MappingError(f"{_key(seen[block], shapes)} and {_key(name, shapes)} both "
                               f"look like {block}")
        seen[block] = name
    return roles


# An output layer's parameter in course code: y is the output beside h (or a), W_hy, Why, Wya,
# by; or the name-classification tutorial's i2o/h2o. (x to y is an input's weight wherever y
# names the state.)
_READOUT = re.compile(r"(w|b|weight|bias)?_?([ha]?2?y|y[ha]?|[ih]2o)")


def _readout_named(key: str) -> bool:
    """Whether a key's name says it belongs to an output layer over the state, not to the
    recurrence (an nn.Linear's `weight`/`bias` speak for the submodule)."""
    parts = [p for p in key.lower().split(".") if p not in ("weight", "bias") and not p.isdigit()]
    return bool(parts) and _READOUT.fullmatch(parts[-1]) is not None


def _bias_named(key: str) -> bool:
    """Whether a key's name says it is a bias ("bias", "x2h_bias", "b_h", "bh", "b0", a list's
    "b.0"): a (1, n) entry is read as one only then, not a learnt initial state ("h0")."""
    last = next((part for part in reversed(key.lower().split(".")) if not part.isdigit()), "")
    return "bias" in last or re.fullmatch(r"b(_\w*|[a-z]{0,2}\d*)", last) is not None


def _side(key: str, gate_words: frozenset[str] = frozenset()) -> str | None:
    """"input" or "hidden" where the key's name says so, else None. The name is the key's last
    part that is not a list's index ("bias_ih.0" of a ParameterList; an nn.Linear's
    `weight`/`bias` speak for the submodule), with or without a leading "W_"/"b_"; an alias
    matches it whole or as its start, digits as a template writes them ("x2h" as "x#h"). A name
    in `gate_words` (the words the module's keys name their gates by) says a gate, not a side:
    the u of b_u beside W_u is the update gate's, not U's of W/U notation."""
    parts = [p for p in key.lower().split(".")
             if p not in ("weight", "bias") and not re.fullmatch(r"[\d#]+", p)]
    full = _DIGITS.sub("#", parts[-1] if parts else "")
    names = {full, re.sub(r"^(w|b|weight|bias)_", "", full)} - gate_words
    for side, aliases in _SIDES.items():
        if any(n == a or (len(a) > 1 and n.startswith(a)) for n in names for a in aliases):
            return side
    return None


def _choose(key: str, candidates: list[tuple[str, str]]) -> tuple[str, str]:
    """One role among the shape-compatible ones; names break ties between the input and hidden
    side. Biases stay "bias" and a square matrix's orientation "?" here: `_settle_biases` and
    `_settle_orientation` decide them once the other weights are known."""
    if all(block.startswith("bias") for block, _ in candidates):
        return ("bias", candidates[0][1])
    weights = [c for c in candidates if not c[0].startswith("bias")]
    if len({block for block, _ in weights}) == 1 and len(weights) == 2:
        return (weights[0][0], "?")  # square: plain or transposed, shapes cannot tell
    if len(weights) == 1:
        return weights[0]
    side = _side(key)
    wanted = {"input": "weight_ih", "hidden": "weight_hh"}.get(side)
    chosen = [c for c in weights if c[0] == wanted]
    if len(chosen) == 1:
        return chosen[0]
    raise MappingError(f"{key} could be any of {', '.join(b + ('.T' if l == 'T' else '') for b, l in weights)}")


# Words for each gate, torch.nn's name first; a key's gate is the one its name ends in, among
# its kind's gates (the Elman RNN's one "h" has none: no name says it).
_GATE_WORDS = {"i": ("i", "in", "input"), "f": ("f", "forget"), "o": ("o", "out", "output"),
               "g": ("g", "c", "cell", "candidate", "u", "cand", "ctilde", "cbar", "chat", "tilde"),
               "r": ("r", "reset"), "z": ("z", "u", "update"),
               "n": ("n", "h", "c", "candidate", "new", "cand", "htilde", "hbar", "hhat", "tilde")}
# Words that name a gate only beside the others' words, or where the key says "gate" too: a
# GRU's candidate in code that names its gates reset, update and out (`out_gate`), where an
# `out` beside W_ir, W_hz, ... is an output layer.
_GATE_WORDS_BESIDE_GATE = {"n": ("out",)}
_WORDED_GATES = ("reset", "update")


def _name_words(key: str) -> list[str]:
    """The words of a per-gate parameter's name after its "W_"/"b_" (an nn.Linear's
    `weight`/`bias` speak for the submodule): "b_h_f" -> ["h", "f"], "W_ii" -> ["ii"]."""
    parts = [p for p in key.lower().split(".") if p not in ("weight", "bias")]
    # "W_z", "Wxi", "bz": the prefix goes; "update", "bias_update": the word stays whole
    words = re.sub(r"^(weight|bias|w|u|b)(_|(?=[a-z]{1,2}$))", "", parts[-1] if parts else "").split("_")
    return [w for w in words if w not in ("gate", "")]


def _gate(key: str, gates: tuple[str, ...], worded: bool = False) -> str | None:
    """The gate a per-gate parameter's name says (W_ii, W_hf, U_z, W_xc, forget_gate.weight...);
    `worded`: the module names its other gates in words (reset, update)."""
    words = _name_words(key)
    if not words:
        return None
    last = words[-1]
    # "ii", "hf", "xc": the side's letter, then the gate's
    candidates = [last, last[1:]] if len(last) == 2 and last[0] in "xih" else [last]
    beside_gate = worded or "gate" in key.lower()
    for text in candidates:
        found = [g for g in gates if text in _GATE_WORDS.get(g, ())
                 or (beside_gate and text in _GATE_WORDS_BESIDE_GATE.get(g, ()))]
        if len(found) == 1:
            return found[0]
    return None


def _gates_named(key: str, gates: tuple[str, ...], worded: bool = False) -> list[str]:
    """What a per-gate parameter's name may say, most likely first: the one gate it names
    (W_ii, U_z, forget_gate), and the gates of a matrix holding some of them stacked, in the
    name's order ("rz" in `linear_rz`: r's rows, then z's). The parameter's shape tells which
    ("W_if": the forget gate's input side, or the i and f gates stacked)."""
    single = _gate(key, gates, worded)
    words = _name_words(key)
    last = words[-1] if words else ""
    stacked = (1 < len(last) < len(gates) and len(set(last)) == len(last)
               and all(letter in gates for letter in last))
    return [reading for reading in (single, last if stacked else None) if reading]


def _side_letter(key: str) -> str | None:
    """"input" or "hidden" where a per-gate name puts the side's letter before the gate's:
    b_i_f / b_h_f, b_if / b_hf (x for the input too)."""
    words = _name_words(key)
    letter = (words[-2] if len(words) >= 2 and len(words[-2]) == 1 else
              words[-1][0] if words and len(words[-1]) == 2 else "")
    return {"i": "input", "x": "input", "h": "hidden"}.get(letter)


def _per_gate(cfg: Config, shapes: dict[str, tuple], roles: dict) -> None:
    """Roles for a layout with one matrix (and bias) per gate and side, W_ii, W_hi, b_ii, ...,
    or per gate over [x, h] (forget_gate = nn.Linear(input + hidden, hidden)), or per group of
    gates the name spells (linear_rz): "weight_ih:<gates>", "combined:<gates>" etc., concatenated
    in torch.nn's gate order by `resolve`. The side comes from the shape (input != hidden on the
    probe), the gates from the name, read as the shape allows, or by elimination
    (`_by_elimination`) where the name says none."""
    hidden, inputs, width = cfg.hidden_size, cfg.input_size, cfg.output_size
    worded = any(word in _WORDED_GATES for key in shapes for word in _name_words(key))
    gate_words = frozenset(_name_words(key)[-1] for key in shapes
                           if _gate(key, cfg.gates, worded))
    for name, shape in shapes.items():
        for gates in _gates_named(name, cfg.gates, worded) if len(shape) == 2 else ():
            side = _weight_side(tuple(shape), len(gates) * hidden, inputs, width)
            if side:
                roles[template(name)] = (f"{side[0]}:{gates}", side[1])
                break
    sides = {name: _weight_side(tuple(shape), hidden, inputs, width)
             for name, shape in shapes.items() if len(shape) == 2 and template(name) not in roles}
    _by_elimination(cfg, shapes, roles, {name: side for name, side in sides.items() if side})
    unread = {}  # the biases no name or weight gives a gate
    for name, shape in shapes.items():
        owner = roles.get(template(name.rsplit(".", 1)[0] + ".weight")) if name.endswith(".bias") else None
        readings = ([owner[0].partition(":")[2]] if owner else
                    _gates_named(name, cfg.gates, worded))
        gates = next((g for g in readings
                      if g and _gates_vector(name, shape, len(g) * hidden)), None)
        side = (owner[0].partition(":")[0] if owner else
                {"input": "weight_ih", "hidden": "weight_hh"}.get(
                    _side(name, gate_words) or _side_letter(name), "weight_ih"))
        bias = "bias_hh" if side == "weight_hh" else "bias_ih"  # a matrix over [x, h]: input's
        if gates:
            roles[template(name)] = (f"{bias}:{gates}", vector_layout(tuple(shape)))
        elif template(name) not in roles and _gates_vector(name, shape, hidden):
            unread[name] = (bias, vector_layout(tuple(shape)))
    _by_elimination(cfg, shapes, roles, unread)


def _gates_vector(key: str, shape: tuple, rows: int) -> bool:
    """Whether an entry holds a bias of `rows`: a vector, or a row or column named as a bias."""
    return tuple(shape) == (rows,) or (tuple(shape) in ((1, rows), (rows, 1)) and _bias_named(key))


def _by_elimination(cfg: Config, shapes: dict[str, tuple], roles: dict,
                    unread: dict[str, tuple[str, str]]) -> None:
    """Roles for keys whose names say no gate (`unread`: key -> the block and layout its shape
    gives one gate's), by elimination: a key whose name differs from other keys' only in its
    last letter, the one theirs name their gates by (Wig beside Wir and Wiz, CSC413's candidate
    g), holds the one gate they leave out where they hold `block` for every other gate and no
    other key of that form is left. A name that says a gate is never overruled (the g of an
    LSTM's W_ig is its cell gate), and words are not letters (fc3 beside reset, candidate is no
    gate)."""
    for key, (block, layout) in unread.items():
        frame = _frame(key)
        kin = [other for other in shapes if other != key and frame and _frame(other) == frame]
        placed = [roles[template(other)][0].partition(":") for other in kin
                  if template(other) in roles]
        letters = "".join(gates for base, _, gates in placed if base == block)
        left = [gate for gate in cfg.gates if gate not in letters]
        if letters and len(placed) == len(kin) and len(left) == 1 and \
                sorted(letters + left[0]) == sorted(cfg.gates):
            roles[template(key)] = (f"{block}:{left[0]}", layout)


def _frame(key: str) -> str | None:
    """A key with the last letter of its name (an nn.Linear's `weight`/`bias` speak for the
    submodule) left out: "Wi?.weight" for Wir.weight, "b_h?" for b_hz; None where the name does
    not end in a letter."""
    parts = key.split(".")
    named = [i for i, part in enumerate(parts)
             if part.lower() not in ("weight", "bias") and not part.isdigit()]
    if not named or not parts[named[-1]][-1:].isalpha():
        return None
    parts[named[-1]] = parts[named[-1]][:-1] + "?"
    return ".".join(parts)


def _weight_side(shape: tuple, rows: int, inputs: int, width: int) -> tuple[str, str] | None:
    """(block, layout) of a matrix of some gates' `rows` by its shape: the input's, the hidden
    state's or one over [x, h], plain or transposed; None for another shape."""
    sides = {(rows, inputs): ("weight_ih", "plain"), (inputs, rows): ("weight_ih", "T"),
             (rows, inputs + width): ("combined", "plain"),
             (inputs + width, rows): ("combined", "T"),
             # square for one gate: orientation settled with the module's other matrices
             (rows, width): ("weight_hh", "?" if rows == width else "plain")}
    if rows != width:
        sides[(width, rows)] = ("weight_hh", "T")
    return sides.get(shape)


def _settle_orientation(roles: dict) -> None:
    """A square matrix follows the orientation the module's other matrices show: an author who
    stores W_ih transposed (for x @ W) stores W_hh transposed too. Without a telling matrix,
    torch.nn's orientation. (Behaviour cannot tell: a W_hh used transposed beside a plain W_ih
    is the classic slip of code that means torch.nn's layout.)"""
    known = [layout for block, layout in roles.values()
             if not block.startswith("bias") and layout != "?"]
    layout = "T" if known and all(shown.startswith("T") for shown in known) else "plain"
    for name, (block, current) in roles.items():
        if current == "?":
            roles[name] = (block, layout)


def _settle_biases(roles: dict, shapes: dict, cfg: Config) -> None:
    """Place the bias keys: an nn.Linear's bias on its weight's side; else by name; two biases
    that names cannot tell apart are interchangeable for the Elman and LSTM maths (in key
    order), never for the GRU's, whose b_hn sits inside r * (...)."""
    biases = [name for name, (block, _) in roles.items() if block == "bias"]
    weight_side = {name.rsplit(".", 1)[0]: block for name, (block, _) in roles.items()
                   if name.endswith(".weight")}
    taken = {block for block, _ in roles.values()}  # a bias under torch.nn's own name
    open_slots = [slot for slot in ("bias_ih", "bias_hh") if slot not in taken]
    unplaced = []
    for name in biases:
        owner = weight_side.get(name.rsplit(".", 1)[0]) if name.endswith(".bias") else None
        side = {"weight_ih": "input", "combined": "input", "weight_hh": "hidden"}.get(owner) or _side(name)
        slot = {"input": "bias_ih", "hidden": "bias_hh"}.get(side)
        if slot in open_slots:
            roles[name] = (slot, roles[name][1])
            open_slots.remove(slot)
        else:
            unplaced.append(name)
    if len(unplaced) == 2 and cfg.family == "gru":
        raise MappingError(f"cannot tell which of {_key(unplaced[0], shapes)} and "
                           f"{_key(unplaced[1], shapes)} is the input bias and which the hidden "
                           "one (it matters for the GRU)")
    for name in unplaced:
        if not open_slots:
            raise MappingError(f"{_key(name, shapes)}: one bias too many")
        roles[name] = (open_slots.pop(0), roles[name][1])


@dataclass(frozen=True)
class Reading:
    """What a module's shapes cannot tell about its layout: whether its matrices over the
    concatenated input and state hold [h, x] rather than [x, h], and the order its stacked
    matrices and biases hold the gates in (None: torch.nn's). Per-gate parameters are read by
    their names whatever the reading. `confirmed`: False where no reading its layout allows gave
    the reference's outputs, and torch.nn's was taken for want of one."""

    state_first: bool = False
    gate_order: str | None = None
    confirmed: bool = True


def readings(cfg: Config, roles: dict[str, tuple[str, str]]) -> list[Reading]:
    """Every reading the roles leave open, torch.nn's own first: the other order of [x, h] where
    a matrix is over both, the other gate orders where a stacked matrix of the module's own
    holds several gates (under torch.nn's names the order is torch.nn's)."""
    shown = {block for name, (block, _) in roles.items() if not _torch_named(cfg, name)}
    orders: list[str | None] = [None]
    if len(cfg.gates) > 1 and shown & set(_STACKED):  # a per-gate block has its gate after ":"
        orders += ["".join(p) for p in itertools.permutations(cfg.gates) if p != tuple(cfg.gates)]
    firsts = (False, True) if any(b.startswith("combined") for b in shown) else (False,)
    return [Reading(first, order) for order in orders for first in firsts]


# The blocks whose rows hold every gate, one after another.
_STACKED = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "combined")


def _torch_named(cfg: Config, key: str) -> bool:
    """Whether a key (or its template) ends in a name torch.nn gives a parameter, a cell's
    (`layers.0.weight_ih`) or a stack's (`weight_ih_l0`, with a word of the module's own after
    it: `weight_hh_l0_raw`, which a weight-dropping wrapper keeps): its gates are in torch.nn's
    order, where another order is a bug, not a layout."""
    last = re.sub(r"_l(\d+|#)(_reverse)?(_[a-z]+)?$", "", key.split(".")[-1])
    return last in set(blocks(cfg).values())


def resolve(cfg: Config, shapes: dict[str, tuple], roles: dict[str, tuple[str, str]],
            reading: Reading = Reading()) -> ParamMap:
    """The map for a module of `cfg` with these state_dict shapes, from roles learnt on the probe
    and read as `reading` says. MappingError when a key's unit (layer, direction) or role cannot
    be told."""
    spec = param_shapes(cfg)
    entries: dict[str, list[Piece]] = {name: [] for name in spec}
    gated: dict[str, dict[str, Piece]] = {}
    own = _own_names(cfg, shapes, roles)
    for key, name in own.items():  # torch.nn's own name, stored x @ W's way maybe
        entries[name].append(Piece(key, _own_name_layout(cfg, name, shapes[key], roles)))
    units = _units(cfg, [key for key in shapes if template(key) in roles and key not in own])
    for key, (layer, direction) in units.items():
        block, layout = roles[template(key)]
        suffix = "" if cfg.is_cell else param_suffix(layer, direction)
        base, _, gate = block.partition(":")
        if base == "combined":
            inputs = cfg.input_size if cfg.is_cell else cfg.layer_input_size(layer)
            pieces = dict(zip(("weight_ih", "weight_hh"),
                              concatenated(key, layout, shapes[key], inputs, reading.state_first)))
        else:
            pieces = {base: Piece(key, layout)}
        for name, piece in pieces.items():
            if gate:  # each gate's rows: placed in gate order below
                rows = cfg.hidden_size
                for index, letter in enumerate(gate):
                    gated.setdefault(name + suffix, {})[letter] = piece if len(gate) == 1 else \
                        replace(piece, rows=(index * rows, (index + 1) * rows))
            elif name + suffix in entries:
                order = None if _torch_named(cfg, key) else reading.gate_order
                entries[name + suffix] += _in_gate_order(cfg, piece, base, order)
    for name, pieces in gated.items():
        if name in entries and set(pieces) == set(cfg.gates):
            entries[name] = [pieces[gate] for gate in cfg.gates]
    assumed = "" if reading.confirmed else (
        "read torch.nn's way: no reading its layout allows gave the reference's outputs")
    return ParamMap({name: tuple(pieces) for name, pieces in entries.items()}, assumed=assumed)


def _in_gate_order(cfg: Config, piece: Piece, block: str, order: str | None) -> list[Piece]:
    """A stacked block's piece as pieces in torch.nn's gate order, its gates held in `order`."""
    if order is None or block not in _STACKED:
        return [piece]
    rows = cfg.hidden_size
    return [replace(piece, rows=(order.index(g) * rows, (order.index(g) + 1) * rows))
            for g in cfg.gates]


def concatenated(key: str, layout: str, shape: tuple, inputs: int,
                 state_first: bool) -> tuple[Piece, Piece]:
    """The input's and the hidden state's columns of a matrix over the concatenated input and
    state ([h, x] when `state_first`), stored as `layout` says."""
    total = shape[0] if layout == "T" else shape[1]
    x_from = total - inputs if state_first else 0
    h_cols = (0, x_from) if state_first else (inputs, total)
    return Piece(key, layout, cols=(x_from, x_from + inputs)), Piece(key, layout, cols=h_cols)


def _own_names(cfg: Config, shapes: dict[str, tuple], roles: dict) -> dict[str, str]:
    """key -> spec name for the keys under torch.nn's own names: a spec name itself, or one
    inside the submodule the keys placed by roles sit in, where no role was learnt for its
    template (a wrapper's `module.weight_hh_l1` beside `module.weight_hh_l0_raw`, the one key it
    renamed, learnt as weight_hh on the probe's one layer)."""
    spec = param_shapes(cfg)
    owners = {key.rpartition(".")[0] for key in shapes if "." in key and template(key) in roles}
    own = {}
    for key in shapes:
        owner, _, name = key.rpartition(".")
        if key in spec:
            own[key] = key
        elif name in spec and owner in owners and template(key) not in roles:
            own[key] = name
    return own


def _own_name_layout(cfg: Config, name: str, shape: tuple, roles: dict) -> str:
    """How a key under torch.nn's own name `name` is stored: transposed when its shape is the
    spec's reversed; a square one as the probe showed its block (in any layer or direction)."""
    want = tuple(param_shapes(cfg)[name])
    if len(want) != 2 or tuple(shape) not in (want, want[::-1]):
        return "plain"
    if want[0] != want[1]:
        return "T" if tuple(shape) == want[::-1] else "plain"
    block = blocks(cfg)[name]
    return next((layout for shown, layout in roles.values() if shown == block), "plain")


def _units(cfg: Config, keys: list[str]) -> dict[str, tuple[int, int]]:
    """key -> (layer, direction) for the keys of a stacked module."""
    directions = cfg.num_directions
    if cfg.is_cell or cfg.num_layers * directions == 1:
        return {key: (0, 0) for key in keys}
    units = {}
    for key in keys:
        # torch's suffix, in a direction's own submodule ("bwd.weight_ih_l0") too, and before a
        # word of the module's own ("weight_hh_l0_raw", which a weight-dropping wrapper keeps)
        match = re.search(r"_l(\d+)(_reverse)?(_[a-z]+)?$", key)
        if match:
            reverse = (match.group(2) or _REVERSE.search(key[:match.start()])
                       or _REVERSE.search(match.group(3) or ""))
            units[key] = (int(match.group(1)), 1 if reverse else 0)
    # Keys of one template the suffix gives one unit (layers.0.weight_ih_l0, layers.1...: a
    # stack of one-layer torch.nn modules) are told apart by the number that differs instead.
    for key in [key for key in units if any(
            other != key and units[other] == units[key] and template(other) == template(key)
            for other in units)]:
        del units[key]
    rest = [key for key in keys if key not in units]
    if not rest:
        return units
    marked = any(_REVERSE.search(key) for key in rest)
    if marked and cfg.num_layers == 1:  # one layer: the markers alone tell the directions
        units.update({key: (0, 1 if _REVERSE.search(key) else 0) for key in rest})
        return units
    numbers = {key: [int(n) for n in _DIGITS.findall(key)] for key in rest}
    # The numbers that differ between keys of the same template are the unit's.
    varying = {}
    for key in rest:
        same = [numbers[k] for k in rest if template(k) == template(key)]
        positions = [i for i in range(len(numbers[key])) if len({tuple(n)[i] for n in same
                                                                   if len(n) == len(numbers[key])}) > 1]
        if len(positions) != 1:
            raise MappingError(f"cannot tell which layer {key} belongs to (give --param-map)")
        varying[key] = numbers[key][positions[0]]
    low = min(varying.values())
    for key, n in varying.items():
        if marked or directions == 1:
            units[key] = (n - low, 1 if _REVERSE.search(key) else 0)
        else:
            units[key] = divmod(n - low, directions)
    return units


def _key(name: str, shapes: dict) -> str:
    """The key a role's template `name` was learnt from (messages name keys, not templates)."""
    return next((key for key in shapes if template(key) == name), name)


def _listed(shapes: dict) -> str:
    return ", ".join(f"{key} {tuple(shape)}" for key, shape in list(shapes.items())[:6]) or "none"
