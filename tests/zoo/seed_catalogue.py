"""What a person expects `rnnbench conform FILE.py:Class --kind K` (no other option) to say about
each seed-style implementation (seed_exercise.py, seed_style.py), with torch.nn's contract as the
yardstick and the constructor, call and parameter-name adaptation in place.

Each row says:
- `not_supported`: per constructor argument the class lacks, the feature it controls, reported
  once as "the constructor takes no `<argument>`" (device/dtype: built, then moved); and
  "unbatched" where forward raises on unbatched input while batched input runs;
  (every sequence row's loop refuses a PackedSequence too: "packed", which tests/test_zoo.py
  allows for every sequence kind rather than repeating it per row);
- `state_required`: forward's state argument is required, so the h0-omitted cases are not
  supported (called with zeros where torch.nn would take None);
- `param_map`: the module's parameter (state_dict name, or attribute of a plain class) -> the
  spec's name, with how it is laid out when not as is ("T": transposed, "rows a:b": a slice);
- `findings`: the diagnosis ids that must be printed (ids of rnnbench.findings.DIAGNOSES);
- `numerics`: whether forward and gradient checks run through the mapping, and with what result;
- `today`: what `rnnbench conform` printed before any adaptation (exit, passed/failed/not
  supported/error), measured with scripts/third_party/verdicts.py.
"""
from typing import NamedTuple


class Expectation(NamedTuple):
    target: str
    kind: str
    source: str
    not_supported: dict[str, str]
    state_required: bool
    param_map: dict[str, str]
    findings: tuple[str, ...]
    numerics: str
    today: str
    note: str = ""


EX, ST = "tests/zoo/seed_exercise.py", "tests/zoo/seed_style.py"
SEQUENCE_ARGS = {"num_layers": "num_layers", "nonlinearity": "relu", "bias": "no_bias",
                 "batch_first": "batch_first", "dropout": "dropout",
                 "bidirectional": "bidirectional", "device/dtype": "moved with .to()"}
LSTM_ARGS = {**{k: v for k, v in SEQUENCE_ARGS.items() if k != "nonlinearity"},
             "proj_size": "proj_size"}
CELL_ARGS = {"bias": "no_bias", "device/dtype": "moved with .to()"}
RNN_CELL_ARGS = {**CELL_ARGS, "nonlinearity": "relu"}
EXERCISE_MAP = {"W_ih": "weight_ih_l0", "W_hh": "weight_hh_l0", "b_ih": "bias_ih_l0",
                "b_hh": "bias_hh_l0"}
TODAY_EXERCISE = "exit 1, 1/164/0/0 (every check: the constructor raised TypeError ... 'bias'; " \
                 "invalid-arguments passes because every construction raises TypeError)"
EXERCISE_EXTRA = ("silent_broadcast",)
UNBATCHED = {"unbatched input": "unbatched"}  # forward raises on it: not supported
EXERCISE_NOTE = ("a plain class, not an nn.Module: parameters are its requires_grad tensor "
                 "attributes, moved by casting them. Under torch.nn's contract one finding remains "
                 "beside the names: an h0 of shape (2, B, H), (2, 1, B, H), (B, H) or (1, 1, H) is "
                 "silently broadcast (the exercise validates nothing, by design); unbatched (L, I) "
                 "input raises ValueError ('not enough values to unpack'), so unbatched is not "
                 "supported")
EXERCISE_ARGS = {**SEQUENCE_ARGS, **UNBATCHED}

