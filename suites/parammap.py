"""Finding the spec's parameters in a module that names or lays them out its own way.

torch.nn names a layer's parameters `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`;
the RNNs people write say `W_ih`, `W_xh.weight` (an nn.Linear), `U_h`, `b_h`, keep x @ W's
transposed layout, or one matrix over the concatenated [x, h]. A `ParamMap` says, for every spec
name, where its values sit in the module's state_dict: pieces of entries (the entry itself, its
transpose, or a block of its rows or columns), or nowhere — a block the module does not have (the
second bias of a one-bias layout) is held at zero by the checks, so the rest can still be judged.

The map comes from, in order (`rnnbench.suites.subject.Subject.layout`):
1. the module's own names, when they are the spec's (the identity);
2. a map the user gives (`Implementation.param_map`, `--param-map KEY=NAME`, where NAME may end
   in `.T` for a transposed entry, then in `:GATES` for an entry holding those gates' rows in
   that order, `x2h.weight=weight_ih:zr`);
3. the kind's own inference, where its family has one (torch.nn's: `param_roles`, from shapes
   with names to break ties); else the spec's names found inside a nested module
   (`recurrent.layer.A` for `A`), `by_name`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from rnnbench.reference.kinds import kind_of


class MappingError(ValueError):
    """The module's parameters cannot be matched to the spec's unambiguously."""


@dataclass(frozen=True)
class Piece:
    """Where (part of) a spec parameter sits: in state_dict entry `key`, as `layout` says
    ("plain": the entry, "T": its transpose, "row": the one row of a (1, n) entry holding a
    vector, as `x @ W + b` broadcasts it, "column": the one column of an (n, 1) entry, as
    column-vector code's `W @ x + b` does), of which only `rows` and `cols` (start, stop) when
    given: one gate's rows of a stacked matrix, one side's columns of a matrix over [x, h]."""

    key: str
    layout: str = "plain"
    rows: tuple[int, int] | None = None
    cols: tuple[int, int] | None = None

    def view(self, tensor):
        """This piece of a tensor shaped like the state_dict entry (a view, never a copy)."""
        if self.layout == "T":
            tensor = tensor.t()
        elif self.layout == "row":
            tensor = tensor[0]
        elif self.layout == "column":
            tensor = tensor[:, 0]
        if self.rows is not None:
            tensor = tensor[self.rows[0]:self.rows[1]]
        if self.cols is not None:
            tensor = tensor[:, self.cols[0]:self.cols[1]]
        return tensor

    def describe(self) -> str:
        text = self.key + {"T": ".T", "row": "[0]", "column": "[:, 0]"}.get(self.layout, "")
        rows = f"{self.rows[0]}:{self.rows[1]}" if self.rows else ":"
        if self.cols:
            return f"{text}[{rows}, {self.cols[0]}:{self.cols[1]}]"
        return f"{text}[{rows}]" if self.rows else text


def vector_layout(shape: tuple) -> str | None:
    """The layout of an entry holding a vector: "plain" (n,), "row" (1, n), as x @ W + b
    broadcasts it, "column" (n, 1), as column-vector code's W @ x + b does; None for another
    shape."""
    if len(shape) == 1:
        return "plain"
    if len(shape) == 2 and 1 in shape:
        return "row" if shape[0] == 1 else "column"
    return None


@dataclass(frozen=True)
class ParamMap:
    """Spec name -> the pieces holding it, concatenated along the first axis; no pieces: the
    module has no such parameter and it is held at zero. `given`: the user's map (`from_user`),
    which a misshapen parameter may be the fault of. `assumed`: what of an inferred map its
    module's outputs did not confirm ("" where they did, or nothing was open)."""

    entries: dict[str, tuple[Piece, ...]]
    given: bool = False
    assumed: str = ""

    @property
    def identity(self) -> bool:
        return all(pieces == (Piece(name),) for name, pieces in self.entries.items())

    @property
    def missing(self) -> list[str]:
        return [name for name, pieces in self.entries.items() if not pieces]

    def keys(self) -> set[str]:
        return {piece.key for pieces in self.entries.values() for piece in pieces}

    def describe(self) -> str:
        """"W_ih -> weight_ih_l0, ..., bias_hh_l0: none (held at zero)", changed names only."""
        parts = []
        for name, pieces in self.entries.items():
            if not pieces:
                parts.append(f"{name}: none (held at zero)")
            elif pieces != (Piece(name),):
                parts.append(f"{_blocks_of_one(pieces) or ' + '.join(p.describe() for p in pieces)}"
                             f" -> {name}")
        return ", ".join(parts)


def _blocks_of_one(pieces: tuple[Piece, ...]) -> str | None:
    """Row blocks of one entry taken in another order, said once: "W[:, 3:8] (row blocks 1, 2, 4,
    3)"; None for any other pieces."""
    first = pieces[0]
    if len(pieces) < 2 or any(p.rows is None or replace(p, rows=None) != replace(first, rows=None)
                              for p in pieces):
        return None
    size = first.rows[1] - first.rows[0]
    order = [p.rows[0] // size + 1 for p in pieces]
    if any(p.rows != (p.rows[0], p.rows[0] + size) or p.rows[0] % size for p in pieces) \
            or sorted(order) != list(range(1, len(pieces) + 1)):
        return None
    return f"{replace(first, rows=None).describe()} (row blocks {', '.join(map(str, order))})"


def spec_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """The spec's parameter names and shapes for a configuration of any kind."""
    return kind_of(cfg).param_shapes(cfg)


def identity(cfg) -> ParamMap:
    return ParamMap({name: (Piece(name),) for name in spec_shapes(cfg)})


def by_name(cfg, shapes: dict[str, tuple]) -> ParamMap:
    """Every spec name found as a key of its own or, in a module nested in another, as the one
    key ending in "." + name; MappingError naming the names not found, or a matrix stored
    transposed (x @ W's layout under torch.nn's names), which the kind's inference reads."""
    entries, missing = {}, []
    for name, shape in spec_shapes(cfg).items():
        matches = ([key for key in shapes if key == name]
                   or [key for key in shapes if key.endswith("." + name)])
        if len(matches) == 1:
            entries[name] = (Piece(matches[0]),)
            if len(shape) == 2 and shape[0] != shape[1] and \
                    tuple(shapes[matches[0]]) == tuple(shape[::-1]):
                raise MappingError(f"{matches[0]} is stored transposed")
        else:
            missing.append(name)
    if missing:
        raise MappingError(f"state_dict lacks {', '.join(missing)}; it has {', '.join(shapes)}")
    return ParamMap(entries)


def parse_user_map(text: str) -> dict[str, str]:
    """"KEY=NAME,KEY=NAME.T" -> {KEY: NAME}; ValueError naming the bad entry."""
    mapping = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key, sep, name = entry.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise ValueError(f"--param-map entry {entry!r} is not KEY=NAME")
        if key.strip() in mapping:
            raise ValueError(f"--param-map names {key.strip()!r} twice")
        mapping[key.strip()] = name.strip()
    return mapping


def from_user(cfg, shapes: dict[str, tuple], user: dict[str, str]) -> ParamMap:
    """The map a user gave (module key -> spec name, `.T` for transposed, `:GATES` for a key
    holding those gates' rows in that order, `weight_ih:zr`, and names joined by `+` for a matrix
    over their inputs concatenated, its columns in that order: `weight_ih+weight_hh` over [x, h],
    `weight_hh+weight_ih` over [h, x]), the module's spec-named entries kept as they are (a spec
    name the map leaves out is its own key, or that name in a submodule the map's keys sit in:
    `module.` for `module.weight_hh_l0_raw`); MappingError for a name the spec does not have,
    gates it does not, or a key not shaped as its names need (a matrix over [x, h] given as
    weight_ih)."""
    spec = spec_shapes(cfg)
    entries: dict[str, list[Piece]] = {name: [] for name in spec}
    gated: dict[str, dict[str, Piece]] = {}
    for key, given in user.items():
        text, _, gates = given.partition(":")
        layout = "T" if text.endswith(".T") else "plain"
        names = text.removesuffix(".T").split("+")
        if key not in shapes:
            if key.endswith(".T") and key[:-2] in shapes:
                raise MappingError(f"--param-map {key}={given}: .T goes after the name "
                                   f"({key[:-2]}={text}.T{':' + gates if gates else ''})")
            continue  # a map written for another configuration (e.g. more layers)
        unknown = [name for name in names if name not in spec]
        if unknown:
            raise MappingError(f"--param-map {key}={given}: the spec has no parameter "
                               f"{unknown[0]!r} for {cfg.describe()}")
        pieces = _pieces(cfg, f"--param-map {key}={given}", key, tuple(shapes[key]), names, layout)
        if not gates:
            for name, piece in pieces.items():
                entries[name].append(piece)
            continue
        if len(set(gates)) != len(gates) or not set(gates) <= set(cfg.gates):
            raise MappingError(f"--param-map {key}={given}: the gates of {cfg.describe()} are "
                               f"{', '.join(cfg.gates)}, each once")
        rows = cfg.hidden_size
        stored = next(iter(pieces.values())).layout
        held = shapes[key][1] if stored in ("T", "row") else shapes[key][0]
        if held != len(gates) * rows:
            raise MappingError(f"--param-map {key}={given}: {key} holds {held} rows, "
                               f"{len(gates)} gate(s) of {rows}")
        for name, piece in pieces.items():
            for index, gate in enumerate(gates):
                if gate in gated.get(name, {}):
                    raise MappingError(f"--param-map gives gate {gate} of {name} twice "
                                       f"({gated[name][gate].key} and {key})")
                gated.setdefault(name, {})[gate] = replace(
                    piece, rows=(index * rows, (index + 1) * rows))
    for name, pieces in gated.items():
        if set(pieces) != set(cfg.gates) or entries[name]:
            raise MappingError(f"--param-map gives {name} for gates {', '.join(pieces)} only, of "
                               f"{', '.join(cfg.gates)} (each key holding some of them says which)")
        entries[name] = [pieces[gate] for gate in cfg.gates]
    # The submodules the map's own keys sit in: where the other names are looked for too.
    owners = {key.rpartition(".")[0] + "." for key in user if "." in key}
    for name in spec:
        matches = [key for key in shapes if key == name or (key not in user and any(
            key == owner + name for owner in owners))]
        if not entries[name] and len(matches) == 1:
            entries[name].append(Piece(matches[0]))
    return ParamMap({name: tuple(pieces) for name, pieces in entries.items()}, given=True)


def _pieces(cfg, entry: str, key: str, shape: tuple, names: list[str],
            layout: str) -> dict[str, Piece]:
    """Spec name -> the piece of `key` (shaped `shape`, stored as `layout` says) a --param-map
    `entry` gives it: the entry itself, or for matrices joined by "+" their columns in the order
    given. MappingError where the key is not shaped as the names need: a vector for a bias, the
    names' columns together for matrices."""
    spec = spec_shapes(cfg)
    if len(names) == 1 and len(spec[names[0]]) == 1:  # a vector, whichever way it stands
        vector = vector_layout(shape)
        if vector is None:
            raise MappingError(f"{entry}: {key} {shape} holds no vector, {names[0]} is one "
                               f"{tuple(spec[names[0]])}")
        return {names[0]: Piece(key, vector)}
    if len(set(names)) != len(names) or any(len(spec[n]) != 2 for n in names) or \
            len({spec[n][0] for n in names}) != 1:
        raise MappingError(f"{entry}: + joins matrices of as many rows, each once, into one over "
                           f"their inputs ({', '.join(f'{n} {tuple(spec[n])}' for n in names)})")
    widths = [spec[name][1] for name in names]
    needs = f"{'+'.join(names)} needs {' + '.join(map(str, widths))} for {cfg.describe()}"
    if len(shape) != 2:
        raise MappingError(f"{entry}: {key} {shape} holds no matrix, {needs} columns")
    columns = shape[0] if layout == "T" else shape[1]
    if columns != sum(widths):
        read = " read transposed" if layout == "T" else ""
        raise MappingError(f"{entry}: {key} {shape}{read} has {columns} columns, "
                           f"{needs}{_joined_hint(spec, names, columns)}")
    if len(names) == 1:
        return {names[0]: Piece(key, layout)}
    starts = [sum(widths[:index]) for index in range(len(names))]
    return {name: Piece(key, layout, cols=(start, start + width))
            for name, start, width in zip(names, starts, widths)}


def _joined_hint(spec: dict, names: list[str], columns: int) -> str:
    """Where one matrix's `columns` are its own and another's of as many rows (weight_ih's and
    weight_hh's: a matrix over [x, h]), how --param-map says so; the other matrix is the one
    whose name differs least ("weight_hh_l0" for "weight_ih_l0"). Else nothing."""
    if len(names) != 1:
        return ""
    [name] = names
    rows, width = spec[name]
    fits = [other for other, shape in spec.items() if other != name and len(shape) == 2
            and shape[0] == rows and width + shape[1] == columns]
    if not fits:
        return ""
    other = min(fits, key=lambda o: (len(o) != len(name), sum(a != b for a, b in zip(name, o))))
    return (f"; a matrix over both inputs is {name}+{other}, its columns in that order "
            f"({other}+{name}: the other way round)")
