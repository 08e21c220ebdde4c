"""``--api-key`` and ``--admin-api-key`` enforced as SGLang 0.5.9 enforces them.

The rules of ``sglang/srt/utils/auth.py`` (``decide_request_auth``) for the endpoints the
emulator serves: ``OPTIONS`` and every path that starts with ``/health`` or ``/metrics`` are always
allowed (liveness probes and Prometheus carry no secret); an admin endpoint (``/flush_cache``,
marked ``ADMIN_OPTIONAL`` in SGLang's ``http_server.py``) takes the admin key when one is set, else
the API key, else nothing; every other endpoint takes the API key when one is set. A key is
accepted only as ``Authorization: Bearer KEY`` (the scheme in any case), compared in constant
time; a refusal is HTTP 401 ``{"error": "Unauthorized"}``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

__all__ = ["ADMIN_OPTIONAL_PATHS", "ApiKeys"]

# The admin endpoints (``@auth_level(AuthLevel.ADMIN_OPTIONAL)``) among those the emulator serves.
ADMIN_OPTIONAL_PATHS = frozenset({"/flush_cache"})
_ALWAYS_OPEN = ("/health", "/metrics")


def _bearer_matches(authorization: str | None, expected: str) -> bool:
    if not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return secrets.compare_digest(token.encode(), expected.encode())


@dataclass(frozen=True)
class ApiKeys:
    """The server's keys (None or empty: not set, as SGLang's ``if api_key:``)."""

    api_key: str | None = None
    admin_api_key: str | None = None

    def allows(self, method: str, path: str, authorization: str | None) -> bool:
        """Whether a request may reach its endpoint (SGLang's ``decide_request_auth``)."""
        if method == "OPTIONS" or path.startswith(_ALWAYS_OPEN):
            return True
        if path in ADMIN_OPTIONAL_PATHS:
            required = self.admin_api_key or self.api_key
        else:
            required = self.api_key
        return not required or _bearer_matches(authorization, required)
