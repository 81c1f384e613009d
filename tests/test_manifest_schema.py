"""Strict manifest validation: CRD structural schemas and CEL rules, built-in kinds, unknown kinds."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripts.manifests.cel_rules import CelRule
from scripts.manifests.crd_schema import CustomResourceVersion, SchemaNode, SchemaRegistry, parse_schema
from scripts.manifests.manifest_schema import ManifestProblem, validate_manifest, validate_manifest_dir

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

# One valid object per kind the project renders, written the way the plan writes them.
VALID_YAML = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu-h100}
spec:
  template:
    metadata:
      labels: {slurm-eks.io/partition: gpu-h100}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu-h100}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: ["0"]}
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
      expireAfter: Never
  limits: {nvidia.com/gpu: 64}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10m
    budgets: [{nodes: "10%"}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: gpu-h100}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
  role: KarpenterNodeRole-dev
  metadataOptions: {httpEndpoint: enabled, httpTokens: required, httpPutResponseHopLimit: 1}
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs: {volumeSize: 200Gi, volumeType: gp3, encrypted: true, deleteOnTermination: true}
  instanceStorePolicy: RAID0
  tags: {slurm-eks.io/partition: gpu-h100}
---
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata: {name: slurm, namespace: slurm}
spec:
  clusterName: dev
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtHs256KeyRef: {name: slurm-auth-jwths256, key: jwt_hs256.key}
  accountingRef: {name: slurm}
  extraConf: GresTypes=gpu
  slurmctld: {image: "ghcr.io/slinkyproject/slurmctld:25.11-ubuntu24.04"}
  persistence: {enabled: true, storageClassName: gp3, resources: {requests: {storage: 4Gi}}}
---
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata: {name: gpu-h100, namespace: slurm}
spec:
  controllerRef: {name: slurm}
  replicas: 0
  extraConf: Gres=gpu:8
  partition: {enabled: true, config: MaxTime=UNLIMITED}
  slurmd:
    image: "ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04"
    resources: {limits: {nvidia.com/gpu: 8}}
    volumeMounts: [{name: shared, mountPath: /shared}]
  template:
    metadata: {labels: {slurm-eks.io/partition: gpu-h100}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: gpu-h100}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      volumes: [{name: shared, persistentVolumeClaim: {claimName: fsx-shared}}]
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: "25%"}}
  workloadDisruptionProtection: true
---
apiVersion: slinky.slurm.net/v1beta1
kind: LoginSet
metadata: {name: login, namespace: slurm}
spec:
  controllerRef: {name: slurm}
  sssdConfRef: {name: slurm-login-sssd, key: sssd.conf}
  replicas: 1
  rootSshAuthorizedKeys: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample researcher@example.com
  login: {image: "ghcr.io/slinkyproject/login:25.11-ubuntu24.04"}
  service: {spec: {type: LoadBalancer, loadBalancerSourceRanges: [203.0.113.0/24]}}
---
apiVersion: slinky.slurm.net/v1beta1
kind: Accounting
metadata: {name: slurm, namespace: slurm}
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtHs256KeyRef: {name: slurm-auth-jwths256, key: jwt_hs256.key}
  storageConfig:
    host: mariadb.slurm.svc.cluster.local
    port: 3306
    database: slurm_acct_db
    username: slurm
    passwordKeyRef: {name: mariadb-password, key: password}
---
apiVersion: slinky.slurm.net/v1beta1
kind: RestApi
metadata: {name: slurm, namespace: slurm}
spec:
  controllerRef: {name: slurm}
  replicas: 1
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: gpu-h100, namespace: slurm}
spec:
  scaleTargetRef: {apiVersion: slinky.slurm.net/v1beta1, kind: NodeSet, name: gpu-h100}
  minReplicaCount: 0
  maxReplicaCount: 8
  cooldownPeriod: 600
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus.monitoring.svc:9090
        query: sum(slurm_partition_jobs_pending{partition="gpu-h100"})
        threshold: "1"
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: fsx-shared}
spec:
  capacity: {storage: 4800Gi}
  volumeMode: Filesystem
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi:
    driver: fsx.csi.aws.com
    volumeHandle: fs-0123456789abcdef0
    volumeAttributes: {dnsname: fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com, mountname: abcdefgh}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: fsx-shared, namespace: slurm}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: fsx-shared
  resources: {requests: {storage: 4800Gi}}
---
apiVersion: v1
kind: Secret
metadata: {name: mariadb-password, namespace: slurm}
type: Opaque
data: {password: c2VjcmV0}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: slurm-gres, namespace: slurm, labels: {app.kubernetes.io/name: slurm}}
data: {gres.conf: "AutoDetect=nvidia\\n"}
---
apiVersion: v1
kind: Service
metadata: {name: slurm-login, namespace: slurm}
spec:
  type: LoadBalancer
  selector: {app.kubernetes.io/name: login}
  ports: [{name: ssh, port: 22, targetPort: 22, protocol: TCP}]
"""
VALID = {doc["kind"]: doc for doc in yaml.safe_load_all(VALID_YAML)}
DELETE = object()


