"""A twin pod's first process: what a container runtime does for one Kubernetes pod, on this machine.

Started by scripts/twin/pods.py as PID 1 of new mount, UTS, IPC and PID namespaces inside the pod's network
namespace (`ip netns exec ... unshare ...`), with a JSON description of the pod (PodRuntimeSpec). It

1. names the host (a pod's hostname is its name: Slurm node names come from it);
2. builds the pod's root file system: an overlay whose lower layers are the image layer (scripts/twin/images.py)
   and this machine's root, whose upper layer is a tmpfs, so nothing the pod writes outside its volumes
   reaches the machine (Slinky's entrypoints edit /etc/pam.d and write host keys, as in their image);
3. gives it fresh /proc, /sys and /dev (with stand-in device nodes) and the twin's /etc/hosts;
4. runs the init containers in order, each to completion, then the containers, each in a mount namespace of
   its own with its volume mounts, whose root is the pod's root (pivot_root, as runc does: a chroot would not
   do, because a process that joins a mount namespace with setns(2) gets that namespace's root, so Slurm's
   namespace/tmpfs plugin, which keeps each job's namespace and joins it for every step, would land its jobs
   outside the container);
5. reaps every orphan (it is PID 1), and ends the pod when a container ends or on SIGTERM (sent on to the
   containers, then SIGKILL after the grace period).

Standard library only: it runs before any pivot_root, with the machine's Python.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
MNT_DETACH = 2
# _IOR(NSIO=0xb7, 0x5, __u64): a mount namespace's id (include/uapi/linux/nsfs.h, Linux 6.8+).
NS_GET_MNTNS_ID = 0x8008B705
SYS_PIVOT_ROOT = 155  # x86_64 (arch/x86/entry/syscalls/syscall_64.tbl); the twin runs on x86_64 only
GRACE_S = 10.0
# Device nodes every container gets from the machine (runc's default devices, minus tty consoles).
DEFAULT_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"pod: `{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()}")


def _mount_namespace_id(fd: int) -> int:
    return int(struct.unpack("Q", fcntl.ioctl(fd, NS_GET_MNTNS_ID, bytes(8)))[0])


def _unshare_mounts_below_all() -> None:
    """A new mount namespace whose id is below every id this machine's kernel will hand out next.

    Why: Slurm's namespace/tmpfs keeps each job's namespace by bind-mounting /proc/<pid>/ns/mnt, and the kernel
    refuses that (EINVAL, mnt_ns_loop) unless the job's namespace has a larger id than the caller's. Since Linux
    6.18 ("mnt: support ns lookup") ids come from per-CPU batches, so a namespace made later on another CPU can get
    a smaller id, and 1 job in 4 failed here with "_create_ns: ns base mount failed: Invalid argument"
    (canonical/snapd#17376 works around the same). The EKS AL2023 AMIs the nodes run carry kernel 6.1 or 6.12
    (awslabs/amazon-eks-ami#2377), which hand ids out in order: this is the twin matching them, not a fix Slurm
    needs there. One namespace per CPU, keep the smallest: every CPU's next id is above the one it just gave."""
    cpus = sorted(os.sched_getaffinity(0))
    made: list[tuple[int, int]] = []
    try:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            if _libc.unshare(CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
            fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
            made.append((_mount_namespace_id(fd), fd))
        if _libc.setns(min(made)[1], CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNS)")
    finally:
        os.sched_setaffinity(0, cpus)
        for _, fd in made:
            os.close(fd)
    _run("mount", "--make-rprivate", "/")


def _pivot_into(root: Path) -> None:
    """Make `root` this mount namespace's root and drop the machine's (pivot_root(".", ".") then detach the old
    root stacked under it: pivot_root(2) NOTES). Python has no binding for pivot_root, hence the raw syscall."""
    os.chdir(root)
    if _libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0:
        raise OSError(ctypes.get_errno(), f"pivot_root({root})")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount2(old root)")
    os.chdir("/")


def _ensure_target(target: Path, like: Path) -> None:
    """A mount point of the same kind (file or directory) as what is mounted there."""
    if like.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def in_root(root: Path, target: str) -> Path:
    """`target` as the container sees it, under `root`: symbolic links on the way (/var/run -> /run) are
    followed inside the root, never out to this machine's files."""
    where = root
    for part in Path(target).parts[1:]:
        candidate = where / part
        hops = 0
        while candidate.is_symlink() and hops < 40:
            link = os.readlink(candidate)
            candidate = (root / link.lstrip("/")) if link.startswith("/") else (candidate.parent / link)
            hops += 1
        where = candidate
    return where


def bind(source: str, root: Path, target: str, readonly: bool = False) -> None:
    if not os.path.exists(source):  # a subPath nothing wrote: the kubelet makes it a directory
        os.makedirs(source)
    where = in_root(root, target)
    _ensure_target(where, Path(source))
    _run("mount", "--bind", source, str(where))
    if readonly:
        _run("mount", "-o", "remount,bind,ro", str(where))


def merge_tree(source: Path, where: Path, keep: Path) -> None:
    """`source`'s entries added to directory `where` (in sysfs, where nothing can be made): a tmpfs over `where`
    holding a bind of each of `source`'s entries and of each entry `where` had, kept through a bind at `keep`."""
    keep.mkdir(parents=True)
    _run("mount", "--rbind", str(where), str(keep))
    _run("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(where))
    for base in (source, keep):
        for entry in sorted(base.iterdir()):
            target = where / entry.name
            if target.exists() or target.is_symlink():
                continue
            _ensure_target(target, entry)
            _run("mount", "--rbind", str(entry), str(target))


def build_root(spec: dict[str, Any]) -> Path:
    layer = Path(spec["layer_dir"])
    layer.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(layer))
    upper, work, root = layer / "upper", layer / "work", layer / "root"
    for directory in (upper, work, root):
        directory.mkdir()
    # Overlay refuses a lower layer inside another (the machine's root holds the image layers): each image
    # layer (a few files and links) is copied onto the tmpfs first.
    lowers = []
    for index, image in enumerate(spec["lowerdirs"][:-1]):
        copy = layer / f"image{index}"
        _run("cp", "-a", image, str(copy))
        lowers.append(str(copy))
    lower = ":".join([*lowers, spec["lowerdirs"][-1]])
    _run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}", str(root))
    _run("mount", "-t", "proc", "proc", str(root / "proc"))
    _run("mount", "-t", "sysfs", "sysfs", str(root / "sys"))
    _run("mount", "--rbind", "/sys/fs/cgroup", str(root / "sys/fs/cgroup"))
    dev = root / "dev"
    _run("mount", "-t", "tmpfs", "-o", "mode=0755,nosuid", "tmpfs", str(dev))
    for name in DEFAULT_DEVICES:
        bind(f"/dev/{name}", root, f"/dev/{name}")
    (dev / "pts").mkdir()
    _run("mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620", "devpts", str(dev / "pts"))
    (dev / "ptmx").symlink_to("pts/ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        (dev / name).symlink_to(target)
    (dev / "shm").mkdir()
    _run("mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", str(dev / "shm"))
    for device in spec.get("devices", []):
        path = dev / device["path"].removeprefix("/dev/")
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(path, 0o666 | 0o020000, os.makedev(device["major"], device["minor"]))
    for index, tree in enumerate(spec.get("trees", [])):  # stand-in /proc and /sys entries (driver files)
        if tree.get("merge"):
            merge_tree(Path(tree["source"]), in_root(root, tree["target"]), layer / f"merged{index}")
        else:
            bind(tree["source"], root, tree["target"], readonly=True)
    bind(spec["hosts_file"], root, "/etc/hosts", readonly=True)
    # No DNS server: names come from /etc/hosts, and a lookup of anything else fails at once.
    (root / "etc/resolv.conf").unlink(missing_ok=True)
    (root / "etc/resolv.conf").write_text("# twin: names are in /etc/hosts\n")
    return root


def _host_pid() -> int:
    """This process's PID as the machine sees it (the first NSpid field of the machine's /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[1])
    return os.getpid()


def start_container(container: dict[str, Any], root: Path, status_dir: Path) -> int:
    """Fork a container: own mount namespace, its mounts, the pod's root, env, exec. Returns its PID (here)."""
    log = open(container["log"], "ab", buffering=0)  # noqa: SIM115 (handed to the child)
    if container.get("run_as"):  # a program that reopens /dev/stdout (supervisord) must be let in
        os.fchown(log.fileno(), *container["run_as"])
    pid = os.fork()
    if pid:
        log.close()
        return pid
    try:
        os.setsid()
        host_pid = _host_pid()
        # Written last, just before exec: whoever reads it may enter the container at once (pods.py exec).
        status_fd = os.open(status_dir, os.O_RDONLY | os.O_DIRECTORY)
        pid_name = f"{container['name']}.pid"
        pid_file = os.open(f".{pid_name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=status_fd)
        _unshare_mounts_below_all()
        for mount in container.get("mounts", []):
            bind(mount["source"], root, mount["target"], mount.get("readonly", False))
        _pivot_into(root)
        os.chdir(container.get("workdir") or "/")
        os.write(pid_file, str(host_pid).encode())
        os.close(pid_file)
        os.rename(f".{pid_name}", pid_name, src_dir_fd=status_fd, dst_dir_fd=status_fd)
        os.close(status_fd)
        if container.get("run_as"):
            uid, gid = container["run_as"]
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.execvpe(container["command"][0], container["command"], container["env"])
    except BaseException as exc:
        os.write(log.fileno(), f"twin: container {container['name']} did not start: {exc}\n".encode())
        os._exit(127)


class Pod:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.status_dir = Path(spec["status_dir"])
        self.running: dict[int, str] = {}
        self.exits: dict[str, int] = {}
        self.stopping = False
        self.exit_code = 0

    def _reap(self, block: bool) -> tuple[str, int] | None:
        """Reap one child; return (container, exit status) when it was a container."""
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        name = self.running.pop(pid, None)
        if name is None:
            return ("", 0)  # an orphan of some container, reparented to us
        self.exits[name] = os.waitstatus_to_exitcode(status)
        return (name, self.exits[name])

    def _terminate(self, _signum: int = 0, _frame: object = None) -> None:
        self.stopping = True
        for pid in self.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)

    def run(self) -> int:
        (self.status_dir / "init.pid").write_text(str(_host_pid()))
        socket.sethostname(self.spec["hostname"])
        root = build_root(self.spec)
        signal.signal(signal.SIGTERM, self._terminate)
        for container in self.spec["init_containers"]:
            pid = start_container(container, root, self.status_dir)
            self.running[pid] = container["name"]
            while pid in self.running:
                self._reap(block=True)
            code = self.exits[container["name"]]
            if code != 0:
                (self.status_dir / "failed").write_text(f"init container {container['name']} exited {code}\n")
                return code
        for container in self.spec["containers"]:
            self.running[start_container(container, root, self.status_dir)] = container["name"]
        (self.status_dir / "started").write_text(str(time.time()))
        while self.running:
            reaped = self._reap(block=True)
            if reaped and reaped[0] and not self.stopping:
                name, code = reaped
                if code == 0 and self.spec.get("restart_policy") in ("Never", "OnFailure"):
                    if not self.running:  # a Job's pod: done when its containers are
                        (self.status_dir / "succeeded").write_text(f"container {name} exited 0\n")
                    continue
                (self.status_dir / "failed").write_text(f"container {name} exited {code}\n")
                self.exit_code = code or 1
                self._terminate()
                break
        deadline = time.monotonic() + GRACE_S
        while self.running and time.monotonic() < deadline:
            if self._reap(block=False) is None:
                time.sleep(0.1)
        for pid in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        return self.exit_code


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    raise SystemExit(Pod(spec).run())


if __name__ == "__main__":
    main()
