"""`kubectl` against the twin: the two commands scripts/change/cluster_facts.py sends (`get pods -l SELECTOR -o
jsonpath={.items[*].metadata.name}` and `exec POD -c CONTAINER -- ARGV`), answered by the twin's pods, so the same
KubectlFacts that asks a real cluster asks the twin. `exec` runs as the container's securityContext user, as the
kubelet's exec does (CRI ExecSync runs in the container's process context)."""

from __future__ import annotations

from collections.abc import Callable

from scripts.change.cluster_facts import FactsUnavailable
from scripts.twin.cluster import CONTAINER_PATH, Twin
from scripts.twin.errors import TwinError


def runner(twin: Twin) -> Callable[[list[str]], str]:
    def run(argv: list[str]) -> str:
        args = _without_globals(argv[1:])
        if args[:2] == ["get", "pods"] and "-l" in args:
            key, _, value = args[args.index("-l") + 1].partition("=")
            names = [p.name for p in twin.pods.values() if p.running is not None and p.labels.get(key) == value]
            return " ".join(sorted(names))
        if args[:1] == ["exec"] and "--" in args:
            pod, command = args[1], args[args.index("--") + 1:]
            container = args[args.index("-c") + 1] if "-c" in args else None
            running = twin.pods[pod].started
            spec = next((c for c in running.spec.containers if c.name == container), running.spec.containers[0])
            if spec.run_as is not None:
                uid, gid = spec.run_as
                command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *command]
            try:
                return running.exec(command, container=spec.name, env={"PATH": CONTAINER_PATH}, timeout=60).stdout
            except TwinError as exc:
                raise FactsUnavailable(str(exc)) from None
        raise FactsUnavailable(f"the twin's kubectl does not answer {' '.join(argv)}")
    return run


def _without_globals(args: list[str]) -> list[str]:
    """Drop `--context C` and `-n NS` (the twin has one cluster; its Slurm pods are in the slurm namespace)."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--context", "-n", "--namespace"):
            skip = True
        else:
            out.append(arg)
    return out
