"""The `slurm-eks` console script as users run it: exit codes, messages, files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.config.helpers import raw_config

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "slurm-eks"


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(CLI), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def _stack_dir(tmp_path: Path, name: str, raw: dict) -> Path:
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    return tmp_path


def test_validate_shipped_stacks() -> None:
    for stack in ("dev", "prod"):
        result = run("validate", "--stack", stack)
        assert result.returncode == 0, result.stderr
        assert f"stack {stack}: valid" in result.stdout


def test_validate_refuses_a_stack_file_without_a_kms_secrets_provider(tmp_path: Path) -> None:
    result = run("validate", "--stack", "nokms", "--stacks-dir", str(_stack_dir(tmp_path, "nokms", raw_config("dev"))))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error[secrets-provider] secretsprovider\n    no secrets provider" in result.stderr
    assert "awskms://alias/" in result.stderr


def test_validate_bad_fsx_capacity_exits_2_naming_path_and_allowed_values(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = 1000
    raw["slurm"]["login"]["rootSshKeys"] = ["hello"]
    result = run("validate", "--stack", "bad", "--stacks-dir", str(_stack_dir(tmp_path, "bad", raw)))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "2 errors" in result.stderr
    assert "storage.fsx.capacityGiB" in result.stderr and "1200, 2400, or a multiple of 2400" in result.stderr
    assert "value: 1000" in result.stderr
    assert "slurm.login.rootSshKeys[0]" in result.stderr and "not an OpenSSH public key" in result.stderr


def test_plan_of_a_bad_config_creates_nothing(tmp_path: Path) -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["instanceTypes"] = ["g5.12xlarg"]
    out = tmp_path / "out"
    result = run("plan", "--stack", "bad", "--stacks-dir", str(_stack_dir(tmp_path, "bad", raw)), "--out", str(out))
    assert result.returncode == 2 and "did you mean g5.12xlarge" in result.stderr
    assert not out.exists()


def test_plan_then_diff(tmp_path: Path) -> None:
    first = run("plan", "--stack", "prod", "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    assert "eks slurm-eks:index:EksCluster" in first.stdout and "x aws:ec2/subnet:Subnet" in first.stdout
    plan = json.loads((tmp_path / "a" / "plan.json").read_text())
    assert {r["type"] for r in plan["resources"]} >= {"eks:index:Cluster", "aws:ec2/vpc:Vpc", "aws:kms/key:Key"}

    raw = raw_config("prod")
    raw["systemNodes"]["maxSize"] = 6
    stacks = _stack_dir(tmp_path, "prod", raw)
    assert run("plan", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(tmp_path / "b")).returncode == 0

    same = run("diff", str(tmp_path / "a"), str(tmp_path / "a" / "plan.json"), "--exit-code")
    assert same.returncode == 0 and same.stdout == "No changes.\n"
    changed = run("diff", str(tmp_path / "a"), str(tmp_path / "b"), "--exit-code")
    assert changed.returncode == 1
    assert "0 to add, 1 to change, 0 to remove" in changed.stdout
    assert "inputs.scalingConfig.maxSize: 4 -> 6" in changed.stdout
    md = run("diff", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "markdown")
    assert md.returncode == 0 and "| `inputs.scalingConfig.maxSize` | `4` | `6` |" in md.stdout


def test_diff_of_a_missing_plan_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{}")
    result = run("diff", str(tmp_path / "x.json"), str(tmp_path / "x.json"))
    assert result.returncode == 2 and "cannot read plan" in result.stderr and "Traceback" not in result.stderr


def test_validate_with_crds_checks_every_manifest(tmp_path: Path, crds_dir: Path) -> None:
    ok = run("validate", "--stack", "prod", "--crds", str(crds_dir))
    assert ok.returncode == 0, ok.stderr
    assert "manifests valid against" in ok.stdout
    # A stricter NodePool schema (weight required) that the shipped NodePools do not satisfy.
    crd = yaml.safe_load((crds_dir / "karpenter" / "karpenter.sh_nodepools.yaml").read_text())
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"].setdefault("required", []).append("weight")
    (tmp_path / "nodepools.yaml").write_text(yaml.safe_dump(crd))
    bad = run("validate", "--stack", "prod", "--crds", str(tmp_path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "NodePool/gpu-h100" in bad.stderr and "weight" in bad.stderr


def test_validate_with_crds_without_the_manifests_extra_says_what_to_install(crds_dir: Path) -> None:
    # `make plan` installs the runtime only: jsonschema (the `manifests` extra) is then missing.
    code = ("import sys; sys.modules['jsonschema'] = None; sys.argv = ['slurm-eks', *sys.argv[1:]]\n"
            "from scripts.cli.entry import main; main()")
    result = subprocess.run([sys.executable, "-c", code, "validate", "--stack", "dev", "--crds", str(crds_dir)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "(jsonschema is missing): pip install -e '.[manifests]' (or make setup-extras)" in result.stderr


def test_plan_out_onto_an_existing_file_is_one_line(tmp_path: Path) -> None:
    existing = tmp_path / "plan.txt"
    existing.write_text("keep me")
    result = run("plan", "--stack", "dev", "--out", str(existing))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: --out {existing} is a file; give a directory (it is created if missing)"
    assert existing.read_text() == "keep me"


def test_validate_counts_read_in_the_singular_and_plural(tmp_path: Path) -> None:
    raw = raw_config("dev")
    raw["storage"]["fsx"]["capacityGiB"] = 1000
    result = run("validate", "--stack", "bad", "--stacks-dir", str(_stack_dir(tmp_path, "bad", raw)))
    assert "1 error in slurm-eks:cluster" in result.stderr and "1 errors" not in result.stderr
    ok = run("validate", "--stack", "dev")
    assert "1 partitions" not in ok.stdout and "1 warnings" not in ok.stdout


def test_messages_keep_their_brackets_and_name_the_file(tmp_path: Path) -> None:
    """Terminal markup never eats a message: a YAML error's snippet keeps `[bold]` and `[...]` as written."""
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  slurm-eks:cluster:\n    region: [us-west-2, [bold]x]]\n")
    result = run("validate", "--stack", "bad", "--stacks-dir", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "region: [us-west-2, [bold]x]]" in result.stderr and "<unicode string>" not in result.stderr
    assert f'in "{tmp_path / "Pulumi.bad.yaml"}", line 3' in result.stderr


def test_a_stack_file_given_as_the_stack_is_answered_with_its_name() -> None:
    result = run("validate", "--stack", "stacks/Pulumi.dev.yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--stack takes a stack's name, not its file" in result.stderr
    assert "fix: --stack dev (the file is <stacks-dir>/Pulumi.<stack>.yaml)" in result.stderr
    assert "(none)" not in result.stderr


def test_version_is_the_packages() -> None:
    from importlib.metadata import version

    result = run("--version")
    assert result.returncode == 0 and result.stdout == f"slurm-eks {version('slurm-eks')}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_complete_commands_and_options(shell: str) -> None:
    script = run("completion", shell)
    assert script.returncode == 0 and "_SLURM_EKS_COMPLETE" in script.stdout
    # What the script asks the program when <Tab> is pressed after `slurm-eks job re` (bash's protocol).
    env = {**os.environ, "_SLURM_EKS_COMPLETE": "complete_bash", "COMP_WORDS": "slurm-eks job re", "COMP_CWORD": "2"}
    answer = subprocess.run([str(CLI)], capture_output=True, text=True, env=env, timeout=60)
    assert answer.stdout.split() == ["render"]
    env.update(COMP_WORDS="slurm-eks validate --st", COMP_CWORD="2")
    answer = subprocess.run([str(CLI)], capture_output=True, text=True, env=env, timeout=60)
    assert set(answer.stdout.split()) == {"--stack", "--stacks-dir"}


def test_help_imports_no_config_model_nor_renderer() -> None:
    """`--help` must start fast (issue 31: under 0.5 s; benchmarks/bench_cli.py times it): the pydantic models,
    jinja2's renderer and boto3 are imported by the commands that use them, not by the command line itself."""
    code = ("import sys; sys.argv = ['slurm-eks', '--help']\n"
            "from scripts.cli.entry import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('pydantic', 'jinja2', 'boto3', 'pulumi', 'jobs.render',"
            " 'components.config.cluster') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "Usage: slurm-eks" in result.stdout, result.stderr
    assert "HEAVY []" in result.stderr, result.stderr
