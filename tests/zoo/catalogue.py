"""The zoo as data: what `rnnbench conform` must say about each implementation in tests/zoo.

CORRECT rows name an Implementation covering every kind; each must pass every check.
PLANTED rows name one bare class (run with `--kind`) carrying exactly one bug: each must fail,
and where `diagnosis` is an id of rnnbench.suites.diagnoses, that id must be among the failed
results' diagnoses (None: caught, but no named diagnosis is expected).
"""
from typing import NamedTuple


class Correct(NamedTuple):
    target: str
    description: str


class Planted(NamedTuple):
    target: str
    kind: str
    diagnosis: str | None
    description: str


ZOO = "tests/zoo"

CORRECT = [
    Correct(f"{ZOO}/clean.py:IMPLEMENTATION", "the zoo's base: a plain torch loop, every kind and option"),
    Correct(f"{ZOO}/float64_inside.py:IMPLEMENTATION", "computes in float64 internally, returns the caller's dtype"),
    Correct(f"{ZOO}/fused.py:IMPLEMENTATION", "one fused [x, h] @ [W_ih, W_hh]^T per step, biases summed once"),
    Correct(f"{ZOO}/layered.py:IMPLEMENTATION", "per-(layer, direction) parameter blocks under torch's state_dict names, premultiplied input, flipped reverse"),
]