def example(kind: str, *edits: tuple[Sequence[str | int], Any]) -> dict[str, Any]:
    """A copy of the valid example of `kind` with values set, appended or DELETEd at key paths."""
    doc = copy.deepcopy(VALID[kind])
    for keys, value in edits:
        parent = doc
        for key in keys[:-1]:
            parent = parent.setdefault(key, {}) if isinstance(parent, dict) else parent[key]
        if value is DELETE:
            del parent[keys[-1]]
        elif isinstance(parent, list) and keys[-1] == len(parent):
            parent.append(value)
        else:
            parent[keys[-1]] = value
    return doc


@pytest.fixture(scope="session")
def registry(crd_registry: SchemaRegistry) -> SchemaRegistry:
    return crd_registry


def widget_registry(schema: dict[str, Any]) -> SchemaRegistry:
    """A registry with one made-up kind, example.com/v1 Widget, whose spec has the given schema."""
    root = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}}
    root["properties"] |= {"metadata": {"type": "object"}, "spec": schema}
    version = CustomResourceVersion(
        "example.com/v1", "Widget", "Namespaced", Path("widget"), parse_schema(root)
    )
    return SchemaRegistry([version])


def widget(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def at(problems: list[ManifestProblem]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for problem in problems:
        found.setdefault(problem.path, []).append(problem.message)
    return found


# --- loading ----------------------------------------------------------------------------------------------


def test_every_crd_file_loads_every_served_version(crds_dir: Path, registry: SchemaRegistry) -> None:
    files = sorted(crds_dir.rglob("*.yaml"))
    assert len(files) >= 25
    served = 0
    for path in files:
        for crd in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
            for version in crd["spec"]["versions"]:
                if version["served"]:
                    served += 1
                    api_version = f"{crd['spec']['group']}/{version['name']}"
                    loaded = registry.lookup(api_version, crd["spec"]["names"]["kind"])
                    assert loaded is not None and loaded.source == path, (path, api_version)
    assert len(registry) == served


def test_loading_a_missing_directory_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        SchemaRegistry.from_crd_dirs([tmp_path / "does-not-exist"])


def test_every_shipped_cel_rule_compiles_and_only_transition_rules_are_skipped(
    registry: SchemaRegistry,
) -> None:
    rules = registry.cel_rules()
    assert [(r.kind, r.path, r.rule.unsupported) for r in rules if r.rule.unsupported] == []
    transition = [r for r in rules if r.rule.is_transition]
    assert transition and all("oldSelf" in r.rule.rule for r in transition)
    assert not any("oldSelf" in r.rule.rule for r in rules if not r.rule.is_transition)
    karpenter = [r for r in rules if r.api_version.startswith("karpenter")]
    assert len(karpenter) > 60  # Karpenter carries most of its constraints as CEL


# --- valid documents ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_examples_pass(kind: str, registry: SchemaRegistry) -> None:
    assert validate_manifest(VALID[kind], registry) == []


def test_validation_does_not_change_the_document(registry: SchemaRegistry) -> None:
    doc = example("NodeSet", (("spec", "extraConf"), None))
    before = copy.deepcopy(doc)
    validate_manifest(doc, registry)
    assert doc == before  # defaults and pruning happen on a copy


@pytest.mark.parametrize(
    ("kind", "edit"),
    [
        ("NodeSet", (("spec", "replicas"), 2.0)),  # Pulumi's mocks turn 2 into 2.0: still an integer
        (
            "NodeSet",
            (("spec", "extraConf"), None),
        ),  # null in a non-nullable field is pruned, as the server does
        ("NodeSet", (("spec", "slurmd", "anything"), {"goes": 1})),  # x-kubernetes-preserve-unknown-fields
        ("NodeSet", (("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), 2)),  # int-or-string
        (
            "NodePool",
            (("spec", "template", "spec", "requirements", 2, "values"), ["+8"]),
        ),  # Go ParseInt takes it
        ("EC2NodeClass", (("spec", "amiSelectorTerms"), [{"alias": "bottlerocket@v1.30.0"}])),
    ],
)
def test_edge_values_the_api_server_accepts(
    kind: str, edit: tuple[Sequence[str | int], Any], registry
) -> None:
    assert validate_manifest(example(kind, edit), registry) == []


# --- broken documents ------------------------------------------------------------------------------------

BROKEN = [
    # Slinky ignores a NodeSet's spec.volumes; strict validation must not.
    ("NodeSet", [(("spec", "volumes"), [{"name": "x"}])], "spec.volumes", 'unknown field "spec.volumes"'),
    ("NodeSet", [(("spec", "controllerRef"), DELETE)], "spec.controllerRef", "Required value"),
    ("NodeSet", [(("spec", "controllerRef"), None)], "spec.controllerRef", "Required value"),
    ("LoginSet", [(("spec", "sssdConfRef"), DELETE)], "spec.sssdConfRef", "Required value"),
    ("LoginSet", [(("spec", "sssdConfRef", "key"), DELETE)], "spec.sssdConfRef.key", "Required value"),
    ("NodeSet", [(("spec", "replicas"), "two")], "spec.replicas", "must be of type integer"),
    ("NodeSet", [(("spec", "replicas"), 2.5)], "spec.replicas", "must be of type integer"),
    ("NodeSet", [(("spec", "replicas"), True)], "spec.replicas", "must be of type integer"),
    ("NodeSet", [(("spec", "partition", "config"), "a\nb")], "spec.partition.config", "should match"),
    ("NodeSet", [(("spec", "scalingMode"), "Deployment")], "spec.scalingMode", "Unsupported value"),
    (
        "NodeSet",
        [(("spec", "updateStrategy"), {"type": "ScheduledUpdate"})],
        "spec.updateStrategy",
        "scheduledUpdate.startTime and scheduledUpdate.duration are required",
    ),
    (
        "NodePool",
        [(("spec", "disruption", "consolidationPolicy"), "Sometimes")],
        "spec.disruption.consolidationPolicy",
        'Unsupported value: "Sometimes"',
    ),
    (
        "NodePool",
        [(("spec", "disruption", "budgets", 0, "nodes"), "ten")],
        "spec.disruption.budgets[0].nodes",
        "should match",
    ),
    (
        "NodePool",
        [(("spec", "disruption", "budgets", 0, "reasons"), ["Empty", "Empty"])],
        "spec.disruption.budgets[0].reasons[1]",
        'Duplicate value: "Empty"',
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "requirements", 0, "values"), DELETE)],
        "spec.template.spec.requirements",
        "requirements with operator 'In' must have a value defined",
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "requirements", 0, "values"), [])],
        "spec.template.spec.requirements",
        "requirements with operator 'In' must have a value defined",
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "requirements", 2, "values"), ["0x10"])],
        "spec.template.spec.requirements",
        "must have a single positive integer value",
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "requirements", 0, "minValues"), 2)],
        "spec.template.spec.requirements",
        "requirements with 'minValues' must have at least that many values",
    ),
    (
        "NodePool",
        [(("spec", "template", "metadata", "labels", "karpenter.sh/foo"), "x")],
        "spec.template.metadata.labels",
        'label domain "karpenter.sh" is restricted',
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "requirements", 0, "key"), "kubernetes.io/hostname")],
        "spec.template.spec.requirements[0].key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    (
        "NodePool",
        [(("spec", "template", "spec", "nodeClassRef", "name"), "")],
        "spec.template.spec.nodeClassRef.name",
        "name may not be empty",
    ),
    (
        "EC2NodeClass",
        [(("spec", "instanceProfile"), "KarpenterNodeInstanceProfile-dev")],
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    (
        "EC2NodeClass",
        [(("spec", "role"), DELETE)],
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    (
        "EC2NodeClass",
        [(("spec", "amiSelectorTerms"), [{"alias": "ubuntu@latest"}])],
        "spec.amiSelectorTerms[0].alias",
        "family is not supported",
    ),
    (
        "EC2NodeClass",
        [(("spec", "amiSelectorTerms"), [{"alias": "windows2022@v1"}])],
        "spec.amiSelectorTerms[0].alias",
        "windows families may only specify version 'latest'",
    ),
    (
        "EC2NodeClass",
        [(("spec", "amiSelectorTerms"), [{"alias": "al2023@latest"}, {"id": "ami-0123456789abcdef0"}])],
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive",
    ),
    (
        "EC2NodeClass",
        [(("spec", "subnetSelectorTerms"), [{}])],
        "spec.subnetSelectorTerms",
        "expected at least one, got none",
    ),
    (
        "EC2NodeClass",
        [(("spec", "metadataOptions", "httpTokens"), "optional-ish")],
        "spec.metadataOptions.httpTokens",
        "Unsupported value",
    ),
    (
        "EC2NodeClass",
        [(("spec", "metadataOptions", "httpPutResponseHopLimit"), 0)],
        "spec.metadataOptions.httpPutResponseHopLimit",
        "should be greater than or equal to 1",
    ),
    (
        "EC2NodeClass",
        [
            (
                ("spec", "blockDeviceMappings", 1),
                {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "1Ti"}},
            )
        ],
        "spec.blockDeviceMappings",
        "must have only one blockDeviceMappings with rootVolume",
    ),
    ("EC2NodeClass", [(("spec", "tags", "eks:eks-cluster-name"), "dev")], "spec.tags", "restricted tag"),
    (
        "EC2NodeClass",
        [(("spec", "instanceStorePolicy"), "RAID5")],
        "spec.instanceStorePolicy",
        "Unsupported value",
    ),
    # `external` is left out and defaults to false: the default must reach the CEL rule.
    (
        "Accounting",
        [(("spec", "slurmKeyRef"), DELETE)],
        "spec",
        "slurmKeyRef must be set when external is false",
    ),
    # Slinky v1.2.1's Controller (main's `spec.ha` and its CEL rule are not released).
    ("Controller", [(("spec", "external"), True)], "spec", "externalConfig must be set when external is true"),
    ("Controller", [(("spec", "ha"), {"enabled": True})], "spec.ha", 'unknown field "spec.ha"'),
    (
        "ScaledObject",
        [(("spec", "minReplicaCount"), 9)],
        "spec",
        "minReplicaCount must be less than or equal to maxReplicaCount",
    ),
    ("NodeSet", [(("metadata", "name"), "GPU_H100")], "metadata.name", "RFC 1123 subdomain"),
    ("NodeSet", [(("metadata", "name"), DELETE)], "metadata.name", "name or generateName is required"),
    ("NodeSet", [(("metadata", "labels"), {"app": 3})], "metadata.labels[app]", "must be of type string"),
    (
        "NodeSet",
        [(("metadata", "labels"), {"bad key!": "x"})],
        "metadata.labels",
        "name part must consist of",
    ),
    (
        "NodeSet",
        [(("metadata", "annotations"), {"a": {"b": 1}})],
        "metadata.annotations[a]",
        "must be of type string",
    ),
    ("NodeSet", [(("metadata", "owner"), "me")], "metadata.owner", 'unknown field "metadata.owner"'),
    ("PersistentVolumeClaim", [(("spec", "bogus"), True)], "spec.bogus", 'unknown field "spec.bogus"'),
    (
        "PersistentVolumeClaim",
        [(("spec", "accessModes"), "ReadWriteMany")],
        "spec.accessModes",
        "must be of type array",
    ),
    ("PersistentVolume", [(("spec", "csi", "driver"), DELETE)], "spec.csi.driver", "Required value"),
    ("Secret", [(("data", "password"), "not base64!")], "data[password]", "is not a 'byte'"),
    ("Service", [(("metadata", "name"), "1-login")], "metadata.name", "DNS-1035 label"),
    ("Service", [(("spec", "ports", 0, "port"), "ssh")], "spec.ports[0].port", "must be of type integer"),
    ("ConfigMap", [(("metadata", "namespace"), "Slurm")], "metadata.namespace", "RFC 1123 label"),
]


