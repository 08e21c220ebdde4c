"""Engine profiles: how an inference engine is started, checked and read, as data.

Adding an engine means adding ``<name>.yaml`` beside this file; the trial loop reads only the
:class:`EngineProfile` fields.
"""

from tuner.engines._profile import (
    REQUEST_EXTENSIONS,
    REQUEST_FORMATS,
    SIGNATURE_REASONS,
    CapacityFlag,
    CrashSignature,
    EngineProfile,
    RequestExtension,
    RequestFormat,
    TuningRule,
    load_profile,
    profile_names,
)

__all__ = [
    "CapacityFlag",
    "CrashSignature",
    "EngineProfile",
    "REQUEST_EXTENSIONS",
    "REQUEST_FORMATS",
    "RequestExtension",
    "RequestFormat",
    "SIGNATURE_REASONS",
    "TuningRule",
    "load_profile",
    "profile_names",
]
