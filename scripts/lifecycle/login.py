"""`slurm-eks login --stack S`: ssh to the stack's login pods. Where to is in the plan and the cluster: the LoginSet
of the plan names the Service (slurm-operator v1.2.1 api/v1beta1/loginset_keys.go: the Service takes the LoginSet's
name; scripts/twin/operator/names.py, the twin's model of the operator, names it for both) and its port; the address
is the NLB AWS gave that Service, read from the Kubernetes API with the official client and the caller's kubeconfig
(`aws eks update-kubeconfig`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from scripts.offline.plan_model import Plan
from scripts.twin.operator.names import loginset_service_name, namespace_of

LOGINSET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"


class LoginError(RuntimeError):
    """No login service in the plan, or no address for it in the cluster; the message says what to do."""


@dataclass(frozen=True)
class LoginTarget:
    namespace: str
    service: str
    port: int


def login_target(plan: Plan) -> LoginTarget:
    loginsets = [r.inputs for r in plan.of_type(LOGINSET)]
    if not loginsets:
        raise LoginError(f"stack {plan.stack} has no login pods (no LoginSet in its plan)")
    loginset = loginsets[0]
    port = int((loginset["spec"].get("service") or {}).get("port", 22))
    return LoginTarget(namespace_of(loginset), loginset_service_name(loginset), port)


def service_address(target: LoginTarget, context: str | None = None) -> str:
    """The hostname (or IP) of the Service's load balancer."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise LoginError("login reads the cluster with the Kubernetes client: pip install kubernetes==36.0.3 (the "
                         "agent's pin; `make setup-extras` installs it)") from None
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError

    try:
        # KUBECONFIG read now: the client reads it once, when first imported (kubernetes/config/kube_config.py).
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None, context=context)
        service = client.CoreV1Api().read_namespaced_service(target.service, target.namespace,
                                                            _request_timeout=30)
    except HTTPError as exc:
        raise LoginError(f"cannot reach the cluster's Kubernetes API ({exc.__class__.__name__}): from where you are, "
                         "the EKS endpoint must be reachable (network.apiPublicCidrs, or a VPN into the VPC)") from None
    except (ConfigException, OSError) as exc:
        raise LoginError(f"no kubeconfig for the cluster ({exc}): run `aws eks update-kubeconfig --name <cluster> "
                         "--region <region>` (the stack's clusterName and region outputs)") from None
    except ApiException as exc:
        raise LoginError(f"the Kubernetes API answered {exc.status} {exc.reason} for Service "
                         f"{target.namespace}/{target.service}: is the stack deployed, and may you read Services "
                         "there?") from None
    ingress = (service.status.load_balancer.ingress or []) if service.status and service.status.load_balancer else []
    for point in ingress:
        if point.hostname or point.ip:
            return str(point.hostname or point.ip)
    raise LoginError(f"Service {target.namespace}/{target.service} has no load balancer address yet: AWS is still "
                     "creating its NLB (a few minutes after `pulumi up`); try again")


def ssh_argv(user: str, host: str, port: int) -> list[str]:
    return ["ssh", "-p", str(port), f"{user}@{host}"]