@pytest.mark.parametrize(
    ("kind", "edits", "path", "fragment"), BROKEN, ids=lambda v: v if isinstance(v, str) else ""
)
def test_broken_examples_fail_at_the_right_path(
    kind: str,
    edits: list[tuple[Sequence[str | int], Any]],
    path: str,
    fragment: str,
    registry: SchemaRegistry,
) -> None:
    problems = validate_manifest(example(kind, *edits), registry)
    assert any(fragment in message for message in at(problems).get(path, [])), problems
    assert all(p.kind == kind for p in problems)
    assert not [p for p in problems if "could not be evaluated" in p.message]


def test_problem_names_the_object_and_reads_as_one_line(registry: SchemaRegistry) -> None:
    (problem,) = validate_manifest(example("NodeSet", (("spec", "volumes"), [])), registry)
    assert problem == ManifestProblem("NodeSet", "gpu-h100", "spec.volumes", 'unknown field "spec.volumes"')
    assert str(problem) == 'NodeSet/gpu-h100: spec.volumes: unknown field "spec.volumes"'


def test_in_without_values_reports_the_evaluation_error_like_the_api_server(registry: SchemaRegistry) -> None:
    doc = example("NodePool", (("spec", "template", "spec", "requirements", 0, "values"), DELETE))
    (message,) = at(validate_manifest(doc, registry))["spec.template.spec.requirements"]
    assert message.startswith("no such member in mapping: 'values' evaluating rule: ")