PLANTED = [
    # initial state, h_n, outputs, the unbatched path
    Planted(f"{ZOO}/state_bugs.py:H0NoneCrashes", "rnn", "h0_none_unhandled", "hx=None is passed on as None: crashes"),
    Planted(f"{ZOO}/state_bugs.py:H0NoneRandom", "gru", "h0_none_unhandled", "hx=None starts from randn instead of zeros"),
    Planted(f"{ZOO}/state_bugs.py:LayerStateCarriedUp", "gru", None,
            "a zero state (omitted or given): each layer above the first starts from the final state of the one below"),
    Planted(f"{ZOO}/state_bugs.py:BatchOfOneSqueezed", "lstm_cell", "batch_of_one_broken",
            "h and c .squeeze(0)d: a batch of one loses its batch axis"),
    Planted(f"{ZOO}/state_bugs.py:H0Ignored", "lstm", "h0_ignored", "a given (h0, c0) is checked, then replaced by zeros"),
    Planted(f"{ZOO}/state_bugs.py:HnSqueezed", "rnn", "h_n_no_layer_dim", "h_n.squeeze(0): no layer dimension for one layer"),
    Planted(f"{ZOO}/state_bugs.py:HnDirectionMajor", "gru", "h_n_layout", "h_n stacked direction-major (all forward layers, then all reverse)"),
    Planted(f"{ZOO}/state_bugs.py:HnIsCellState", "lstm", "lstm_state_swapped", "returns (c_n, h_n) instead of (h_n, c_n)"),
    Planted(f"{ZOO}/state_bugs.py:BroadcastsH0", "rnn", "silent_broadcast", "no h0 shape check: a broadcastable wrong h0 is accepted"),
    Planted(f"{ZOO}/state_bugs.py:C0Ignored", "lstm", "c0_ignored",
            "a given c0 is checked, then replaced by zeros (h0 used)"),
    Planted(f"{ZOO}/state_bugs.py:CutsC0ToTheBatch", "lstm", "silent_broadcast",
            "a c0 with more batch rows than the input is cut to its batch, not refused"),
    Planted(f"{ZOO}/state_bugs.py:CastsInput", "lstm_cell", "input_dtype_accepted",
            "an input of another dtype is cast to the parameters' instead of refused"),
    Planted(f"{ZOO}/state_bugs.py:MutatesInput", "gru", "input_mutated", "zeroes the caller's input tensor after use"),
    Planted(f"{ZOO}/state_bugs.py:UnbatchedAsBatch", "rnn", None, "unbatched (L, I) taken as one step of L sequences"),
    # cell math
    Planted(f"{ZOO}/math_bugs.py:TransposedWhh", "rnn", "weight_transposed", "h @ W_hh instead of h @ W_hh^T"),
    Planted(f"{ZOO}/math_bugs.py:TransposedWeights", "rnn", "weight_transposed", "x @ W for every weight (crashes unless input_size == hidden_size)"),
    Planted(f"{ZOO}/math_bugs.py:NoTanhCell", "rnn_cell", "missing_nonlinearity", "no nonlinearity: h' = W_ih x + b_ih + W_hh h + b_hh"),
    Planted(f"{ZOO}/math_bugs.py:NonlinearitySwapped", "rnn", "wrong_nonlinearity", "relu when tanh is asked for and vice versa"),
    Planted(f"{ZOO}/math_bugs.py:LSTMGatesIFOG", "lstm", "lstm_gate_order", "LSTM gates read as i, f, o, g"),
    Planted(f"{ZOO}/math_bugs.py:LSTMCellGatesIGFO", "lstm_cell", "lstm_gate_order", "LSTM cell gates read as i, g, f, o"),
    Planted(f"{ZOO}/math_bugs.py:LSTMForgetBias", "lstm", "lstm_forget_bias",
            "1.0 added to the forget gate, as TensorFlow does"),
    Planted(f"{ZOO}/math_bugs.py:LSTMCellStateClipped", "lstm", None,
            "the cell state clipped to [-3, 3] in every step (ELMo's memory-cell clip)"),
    Planted(f"{ZOO}/math_bugs.py:LSTMTensorFlowPort", "lstm", "lstm_tensorflow_gates",
            "TensorFlow's i, j, f, o blocks and forget_bias 1.0"),
    Planted(f"{ZOO}/math_bugs.py:GRUGatesZRN", "gru", "gru_gate_order", "GRU gates read as z, r, n"),
    Planted(f"{ZOO}/math_bugs.py:GRUCho", "gru", "gru_cho_reset", "Cho-2014 candidate: W_hn (r * h) + b_hn"),
    Planted(f"{ZOO}/math_bugs.py:GRUCellSwappedZ", "gru_cell", "gru_swapped_z", "h' = z * n + (1 - z) * h"),
    Planted(f"{ZOO}/math_bugs.py:GRUCellResetOutsideBias", "gru_cell", "gru_bhn_outside_reset",
            "r scales W_hn h but not b_hn"),
    Planted(f"{ZOO}/math_bugs.py:LSTMSingleBias", "lstm", "single_bias", "bias_hh registered but never used"),
    Planted(f"{ZOO}/math_bugs.py:GRUBiasesIgnored", "gru", "bias_ignored", "both biases registered, neither used"),
    Planted(f"{ZOO}/math_bugs.py:TanhFromExp", "rnn_cell", "non_finite",
            "tanh written (e^a - e^-a) / (e^a + e^-a): NaN past exp's overflow"),
    Planted(f"{ZOO}/math_bugs.py:LSTMCellHardSigmoid", "lstm_cell", None,
            "Keras 2's hard sigmoid for every gate: off by less than bfloat16's tolerance"),
    Planted(f"{ZOO}/math_bugs.py:LSTMStepsInBfloat16", "lstm", "lower_precision",
            "every step computed in bfloat16, cast back, in float32 and float64 too"),
    Planted(f"{ZOO}/math_bugs.py:LSTMGatesSplitBySize", "lstm", "gates_split_by_size", "gates split in chunks of size 4, not 4 chunks (lucid 2.x)"),
    # init
    Planted(f"{ZOO}/init_bugs.py:InitBoundOneOverH", "rnn", "init_bound_1_over_h", "U(-1/H, 1/H)"),
    Planted(f"{ZOO}/init_bugs.py:InitRandn", "lstm", "init_wrong_distribution", "every parameter from N(0, 1)"),
    Planted(f"{ZOO}/init_bugs.py:InitZeroBiases", "gru", "init_wrong_distribution", "biases initialised to zero"),
    Planted(f"{ZOO}/init_bugs.py:InitOrthogonalWhh", "rnn", "init_wrong_distribution", "orthogonal W_hh"),
    Planted(f"{ZOO}/init_bugs.py:InitForgetBiasOne", "lstm_cell", "init_wrong_distribution", "forget-gate block of bias_ih set to 1 (unit forget bias)"),
    Planted(f"{ZOO}/init_bugs.py:InitProjectionBound", "lstm", "init_wrong_distribution", "weight_hr from U(+-1/sqrt(proj_size))"),
    # time order, directions, batch_first, the layer stack
    Planted(f"{ZOO}/order_bugs.py:TimeReversed", "rnn", "time_reversed", "every direction scans from the last step"),
    Planted(f"{ZOO}/order_bugs.py:ReverseNotReversed", "gru", "reverse_not_reversed", "the reverse direction scans forward in time"),
    Planted(f"{ZOO}/order_bugs.py:ReverseHnWrongEnd", "lstm", "reverse_h_n_wrong_end", "reverse h_n taken from output[-1]"),
    Planted(f"{ZOO}/order_bugs.py:ReverseOutputsNotRealigned", "rnn", "reverse_output_not_realigned", "reverse outputs left in processing order (h_n right)"),
    Planted(f"{ZOO}/order_bugs.py:BatchFirstIgnored", "lstm", "batch_first_ignored", "batch_first accepted, input read as time-major"),
    Planted(f"{ZOO}/order_bugs.py:UpperLayersReadInput", "rnn", "layer_input_wrong", "every layer reads the raw input (crashes unless I == D * H)"),
    Planted(f"{ZOO}/order_bugs.py:StateNotCarried", "lstm", "state_not_carried",
            "each step's new state computed, never assigned back"),
    # variable-length (PackedSequence) input
    Planted(f"{ZOO}/packed_bugs.py:PackedPaddingRead", "gru", "packed_padding_read", "pad_packed_sequence, run over the padded tensor, pack back"),
    Planted(f"{ZOO}/packed_bugs.py:PackedHnPaddedEnd", "rnn", "packed_h_n_padded_end", "top layer's h_n = padded output[-1] (zeros for short sequences)"),
    Planted(f"{ZOO}/packed_bugs.py:PackedReverseFromPadding", "lstm", "packed_reverse_from_padding", "reverse direction starts at the padded end"),
    # dropout
    Planted(f"{ZOO}/dropout_bugs.py:DropoutInEval", "rnn", "dropout_in_eval", "inter-layer dropout also in eval mode"),
    Planted(f"{ZOO}/dropout_bugs.py:DropoutAfterLastLayer", "gru", "dropout_after_last_layer", "dropout on the top layer's output too"),
    Planted(f"{ZOO}/dropout_bugs.py:DropoutNotRescaled", "lstm", "dropout_wrong_scale", "mask without the 1/(1-p) rescale"),
    Planted(f"{ZOO}/dropout_bugs.py:DropoutRateAsKeep", "rnn", "dropout_wrong_scale", "p used as the keep probability"),
    Planted(f"{ZOO}/dropout_bugs.py:WeightDropInTraining", "lstm", "changes_in_training",
            "DropConnect on W_hh in training at a rate of its own"),
    Planted(f"{ZOO}/dropout_bugs.py:DropoutInRecurrence", "gru", "dropout_reaches_first_layer",
            "a lower layer's dropped h carried as its state too"),
    # construction contract
    Planted(f"{ZOO}/contract_bugs.py:OneBasedNames", "rnn", "param_names", "1-based layer names (weight_ih_l1 first, as R torch)"),
    Planted(f"{ZOO}/contract_bugs.py:RowVectorBiases", "gru", "param_shapes", "biases stored as (1, 3H) rows"),
    Planted(f"{ZOO}/contract_bugs.py:BiasHHMissing", "rnn", "single_bias", "no bias_hh at all: one bias per layer"),
    Planted(f"{ZOO}/contract_bugs.py:BiasFlagIgnored", "lstm", "param_names", "bias=False still creates and uses biases"),
    Planted(f"{ZOO}/contract_bugs.py:StackingIgnored", "gru", "layers_ignored",
            "num_layers and bidirectional taken and dropped: always one layer, one direction"),
    Planted(f"{ZOO}/contract_bugs.py:DtypeIgnored", "rnn", None, "dtype= ignored: parameters always float32"),
    Planted(f"{ZOO}/contract_bugs.py:InvalidArgumentsAccepted", "gru", None, "no argument validation (hidden_size=0, dropout=1.5 accepted)"),
]

