#!/bin/sh
# The identity sidecar (components/slinky/identity.py): re-runs setup.sh whenever the identity ConfigMap's files
# change, so people added to the stack (or their keys) reach the running login, slurmctld and slurmrestd pods
# without a restart. The kubelet rewrites the ConfigMap's volume in place when the object changes; setup.sh
# appends to the files the daemon container has bound and rewrites the key files sshd reads at each login.
#
# Environment: what setup.sh takes (IDENTITY_SOURCE, IDENTITY_ROOT, ...), and
#   IDENTITY_SYNC_SECONDS  how often to compare the ConfigMap's files (default 10)
set -u

src=${IDENTITY_SOURCE:?IDENTITY_SOURCE is the identity ConfigMap directory}
interval=${IDENTITY_SYNC_SECONDS:-10}

digest() {
  cat "$src"/* 2>/dev/null | cksum
}

applied=""
while :; do
  now=$(digest)
  if [ "$now" != "$applied" ]; then
    # setup.sh only adds what is missing: a look taken while files change is completed by the next one.
    if sh "$src/setup.sh"; then
      applied=$now
      echo "identity-sync: applied the identity ConfigMap ($now)"
    else
      echo "identity-sync: setup failed (above); the pod keeps its people, retrying in ${interval}s" >&2
    fi
  fi
  sleep "$interval"
done
