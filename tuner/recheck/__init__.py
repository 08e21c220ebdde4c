"""After an engine upgrade: does the tuned configuration still hold?

``tuner recheck`` (:func:`run_recheck`) measures the study's baseline, its exported winner and
the next configurations again on the installed engine, interleaved, and says whether the winner
still wins, lost its lead or can no longer run. Before any host time, :func:`check_version`
says what the version change breaks (:func:`version_breaks`, pure: flags the engine no longer
knows, values outside a flag's choices, patches whose find-text is gone); ``tuner optimize``
says it too (:func:`say_version_breaks`). ``tuner optimize --from-study OLD`` seeds a new study
with the rechecked figures and the old ranking (:func:`seed_from_study`).
"""

from __future__ import annotations

from tuner.recheck._breaks import (
    Break,
    BreakKind,
    EngineInterface,
    StoredLaunch,
    launch_flags,
    parse_help,
    version_breaks,
)
from tuner.recheck._check import (
    VersionCheck,
    check_version,
    installed_interface,
    say_version_breaks,
    stored_launches,
    upgrade_check,
)
from tuner.recheck._measure import RecheckRuns, recheck_study_name
from tuner.recheck._plan import Role, Subject, choose_subjects, interleaved
from tuner.recheck._run import (
    RecheckOptions,
    RecheckPlan,
    RecheckResult,
    plan_recheck,
    run_recheck,
)
from tuner.recheck._seed import Seeded, UpgradeStart, seed_from_study
from tuner.recheck._verdict import Commands, Verdict, VerdictKind, verdict

__all__ = [
    "Break",
    "BreakKind",
    "Commands",
    "EngineInterface",
    "RecheckOptions",
    "RecheckPlan",
    "RecheckResult",
    "RecheckRuns",
    "Role",
    "Seeded",
    "StoredLaunch",
    "Subject",
    "UpgradeStart",
    "Verdict",
    "VerdictKind",
    "VersionCheck",
    "check_version",
    "choose_subjects",
    "installed_interface",
    "interleaved",
    "launch_flags",
    "parse_help",
    "plan_recheck",
    "recheck_study_name",
    "run_recheck",
    "say_version_breaks",
    "seed_from_study",
    "stored_launches",
    "upgrade_check",
    "verdict",
    "version_breaks",
]