def test_wrong_types_below_a_rule_are_reported_once_not_again_by_the_rule(registry: SchemaRegistry) -> None:
    doc = example("NodePool", (("spec", "template", "spec", "requirements", 0, "values"), "p5.48xlarge"))
    problems = validate_manifest(doc, registry)
    assert [p.path for p in problems] == ["spec.template.spec.requirements[0].values"]


def test_unknown_kind_is_a_problem_never_a_pass(registry: SchemaRegistry) -> None:
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert validate_manifest(doc, registry) == [
        ManifestProblem("Widget", "w", "", "no schema for example.com/v1/Widget")
    ]
    # A custom group whose first label matches a built-in file name (batch-v1alpha1) is still unknown.
    volcano_like = {"apiVersion": "batch.example.com/v1", "kind": "Job", "metadata": {"name": "j"}}
    assert "no schema for" in validate_manifest(volcano_like, registry)[0].message


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        (["a", "list"], "must be a mapping"),
        ({"kind": "ConfigMap"}, "Required value"),
        ({"apiVersion": "v1"}, "Required value"),
    ],
)
def test_documents_without_a_kind_are_problems(doc: Any, fragment: str, registry: SchemaRegistry) -> None:
    (problem,) = validate_manifest(doc, registry)
    assert fragment in problem.message


