"""Submit, watch and cancel Slurm jobs from a notebook through slurmrestd, as yourself.

Standard library only: the hub mounts this one file into every notebook (components/addons/jupyterhub.py), whatever
image it runs. It speaks data_parser v0.0.44, the newest API Slurm 25.11 serves, and authenticates with the
user's own JWT (`scontrol token` on a login pod) in the X-SLURM-USER-NAME / X-SLURM-USER-TOKEN headers
(the `user` and `token` security schemes of slurmrestd's OpenAPI description; requests are checked against it
in tests/slurm/test_rest_client.py).

    from rest_client import SlurmRest
    slurm = SlurmRest.from_env()                 # SLURMRESTD_URL, SLURM_JWT, and USER / JUPYTERHUB_USER
    job = slurm.submit("#!/bin/bash\\nsrun hostname\\n", partition="gpu-h100", gpus_per_node=8, minutes=60)
    slurm.wait(job)                              # "COMPLETED", or the state it ended in
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

API = "/slurm/v0.0.44"
# Job states after which a job never runs again (v0.0.44_job_info job_state's enum, Slurm 25.11).
FINISHED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                      "DEADLINE", "OUT_OF_MEMORY"})


class SlurmRestError(RuntimeError):
    """slurmrestd answered with an HTTP error or listed errors in its reply."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # under the server root, with the query string
    body: dict[str, Any] | None = None


def submit_request(script: str, partition: str, cwd: str, *, name: str = "notebook", account: str | None = None,
                   nodes: int = 1, gpus_per_node: int = 0, minutes: int | None = None,
                   environment: Mapping[str, str] | None = None) -> Request:
    """POST job/submit with a v0.0.44_job_submit_req body: the batch script and its job description."""
    job: dict[str, Any] = {
        "script": script, "name": name, "partition": partition, "current_working_directory": cwd,
        "nodes": str(nodes),
        # Slurm needs an environment for batch jobs; PATH alone is what sbatch --export=NONE would give.
        "environment": [f"{k}={v}" for k, v in (environment or {"PATH": "/usr/local/bin:/usr/bin:/bin"}).items()],
    }
    if account:
        job["account"] = account
    if gpus_per_node:
        job["tres_per_node"] = f"gres/gpu:{gpus_per_node}"
    if minutes is not None:
        job["time_limit"] = {"set": True, "infinite": False, "number": minutes}
    return Request("POST", f"{API}/job/submit", {"job": job})


def state_request(job_id: int) -> Request:
    return Request("GET", f"{API}/job/{job_id}")


def cancel_request(job_id: int) -> Request:
    return Request("DELETE", f"{API}/job/{job_id}")


def headers(user: str, token: str) -> dict[str, str]:
    return {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token, "Content-Type": "application/json",
            "Accept": "application/json"}


class SlurmRest:
    def __init__(self, url: str, user: str, token: str, timeout: float = 30.0) -> None:
        self.url, self.user, self.token, self.timeout = url.rstrip("/"), user, token, timeout

    @classmethod
    def from_env(cls) -> SlurmRest:
        token = os.environ.get("SLURM_JWT")
        if not token:
            raise SlurmRestError("SLURM_JWT is not set: run `scontrol token lifespan=86400` on a login pod and "
                                 "set os.environ['SLURM_JWT'] to the value after SLURM_JWT=")
        user = os.environ.get("JUPYTERHUB_USER") or os.environ["USER"]
        return cls(os.environ.get("SLURMRESTD_URL", "http://slurm-restapi.slurm.svc.cluster.local:6820"),
                   user, token)

    def call(self, request: Request) -> dict[str, Any]:
        data = json.dumps(request.body).encode() if request.body is not None else None
        http = urllib.request.Request(self.url + request.path, data=data, method=request.method,
                                      headers=headers(self.user, self.token))
        try:
            with urllib.request.urlopen(http, timeout=self.timeout) as reply:
                answer = json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise SlurmRestError(f"{request.method} {request.path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
        errors = answer.get("errors") or []
        if errors:
            raise SlurmRestError(f"{request.method} {request.path}: {errors}")
        return answer

    def submit(self, script: str, partition: str, cwd: str | None = None, **options: Any) -> int:
        reply = self.call(submit_request(script, partition, cwd or os.getcwd(), **options))
        return int(reply["job_id"])

    def state(self, job_id: int) -> str:
        jobs = self.call(state_request(job_id)).get("jobs") or []
        if not jobs:
            raise SlurmRestError(f"job {job_id} is unknown to slurmctld")
        return ",".join(jobs[0].get("job_state") or ["UNKNOWN"])

    def wait(self, job_id: int, poll_seconds: float = 15.0, timeout: float | None = None) -> str:
        """Poll until the job finishes; its final state (first of its flags)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.state(job_id)
            if state.split(",")[0] in FINISHED:
                return state
            if deadline is not None and time.monotonic() > deadline:
                return state
            time.sleep(poll_seconds)

    def cancel(self, job_id: int) -> None:
        self.call(cancel_request(job_id))
