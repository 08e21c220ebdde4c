"""Engine profiles: how an inference engine is started, checked and read, as data.

Adding an engine means adding ``<name>.yaml`` beside this file; the trial loop reads only the
:class:`EngineProfile` fields.
"""

from tuner.engines._profile import (
    REQUEST_EXTENSIONS,
    CapacityFlag,
    CrashSignature,
    EngineProfile,
    RequestExtension,
    TuningRule,
    load_profile,
    profile_names,
)

__all__ = ["CapacityFlag", "CrashSignature", "EngineProfile", "REQUEST_EXTENSIONS", "RequestExtension", "TuningRule",
           "load_profile", "profile_names"]