# --- every required field, deleted one at a time ------------------------------------------------------------


def required_fields(node: SchemaNode, value: Any, keys: tuple[str | int, ...] = ()) -> Iterator[tuple]:
    """Key paths of fields present in `value` that its schema requires and does not default."""
    if isinstance(value, dict):
        for name in node.required:
            if name in value and not node.properties[name].has_default:
                yield (*keys, name)
        for name, child in value.items():
            if name in node.properties:
                yield from required_fields(node.properties[name], child, (*keys, name))
    elif isinstance(value, list) and node.items is not None:
        for index, item in enumerate(value):
            yield from required_fields(node.items, item, (*keys, index))


def test_deleting_any_required_field_of_any_custom_resource_example_is_reported(
    registry: SchemaRegistry,
) -> None:
    checked = 0
    for doc in VALID.values():
        crd = registry.lookup(doc["apiVersion"], doc["kind"])
        if crd is None:
            continue
        for keys in required_fields(crd.schema, doc):
            problems = validate_manifest(example(doc["kind"], (keys, DELETE)), registry)
            path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
            assert "Required value" in at(problems).get(path, []), (doc["kind"], path, problems)
            checked += 1
    assert checked >= 10


# --- schema features, on a made-up kind ---------------------------------------------------------------------


def test_additional_properties_and_preserve_unknown_fields_decide_what_is_unknown() -> None:
    registry = widget_registry(
        {
            "type": "object",
            "properties": {
                "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
                "free": {"type": "object", "additionalProperties": True},
                "raw": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"n": {"type": "integer"}},
                },
            },
        }
    )
    problems = validate_manifest(
        widget({"limits": {"cpu": 1, "gpu": "8"}, "free": {"x": [1]}, "raw": {"y": 1, "n": "z"}, "extra": 1}),
        registry,
    )
    assert at(problems) == {
        "spec.limits[gpu]": ['Invalid value: "8": must be of type integer'],
        "spec.raw.n": ['Invalid value: "z": must be of type integer'],
        "spec.extra": ['unknown field "spec.extra"'],
    }


