"""One type names the request formats: the engine profile's ``api``, the workload's ``api``
and the client's dialects read it, and each refuses a format it does not name."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from tuner.engines import REQUEST_FORMATS, EngineProfile, RequestFormat, load_profile
from tuner.errors import ConfigError
from tuner.loadgen import APIS
from tuner.loadgen._apis import Dialect, api_format
from tuner.loadgen._spec import check_api
from tuner.space._workload import WorkloadSection


def test_every_reader_names_the_same_formats() -> None:
    assert APIS == REQUEST_FORMATS == get_args(RequestFormat) == ("sglang", "openai", "openai-chat")
    assert get_args(EngineProfile.model_fields["api"].annotation) == REQUEST_FORMATS
    assert RequestFormat in get_args(WorkloadSection.model_fields["api"].annotation)
    for name in REQUEST_FORMATS:
        assert check_api(name) == name and Dialect(name).api == name and api_format(name).name == name


def test_a_format_no_reader_names_is_refused() -> None:
    with pytest.raises(ConfigError, match="api 'grpc' is unknown"):
        check_api("grpc")
    with pytest.raises(ConfigError):
        Dialect("grpc")
    profile = load_profile("sglang").model_dump()
    with pytest.raises(ValidationError):
        EngineProfile(**{**profile, "api": "grpc"})
