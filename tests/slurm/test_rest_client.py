"""slurm/rest_client.py's requests against slurmrestd's own OpenAPI description for data_parser v0.0.44, which
the Slurm 25.11 build generates (the `slurmrestd_openapi` fixture, tests/slurm_openapi.py): each path and method
exists, each body validates against its requestBody schema, and the auth headers are the description's security
schemes."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from slurm import rest_client as rc
from tests.conftest import require_module

jsonschema = require_module("jsonschema", "the manifests extra")
# openapi-core's schema validator: OpenAPI 3.0 schemas (nullable, $ref into components)
OAS30Validator = require_module("openapi_schema_validator", "the dev extra").OAS30Validator


@pytest.fixture
def spec(slurmrestd_openapi: dict[str, Any]) -> dict[str, Any]:
    return slurmrestd_openapi


def _operation(spec: dict[str, Any], request: rc.Request) -> dict[str, Any]:
    path = request.path.split("?")[0]
    for template, methods in spec["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path) and request.method.lower() in methods:
            return methods[request.method.lower()]
    raise AssertionError(f"{request.method} {path} is not in slurmrestd's v0.0.44 description")


def check(spec: dict[str, Any], request: rc.Request) -> None:
    operation = _operation(spec, request)
    if request.body is None:
        assert "requestBody" not in operation
        return
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    validator = OAS30Validator({**schema, "components": spec["components"]})
    errors = list(validator.iter_errors(request.body))
    if errors:
        raise jsonschema.ValidationError("; ".join(e.message for e in errors))


def _props(spec: dict[str, Any], name: str) -> set[str]:
    return set(spec["components"]["schemas"][name]["properties"])


def test_every_request_is_in_the_description_and_validates(spec: dict[str, Any]) -> None:
    check(spec, rc.submit_request("#!/bin/bash\nsrun hostname\n", "gpu-h100", "/shared/home/alice",
                                  account="llm", nodes=2, gpus_per_node=8, minutes=60,
                                  environment={"PATH": "/usr/bin"}))
    check(spec, rc.state_request(42))
    check(spec, rc.cancel_request(42))


def test_the_job_fields_are_the_descriptions(spec: dict[str, Any]) -> None:
    body = rc.submit_request("#!/bin/bash\n", "p", "/tmp", account="a", gpus_per_node=1, minutes=5).body
    assert body is not None and set(body) <= _props(spec, "v0.0.44_job_submit_req")
    assert set(body["job"]) <= _props(spec, "v0.0.44_job_desc_msg")


def test_a_wrong_body_fails_the_schema(spec: dict[str, Any]) -> None:
    bad = rc.submit_request("#!/bin/bash\n", "p", "/tmp", minutes=5)
    assert bad.body is not None
    bad.body["job"]["time_limit"] = "60"  # v0.0.44 wants a uint32_no_val_struct
    with pytest.raises(jsonschema.ValidationError):
        check(spec, bad)
    with pytest.raises(AssertionError, match="not in slurmrestd"):
        check(spec, rc.Request("POST", "/slurm/v0.0.44/jobs/submit", {}))


def test_headers_are_the_security_schemes(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert set(rc.headers("alice", "t")) >= {schemes["user"]["name"], schemes["token"]["name"]}


def test_finished_states_are_job_states(spec: dict[str, Any]) -> None:
    states = set(spec["components"]["schemas"]["v0.0.44_job_info"]["properties"]["job_state"]["items"]["enum"])
    assert states >= rc.FINISHED


def test_the_client_is_standard_library_only() -> None:
    """It is mounted alone into notebooks of any image."""
    tree = ast.parse(Path(rc.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}
