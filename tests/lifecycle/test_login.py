"""`slurm-eks login --stack S`: the login Service from the plan, its NLB address from a Kubernetes API (a local HTTP
server speaking the API's Service resource, read by the official client through a kubeconfig), then ssh as a person
the stack declares (os.execvp recorded)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from scripts.cli.main import app

pytestmark = pytest.mark.slow  # plans prod

SERVICES: dict[str, dict] = {}  # path -> the Service the fake API answers with


class FakeApi(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = SERVICES.get(self.path)
        body = json.dumps(found or {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                    "code": 404}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict]]:
    server = HTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "twin",
                  "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "twin", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    SERVICES.clear()
    yield SERVICES
    server.shutdown()


@pytest.fixture
def execs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    ran: list[list[str]] = []

    def execvp(file: str, argv: list[str]) -> None:
        ran.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvp", execvp)  # scripts/cli/lifecycle.py login imports os when it runs
    return ran


def _service(hostname: str | None) -> dict:
    ingress = [{"hostname": hostname}] if hostname else []
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slurm", "namespace": "slurm"},
            "spec": {"ports": [{"port": 22}]}, "status": {"loadBalancer": {"ingress": ingress}}}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["login", "--stack", "prod", *args], env={"COLUMNS": "200"})


def test_login_ssh_es_to_the_login_services_nlb_as_the_person(cluster: dict, execs: list[list[str]]) -> None:
    cluster["/api/v1/namespaces/slurm/services/slurm"] = _service("login-abc.elb.us-west-2.amazonaws.com")
    result = invoke("--user", "alice")
    assert result.exit_code == 0, result.output
    assert execs == [["ssh", "-p", "22", "alice@login-abc.elb.us-west-2.amazonaws.com"]]


def test_a_person_the_stack_does_not_declare_is_refused(cluster: dict, execs: list[list[str]]) -> None:
    result = invoke("--user", "mallory")
    assert result.exit_code == 2 and execs == []
    assert "mallory is not a person stack prod declares (slurm.identity.users: alice, bob, carol" in result.output


def test_a_service_without_its_nlb_yet_says_to_wait(cluster: dict, execs: list[list[str]]) -> None:
    cluster["/api/v1/namespaces/slurm/services/slurm"] = _service(None)
    result = invoke("--user", "alice")
    assert result.exit_code == 2 and execs == [] and "AWS is still creating its NLB" in result.output


def test_an_undeployed_stack_says_what_the_api_answered(cluster: dict, execs: list[list[str]]) -> None:
    result = invoke("--user", "alice")
    assert result.exit_code == 2 and execs == []
    assert "the Kubernetes API answered 404 Not Found for Service slurm/slurm: is the stack deployed" in result.output


def test_no_kubeconfig_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           execs: list[list[str]]) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = invoke("--user", "alice")
    assert result.exit_code == 2 and execs == [] and "aws eks update-kubeconfig --name" in result.output


def test_an_unreachable_api_says_where_it_must_be_reachable_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                execs: list[list[str]]) -> None:
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
                  "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],  # discard: nothing listens
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    result = invoke("--user", "alice")
    assert result.exit_code == 2 and execs == [] and "cannot reach the cluster's Kubernetes API" in result.output
