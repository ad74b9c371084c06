"""Which features running a case needs that an implementation lacks, why, and where that comes
from (`SOURCES`).

A feature is unsupported when the implementation declares it ("declared":
`Implementation.unsupported`, `--unsupported`), when its signatures say so ("signature": a
constructor without `bidirectional`, a forward without a state: `rnnbench.impls.adapt`), or when
the module refuses it ("observed": the kind's probes, `SuiteKind.probes`, e.g. unbatched input,
packed sequences, a constructor raising on bidirectional=True, ask once per process, and only
where a check needs the feature). Only a declared feature is excused from the drop-in verdict.
"""
from __future__ import annotations

import warnings

from rnnbench.errors import REFUSING, UsageError, raised_naming
from rnnbench.impls.adapt import ARGUMENT_FEATURES, torch_signature
from rnnbench.impls.base import Implementation, required_features
from rnnbench.impls.signatures import SIGNATURES
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import Subject

SOURCES = ("declared", "signature", "observed")
# (constructor, kind, device, feature) -> why the module refuses the feature, or None.
_PROBED: dict[tuple, str | None] = {}
# (constructor, kind, device, configuration) -> what `refused_configuration` found.
_BUILT: dict[tuple, Exception | bool | None] = {}


def refused_configuration(subject: Subject, cfg) -> Exception | bool | None:
    """The refusal (`refusal`) the subject's constructor raises on `cfg` (it says it does not
    support it), False when it builds it, None when it fails otherwise (the checks report that,
    sys.exit included); asked once per process."""
    key = (subject.impl.kinds.get(subject.kind), subject.kind, subject.device, cfg)
    if key not in _BUILT:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                subject.construct(cfg)
                _BUILT[key] = False
            except Finding as finding:
                refused = refusal(finding.__cause__, subject.kind, cfg)
                _BUILT[key] = finding.__cause__ if refused else None
            except SystemExit:
                _BUILT[key] = None
    return _BUILT[key]


def refusal(error: BaseException | None, kind: str, cfg) -> bool:
    """Whether a constructor's exception says it does not support `cfg`: NotImplementedError,
    Python's way of saying so, or a failed assert, ValueError or RuntimeError raised by a line
    of the constructor's own that names an argument `cfg` sets otherwise than torch.nn's default
    (research and deployment code's ways), not an invariant a bug broke deeper down."""
    if isinstance(error, NotImplementedError):
        return True
    return (isinstance(error, REFUSING) and kind in SIGNATURES
            and raised_naming(error, _asked_arguments(kind, cfg)))


def _asked_arguments(kind: str, cfg) -> list[str]:
    """The constructor arguments `cfg` sets otherwise than torch.nn's default (none for a kind
    without torch.nn's signature)."""
    if kind not in SIGNATURES:
        return []
    defaults = torch_signature(kind).parameters
    return [name for name, value in cfg.constructor_kwargs().items() if name in defaults
            and defaults[name].default is not defaults[name].empty  # the sizes have none
            and value != defaults[name].default]


def device_type(device: str) -> str:
    """"cpu" or "cuda" for a device name ("cuda:1" too); UsageError for anything else."""
    kind = device.split(":")[0]
    if device in ("cpu", "cuda") or (kind == "cuda" and device[5:].isdigit()):
        return kind
    raise UsageError(f"unknown device {device!r}; use cpu or cuda")


def unsupported(subject: Subject, probe: tuple[str, ...] = ()) -> dict[str, str]:
    """Every feature the subject's kind lacks, with the reason: declared, read off its
    signatures, or found by the kind's probes of the features in `probe` (once per process)."""
    impl, kind = subject.impl, subject.kind
    declared = impl.unsupported_reasons(kind)
    found = {}
    for feature, function in subject.suite.probes.items():
        key = (impl.kinds.get(kind), kind, subject.device, feature)
        if feature in probe and feature not in declared and key not in _PROBED:
            _PROBED[key] = function(subject)
        if _PROBED.get(key):
            found[feature] = _PROBED[key]
    return {**found, **declared}


def source(subject: Subject, feature: str) -> str:
    """Where the subject's lack of `feature` comes from: one of SOURCES."""
    if feature in subject.impl.unsupported:
        return "declared"
    key = (subject.impl.kinds.get(subject.kind), subject.kind, subject.device, feature)
    return "observed" if _PROBED.get(key) else "signature"


def case_missing_features(subject: Subject, case, dtype: str, backward: bool,
                          check_features=(), calls: bool = True, probe: bool = True
                          ) -> dict[str, str]:
    """The features running `case` this way needs that the subject's implementation lacks, with
    the reasons; with `probe`, the module is asked about those the case needs. A check that
    never calls forward (`calls` False) needs none of the case's call features, and probes only
    what its constructor is asked for."""
    impl: Implementation = subject.impl
    how = {"batched": case.batched or not calls, "dtype": dtype,
           "device": device_type(subject.device), "backward": backward,
           "extra": tuple(check_features) + (tuple(case.needs) if calls else ())}
    needed = required_features(case.config, **how)
    asked = needed if calls else [f for f in needed if f in ARGUMENT_FEATURES.values()]
    reasons = unsupported(subject, tuple(asked) if probe else ())
    missing = impl.missing_features(case.config, **how)
    missing += [f for f in needed if f in reasons and f not in missing]
    refused = [f for f in missing if f in ARGUMENT_FEATURES.values()
               and source(subject, f) == "observed"]
    if refused and not refused_configuration(subject, case.config):
        missing = [f for f in missing if f not in refused]  # this configuration it builds
    # An argument the case sets, of a feature the implementation lacks, that the constructor
    # refuses, is that feature missing where the case does not need it too (dropout with one
    # layer, which torch.nn takes and does nothing with): the refusal says nothing of the function.
    arguments = [ARGUMENT_FEATURES[name] for name in _asked_arguments(subject.kind, case.config)
                 if name in ARGUMENT_FEATURES and ARGUMENT_FEATURES[name] not in missing]
    if arguments and refused_configuration(subject, case.config):
        reasons = {**unsupported(subject, tuple(arguments) if probe else ()), **reasons}
        missing += [feature for feature in arguments if feature in reasons]
    return {feature: reasons[feature] for feature in missing}
