"""Named diagnoses: the mistakes from-scratch RNN authors make, by stable id, and how a wrong
output is traced back to one of them.

`DIAGNOSES` (defined in `rnnbench.findings`, so reports read it without importing the suites)
maps each id to the sentence a user reads.

`diagnose` explains a forward pass that differs from the reference (or raised). It first asks
the implementation two more questions (probes): does it work when the zero initial state is
passed explicitly (then h0=None is not handled), and does it give the right answer when the
input is handed over time-major (then batch_first is ignored). Then it recomputes the reference
with each named mistake (`rnnbench.suites.mistakes`) and names the one the implementation
reproduces. Last, final states that contradict the module's own outputs are named. Other
checks name their findings themselves (init, dropout, error inputs, parameter names).
`diagnose_packed` does the same for variable-length (packed) input with its own mistakes.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import torch

from rnnbench.findings import DIAGNOSES  # noqa: F401  (re-exported: the suites' vocabulary)
from rnnbench import reference
from rnnbench.impls.adapt import BatchFirstAdapter, unwrapped
from rnnbench.reference import io_shapes, output_names, param_shapes
from rnnbench.reference.numerics import flatten_outputs, nest_state, state_names
from rnnbench.suites import mistakes
from rnnbench.suites.compare import agree, excess, identical, precision_reached
from rnnbench.suites.layers import is_batched, time_major
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import call, draw_params, params_of, to_numpy



def diagnose(run, observed: dict | None, message: str = "") -> str | None:
    """The diagnosis id of a run whose outputs (`observed`, None if forward raised `message`)
    are wrong. A module built batch_first=True because it refused time-major
    (`BatchFirstAdapter`) is handed its input batch-first: where it reads it time-major all the
    same, it ignores its batch_first."""
    found = _diagnosed(run, observed, message)
    if found == "always_batch_first" and isinstance(run.module, BatchFirstAdapter):
        return "batch_first_ignored"
    return found


def _diagnosed(run, observed: dict | None, message: str) -> str | None:
    if observed is None and transposed_operand(run.cfg, message):
        return "weight_transposed"
    tol = run.tolerance()
    expected = run.expected()
    for probe in (_h0_none_unhandled, _state_first, _batch_first_ignored, _always_batch_first,
                  _state_layout, _training_changes_output, _gates_split_by_size,
                  _batch_of_one_broken):
        found = probe(run, observed, expected, tol)
        if found:
            return found
    if observed is None:
        return None
    if _non_finite(observed, expected):
        return "non_finite"
    if _state_swapped(run.cfg, observed, expected, tol):
        return "lstm_state_swapped"
    # A known mistake first: a wrong function whose error a coarser dtype's looser tolerance
    # happens to cover is that mistake, not imprecision.
    found = mistakes.matches(run.cfg, run.params, run.x64, run.hx64, observed, expected, tol)
    if len(found) > 1 and run.hx64 is None:
        found = _told_apart(run, found, tol)
    return ((next(iter(found)) if len(found) == 1 else None)
            or ("lower_precision" if precision_reached(run, observed, expected) else None)
            or final_state_mismatch(run.cfg, observed, tol))


def _state_swapped(cfg, observed: dict, expected: dict, tol) -> bool:
    """An LSTM's h and c (h_n and c_n) each equal the other's reference."""
    if cfg.family != "lstm":
        return False
    h, c = output_names(cfg)[-2:]
    if h not in observed or c not in observed:  # a module that returns h alone
        return False
    return agree({**observed, h: observed[c], c: observed[h]}, expected, tol)


def _told_apart(run, tied: set[str], tol) -> set[str]:
    """The mistakes tied on a run with the state omitted (zeros: the Cho GRU's reset and a b_hn
    outside it give the same outputs there) that the module still reproduces from a random
    state; the tie as it was where forward does not take that state."""
    rng = run.subject.rng("tied-mistakes", run.case.name)
    shapes = io_shapes(run.cfg, run.case.batch, run.case.steps)
    hx64 = {name: run.rounded(rng.uniform(-1, 1, shapes[name])) for name in state_names(run.cfg)}
    try:
        observed = run.run(hx=run.tensors(hx64=hx64)[1])
    except Finding:
        return tied
    found = tied & mistakes.matches(run.cfg, run.params, run.x64, hx64, observed,
                                    run.expected(hx=hx64), tol)
    return found or tied


def _non_finite(observed: dict, expected: dict) -> bool:
    """Whether an output is NaN or infinite where the reference's is finite."""
    return any(np.shape(observed[name]) == np.shape(want)
               and bool(np.any(~np.isfinite(observed[name]) & np.isfinite(want)))
               for name, want in expected.items()
               if want is not None and observed.get(name) is not None)


