"""The OpenAPI document is true of the server (deployments/ingress/openapi.py): the ingress's
real answers validate against the schemas it declares, every status it answers is declared for
the route, the request bodies are narrowed to what this deployment serves, the example requests
are served, and the API keys appear as a bearer scheme on every route but /healthz. (The fuzzer,
scripts/fuzz.sh, checks the same against a running server; these need no Ray.)"""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonschema
from fastapi.testclient import TestClient

from app.controller.controller import PolicyController
from deployments.ingress.answers import FamilyHealthOut, ModelsResponse, StatusResponse
from deployments.ingress.config import HttpConfig
from deployments.ingress.health import FamilyLiveness
from deployments.ingress.openapi import tiny_png
from deployments.models.input_decoding import decode_image
from tests.helpers.classify_http import catalog, client, keyed_client, shed
from tests.helpers.controller_inputs import config, report


def document(c: TestClient, key: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = c.get("/openapi.json", headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def check(doc: dict[str, Any], path: str, method: str, r: Any) -> None:
    """`r` is an answer the document declares for the operation: status, type, body."""
    responses = doc["paths"][path][method]["responses"]
    assert str(r.status_code) in responses, (path, r.status_code, sorted(responses))
    content = responses[str(r.status_code)]["content"]
    media = r.headers["content-type"].split(";")[0]
    assert media in content, (path, media, sorted(content))
    if media == "application/json":
        schema = {"$ref": content[media]["schema"]["$ref"], "components": doc["components"]}
        jsonschema.Draft202012Validator(schema).validate(r.json())


def test_every_answer_is_one_the_document_declares() -> None:
    c = client(shed)
    doc = document(c)
    for path in ("/v1/models", "/healthz", "/v1/status", "/metrics"):
        check(doc, path, "get", c.get(path))  # /v1/status: the test controller is down (503)
    bad = [b"{", b'{"model": "m", "inputs": {"image": "x"}, "slo": {"latency_ms": NaN}}',
           b'{"model": "nope", "inputs": {"image": "x"}, "slo": {"latency_ms": 100}}',
           b'{"model": "m", "inputs": {"image": "x"}, "slo": {"latency_ms": 0.001}}',
           b'{"model": "m", "inputs": {"image": "x"}, "slo": {"latency_ms": "100"}}',
           b"[" * 40 + b"]" * 40]
    for raw in bad:
        for path in ("/v1/classify", "/v1/jobs"):
            r = c.post(path, content=raw, headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500
            check(doc, path, "post", r)


def test_the_get_answers_match_their_models() -> None:
    """What the routes send is what their documented models describe: validated, nothing is
    dropped, renamed or coerced."""
    models = catalog().to_json()
    assert models["models"]
    assert ModelsResponse.model_validate(models).model_dump(mode="json",
                                                            exclude_unset=True) == models
    live = FamilyLiveness(["m", "n"], clock=lambda: 5.0)
    live.call_failed("n", RuntimeError("ActorDiedError"))
    states = live.to_json()
    assert {h["state"] for h in states.values()} == {"starting", "suspect"}
    for health in states.values():
        assert FamilyHealthOut.model_validate(health).model_dump(mode="json") == health


def test_the_controller_status_matches_its_model(tmp_path: Any) -> None:
    ctl = PolicyController(config(tmp_path), clock=lambda: 100.0)
    ctl.report(report(100.0, "r1", 10.0, ok=4, deadline_met=3, late=1, accuracy_sum=3.6))
    status = StatusResponse.model_validate(ctl.status())
    assert status.deployments["fam"].answered == 4


def test_request_bodies_are_narrowed_to_what_is_served() -> None:
    http = HttpConfig(max_items_per_job=7)
    doc = document(client(shed, http))
    schemas = doc["components"]["schemas"]
    classify, job = schemas["ClassifyRequest"], schemas["JobRequest"]
    assert classify["properties"]["model"]["enum"] == ["m"] == job["properties"]["model"]["enum"]
    assert classify["properties"]["task"]["anyOf"][0]["enum"] == ["t"]
    inputs = classify["properties"]["inputs"]
    assert sorted(inputs["properties"]) == ["image"] and inputs["additionalProperties"] is False
    assert job["properties"]["items"]["maxItems"] == 7
    assert job["properties"]["items"]["items"]["properties"] == inputs["properties"]
    assert "$defs" not in json.dumps(doc)  # every $ref resolves inside the document


def test_the_example_requests_are_served() -> None:
    c = client(shed)
    doc = document(c)
    for path in ("/v1/classify", "/v1/jobs"):
        content = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        example = content["examples"]["m"]["value"]
        schema = {"$ref": content["schema"]["$ref"], "components": doc["components"]}
        jsonschema.Draft202012Validator(schema).validate(example)
        r = c.post(path, json=example)
        assert r.status_code == 200, r.text
        check(doc, path, "post", r)
    image = decode_image(base64.b64encode(tiny_png()).decode(), "image", 28, 28)
    assert image.shape == (1, 28, 28) and 0 < float(image.mean()) < 1


def test_api_keys_are_a_bearer_scheme_on_every_route_but_healthz() -> None:
    assert "securitySchemes" not in document(client(shed)).get("components", {})
    c = keyed_client()
    doc = document(c, "sk-ingress-0001")
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if path == "/healthz":
                assert op["security"] == [] and "401" not in op["responses"]
                continue
            assert op["security"] == [{"bearer": []}], path
            assert op["responses"]["401"]["headers"]["WWW-Authenticate"]["required"]
            r = c.request(method.upper(), path)
            assert r.status_code == 401
            check(doc, path, method, r)
