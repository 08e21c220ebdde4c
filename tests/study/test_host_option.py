"""``--host [user@]address[:port]``: an IPv6 address in brackets, as ssh and URLs write it."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.study.trial import parse_host_option


@pytest.mark.parametrize("value, fields", [
    ("local", {"address": "local"}),
    ("gpu-host", {"address": "gpu-host"}),
    ("root@gpu-host:2222", {"address": "gpu-host", "user": "root", "port": 2222}),
    ("me@[::1]:22", {"address": "::1", "user": "me", "port": 22}),
    ("[fe80::1]", {"address": "fe80::1"}),
])
def test_host_option_fields(value: str, fields: dict) -> None:
    assert parse_host_option(value) == fields


@pytest.mark.parametrize("value", ["me@[::1", "me@[::1]x", "host:ssh", "me@", "[]:22"])
def test_a_host_option_that_is_not_an_address_says_how_to_write_one(value: str) -> None:
    with pytest.raises(ConfigError, match=r"not \[user@\]address\[:port\] or local; fix: write e\.g\."):
        parse_host_option(value)