# Bugs confined to the half-precision path, which only the bfloat16/float16 rows can see: each is
# run through those rows on the full case list (HALF_CHECKS; the one-step rows, where a single
# rounding is most of the error, are not in the quick list) and must fail there while its
# float64 and float32 rows pass.
HALF_CHECKS = "*-bfloat16/*,*-float16/*"
HALF_PLANTED = [
    Planted(f"{ZOO}/half_bugs.py:GRUFloat16StepInBfloat16", "gru", "lower_precision", "float16 steps computed in bfloat16, cast back"),
    Planted(f"{ZOO}/half_bugs.py:RNNHalfTanhApproximated", "rnn", None, "in half precision, tanh by a Pade approximant (off by up to 0.02)"),
]


class BlindSpot(NamedTuple):
    """A planted bug a suite with blind spots passes (or names wrongly): the same fields as
    Planted, plus what today's suite says of it (exit code, passed/failed/not supported/error
    counts, diagnoses) in `today`."""

    target: str
    kind: str
    diagnosis: str | None
    description: str
    today: str


# Each must fail with its diagnosis (tests/test_zoo.py); `today` is what the suite said before it
# learnt to see them.
BLIND_SPOTS = [
    BlindSpot(f"{ZOO}/blind_spots.py:ZERO_INIT_GRU", "gru", "init_wrong_distribution",
              "all-zero init; num_layers and bidirectional declared unsupported",
              "exit 0, 80/0/69/0: init runs only on two-layer bidirectional rows"),
    BlindSpot(f"{ZOO}/blind_spots.py:RANDN_INIT_RNN", "rnn", "init_wrong_distribution",
              "randn init; num_layers and bidirectional declared unsupported",
              "exit 0, 80/0/85/0"),
    BlindSpot(f"{ZOO}/blind_spots.py:LSTMAlwaysRaises", "lstm", "rejects_valid_input",
              "forward raises on every input ([x, h] @ W_ih^T)",
              "exit 1, 104/73/0/0, but all 88 error-* checks passed"),
    BlindSpot(f"{ZOO}/blind_spots.py:BroadcastsH0OfBatchOne", "rnn", "silent_broadcast",
              "an h0 of batch 1 broadcast over the batch (as onnx.reference does)",
              "exit 0, 165/0/0/0: error-h0-batch tries batch + 1 only"),
    BlindSpot(f"{ZOO}/blind_spots.py:DropoutMaskPerSequence", "rnn", "dropout_mask_per_sequence",
              "variational dropout: one mask per sequence, reused at every step",
              "exit 0, 165/0/0/0"),
    BlindSpot(f"{ZOO}/blind_spots.py:DropoutNeverApplied", "lstm", "dropout_not_applied",
              "no dropout at all in training",
              "exit 1, 175/2/0/0, named dropout_wrong_scale (2)"),
    BlindSpot(f"{ZOO}/blind_spots.py:CellZeroStateFromFirstAxis", "gru_cell", "h0_none_unhandled",
              "zero state (input.size(0), hidden): (I, hidden) for unbatched input",
              "exit 0, 57/0/0/0: no unbatched row with the state omitted"),
    BlindSpot(f"{ZOO}/order_bugs.py:ReverseOutputsNotRealigned", "rnn",
              "reverse_output_not_realigned",
              "reverse outputs left in processing order, h_n right",
              "exit 1, 155/10/0/0, named reverse_not_reversed (10)"),
    BlindSpot(f"{ZOO}/math_bugs.py:LSTMGatesSplitBySize", "lstm", "gates_split_by_size",
              "gates split in chunks of size 4, not 4 chunks (lucid 2.x)",
              "exit 1, 104/73/0/0, no diagnosis (RuntimeError 'size of tensor a (4) must match')"),
    BlindSpot(f"{ZOO}/blind_spots.py:GRUCellGatesSplitBySize", "gru_cell", "gates_split_by_size",
              "gates split in chunks of size 3, not 3 chunks (lucid 2.x)",
              "exit 1, 33/24/0/0, no diagnosis"),
    BlindSpot(f"{ZOO}/blind_spots.py:ImplicitMitrIgnored", "implicit",
              "implicit_solver_settings_ignored", "the constructor drops mitr (always 300)",
              "exit 1, 22/1/0/0, named implicit_no_convergence_warning"),
    BlindSpot(f"{ZOO}/blind_spots.py:ChainedCauseRNN", "rnn", None,
              "the real AttributeError only as __cause__ of a RuntimeError whose message has an "
              "object address",
              "exit 1, 91/74/0/0: messages 'RuntimeError: recurrent step failed in <..._Kernel "
              "object at 0x..>', the cause nowhere; all error-* checks passed"),
    BlindSpot(f"{ZOO}/blind_spots.py:DROPOUT_UNSUPPORTED", "rnn", "dropout_after_last_layer",
              "dropout declared unsupported; one layer drops its own output in training",
              "exit 0, 159/0/6/0: dropout-single-layer not supported"),
    BlindSpot(f"{ZOO}/blind_spots.py:FLOAT64_UNSUPPORTED", "rnn", "dtype_ignored",
              "float64 declared unsupported; the constructor ignores dtype=",
              "exit 0, 144/0/21/0: dtype-device runs in float64 only"),
]
# Not a row: runs too long for the test suite. Today (on a loaded 2-core machine) its run took
# 54 s with --timeout 5 and 505 s with the default 60 s per check: 157 passed and 8 errors, each
# "the process timed out" on whichever check came after the 20th call in a fresh child.
HANGS = f"{ZOO}/blind_spots.py:HangsAfterTwentyCalls"


