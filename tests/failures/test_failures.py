"""One failure vocabulary: each class says whether the configuration is blamed, whether it is a
capacity failure and whether it may run again, and every stored name reads back."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from pydantic import ValidationError

from tuner.engines import SIGNATURE_REASONS, CrashSignature, load_profile, profile_names
from tuner.errors import ServerFailure
from tuner.failures import FailureClass
from tuner.study.record import Outcome, outcome_of, records, reusable_failure, write_outcome
from tuner.study.record._outcome import TrialOutcome

REPO = Path(__file__).resolve().parents[2]

# The names FAIL trials carry in stored studies (``unstable-at-<c>`` with its level).
STORED = {
    "startup-crash": FailureClass.STARTUP_CRASH, "oom-at-start": FailureClass.OOM_AT_START,
    "unstable-at-1024": FailureClass.UNSTABLE, "hang": FailureClass.HANG, "wrong-output": FailureClass.WRONG_OUTPUT,
    "timeout": FailureClass.TIMEOUT, "measurement-bound": FailureClass.MEASUREMENT_BOUND,
    "host-error": FailureClass.HOST_ERROR, "worker-died": FailureClass.WORKER_DIED,
    "interrupted": FailureClass.INTERRUPTED,
}


@pytest.mark.parametrize("stored", sorted(STORED))
def test_every_stored_name_reads_back_as_its_class(stored: str) -> None:
    assert FailureClass.of(stored) is STORED[stored]


def test_every_class_has_a_stored_name_and_none_reads_as_another() -> None:
    assert set(STORED.values()) == set(FailureClass)
    assert FailureClass.of(None) is None and FailureClass.of("") is None and FailureClass.of("crash") is None
    assert FailureClass.UNSTABLE.at(512) == "unstable-at-512"
    with pytest.raises(ValueError):
        FailureClass.HANG.at(512)


def test_the_configuration_is_blamed_for_what_it_would_do_again_and_the_run_for_the_rest() -> None:
    blamed = {c for c in FailureClass if c.blamed}
    assert blamed == {FailureClass.STARTUP_CRASH, FailureClass.OOM_AT_START, FailureClass.UNSTABLE,
                      FailureClass.HANG, FailureClass.WRONG_OUTPUT, FailureClass.TIMEOUT}
    assert all(c.may_run_again is not c.blamed for c in FailureClass)
    assert {c for c in FailureClass if c.capacity} == {FailureClass.OOM_AT_START, FailureClass.UNSTABLE}
    assert {c for c in FailureClass if c.of_a_value} == {FailureClass.STARTUP_CRASH, FailureClass.WRONG_OUTPUT}
    assert reusable_failure("unstable-at-64") and not reusable_failure("measurement-bound")
    assert not reusable_failure(None) and not reusable_failure("a reason no class names")


@pytest.mark.parametrize("stored", sorted(STORED))
def test_a_failed_trial_stores_the_name_and_reads_back_its_outcome(stored: str) -> None:
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    write_outcome(study, trial, TrialOutcome.server_failed(ServerFailure(stored, "detail")))
    frozen = study.trials[0]
    assert frozen.user_attrs["failure_reason"] == stored and type(frozen.user_attrs["failure_reason"]) is str
    expected = Outcome.FAILED if STORED[stored].blamed else Outcome.RUN_FAILED
    assert outcome_of(frozen) is expected
    assert records(study)[0].failure_class is STORED[stored]


def test_a_server_failure_refuses_a_name_no_class_has() -> None:
    with pytest.raises(ValueError, match="not a failure class"):
        ServerFailure("crashed", "no such class")
    assert ServerFailure(FailureClass.UNSTABLE.at(8), "x").failure_class is FailureClass.UNSTABLE


def test_a_crash_signature_reads_the_profiles_short_names_and_refuses_a_class_of_the_run() -> None:
    for word, failure_class in SIGNATURE_REASONS.items():
        assert CrashSignature(pattern="x", reason=word).reason is failure_class
    assert CrashSignature(pattern="x", reason="oom-at-start").reason is FailureClass.OOM_AT_START
    assert CrashSignature(pattern="x").reason is FailureClass.STARTUP_CRASH
    for refused in ("worker-died", "unstable-at", "nonsense"):
        with pytest.raises(ValidationError):
            CrashSignature(pattern="x", reason=refused)
    for name in profile_names():  # the shipped profiles load
        assert all(isinstance(s.reason, FailureClass) for s in load_profile(name).crash_signatures)
