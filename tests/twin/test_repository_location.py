"""The twin refuses, in one sentence, a checkout its jobs cannot see: every Slurm job gets a /tmp and /dev/shm of its
own (job_container.conf Dirs, components/slinky/slurm_conf.py), and the twin's jobs run the checkout's torchrun.
Found by a rehearsal in a clone under /tmp, whose journeys failed with `torchrun: not found` (exit 127)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.slinky.slurm_conf import JOB_CONTAINER_CONF, JOB_PRIVATE_DIRS
from scripts.twin.cluster import check_repository_location
from scripts.twin.errors import TwinError


@pytest.mark.parametrize("repo", ["/tmp/fresh.1YVV/main", "/dev/shm/main"])
def test_a_checkout_under_a_jobs_private_directory_is_refused(repo: str) -> None:
    with pytest.raises(TwinError, match=r"under /(tmp|dev/shm), which every Slurm job sees as its own empty "
                                         r"directory .* Clone it outside /tmp, /dev/shm$"):
        check_repository_location(Path(repo))


@pytest.mark.parametrize("repo", ["/work/main", "/var/tmp/main", "/tmpfoo/main"])
def test_a_checkout_elsewhere_is_taken(repo: str) -> None:
    check_repository_location(Path(repo))


def test_the_private_directories_are_the_ones_slurm_is_given() -> None:
    assert f"Dirs={','.join(JOB_PRIVATE_DIRS)}\n" in JOB_CONTAINER_CONF