def test_embedded_resources_allow_and_check_their_own_type_fields() -> None:
    registry = widget_registry(
        {
            "type": "object",
            "properties": {
                "object": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                }
            },
        }
    )
    good = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert validate_manifest(widget({"object": good}), registry) == []
    bad = {"kind": "ConfigMap", "metadata": {"name": "Not_Valid", "uid": 1}}
    found = at(validate_manifest(widget({"object": bad}), registry))
    assert set(found) == {"spec.object.apiVersion", "spec.object.metadata.uid", "spec.object.metadata.name"}
    assert found["spec.object.apiVersion"] == ["Required value: must not be empty"]
    assert "RFC 1123 subdomain" in found["spec.object.metadata.name"][0]


def test_int_or_string_list_types_and_string_formats() -> None:
    registry = widget_registry(
        {
            "type": "object",
            "properties": {
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                        },
                    },
                },
                "since": {"type": "string", "format": "date-time"},
                "blob": {"type": "string", "format": "byte"},
                "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": True},
            },
        }
    )
    good = {"port": "ssh", "tags": ["a", "b"], "ports": [{"name": "a"}, {"name": "a", "protocol": "UDP"}]}
    good |= {"since": "2026-01-02T03:04:05Z", "blob": "aGVsbG8=", "ratio": 0}
    assert validate_manifest(widget(good), registry) == []
    bad = {"port": 1.5, "tags": ["a", "a"], "ports": [{"name": "a"}, {"name": "a", "protocol": "TCP"}]}
    bad |= {"since": "yesterday", "blob": "???", "ratio": 1}
    assert at(validate_manifest(widget(bad), registry)) == {
        "spec.port": ["Invalid value: 1.5: must be of type integer or string"],
        "spec.tags[1]": ['Duplicate value: "a"'],
        # The defaulted protocol makes the second entry a duplicate key.
        "spec.ports[1]": ['Duplicate value: {"name": "a", "protocol": "TCP"}'],
        "spec.since": ['Invalid value: "yesterday": must be in date-time format'],
        "spec.blob": ['Invalid value: "???": must be in byte format'],
        "spec.ratio": ["Invalid value: 1: should be less than 1"],
    }


