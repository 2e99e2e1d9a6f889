"""A classifier replica killed in a real Ray Serve app, and the answers its clients may get
meanwhile (tests/integration/test_serving_resilience*.py)."""

from __future__ import annotations

from bench.core.http import HttpResponse

OK_STATUSES = {"ok", "deadline_exceeded", "shed"}
ERROR_TYPES = {"replica_unavailable", "internal_error", "unavailable"}


def kill_replica(app_name: str, deployment: str) -> str:
    """Kill one replica of `deployment` in the Serve app `app_name` (no restart); its actor's
    name."""
    import ray

    for actor in ray.util.list_named_actors(all_namespaces=True):
        name = actor["name"]
        if name.startswith("SERVE_REPLICA::") and f"{app_name}#{deployment}#" in name:
            ray.kill(ray.get_actor(name, namespace=actor["namespace"]), no_restart=True)
            return name
    raise AssertionError(f"no replica of {deployment} found")


def check_answer(r: HttpResponse) -> str:
    """One JSON answer: a result (200), a fast refusal (429 `overloaded` with Retry-After: the
    ingress sees the drained replica's answers slow down) or an explicit error (5xx)."""
    body = r.json()
    if r.status_code == 200:
        assert body["status"] in OK_STATUSES, body
        return body["status"]
    if r.status_code == 429:
        assert body["error"]["type"] == "overloaded" and int(r.headers["retry-after"]) >= 1, r.text
        return "overloaded"
    assert r.status_code in (500, 503), r.text
    assert body["error"]["type"] in ERROR_TYPES, body
    if body["error"]["type"] == "unavailable":  # the family has no live replica: fast 503
        assert int(r.headers["retry-after"]) >= 1, r.headers
    return body["error"]["type"]