class RealCode(NamedTuple):
    """A defect seen in public from-scratch code (real_code.py), and what the verdict must say:
    the cause of the first finding (a diagnosis id, or how its message starts), each level's
    state, the features held against the drop-in level ({feature: source}), and whether the
    quick case list shows it (the half-precision rows are only in the full one)."""

    target: str
    kind: str
    first: str
    numerics: str
    drop_in: str
    undeclared: dict[str, str]
    quick: bool = True


REAL = f"{ZOO}/real_code.py"
NO, YES, UNCHECKED = "does not conform", "conforms", "not checked"
REAL_CODE = [
    RealCode(f"{REAL}:OutputOnlyLSTM", "lstm", "param_names", YES, NO, {"final_state": "observed"}),
    RealCode(f"{REAL}:WrongAxisZeroStateGRUCell", "gru_cell", "h0_none_unhandled", NO, NO, {}),
    RealCode(f"{REAL}:ScriptedRNNCell", "rnn_cell", "silent_broadcast", YES, NO, {}),
    RealCode(f"{REAL}:StatelessRNN", "rnn", "", YES, NO, {"initial_state": "signature"}),
    RealCode(f"{REAL}:ShortBiasGRUCell", "gru_cell", "param_shapes", NO, NO, {}),
    RealCode(f"{REAL}:NoArgumentValidationRNN", "rnn", "param_names", YES, NO,
             dict.fromkeys(("bidirectional", "batch_first", "dropout", "no_bias",
                            "factory_kwargs"), "signature")),
    RealCode(f"{REAL}:QuantizableLSTM", "lstm", "param_shapes", NO, NO,
             {"proj_size": "signature", "packed": "observed"}),
    RealCode(f"{REAL}:ZeroPeepholeLSTMCell", "lstm_cell", "other_parameters", NO, NO, {}),
    RealCode(f"{REAL}:WeightNormLSTM", "lstm", "param_names", UNCHECKED, NO, {}),
    RealCode(f"{REAL}:LegacyWeightNormLSTM", "lstm", "param_names", UNCHECKED, NO, {}),
    RealCode(f"{REAL}:DynamicQuantizedLSTM", "lstm", "param_names", NO, NO,
             {"proj_size": "signature", "factory_kwargs": "signature", "unbatched": "observed"}),
    RealCode(f"{REAL}:RowWeightsRNN", "rnn", "weight_transposed", NO, NO,
             dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout", "no_bias",
                            "factory_kwargs"), "signature")),
    RealCode(f"{REAL}:ExpandStateRNN", "rnn", "", YES, NO,
             {"unbatched": "observed", "packed": "observed"}),
    RealCode(f"{REAL}:UnpicklableLSTMCell", "lstm_cell", "a copy raised TypeError", YES, NO, {}),
    RealCode(f"{REAL}:Bfloat16KeyErrorGRUCell", "gru_cell", "lower_precision", NO, NO, {},
             quick=False),
    RealCode(f"{REAL}:PerGateGRUCell", "gru_cell", "param_names", UNCHECKED, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:ZeroDivisionRNN", "rnn", "wrong_exception_type", YES, NO, {}),
    # The full list: in the quick one the batched crash also explains more checks.
    RealCode(f"{REAL}:GateTripletLSTM", "lstm", "always_batch_first", NO, NO,
             dict.fromkeys(("num_layers", "bidirectional", "no_bias", "proj_size",
                            "factory_kwargs", "dropout"), "signature"), quick=False),
    RealCode(f"{REAL}:SplitLinearGRUCell", "gru_cell", "param_names", UNCHECKED, NO,
             {"factory_kwargs": "signature"}),
    RealCode(f"{REAL}:BatchFirstByDefaultLSTM", "lstm", "changed_default", YES, NO, {}),
    RealCode(f"{REAL}:NoBidirectionalGRU", "gru", "", YES, NO, {"bidirectional": "observed"}),
    RealCode(f"{REAL}:ColumnBiasLSTM", "lstm", "output has shape (#, #, #), expected (#, #)", NO, NO,
             {**dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout",
                               "no_bias", "proj_size", "factory_kwargs"), "signature"),
              "packed": "observed"}),
    RealCode(f"{REAL}:RightMultipliedRNNCell", "rnn_cell", "param_names", YES, NO,
             {"factory_kwargs": "signature"}),
    RealCode(f"{REAL}:StateFirstRNNCell", "rnn_cell", "state_before_input", NO, NO,
             {"optional_state": "signature"}),
    RealCode(f"{REAL}:ProjectedZeroStateLSTM", "lstm", "h0_none_unhandled", NO, NO, {},
             quick=False),
    RealCode(f"{REAL}:SplitStateLSTMCell", "lstm_cell", "split_state", YES, NO,
             {"optional_state": "signature"}),
    RealCode(f"{REAL}:OutputAndHiddenRNNCell", "rnn_cell", "wrapped_output", YES, NO, {}),
    RealCode(f"{REAL}:OutputAndStateLSTMCell", "lstm_cell", "wrapped_output", YES, NO, {}),
    RealCode(f"{REAL}:ForgetBiasOutputAndStateLSTMCell", "lstm_cell", "lstm_forget_bias", NO, NO,
             {}),
    RealCode(f"{REAL}:ResetUpdateLinearGRUCell", "gru_cell", "param_names", YES, NO, {}),
    RealCode(f"{REAL}:WeightDropRNN", "rnn", "param_names", YES, NO, {}),
    RealCode(f"{REAL}:WrappedWeightDropLSTM", "lstm", "param_names", YES, NO, {}),
    RealCode(f"{REAL}:NoDropoutRNN", "rnn", "", YES, NO, {"dropout": "observed"}),
    RealCode(f"{REAL}:PerLayerStateLSTM", "lstm", "state_not_stacked", YES, NO, {}),
    RealCode(f"{REAL}:DirectionStatesGRU", "gru", "state_not_stacked", YES, NO, {}),
    RealCode(f"{REAL}:DirectionTuplesLSTM", "lstm", "state_not_stacked", YES, NO, {}),
    RealCode(f"{REAL}:MinCharRNNCell", "rnn_cell", "init_wrong_distribution", NO, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:ReadoutRNNCell", "rnn_cell", "forward returned a tuple (Tensor, Tensor)",
             NO, NO, {}),
    RealCode(f"{REAL}:CellLoopLSTM", "lstm", "always_batch_first", NO, NO,
             dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout", "proj_size",
                            "no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:StackStepGRUCell", "gru_cell", "cell_state_layer_axis", NO, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:LayerAxisLSTMCell", "lstm_cell", "cell_state_layer_axis", NO, NO,
             {"unbatched": "observed"}),
    RealCode(f"{REAL}:SelfDoubledRNN", "rnn", "param_names", YES, NO,
             {**dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout", "no_bias",
                               "factory_kwargs"), "signature"), "packed": "observed"}),
    RealCode(f"{REAL}:StatefulLSTMCell", "lstm_cell", "state_kept_between_calls", NO, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "initial_state"), "signature")),
    RealCode(f"{REAL}:BatchFirstOutputRNN", "rnn", "always_batch_first", NO, NO,
             {**dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout", "no_bias",
                               "factory_kwargs"), "signature"),
              **dict.fromkeys(("unbatched", "packed", "final_state"), "observed")}),
    RealCode(f"{REAL}:LengthsBeforeStateGRU", "gru", "state_not_second", YES, NO, {}),
    RealCode(f"{REAL}:FlatStateLSTM", "lstm", "state_not_nested", YES, NO, {}),
    RealCode(f"{REAL}:ExtraNoneLSTM", "lstm", "extra_values_returned", YES, NO, {}),
    RealCode(f"{REAL}:ListStateGRUCell", "gru_cell", "state_in_list", NO, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:ConcatStateLSTMCell", "lstm_cell", "state_concatenated", NO, NO,
             dict.fromkeys(("no_bias", "factory_kwargs", "optional_state"), "signature")),
    RealCode(f"{REAL}:StateFirstIfogLSTMCell", "lstm_cell", "param_names", YES, NO,
             {"no_bias": "signature", "factory_kwargs": "signature",
              "optional_state": "signature"}),
    RealCode(f"{REAL}:BatchFirstOnlyLSTM", "lstm", "changed_default", YES, NO, {}),
    RealCode(f"{REAL}:HiddenFirstLSTM", "lstm", "sizes_reversed", YES, NO,
             dict.fromkeys(("num_layers", "bidirectional", "batch_first", "dropout", "no_bias",
                            "proj_size", "factory_kwargs"), "signature")),
]