_MATMUL_SHAPES = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and "
                            r"(\d+)x(\d+)\)")


def transposed_operand(cfg, message: str) -> bool:
    """Whether a failed matrix product's shapes say a weight stored (rows, cols) as torch.nn
    stores it was multiplied as x @ W: mat2 is a non-square spec weight, and mat1's last axis
    matches its columns."""
    found = _MATMUL_SHAPES.search(message or "")
    if not found:
        return False
    _, inner, rows, cols = map(int, found.groups())
    weights = {tuple(shape) for shape in param_shapes(cfg).values() if len(shape) == 2}
    return rows != cols and (rows, cols) in weights and inner == cols


def final_state_mismatch(cfg, pieces: dict, tol) -> str | None:
    """What is wrong when the top layer's h_n contradicts the module's own output sequence (None
    when it does not): each direction's h_n is its output at the last timestep it processed,
    t = L-1 forward, t = 0 reverse."""
    if cfg.is_cell or "h_n" not in pieces:
        return None
    seq = time_major(cfg, pieces["output"])
    h_n = pieces["h_n"] if is_batched(cfg, pieces["output"]) else pieces["h_n"][:, None]
    layers, directions, width = cfg.num_layers, cfg.num_directions, cfg.output_size

    def ends_at(index: int, d: int, last: bool) -> bool:
        """Whether h_n[index] is direction d's output at its last (or first) processed step."""
        step = -1 if (d == 0) == last else 0
        return excess(h_n[index], seq[step][..., d * width:(d + 1) * width], tol) <= 1.0

    top = (layers - 1) * directions
    if all(ends_at(top + d, d, last=True) for d in range(directions)):
        return None
    if layers > 1 and directions == 2 and all(ends_at(d * layers + layers - 1, d, last=True)
                                              for d in range(directions)):
        return "h_n_layout"
    if len(seq) > 1:
        if ends_at(top, 0, last=False):
            return "time_reversed"
        if directions == 2 and ends_at(top, 0, last=True) and ends_at(top + 1, 1, last=False):
            return "reverse_h_n_wrong_end"
    return "output_h_n_mismatch"


def _h0_none_unhandled(run, observed, expected, tol) -> str | None:
    """hx=None fails, but passing zeros (of the input's dtype) explicitly gives the right
    answer: the omitted state is what fails. When it raised in a dtype other than torch's
    default while the same module in the default dtype runs, the zero state is made in the
    default dtype, not the input's."""
    if run.hx64 is not None:
        return None
    try:
        with_zeros = run.run(hx=_zero_state(run))
    except Finding as finding:
        # With explicit zeros forward ran, and only its result has a problem of its own (found
        # by another check): the dtype of the omitted state is still what raised.
        ran = "raised_at" not in finding.numbers
        return "zero_state_default_dtype" if ran and _default_dtype_runs(run, observed) else None
    if not agree(with_zeros, expected, tol):
        return None
    return "zero_state_default_dtype" if _default_dtype_runs(run, observed) else "h0_none_unhandled"


def _batch_of_one_broken(run, observed, expected, tol) -> str | None:
    """A batch of one fails (raises, or answers wrong) where a batch of two, the same input
    and another beside it, gets the reference's outputs: a squeeze that drops the batch axis,
    say. (Another input, not the same one twice: rows that are equal hide a mistake that mixes
    the batch's rows.) A batch of one that raised only where the check asked more of the call
    than the probe does (an initial state that requires a gradient, which an in-place write to
    it refuses at any batch size) is not named so."""
    if run.case.batch != 1:
        return None
    if observed is None:
        try:
            run.run()
            return None  # the plain call runs: the batch size is not what raised
        except Finding:
            pass
    cfg = run.cfg
    x_axis = 0 if cfg.is_cell or cfg.batch_first else 1
    state_axis = 0 if cfg.is_cell else 1
    rng = run.subject.rng("batch-of-two", run.case.name)

    def beside(value: np.ndarray, axis: int) -> np.ndarray:
        other = run.rounded(rng.normal(0.0, 1.0, value.shape) + value.mean())
        return np.concatenate([value, other], axis)
    x = beside(run.x64, x_axis)
    hx = None if run.hx64 is None else {
        name: beside(value, state_axis) for name, value in run.hx64.items()}
    try:
        doubled = run.run(*run.tensors(x, hx))
    except Finding:
        return None
    return "batch_of_one_broken" if agree(doubled, run.expected(x=x, hx=hx), tol) else None


