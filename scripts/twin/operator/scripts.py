"""The shell scripts the operator embeds in its sidecar and init containers, as behavioural equivalents.

The operator runs each as `sh -c <script>` (logfile, initconf) or `tini -g -- bash -c <script>` (reconfigure).
The upstream files are not copied here; each constant below is this project's own script doing what the
upstream one does, described with its source:

* LOGFILE: slurm-operator v1.2.1 internal/builder/common/scripts/logfile.sh. Makes the FIFO named by $SOCKET
  (default /tmp/logfile.log; the operator sets /var/log/slurm/slurmctld.log or slurmd.log) with mode 777,
  replacing a non-FIFO file there, and copies whatever is written into it to stdout forever (retrying every
  second); exits 0 on TERM and 1 on INT/HUP. slurmctld/slurmd write their log file into that FIFO, so the
  daemon's log is the sidecar's stdout.
* INITCONF: slurm-operator v1.2.1 internal/builder/common/scripts/initconf.sh. Copies every *.conf and *.key
  file under /mnt/slurm into /mnt/etc/slurm (the emptyDir later mounted at /etc/slurm), owns them 401:401,
  makes *.conf 644, slurmdbd.conf and *.key 600, and lists the directory. Scripts and other files are NOT
  copied.
* RECONFIGURE: slurm-operator v1.2.1 internal/builder/controllerbuilder/scripts/reconfigure.sh. Every 5 s,
  hashes every file under /etc/slurm (skipping kubelet's `..` projection directories); when the hash changes,
  runs `scontrol reconfigure` until it succeeds.
"""

from __future__ import annotations

LOGFILE = """set -eu
SOCKET="${SOCKET:-/tmp/logfile.log}"
trap 'exit 0' TERM
trap 'exit 1' INT HUP
mkdir -p "$(dirname "$SOCKET")"
if [ ! -p "$SOCKET" ]; then rm -f "$SOCKET"; mkfifo -m 777 "$SOCKET"; fi
while :; do cat "$SOCKET" || true; sleep 1; done
"""

INITCONF = """set -eu
src=/mnt/slurm
dst=/mnt/etc/slurm
mkdir -p "$dst"
find "$src" -type f \\( -name '*.conf' -o -name '*.key' \\) -exec cp -v {} "$dst"/ \\;
find "$dst" -type f -exec chown 401:401 {} +
find "$dst" -type f -name '*.conf' -exec chmod 644 {} +
find "$dst" -type f \\( -name slurmdbd.conf -o -name '*.key' \\) -exec chmod 600 {} +
ls -lAF "$dst"
"""

RECONFIGURE = """set -euo pipefail
dir=/etc/slurm
digest() {
  find "$dir" -path '*/..*' -prune -o \\( -type f -o -type l \\) -exec sha256sum {} \\; | sort -k2 | sha256sum
}
last="$(digest)"
while :; do
  now="$(digest)"
  if [ "$now" != "$last" ]; then
    until scontrol reconfigure; do sleep 2; done
    last="$now"
  fi
  sleep 5
done
"""