SEEDS = [
    Expectation(f"{EX}:ExerciseRNN", "rnn", "the exercise's approach, correct",
                EXERCISE_ARGS, False, EXERCISE_MAP, ("param_names",) + EXERCISE_EXTRA,
                "run and pass (batched cases)", TODAY_EXERCISE, EXERCISE_NOTE),
    Expectation(f"{EX}:ExerciseH0NoneUnhandled", "rnn", "pitfall: h0=None not handled",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "h0_none_unhandled") + EXERCISE_EXTRA,
                "run; pass with h0 given, h0-omitted cases fail", TODAY_EXERCISE,
                "AttributeError: 'NoneType' object has no attribute 'squeeze'"),
    Expectation(f"{EX}:ExerciseWrongDims", "rnn", "pitfall: wrong matrix dimensions (h @ W_hh)",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "weight_transposed") + EXERCISE_EXTRA,
                "run and fail", TODAY_EXERCISE),
    Expectation(f"{EX}:ExerciseNoUnsqueeze", "rnn", "pitfall: h_n without unsqueeze(0)",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "h_n_no_layer_dim") + EXERCISE_EXTRA,
                "run; output right, h_n of the wrong shape", TODAY_EXERCISE),
    Expectation(f"{EX}:ExerciseNoTanh", "rnn", "pitfall: no tanh",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "missing_nonlinearity") + EXERCISE_EXTRA,
                "run and fail", TODAY_EXERCISE),
    Expectation(f"{EX}:ExerciseRandnInit", "rnn", "pitfall: randn init",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "init_wrong_distribution") + EXERCISE_EXTRA,
                "run and pass (init is the only maths-free difference)", TODAY_EXERCISE,
                "init must run on a single-layer unidirectional row: the class takes no "
                "num_layers or bidirectional"),
    Expectation(f"{EX}:ExerciseTimeReversed", "rnn", "pitfall: wrong time order",
                EXERCISE_ARGS, False, EXERCISE_MAP,
                ("param_names", "time_reversed") + EXERCISE_EXTRA,
                "run and fail", TODAY_EXERCISE,
                "outputs appended in processing order: output[-1] == h_n, both from x[0]"),
    Expectation(f"{ST}:VanillaRNNCell", "rnn_cell", "a tutorial's manual Elman cell",
                RNN_CELL_ARGS, True,
                {"W_xh.weight": "weight_ih", "W_xh.bias": "bias_ih", "W_hh.weight": "weight_hh"},
                ("param_names", "single_bias", "init_wrong_distribution", "silent_broadcast"),
                "run with bias_hh held at 0, and pass",
                "exit 1, 1/70/0/0 (constructor TypeError 'bias')",
                "init: W_xh from nn.Linear's U(+-1/sqrt(input)), W_hh orthogonal"),
    Expectation(f"{ST}:LSTMCell", "lstm_cell", "a tutorial's manual LSTM cell",
                {**CELL_ARGS, **UNBATCHED}, True,
                {"W_x.weight": "weight_ih", "W_x.bias": "bias_ih", "W_h.weight": "weight_hh"},
                ("param_names", "single_bias", "init_wrong_distribution", "silent_broadcast"),
                "run with bias_hh held at 0; batched cases pass",
                "exit 1, 1/60/0/0 (constructor TypeError 'bias')",
                "gates.chunk(4, dim=1) raises IndexError on unbatched (I,) input; W_h's nn.Linear "
                "init happens to be torch's bound, W_x's and its bias are U(+-1/sqrt(input))"),
    Expectation(f"{ST}:RNNCell", "rnn_cell", "lucid-style RNNCell, no device/dtype",
                {"device/dtype": "moved with .to()"}, False, {}, (),
                "run and pass: conforming where supported (exit 0)",
                "exit 1, 70/1/0/0 (dtype-device: constructor TypeError 'dtype')"),
    Expectation(f"{ST}:RNNScratch", "rnn", "d2l's RNNScratch",
                SEQUENCE_ARGS, False,
                {"W_xh": "weight_ih_l0 (T)", "W_hh": "weight_hh_l0 (T)", "b_h": "bias_ih_l0"},
                ("param_names", "single_bias", "output_not_stacked", "init_wrong_distribution",
                 "zero_state_default_dtype"),
                "values right once stacked; by torch.nn's contract the return structure fails "
                "first (so h_n's missing layer axis is not reached)",
                "exit 1, 1/164/0/0 (constructor TypeError 'num_layers')",
                "sigma is an extra argument with a default: fine. X @ W_xh stores W_ih transposed; "
                "the square W_hh is transposed too, which shapes alone cannot tell: a mapping "
                "that assumes W_hh untransposed must end in weight_transposed, not in a pass. "
                "forward returns (list of T tensors (B, H), state (B, H)); a given hx (1, B, H) "
                "is unpacked by `state, = state`; the zero state is float32 whatever the input"),
    Expectation(f"{ST}:CharRNNCell", "rnn_cell", "one nn.Linear over [x, h] (char-RNN/makemore)",
                {**RNN_CELL_ARGS, **UNBATCHED}, True,
                {"xh_to_h.weight": "weight_ih (cols :I) + weight_hh (cols I:)",
                 "xh_to_h.bias": "bias_ih"},
                ("param_names", "single_bias", "init_wrong_distribution"),
                "run with bias_hh held at 0; batched cases pass",
                "exit 1, 1/70/0/0 (constructor TypeError 'bias')",
                "init bound 1/sqrt(I + H); torch.cat(dim=1) fails on unbatched input"),
    Expectation(f"{ST}:LinearPairRNNCell", "rnn_cell", "two nn.Linear with biases (ih, hh)",
                RNN_CELL_ARGS, True,
                {"ih.weight": "weight_ih", "ih.bias": "bias_ih", "hh.weight": "weight_hh",
                 "hh.bias": "bias_hh"},
                ("param_names", "init_wrong_distribution", "silent_broadcast"),
                "run and pass (unbatched too)",
                "exit 1, 1/70/0/0 (constructor TypeError 'bias')",
                "only ih's init differs (U(+-1/sqrt(input))); hh's is torch's"),
    Expectation(f"{ST}:CustomLSTM", "lstm", "a widely copied batch-first LSTM (W, U, bias)",
                {**LSTM_ARGS, **UNBATCHED}, False,
                {"W": "weight_ih_l0 (T)", "U": "weight_hh_l0 (T)", "bias": "bias_ih_l0"},
                # (its h_n lacks the layer axis too: shaped by the batch-first reading, which
                # is named first)
                ("param_names", "single_bias", "always_batch_first"),
                "run and fail: time-major input read as (batch, seq)",
                "exit 1, 2/175/0/0 (constructor TypeError 'input_size': its arguments are "
                "input_sz, hidden_sz)",
                "the constructor's first two arguments must be passed positionally; init is "
                "torch's U(+-1/sqrt(H)) and passes"),
    Expectation(f"{ST}:TextbookGRUCell", "gru_cell", "per-gate nn.Linear GRU as textbooks write it",
                CELL_ARGS, True,
                {"W_r.weight": "weight_ih (rows 0:H)", "W_z.weight": "weight_ih (rows H:2H)",
                 "W_h.weight": "weight_ih (rows 2H:3H)", "W_r.bias": "bias_ih (0:H)",
                 "W_z.bias": "bias_ih (H:2H)", "W_h.bias": "bias_ih (2H:3H)",
                 "U_r.weight": "weight_hh (rows 0:H)", "U_z.weight": "weight_hh (rows H:2H)",
                 "U_h.weight": "weight_hh (rows 2H:3H)"},
                ("param_names", "single_bias", "gru_cho_textbook", "init_wrong_distribution",
                 "silent_broadcast"),
                "run and fail: the two textbook differences at once, named together",
                "exit 1, 1/56/0/0 (constructor TypeError 'bias')"),
]