def _zero_state(run, dtype: str | None = None) -> dict:
    """The initial state torch.nn takes for hx=None, explicitly, in the run's dtype (or `dtype`)."""
    shapes = io_shapes(run.cfg, run.case.batch, run.case.steps)
    return {name: run.subject.tensor(np.zeros(shapes[name]), dtype or run.dtype)
            for name in state_names(run.cfg)}


def _default_dtype_runs(run, observed) -> bool:
    """Whether forward, wrong (`observed` None) in a dtype other than torch's default, answers
    otherwise with the state omitted than with explicit zeros there, while in the default dtype
    it answers the same with either (a zero state that is float64, or shaped wrong, differs
    there too). A forward wrong with either state in the run's dtype is wrong for another cause."""
    default = str(torch.get_default_dtype()).removeprefix("torch.")
    if observed is not None or run.dtype == default:
        return False
    return (_omitted_state_differs(run, run.dtype) is True
            and _omitted_state_differs(run, default) is False)


def _omitted_state_differs(run, dtype: str) -> bool | None:
    """Whether forward in `dtype`, given the run's parameters and input, answers otherwise (or
    raises) with the state omitted than with explicit zeros; None when it raises with zeros."""
    module = run.module if dtype == run.dtype else run.subject.build(run.cfg, dtype, run.params)
    x = run.subject.tensor(run.x64, dtype)
    try:
        zeros = run.subject_call(x, _zero_state(run, dtype), module, run.cfg)
    except Finding:
        return None
    try:
        omitted = run.subject_call(x, None, module, run.cfg)
    except Finding:
        return True
    got, want = list(_tensors(omitted)), list(_tensors(zeros))
    return not (len(got) == len(want) > 0 and all(map(identical, got, want)))


