"""Findings: what the named diagnoses mean, and failed checks grouped by their root cause.

The vocabulary lives here, outside the suites, so that everything that reads conformance results
(`rnnbench conform`'s text, the report) shares it without importing the checks.

`DIAGNOSES` maps each diagnosis id to the sentence a user reads. The ids are a public contract
(results JSON, planted-bug tests), so they never change meaning.

`group_failures` turns a run's failed and errored results into root causes: one group per
diagnosis, or per error message where no diagnosis was named (with the numbers that differ from
case to case, and object addresses, taken out, so the same failure on several cases is one
group). Groups come most fundamental first: an implementation that cannot be constructed, then
one whose shapes, forward, gradients, init, ... are wrong, then its names and construction
details, then its error handling; a later group is often a consequence of an earlier one.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DIAGNOSES: dict[str, str] = {
    "h0_none_unhandled": "h0=None not handled (a crash, or an initial state that is not zeros of the "
                         "input's batch and dtype)",
    "state_kept_between_calls": "forward keeps its final state and starts the next call "
                                "from it when none is given (a stateful module), where torch.nn "
                                "starts every call from zeros",
    "h0_ignored": "the given initial state is ignored",
    "c0_ignored": "the given initial cell state c0 is ignored (the cell state starts at zero)",
    "h_n_no_layer_dim": "h_n has no layer dimension",
    "h0_no_layer_dim": "the initial state is taken without its layer axis, (batch, hidden), "
                       "where torch.nn's is (layers x directions, batch, hidden)",
    "cell_state_layer_axis": "the state is taken (or returned) with a layer's leading axis, "
                             "(1, batch, hidden), where torch.nn's cells have (batch, hidden)",
    "state_in_list": "the state is taken wrapped in a list, [h] (Keras's convention), where "
                     "torch.nn's cells take the tensor h",
    "state_concatenated": "an LSTM's state is taken as one tensor, h and c concatenated along "
                          "the features (TensorFlow's state_is_tuple=False), where torch.nn "
                          "takes the tuple (h, c)",
    "state_not_carried": "the state not carried from step to step: every step starts from "
                         "the initial state (the new state computed, never assigned back)",
    "h_n_layout": "h_n layers/directions in the wrong order",
    "weight_transposed": "W used transposed (W^T instead of W)",
    "missing_nonlinearity": "nonlinearity missing (no tanh)",
    "non_finite": "NaN or inf where the reference is finite (e.g. a tanh or sigmoid written with "
                  "exp, which overflows at large pre-activations where torch.nn's saturate)",
    "wrong_nonlinearity": "tanh and relu confused",
    "init_bound_1_over_h": "init bound uses 1/H instead of 1/sqrt(H)",
    "init_wrong_distribution": "parameters not drawn from the spec's init distribution "
                               "(torch.nn's U(-1/sqrt(H), 1/sqrt(H)); randn, zeros, orthogonal, ...)",
    "time_reversed": "sequence processed in the wrong time order",
    "reverse_not_reversed": "reverse direction not reversed in time",
    "reverse_h_n_wrong_end": "h_n of the reverse direction taken at the wrong end",
    "batch_first_ignored": "batch_first ignored",
    "sizes_reversed": "the constructor takes the hidden size before the input size, where "
                      "torch.nn takes (input_size, hidden_size)",
    "state_before_input": "forward takes the state first, forward(h, x), where torch.nn's cells "
                          "take (input, hx)",
    "state_not_second": "forward takes the state after other arguments (forward(x, lengths=None, "
                        "hx=None)), where torch.nn takes it second: code written for torch.nn "
                        "passes it as the other argument",
    "split_state": "forward takes an LSTM's state as two arguments (h, c), where torch.nn takes "
                   "one (h, c) tuple",
    "layers_ignored": "num_layers or bidirectional ignored: the module holds the parameters of "
                      "one layer, one direction, whatever it is asked for",
    "wrapped_output": "forward returns the state wrapped, in a tuple or as a layer returns "
                      "output and state ((h, h), (h, (h, c))), where torch.nn's cells return h "
                      "or (h, c) alone",
    "dropout_in_eval": "dropout active in eval mode",
    "dropout_after_last_layer": "dropout applied after the last layer",
    "dropout_reaches_first_layer": "dropout changes the first layer's own final state in "
                                   "training (dropped inside its recurrence, on its input, or "
                                   "on the state it returns), where torch.nn drops only the "
                                   "outputs one layer passes to the next",
    "dropout_wrong_scale": "dropout not scaled by 1/(1-p) (or wrong rate)",
    "changes_in_training": "output changes in training mode where nothing may drop (dropout=0, "
                           "or one layer): a dropout of its own, e.g. DropConnect on the weights",
    "lstm_state_swapped": "an LSTM's state returned as (c, h), where torch.nn returns (h, c)",
    "lstm_gate_order": "LSTM gates not in torch's i,f,g,o order",
    "lstm_forget_bias": "1.0 added to the forget gate in every step (TensorFlow's forget_bias; "
                        "torch.nn adds no constant there)",
    "lstm_tensorflow_gates": "TensorFlow's LSTM: gates in its i, j, f, o order, not torch's "
                             "i,f,g,o, and 1.0 added to the forget gate (its forget_bias)",
    "gru_gate_order": "GRU gates not in torch's r,z,n order",
    "gru_cho_reset": "Cho-2014 GRU: reset gate applied before the hidden matmul",
    "gru_bhn_outside_reset": "GRU's b_hn added outside the reset product (r * (W_hn h) + b_hn, "
                             "as when its two biases are summed into one), not inside it",
    "gru_swapped_z": "GRU update uses z and 1-z swapped",
    "gru_cho_textbook": "the textbook GRU: reset gate before the hidden matmul (Cho et al. 2014) "
                        "and h' = (1-z) h + z n (z and 1-z swapped)",
    "single_bias": "one bias instead of two (bias_hh missing or ignored)",
    "bias_ignored": "biases not used",
    "input_mutated": "the implementation modified its input",
    "silent_broadcast": "a wrongly shaped input was silently accepted",
    "batch_of_one_broken": "a batch of one is mishandled: its batch axis dropped (a squeeze, "
                           "say), or it fails where a batch of two is right",
    "param_names": "parameter names differ from the spec's (torch.nn's for its kinds)",
    "unregistered_parameters": "modules or parameters nn.Module does not register (held in a "
                               "plain list or dict, or as plain tensors): no state_dict, "
                               "parameters() or .to() sees them",
    "param_shapes": "parameter shapes differ from torch.nn's",
    "output_h_n_mismatch": "h_n does not match the last output step",
    "layer_input_wrong": "upper layers fed the wrong input (e.g. the raw input, or one direction only)",
    "rejects_valid_input": "raises on the valid input too, so its rejections of wrong ones prove nothing",
    "dropout_mask_per_sequence": "one dropout mask per sequence reused at every time step "
                                 "(variational), not a fresh mask per step",
    "dropout_not_applied": "dropout never applied in training",
    "reverse_output_not_realigned": "reverse direction's outputs left in processing order "
                                    "(not put back in time order)",
    "gates_split_by_size": "gates split into chunks of the gate count's size, not into that "
                           "many chunks (right only when hidden_size equals the gate count)",
    "changed_default": "a constructor argument torch.nn has defaults to another value (or has "
                       "none): code that leaves it out gets another module",
    "dtype_ignored": "the constructor's dtype= (or device=) is ignored",
    "input_dtype_accepted": "an input in another dtype than the parameters is accepted (torch.nn "
                            "raises)",
    "biases_missing": "no bias parameters although bias=True",
    "other_parameters": "the output depends on parameters outside the spec's (a peephole, a "
                        "norm's gain): another function, whatever their initial values",
    "zero_state_default_dtype": "the omitted initial state is made in the default dtype "
                                "(torch's, or another library's), not the input's",
    "wrong_exception_type": "wrong input rejected with an exception type torch.nn does not raise "
                            "(not ValueError, RuntimeError or TypeError)",
    "lower_precision": "computed in lower precision than its dtype (right only to a coarser "
                       "dtype's accuracy: float32's or bfloat16's in float64, bfloat16's in "
                       "float32 or float16)",
    "dropout_with_one_layer": "dropout changes a one-layer module in training (torch.nn drops "
                              "only between layers)",
    "output_not_stacked": "the output sequence is returned as a list of steps, not one tensor",
    "state_not_nested": "an LSTM's final state returned flat, (output, h_n, c_n), not nested "
                        "as (output, (h_n, c_n))",
    "extra_values_returned": "forward returns more than torch.nn's (output, state): Nones "
                             "after them, (output, state, None)",
    "state_not_stacked": "the final state is returned as a list per layer and direction, not "
                         "one tensor",
    "always_batch_first": "input read batch-first although batch_first=False (torch.nn's default)",
    # Variable-length (packed) sequences.
    "packed_h_n_padded_end": "h_n of variable-length sequences taken at the padded end (the "
                             "longest sequence's last step), not at each sequence's own last step",
    "packed_reverse_from_padding": "the reverse direction of variable-length sequences starts at "
                                   "the padded end and reads the padding, not at each sequence's "
                                   "own last step",
    "packed_padding_read": "variable-length sequences run over the padded tensor: the padding is "
                           "read into the state (h_n after the longest sequence's length)",
    # The implicit kind's.
    "implicit_d_library_variant": "D multiplies [U_t, H_{t-1}] (torchidl's code), not U_t as documented",
    "implicit_solver_early_stop": "the fixed-point solver stops before its tolerance is met",
    "implicit_not_well_posed": "A is not rescaled to ||A||_inf <= kappa before the solve",
    "implicit_param_mutated": "the well-posedness rescale changes the stored parameter A",
    "implicit_rescale_straight_through": "the gradient of A skips the rescale (straight-through)",
    "implicit_no_convergence_warning": "a solve that hits its iteration cap gives no warning",
    "implicit_shared_solver_state": "solver settings are shared between models (class attributes)",
    "implicit_solver_settings_ignored": "the constructor ignores the solver settings (the cap on "
                                        "iterations was not applied)",
}


# Check names (the part of a check id before "/", without a dtype suffix), most fundamental
# first; unknown names after these. What the module computes comes before how it is built and
# named, error handling last; within each, the check closest to the core maths first.
FUNDAMENTAL_ORDER = ("shapes", "forward", "gradients", "packed-forward", "packed-gradients",
                     "state", "d-variant", "residual", "well-posed", "batch-invariance",
                     "non-convergence", "documented-example", "init", "dropout-eval",
                     "dropout-train", "parameters", "biases", "dtype-device", "defaults",
                     "invalid-arguments", "error", "inputs", "state-dict", "deepcopy", "pickle")
# The checks of what a module computes: FUNDAMENTAL_ORDER up to its construction and init.
_COMPUTES = FUNDAMENTAL_ORDER.index("init")
# How the names of the cases on unbatched input start.
UNBATCHED = "unbatched"
# A check's dtype suffix -> how far from float64 it is: a finding in half precision alone is
# less fundamental than any in float64 or float32.
_DTYPE_RANK = {"float32": 1, "bfloat16": 2, "float16": 2}
# A constructor that raises makes every check fail the same way: that group comes first.
_CANNOT_CONSTRUCT = re.compile(r"^the constructor (raised|requires)")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
# Words that differ between the same failure in several dtypes, or of several copy routes: a
# message is grouped with them taken out.
# A dtype as messages name it: float32, torch.float64, c10::BFloat16, DoubleTensor, and the
# legacy type names with a device before them (CPUBFloat16Type, CUDAFloatType).
_DTYPE_WORDS = re.compile(r"\b(torch\.|c10::)?(float(16|32|64)|bfloat16|half|double|float|"
                          r"(CPU|CUDA)?(BFloat16|Half|Float|Double)(Tensor|Type)?)\b",
                          re.IGNORECASE)
_COPY_ROUTE = re.compile(r"^(deepcopy|pickle) raised")
# What the dropout check says before a finding of the module in eval mode: the cause is the
# finding's own, the one the other checks group under.
EVAL_MODE_ALREADY = "in eval mode (no dropout) already: "


@dataclass(frozen=True)
class FindingGroup:
    """Failed or errored results that share one root cause.

    `cause` is the diagnosis id, or the normalised message when no diagnosis was named;
    `results` are the check results it explains (`CheckResult`s, or anything with their
    attributes), in their run order."""

    cause: str
    diagnosis: str | None
    results: tuple

    @property
    def count(self) -> int:
        return len(self.results)

    @property
    def example(self):
        """The result that shows the cause best: the most fundamental check it explains."""
        return min(self.results, key=lambda r: _check_rank(r.check))

    @property
    def sentence(self) -> str:
        """What is wrong, in words: the diagnosis' sentence, or the example's message."""
        if self.diagnosis:
            return DIAGNOSES.get(self.diagnosis, self.diagnosis)
        return strip_addresses(self.example.message or "")

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(r.kind for r in self.results))

    @property
    def rank(self) -> tuple[int, int, int, int]:
        """Where the group's cause stands, most fundamental first: (half precision or not, stage,
        the example's place in FUNDAMENTAL_ORDER, its dtype's distance from float64). The stages:
        what the module computes on batched input, then what it computes met on unbatched
        input alone (a step torch.nn takes beyond the batched one), then the other checks.
        Before every group a constructor that raises, after it checks that did not run."""
        messages = [r.message or "" for r in self.results]
        if any(_CANNOT_CONSTRUCT.match(m) for m in messages):
            return (-1, 0, 0, 0)
        if all(m.startswith("not run:") for m in messages):  # a consequence of other findings
            return (3, 0, 0, 0)
        half, order, dtype = _check_rank(self.example.check)
        if order >= _COMPUTES:
            return (half, 2, order, dtype)
        return (half, int(all(r.case.startswith(UNBATCHED) for r in self.results)), order, dtype)


def strip_addresses(message: str) -> str:
    """A message without object addresses ("<X object at 0x7f..>"), which differ run to run."""
    return _ADDRESS.sub("", message)


def cause_of(result) -> str:
    """The grouping key of one failed result: its diagnosis, else its normalised message."""
    if result.diagnosis:
        return str(result.diagnosis)
    message = _COPY_ROUTE.sub("a copy raised", strip_addresses(result.message or "")
                              .removeprefix(EVAL_MODE_ALREADY))
    return _NUMBER.sub("#", _DTYPE_WORDS.sub("<dtype>", message))


def group_failures(results: Iterable) -> list[FindingGroup]:
    """The failed and errored results grouped by root cause, most fundamental first: by `rank`,
    then, within one check, the group met first in the run (a kind's cases run plainest first,
    so a batched sequence's failure comes before an unbatched one's; kinds run in turn)."""
    groups: dict[str, list] = {}
    position: dict[int, int] = {}
    for index, result in enumerate(results):
        if result.outcome in ("failed", "error"):
            groups.setdefault(cause_of(result), []).append(result)
            position.setdefault(id(result), index)
    found = [FindingGroup(cause, members[0].diagnosis or None, tuple(members))
             for cause, members in groups.items()]
    return sorted(found, key=lambda group: (group.rank, position[id(group.example)]))


def _check_rank(check_id: str) -> tuple[int, int, int]:
    """(1 for half precision, else 0; the name's place in FUNDAMENTAL_ORDER; the dtype's
    distance from float64): smaller is more fundamental."""
    name = check_id.split("/", 1)[0]
    base, _, suffix = name.rpartition("-")
    dtype = _DTYPE_RANK.get(suffix, 0)
    name = base if dtype else name
    rank = next((rank for rank, known in enumerate(FUNDAMENTAL_ORDER) if name == known), None)
    if rank is None:
        rank = next((rank for rank, prefix in enumerate(FUNDAMENTAL_ORDER)
                     if name.startswith(prefix + "-")), len(FUNDAMENTAL_ORDER))
    return (int(dtype == 2), rank, dtype)


def unsupported_features(results: Iterable) -> dict[str, dict]:
    """What the not-supported results skipped, once per feature: feature -> {"reason", "checks",
    "kinds"}. A result skipped for a reason other than a feature is listed under its message."""
    found: dict[str, dict] = {}
    for result in results:
        if result.outcome != "not_supported":
            continue
        features = (result.numbers or {}).get("features")
        if not isinstance(features, Mapping):
            features = {strip_addresses(result.message or "not supported"): ""}
        for feature, reason in features.items():
            entry = found.setdefault(feature, {"reason": reason, "checks": 0, "kinds": []})
            entry["checks"] += 1
            if result.kind not in entry["kinds"]:
                entry["kinds"].append(result.kind)
    return found
