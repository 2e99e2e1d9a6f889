"""The front door's limiter settings from ADAPTSERVE_FRONT_DOOR (deployments/ingress/proxy/front_door)."""

from __future__ import annotations

import pytest

from deployments.ingress.proxy.front_door import SETTINGS_ENV, proxy_middlewares, settings_from_env
from policies.admission import LimiterSettings


def test_no_env_gives_the_defaults() -> None:
    assert settings_from_env({}) == LimiterSettings()
    assert settings_from_env({SETTINGS_ENV: "  "}) == LimiterSettings()


def test_env_overrides_only_the_keys_it_names() -> None:
    s = settings_from_env({SETTINGS_ENV: '{"late_fraction": 0.6, "window": 20}'})
    assert (s.late_fraction, s.window) == (0.6, 20)
    assert s.decrease == LimiterSettings().decrease


@pytest.mark.parametrize("raw, says", [
    ('{"late_fractoin": 0.6}', "valid: ["),
    ('{"window": "50"}', "must be a number"),
    ('{"window": true}', "must be a number"),
    ('[0.6]', "JSON object"),
    ('{"decrease": 1.5}', "0 < decrease < 1"),
])
def test_bad_settings_are_refused_with_the_reason(raw: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        settings_from_env({SETTINGS_ENV: raw})
    assert says in str(err.value)


def test_the_proxy_callback_uses_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SETTINGS_ENV, '{"initial_limit": 4}')
    [middleware] = proxy_middlewares()
    assert middleware.kwargs["settings"].initial_limit == 4
