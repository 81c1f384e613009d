#!/bin/sh
# Adds the people declared in the stack (`slurm.identity.users`) to a Slurm pod before its daemons start, and
# again whenever they change (the identity-sync sidecar, identity-sync.sh, runs it on the running pod).
# An init container runs it in the pod's own image (components/slinky/identity.py); the daemon's container
# then mounts what it wrote: etc/passwd, etc/group and etc/shadow (each begun as a copy of the image's) and,
# on the login pod, etc/ssh/authorized_keys/<user>. On the login pod it also creates missing homes, and each
# person's private directories for job output and checkpoints on /shared (the job scripts write there:
# jobs/templates/base.sbatch.j2): nobody else may read a person's logs or touch their checkpoints.
#
# Environment:
#   IDENTITY_SOURCE  the identity ConfigMap's directory: passwd, group and shadow lines, <user>.keys
#   IDENTITY_ROOT    where everything is written, as if it were / (the pod's emptyDir; a temp dir in tests)
#   IDENTITY_SEED    the image's /etc: a missing $IDENTITY_ROOT/etc/<file> begins as its copy when readable
#                    (slurmctld and slurmrestd run as non-root users, who cannot read shadow: they get none)
#   IDENTITY_LOGIN   1 on the login pod: install keys and create homes (the pod mounts /shared under the root)
#   IDENTITY_SHARED  on the login pod, where /shared is seen under the root (default /shared)
#
# Existing entries are never changed. A declared name already there with another ID, or a declared ID already
# used by another name, stops the pod: a person must have the same UID on every pod.
set -eu

src=${IDENTITY_SOURCE:?IDENTITY_SOURCE is the identity ConfigMap directory}
root=${IDENTITY_ROOT:-}
etc=$root/etc

fail() {
  echo "identity-setup: $*" >&2
  exit 1
}

if [ -n "${IDENTITY_SEED:-}" ]; then
  mkdir -p "$etc"
  for file in passwd group shadow; do
    if [ ! -e "$etc/$file" ] && [ -r "$IDENTITY_SEED/$file" ]; then
      cp -p "$IDENTITY_SEED/$file" "$etc/$file"
    fi
  done
fi

# field FILE NAME N: field N of NAME's entry in FILE (empty when NAME has none).
field() {
  awk -F: -v name="$2" -v n="$3" '$1 == name { print $n; exit }' "$1"
}

# add FILE LINES COMPARE_IDS: append each line of LINES whose name FILE lacks. With COMPARE_IDS, field 3 is
# the UID or GID: it must match the entry already there, and no other name may hold it.
add() {
  file=$1
  [ -e "$file" ] || fail "$file is missing"
  if [ -s "$file" ] && [ -n "$(tail -c 1 "$file")" ]; then
    echo >>"$file"  # the last entry lacks its newline: appending would join two entries
  fi
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    name=${line%%:*}
    id=$(echo "$line" | cut -d: -f3)
    if [ -n "$(field "$file" "$name" 1)" ]; then
      have=$(field "$file" "$name" 3)
      if [ "$3" = 1 ] && [ "$have" != "$id" ]; then
        fail "$name has ID $have in $file, but the stack gives it $id"
      fi
      continue
    fi
    if [ "$3" = 1 ]; then
      other=$(awk -F: -v id="$id" '$3 == id { print $1; exit }' "$file")
      [ -z "$other" ] || fail "ID $id of $name already belongs to $other in $file"
    fi
    printf '%s\n' "$line" >>"$file"
  done <"$2"
}

add "$etc/passwd" "$src/passwd" 1
add "$etc/group" "$src/group" 1
if [ -e "$etc/shadow" ]; then
  add "$etc/shadow" "$src/shadow" 0
fi

[ "${IDENTITY_LOGIN:-}" = 1 ] || exit 0

# sshd's StrictModes accepts a key file only if it and every directory above it are owned by root (or the
# user) and writable by nobody else.
keys=$etc/ssh/authorized_keys
mkdir -p "$keys"
chown 0:0 "$keys"
chmod 0755 "$keys"
for file in "$src"/*.keys; do
  [ -e "$file" ] || continue
  user=$(basename "$file" .keys)
  cp "$file" "$keys/.$user"
  chown 0:0 "$keys/.$user"
  chmod 0644 "$keys/.$user"
  mv -f "$keys/.$user" "$keys/$user"
done
# A person removed from the stack (or left with no key) logs in no more: their key file goes.
for file in "$keys"/*; do
  [ -e "$file" ] || continue
  user=$(basename "$file")
  [ -e "$src/$user.keys" ] || rm -f "$file"
done

while IFS=: read -r name _ uid gid _ home _; do
  [ -n "$name" ] || continue
  if [ ! -e "$root$home" ]; then
    mkdir -p "$(dirname "$root$home")"
    mkdir -m 0700 "$root$home"
    chown "$uid:$gid" "$root$home"
  fi
done <"$src/passwd"

# /shared/logs, checkpoints, images (enroot imports) and neuron-cache (compiled graphs): sticky and open, so a
# person the stack does not declare (a directory user) can make their own there and nobody can remove another's;
# each declared person's made here, private. The job scripts use only their user's own (jobs/templates/
# own_directory.sh): nothing one person writes there is run or loaded by another's job.
shared=$root${IDENTITY_SHARED:-/shared}
for dir in logs checkpoints images neuron-cache; do
  mkdir -p "$shared/$dir"
  chown 0:0 "$shared/$dir"
  chmod 1777 "$shared/$dir"
done
while IFS=: read -r name _ uid gid _; do
  [ -n "$name" ] || continue
  for dir in logs checkpoints images neuron-cache; do
    own=$shared/$dir/$name
    if [ -L "$own" ] || { [ -e "$own" ] && [ ! -d "$own" ]; }; then
      fail "$own is not a directory: remove it so that $name's ${dir} can be made there"
    fi
    [ -d "$own" ] || mkdir -m 0700 "$own"
    chown "$uid:$gid" "$own"
    chmod 0700 "$own"
  done
done <"$src/passwd"