def _tensors(value):
    """The tensors in a nest of tuples and lists, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def output_sequence(result) -> torch.Tensor | None:
    """The output sequence in a layer's return value, alone or first: its first tensor, where
    that is 3-D (batched); None otherwise."""
    output = next(_tensors(result), None)
    return output if output is not None and output.dim() == 3 else None


def _training_changes_output(run, observed, expected, tol) -> str | None:
    """A module without dropout whose output is right in eval mode but wrong in training mode
    drops units with p = 0. (One that raised is not judged so: its eval run differs in more than
    the mode, e.g. inputs that do not require gradients.)"""
    if observed is None or not run.module.training or run.cfg.is_cell or run.cfg.dropout:
        return None
    run.module.eval()
    try:
        in_eval = run.run()
    except Finding:
        return None
    finally:
        run.module.train()
    return "changes_in_training" if agree(in_eval, expected, tol) else None


def _state_first(run, observed, expected, tol) -> str | None:
    """A cell whose forward names its first argument as a state (h, hx, hidden, state, prev_h)
    is right when called forward(state, input). (Behaviour alone cannot tell it from W_ih and
    W_hh applied to each other's operand, hence the name.)"""
    if not run.cfg.is_cell or run.hx64 is None or not _state_named_first(run.module):
        return None
    x, hx = run.tensors()
    try:
        swapped = run.unpack(run.cfg, x, call("forward", run.module, nest_state(run.cfg, hx), x))
    except Finding:
        return None
    seen = {name: to_numpy(value) for name, value in swapped.items()}
    return "state_before_input" if agree(seen, expected, tol) else None


def _state_layout(run, observed, expected, tol) -> str | None:
    """forward raised on torch.nn's state: the state layout (`_state_layouts`; on an unbatched
    input none with a layer axis, which reads as a batch of one) whose first output is the
    reference's is named, else the first that forward runs on (a module that takes its state so
    and is wrong besides, or returns other outputs: the layout is its first cause all the same).
    Not on a case whose tolerance is scaled up (the saturated one), where a state read wrongly
    can still agree."""
    cfg = run.cfg
    if observed is not None or run.hx64 is None or run.case.tolerance_scale != 1.0:
        return None
    try:
        run.subject_call(*run.tensors())
        return None  # it runs on torch.nn's state: what is wrong is its result
    except Finding:
        pass
    first = run.spec.output_names(cfg)[0]
    want = {first: expected[first]}
    ran = None
    for diagnosis, given, state, read in _state_layouts(run, want[first].ndim):
        try:
            result = call("forward", run.module, given, state)
        except Finding:
            continue
        out = next(_tensors(result), None)
        if out is None:
            continue
        if diagnosis == "state_in_list" and any(
                tuple(t.shape) == (1, *want[first].shape) for t in _tensors(result)):
            diagnosis = "cell_state_layer_axis"  # h = state[0] read from (1, batch, hidden)
        if agree({first: to_numpy(read(out))}, want, tol):
            return diagnosis
        ran = ran or diagnosis
    return ran


def _state_layouts(run, ndim: int):
    """(diagnosis, input, state, read of the first output) for each state layout `_state_layout`
    tries, in this order: a cell's h in a list, as Keras's cells take it (first: a cell that
    reads `state[0]` runs on a layer axis too); a cell's state with a one-layer stack's leading
    axis, alone or in a tuple (h,); a one-layer, one-direction layer's state without its layer
    axis, as a loop over a cell takes it (the input time-major; where the module runs on that
    state only with the input handed batch-first, that reading is named, the state's layout
    being its next finding); an LSTM's h and c concatenated either way round, as TensorFlow's
    state_is_tuple=False keeps them."""
    cfg = run.cfg

    def fresh(reshape=lambda value: value):
        """The input and the state, each state tensor reshaped: new tensors for every call."""
        x, hx = run.tensors(hx64={name: reshape(value) for name, value in run.hx64.items()})
        return x, nest_state(cfg, hx)

    def same(out):
        return out

    def without_layer_axis(out):  # a cell's h, returned with the layer axis or without
        return out[0] if out.dim() == ndim + 1 else out

    def axes_swapped(value):
        return value.transpose(0, 1)

    batched = is_batched(cfg, run.x64)  # unbatched, an axis of one reads as a batch of one
    if cfg.is_cell and cfg.family != "lstm":
        x, h = fresh()
        yield "state_in_list", x, [h], same
    if batched and cfg.is_cell:
        for wrap in (same, lambda state: (state,)) if cfg.family != "lstm" else (same,):
            x, layered = fresh(lambda value: value[None])
            yield "cell_state_layer_axis", x, wrap(layered), without_layer_axis
    elif batched and cfg.num_layers * cfg.num_directions == 1:
        x, unlayered = fresh(lambda value: value[0])
        yield "h0_no_layer_dim", x, unlayered, same
        if not cfg.batch_first:
            # where it runs only on the input handed batch-first, that reading came first
            x, unlayered = fresh(lambda value: value[0])
            yield "always_batch_first", axes_swapped(x), unlayered, axes_swapped
    if cfg.family == "lstm":
        for order in ((0, 1), (1, 0)):
            x, state = fresh()
            yield "state_concatenated", x, torch.cat([state[i] for i in order], -1), same


def _state_named_first(module) -> bool:
    module = unwrapped(module)
    try:
        first = next(iter(inspect.signature(module.forward).parameters), "")
    except (TypeError, ValueError):
        return False
    return first.lower().startswith(("h", "state", "prev"))


def _always_batch_first(run, observed, expected, tol) -> str | None:
    """With batch_first=False the module's output is right when it is handed the input
    batch-first (and its output read batch-first), and wrong when handed it time-major, both
    without the state: it always reads (N, L, I). (In half precision the tolerance can be wider
    than the difference between the two readings.) Only the output sequence is compared, since
    such modules often shape h_n their own way too."""
    cfg = run.cfg
    if cfg.is_cell or cfg.batch_first or not is_batched(cfg, run.x64):
        return None

    def output_for(x) -> np.ndarray | None:
        try:
            output = output_sequence(run.subject_call(x))
        except Finding:
            return None
        return None if output is None else to_numpy(output)

    x = run.tensors()[0]
    batch_first, time_major = output_for(x.transpose(0, 1)), output_for(x)
    if batch_first is None or time_major is None:
        return None
    want = {"output": run.expected(hx=None)["output"]}
    if agree({"output": batch_first.swapaxes(0, 1)}, want, tol) and not agree(
            {"output": time_major}, want, tol):
        return "always_batch_first"
    return None


def _gates_split_by_size(run, observed, expected, tol) -> str | None:
    """forward fails, yet a module whose hidden_size equals the gate count is right: the gates
    were split into chunks of that size rather than into that many chunks (which only
    coincide there). The case sizes keep hidden_size off every gate count for this."""
    cfg = run.cfg
    gates = len(cfg.gates)
    if observed is not None or gates == 1 or cfg.hidden_size == gates or cfg.proj_size:
        return None
    rng = run.subject.rng("gates-by-size", run.case.name)

    def runs(size: int):
        """A fresh module of this hidden size on the run's input: (outputs, params) or None."""
        sized = cfg.replace(hidden_size=size)
        try:
            module = run.subject.build(sized, run.dtype, draw_params(sized, rng))
            params = params_of(module, sized, run.subject.param_map(module, sized))
            return run.run(module=module, cfg=sized, hx=None), params
        except Finding:
            return None

    # The failure must follow the size: a fresh module of the run's own size fails too.
    if runs(cfg.hidden_size) is not None:
        return None
    small = runs(gates)
    if small is None:
        return None
    want = run.expected(cfg.replace(hidden_size=gates), small[1], hx=None)
    return "gates_split_by_size" if agree(small[0], want, tol) else None


def dropout_in_eval(run) -> bool:
    """Whether the run's module built with dropout=0 (same parameters) equals the reference in
    eval mode, so that dropout is what makes it wrong."""
    try:
        without = run.subject.build(run.cfg.replace(dropout=0.0), run.dtype, run.params)
        return agree(run.run(module=without, cfg=run.cfg), run.expected(), run.tolerance())
    except Finding:
        return False


def _batch_first_ignored(run, observed, expected, tol) -> str | None:
    """With batch_first=True the module is right when handed the input time-major."""
    cfg = run.cfg
    if not (cfg.batch_first and is_batched(cfg, run.x64)):
        return None
    time_major_cfg = cfg.replace(batch_first=False)
    try:
        seen = run.run(run.tensors()[0].transpose(0, 1), module=run.module, cfg=time_major_cfg)
    except Finding:
        return None
    want = {**expected, "output": expected["output"].swapaxes(0, 1)}
    return "batch_first_ignored" if agree(seen, want, tol) else None


def diagnose_packed(run, observed: dict, expected: dict, tol) -> str | None:
    """The diagnosis id of a packed run (`check_packed.PackedRun`) whose outputs (padded,
    time-major) differ from `expected`: the reference recomputed with each classic
    variable-length mistake (`packed_variants`), the one the implementation reproduces. The
    reverse direction's mistake is only well defined for one layer (what an upper layer reads
    in the padding is the implementation's own business), so a deeper module is asked once
    more as a fresh one-layer module on the same lengths."""
    found = _packed_match(run, observed, tol)
    cfg = run.cfg
    if found or cfg.num_layers == 1 or not cfg.bidirectional:
        return found
    shallow = cfg.replace(num_layers=1, dropout=0.0)
    try:
        probe = type(run)(run.subject, run.case, run.dtype, "packed-probe", cfg=shallow)
        seen = {name: to_numpy(t) for name, t in probe.packed_call().items()}
    except Finding:
        return None
    if agree(seen, probe.packed_expected(), tol):
        return None
    return _packed_match(probe, seen, tol)


def _packed_match(run, observed: dict, tol) -> str | None:
    variants_ = packed_variants(run.cfg, run.params, run.time_major(run.x64),
                                run.lengths, run.hx64)
    return next((name for name, want in variants_.items() if agree(observed, want, tol)), None)


def packed_variants(cfg, params: dict, x: np.ndarray, lengths, hx: dict | None) -> dict:
    """What each classic variable-length mistake computes for time-major padded input `x`,
    keyed by diagnosis id: the parts of the result the mistake determines (padded output with
    zeros beyond each length, h_n)."""
    cfg = cfg.replace(batch_first=False)
    state = None if hx is None else nest_state(cfg, hx)
    right = reference.forward_packed(cfg, params, x, lengths, state)
    live = np.arange(x.shape[0])[:, None] < np.asarray(lengths)[None, :]  # (T, N)
    # The whole padded tensor (zeros beyond each length, as pad_packed_sequence gives it) run
    # as one batch, the outputs packed back (so only each sequence's own steps are seen).
    padded_x = np.where(live[..., None], x, 0.0)
    padded = flatten_outputs(cfg, reference.forward(cfg, params, padded_x, state))
    padded_run = {"output": np.where(live[..., None], padded["output"], 0.0), "h_n": padded["h_n"]}
    # Right outputs, but each layer's forward h_n read off its padded output at the last step:
    # zeros for every sequence shorter than the longest.
    short = np.asarray(lengths) < x.shape[0]
    h_n = right["h_n"].copy()
    h_n[0::cfg.num_directions, short] = 0.0
    found = {"packed_padding_read": padded_run,
             "packed_h_n_padded_end": {"output": right["output"], "h_n": h_n}}
    if cfg.bidirectional and cfg.num_layers == 1:
        # One layer: the forward direction right, the reverse one that of the padded run.
        width = cfg.output_size
        output = right["output"].copy()
        output[..., width:] = padded_run["output"][..., width:]
        found["packed_reverse_from_padding"] = {
            "output": output, "h_n": np.stack([right["h_n"][0], padded["h_n"][1]])}
    return found
