"""The emulated server enforces ``--api-key`` and ``--admin-api-key`` as SGLang 0.5.9 does.

The keys reach it as the tuner gives them: in a ``--config`` YAML file (SGLang's config merger).
SGLang's rules (``sglang/srt/utils/auth.py``): ``/health*`` and ``/metrics*`` always open; the
API key as ``Authorization: Bearer KEY`` on every other endpoint; an admin endpoint
(``/flush_cache``) takes only the admin key when one is set. It logs its ``server_args`` at
start with the key in it, as SGLang does: what the tuner must scrub before it keeps a log.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.emulator import Emulator, emulator_with_keys

API_KEY = "sk-emulated-5e1f0c2a"
ADMIN_KEY = "admin-emulated-77d3b9e4"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with emulator_with_keys(tmp_path_factory.mktemp("host"), {"--api-key": API_KEY, "--admin-api-key": ADMIN_KEY}) as emulator:
        assert emulator.wait_ready(30), emulator.log()
        yield emulator


def status(server: Emulator, path: str, authorization: str | None = None,
           body: dict | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.base_url + path, data, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        assert error.code != 401 or json.loads(error.read()) == {"error": "Unauthorized"}
        return error.code


GENERATE = {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}


@pytest.mark.parametrize("path", ["/health", "/health_generate"])
def test_health_needs_no_key(server: Emulator, path: str) -> None:
    assert status(server, path) == 200


@pytest.mark.parametrize("path, body", [("/server_info", None), ("/model_info", None),
                                        ("/v1/models", None), ("/generate", GENERATE)])
def test_every_other_endpoint_wants_the_api_key_as_a_bearer(server: Emulator, path: str,
                                                            body: dict | None) -> None:
    assert status(server, path, body=body) == 401
    assert status(server, path, "Bearer wrong-key", body) == 401
    assert status(server, path, API_KEY, body) == 401  # no scheme
    assert status(server, path, f"Basic {API_KEY}", body) == 401
    assert status(server, path, f"Bearer {ADMIN_KEY}", body) == 401  # the admin key is not it
    assert status(server, path, f"Bearer {API_KEY}", body) == 200
    assert status(server, path, f"bearer {API_KEY}", body) == 200  # the scheme in any case


def test_an_admin_endpoint_takes_only_the_admin_key_when_one_is_set(server: Emulator) -> None:
    assert status(server, "/flush_cache") == 401
    assert status(server, "/flush_cache", f"Bearer {API_KEY}") == 401
    assert status(server, "/flush_cache", f"Bearer {ADMIN_KEY}") == 200


def test_the_start_up_log_shows_the_keys_as_sglang_logs_its_server_args(server: Emulator) -> None:
    line = next(line for line in server.log().splitlines() if "server_args=ServerArgs(" in line)
    assert f"api_key='{API_KEY}'" in line and f"admin_api_key='{ADMIN_KEY}'" in line