# --- CEL ----------------------------------------------------------------------------------------------------


def rule_registry(*rules: dict[str, Any], properties: dict[str, Any] | None = None) -> SchemaRegistry:
    props = properties or {"n": {"type": "integer"}, "s": {"type": "string"}, "r": {"type": "number"}}
    return widget_registry({"type": "object", "properties": props, "x-kubernetes-validations": list(rules)})


def test_message_expression_and_field_path_shape_the_problem() -> None:
    registry = rule_registry(
        {
            "rule": "self.n < 5",
            "messageExpression": "'n is ' + string(self.n) + ', want < 5'",
            "fieldPath": ".n",
        }
    )
    assert at(validate_manifest(widget({"n": 7}), registry)) == {"spec.n": ["n is 7, want < 5"]}
    assert validate_manifest(widget({"n": 4}), registry) == []


def test_a_rule_without_message_reports_the_rule() -> None:
    registry = rule_registry({"rule": "self.s.startsWith('a')"})
    assert at(validate_manifest(widget({"s": "b"}), registry)) == {
        "spec": ["failed rule: self.s.startsWith('a')"]
    }


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("self.s.reverse() == 'a'", "unsupported function(s) reverse"),
        ("quantity(self.s).isGreaterThan(quantity('1'))", "unsupported function(s) isGreaterThan, quantity"),
        ("self.?s.orValue('') == 'a'", "cel-python cannot parse it"),
        (
            "self.r == 1",
            "cel-python: found no matching overload",
        ),  # cel-go compares 1.0 == 1; cel-python cannot
        ("self.s__dash__x == 'a'", "escaped property names"),
    ],
)
def test_a_rule_that_cannot_be_evaluated_is_reported_never_passed(rule: str, reason: str) -> None:
    registry = rule_registry({"rule": rule, "message": "never shown"})
    (problem,) = validate_manifest(widget({"s": "a", "r": 1.0}), registry)
    assert problem.path == "spec"
    assert problem.message.startswith("rule could not be evaluated (")
    assert reason in problem.message and rule in problem.message


def test_transition_rules_are_skipped_on_create() -> None:
    registry = rule_registry({"rule": "self.n == oldSelf.n", "message": "n is immutable"})
    (rule,) = [r.rule for r in registry.cel_rules()]
    assert rule.is_transition and rule.unsupported is None
    assert validate_manifest(widget({"n": 1}), registry) == []


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("self.split('@') == ['al2023', 'latest']", "al2023@latest"),
        ("self.split('@', 1) == ['a@b@c']", "a@b@c"),
        ("self.split('@', 0) == []", "a@b"),
        ("self.find('^[^/]+') == 'karpenter.sh'", "karpenter.sh/nodepool"),
        ("self.find('[0-9]+') == ''", "no digits"),
        ("self.findAll('[0-9]+') == ['1', '22']", "a1b22"),
        ("self.findAll('[0-9]+', 1) == ['1']", "a1b22"),
        ("self.lowerAscii() == 'abcé'", "ABCé"),
        ("self.upperAscii() == 'ABCé'", "abcé"),
        ("self.matches('^[a-z]+$') && self.endsWith('c') && size(self) == 3", "abc"),
        ("int(self) == -5", "-5"),
    ],
)
def test_kubernetes_cel_functions(rule: str, value: str) -> None:
    assert CelRule(rule).failure_message(value) is None
    assert CelRule(rule.replace("==", "!=", 1)).failure_message(value) is not None


