"""Fixtures shared by every test package.

``sshd``: a real OpenSSH server on 127.0.0.1 for the whole session (own keys, config and
known_hosts; see ``tests/support/sshd.py``). Tests skip with a clear message where
``/usr/sbin/sshd`` is missing.

Every test must leave the interrupt signals' dispositions as it found them
(``signals_left_as_found``): a later test must not meet an earlier one's handler. A test that
needs SIGINT at a given disposition sets it (``tests/support/signals.py``): a run started as a
background job inherits SIGINT ignored.

The README's command runs the suite in two steps: every test but the real-engine ones in two
processes (pytest-xdist, ``-n 2 -m "not vllm"``; ``--dist loadgroup`` in pyproject.toml), each
test file whole in one process so that its module fixtures are built once
(``pytest_collection_modifyitems``), then the real-engine tests alone (``-m vllm``): they measure
a real server in real time, and beside another process's tests on 2 cores the client measured
itself (event-loop lag 0.8-1.1 s p99: every level correctly flagged measurement-bound).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tests.support.sshd import SSHD_BINARY, SshServer

# The host fixtures (``host`` on both transports, ``run_root``, ``servers``), for every package
# whose module runs on a host (tests/host, tests/lifecycle, tests/patches, ...).
pytest_plugins = ["tests.support.host"]


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A running sshd on 127.0.0.1.

    It has ``host``, ``port``, ``user``, ``key_path``, ``known_hosts_path``, ``host_key_path``,
    ``stop()``, ``restart(new_host_key=False)`` and ``drop_connections()``.
    """
    if not os.access(SSHD_BINARY, os.X_OK):
        pytest.skip(f"{SSHD_BINARY} is missing: apt-get install -y openssh-server")
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


REAL_ENGINE_GROUP = "real-engine"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-noisy", action="store_true",
                     help="also run the studies marked noisy (a real effect near this CPU's run-to-run noise)")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per test file, one for every real-engine test, those first. A study marked
    ``noisy`` is left out (deselected, and said so) unless ``--run-noisy`` asks for it."""
    if not config.getoption("--run-noisy"):
        noisy = [item for item in items if item.get_closest_marker("noisy") is not None]
        if noisy:
            config.hook.pytest_deselected(items=noisy)
            items[:] = [item for item in items if item.get_closest_marker("noisy") is None]
    for item in items:
        real = item.get_closest_marker("vllm") is not None
        item.add_marker(pytest.mark.xdist_group(REAL_ENGINE_GROUP if real else item.nodeid.split("::")[0]))
    items.sort(key=lambda item: item.get_closest_marker("vllm") is None)  # stable: files keep their order


# SIGALRM and the interval timer belong to pytest-timeout (``timeout`` in pyproject.toml).
_WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def signals_left_as_found() -> Iterator[None]:
    """Fails a test that leaves the handler of an interrupt signal changed (it is put back
    first, so that the next test runs as if it had not)."""
    before = {signum: signal.getsignal(signum) for signum in _WATCHED}
    yield
    left = [signum for signum, handler in before.items() if signal.getsignal(signum) != handler]
    for signum in left:
        handler = before[signum]
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    assert not left, f"the test left the handler of {[signal.Signals(s).name for s in left]} changed"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """Each phase's report on the test item (``item.rep_call``), for fixtures that check after
    the test whether it passed (``emulated_study``: a passed test that left a server fails)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
