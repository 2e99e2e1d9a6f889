"""The KubeRay RayService manifest of one deployment variant (CPU, GPU): `deploy/overrides.yaml`
says what differs from `serve_config.yaml` and how the pods look; `app.cli.rayservice` writes
the manifests (docs/deploy.md).

What every manifest has, whatever the overrides say: Ray token authentication
(`authOptions.mode: token`; KubeRay makes the token Secret and sets RAY_AUTH_MODE/RAY_AUTH_TOKEN
in every container), the API keys from a Kubernetes Secret (`api_keys.env`, read by the ingress),
the cluster-wide Serve environment (`deployments.config.CLUSTER_ENV`), an image with a registry
and a pull policy, a 0-CPU head (no replica runs there), the Ray client port (10001) not exposed,
an upgrade strategy and an initializing timeout, and KubeRay's in-tree autoscaler (a sidecar in
the head pod: a worker pod for every replica Serve cannot place, idle pods removed; worker groups
bounded by min/max; docs/autoscaling.md).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import Field, model_validator

from deployments.config import CLUSTER_ENV, StrictConfig

KUBERAY_VERSION = "v1.7.0"  # the CRD vendored in ../shared/data/kuberay (tests validate with it)
INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("serve", 8000))  # no client (10001)
# the Ray images run as `ray` (uid 1000); a numeric user lets the kubelet check runAsNonRoot
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                      "runAsNonRoot": True, "runAsUser": 1000}


class ApiKeysSecret(StrictConfig):
    """The Kubernetes Secret holding the API keys, and the env var the ingress reads them from."""

    secret: str = Field(description="Secret name (create it before applying the manifest)")
    key: str = Field(description="the key inside the Secret")
    env: str = Field(description="environment variable the ingress reads the keys from")


class PodSize(StrictConfig):
    cpu: str
    memory: str


class WorkerGroup(StrictConfig):
    group: str
    replicas: int = Field(ge=0, description="pods at creation; the autoscaler moves it after")
    min_replicas: int = Field(ge=0, description="pods the autoscaler never goes below")
    max_replicas: int = Field(ge=1, description="pods the autoscaler never goes above")
    idle_timeout_s: int | None = Field(
        default=None, ge=0,
        description="this group's idle timeout (autoscaler v2); default: the autoscaler's")
    size: PodSize
    gpus: int = Field(default=0, ge=0, description="nvidia.com/gpu per worker pod")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _bounded(self) -> WorkerGroup:
        if not self.min_replicas <= self.replicas <= self.max_replicas:
            raise ValueError(f"worker group {self.group}: need min_replicas <= replicas <= "
                             f"max_replicas, got {self.min_replicas}, {self.replicas}, "
                             f"{self.max_replicas}")
        return self


class Autoscaler(StrictConfig):
    """KubeRay's in-tree Ray autoscaler (`autoscalerOptions`): it adds worker pods for replicas
    that fit nowhere (pending actors) and removes pods idle for `idle_timeout_s`."""

    version: Literal["v1", "v2"] = Field(
        description="v2: Ray >= 2.47's default, stated; per-group idle timeouts need it")
    upscaling_mode: Literal["Default", "Aggressive", "Conservative"] = Field(
        description="Default: a pod for every pending replica at once; Conservative: pending "
                    "pods at most the cluster's size")
    idle_timeout_s: int = Field(ge=0, description="a worker pod using no Ray resources goes "
                                                  "after this long (down to min_replicas)")
    size: PodSize = Field(description="the autoscaler sidecar's container (requests = limits)")


class Variant(StrictConfig):
    output: str = Field(description="manifest path, relative to the repository root")
    image: str = Field(description="repository:tag under the registry")
    serve_config: dict[str, Any] = Field(
        default_factory=dict,
        description="dotted keys into serve_config.yaml -> value (named list items by name)")
    head: PodSize
    workers: WorkerGroup


class Overrides(StrictConfig):
    """`deploy/overrides.yaml`: everything the manifests add to or change in serve_config.yaml."""

    name: str
    ray_version: str
    registry: str = Field(description="image registry (a placeholder until you set yours)")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"]
    workdir: str = Field(description="the code's directory in the image (deploy/Dockerfile)")
    upgrade_strategy: Literal["NewCluster", "NewClusterWithIncrementalUpgrade", "None"]
    initializing_timeout: str = Field(description="Go duration, e.g. 30m")
    exclude_head_from_serve_service: bool = True
    api_keys: ApiKeysSecret
    autoscaler: Autoscaler
    variants: dict[str, Variant]


def container_env(api_keys: ApiKeysSecret) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in CLUSTER_ENV.items()]
    env.append({"name": api_keys.env, "valueFrom": {"secretKeyRef": {
        "name": api_keys.secret, "key": api_keys.key}}})
    return env


def _resources(size: PodSize, gpus: int = 0) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": size.cpu, "memory": size.memory}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    return {"requests": dict(limits), "limits": limits}


def _container(o: Overrides, v: Variant, name: str, size: PodSize, gpus: int = 0,
               ports: tuple[tuple[str, int], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name, "image": f"{o.registry}/{v.image}", "imagePullPolicy": o.image_pull_policy,
        "workingDir": o.workdir, "env": container_env(o.api_keys),
        "resources": _resources(size, gpus), "securityContext": copy.deepcopy(CONTAINER_SECURITY)}
    if ports:
        out["ports"] = [{"containerPort": p, "name": n} for n, p in ports]
    return out


def _worker_group(o: Overrides, v: Variant) -> dict[str, Any]:
    w = v.workers
    pod: dict[str, Any] = {"containers": [_container(o, v, "ray-worker", w.size, w.gpus)]}
    if w.node_selector:
        pod["nodeSelector"] = dict(w.node_selector)
    if w.tolerations:
        pod["tolerations"] = list(w.tolerations)
    group: dict[str, Any] = {"groupName": w.group, "replicas": w.replicas,
                             "minReplicas": w.min_replicas, "maxReplicas": w.max_replicas}
    if w.idle_timeout_s is not None:
        group["idleTimeoutSeconds"] = w.idle_timeout_s
    return {**group, "rayStartParams": {}, "template": {"spec": pod}}


def autoscaler_options(a: Autoscaler) -> dict[str, Any]:
    """`autoscalerOptions`: the sidecar runs the head's image (KubeRay's default), with the same
    container hardening as the Ray containers."""
    return {"version": a.version, "upscalingMode": a.upscaling_mode,
            "idleTimeoutSeconds": a.idle_timeout_s, "resources": _resources(a.size),
            "securityContext": copy.deepcopy(CONTAINER_SECURITY)}


def manifest(o: Overrides, v: Variant, serve_config_text: str) -> dict[str, Any]:
    """The RayService resource of variant `v` serving `serve_config_text` (serveConfigV2)."""
    head = _container(o, v, "ray-head", v.head, ports=HEAD_PORTS)
    return {
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": o.name, "labels": {"app.kubernetes.io/name": o.name},
                     "annotations": {INITIALIZING_TIMEOUT_ANNOTATION: o.initializing_timeout}},
        "spec": {
            "upgradeStrategy": {"type": o.upgrade_strategy},
            "excludeHeadPodFromServeSvc": o.exclude_head_from_serve_service,
            "serveConfigV2": serve_config_text,
            "rayClusterConfig": {
                "rayVersion": o.ray_version,
                "authOptions": {"mode": "token"},
                "enableInTreeAutoscaling": True,
                "autoscalerOptions": autoscaler_options(o.autoscaler),
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
                    "template": {"spec": {"containers": [head]}}},
                "workerGroupSpecs": [_worker_group(o, v)]}}}