# --- directories of manifests -------------------------------------------------------------------------------


def test_validate_manifest_dir_reads_every_yaml_document(tmp_path: Path, registry: SchemaRegistry) -> None:
    (tmp_path / "karpenter").mkdir()
    (tmp_path / "karpenter" / "gpu.yaml").write_text(
        yaml.safe_dump_all([VALID["NodePool"], example("EC2NodeClass", (("spec", "role"), DELETE))])
    )
    (tmp_path / "slurm.yml").write_text(yaml.safe_dump(VALID["NodeSet"]) + "---\n---\n")
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "notes.txt").write_text("kind: NotAManifest\n")
    results = validate_manifest_dir(tmp_path, registry)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in results) == [
        "broken.yaml",
        "karpenter/gpu.yaml",
        "slurm.yml",
    ]
    assert results[tmp_path / "slurm.yml"] == []
    assert [(p.kind, p.path) for p in results[tmp_path / "karpenter" / "gpu.yaml"]] == [
        ("EC2NodeClass", "spec")
    ]
    assert results[tmp_path / "broken.yaml"][0].message.startswith("not valid YAML")


def test_unquoted_timestamps_stay_strings_as_kubectl_sends_them(tmp_path: Path) -> None:
    registry = widget_registry(
        {"type": "object", "properties": {"since": {"type": "string", "format": "date-time"}}}
    )
    (tmp_path / "w.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {since: 2026-01-02T03:04:05Z}\n"
    )
    assert validate_manifest_dir(tmp_path, registry) == {tmp_path / "w.yaml": []}


def test_a_hundred_distinct_valid_manifests_all_validate(registry: SchemaRegistry) -> None:
    # Its speed is measured by benchmarks/bench_manifests.py, not asserted here (a loaded machine is slow).
    docs = [example(kind, (("metadata", "name"), f"{kind.lower()}-{i}")) for i in range(8) for kind in VALID]
    assert len(docs) >= 100
    assert not [p for doc in docs for p in validate_manifest(doc, registry)]


# --- properties ---------------------------------------------------------------------------------------------

GO_DECIMAL_INT64 = re.compile(r"[+-]?[0-9]+")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.text(max_size=8), st.from_regex(r"\A[+-]?[0-9_ ]{1,20}\Z"), st.integers().map(str)))
def test_gt_requirement_value_is_read_as_go_reads_integers(value: str, registry: SchemaRegistry) -> None:
    # cel-python's int() would take ' 5', '1_000' or '٣'; the API server (Go's ParseInt) takes none of them.
    doc = example("NodePool", (("spec", "template", "spec", "requirements", 2, "values"), [value]))
    accepted = GO_DECIMAL_INT64.fullmatch(value) is not None and 0 <= int(value) < 2**63
    problems = validate_manifest(doc, registry)
    assert (problems == []) == accepted, problems
    assert not [p for p in problems if "could not be evaluated" in p.message]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(min_size=1, max_size=20),
    kind=st.sampled_from(["NodeSet", "NodePool", "EC2NodeClass", "Accounting"]),
)
def test_any_undeclared_spec_field_is_unknown(name: str, kind: str, registry: SchemaRegistry) -> None:
    crd = registry.lookup(VALID[kind]["apiVersion"], kind)
    assert crd is not None
    if name in crd.schema.properties["spec"].properties:
        return
    problems = validate_manifest(example(kind, (("spec", name), "x")), registry)
    assert f'unknown field "spec.{name}"' in at(problems).get(f"spec.{name}", []), problems
