#!/usr/bin/env bash
# `make rehearse`: the README's first commands, as a new user runs them, on a fresh Debian 12 (bookworm) root.
#
# CI runs on a machine where packages installed by hand are still present, so a missing install step can pass
# there. This takes a clean clone of the repository's committed HEAD (uncommitted work is NOT included) into a
# fresh debootstrap'ed minbase root and runs, as root, with CI=true and no AWS_* variables, each line of the
# README's first ```bash block (its prerequisites line, `make plan`, `make test`), timing each one. Exit 0 when
# every line passes; otherwise the failing phase is named and the exit status is non-zero.
#
# Isolation: the root runs in its own mount, PID, network, IPC and UTS namespaces (unshare). Every mount (the
# root bound onto itself, so that / is a mount point there as on a machine; /proc; /sys with this machine's
# cgroup hierarchy; /dev, /dev/pts, /dev/shm; /run as a tmpfs; read-only binds of ../shared and of the
# directories this machine's pip config names) lives only in that mount namespace, so none is ever visible to,
# or left on, this machine: an exit trap unmounts them, and the kernel drops them in any case when the
# namespace's last process ends (its PID 1 takes every daemon the tests started with it; Ctrl-C, or even
# SIGKILL of this script, ends that PID 1). The network namespace has its own loopback (the tests' Slurm,
# MariaDB and slapd ports cannot clash with this machine's) and reaches the package registries through a veth
# pair and an nftables masquerade (table slurm_eks_rehearse, with net.ipv4.ip_forward on), undone on exit, or
# by the next rehearsal after a SIGKILL.
#
# This machine's settings are carried in, so the root reaches the same mirrors: apt sources and the apt.conf.d
# files that set Acquire:: options, extra CA certificates (/usr/local/share/ca-certificates: picked up when the
# README's line installs ca-certificates), pip's config files and PIP_* variables, and read-only binds of the
# local directories they name (find-links, file:// indexes).
#
# Needs root on Linux (debootstrap, mount, unshare, nft; debootstrap is installed with apt-get when missing).
# The debootstrap result is cached as build/rehearse/bookworm-minbase.tar; every rehearsal starts from a new
# extraction into build/rehearse/root, which is deleted after a pass and kept after a failure for inspection.
#
# Environment: REHEARSE_REPO=DIR rehearses DIR's HEAD instead (e.g. a scratch clone with a candidate commit;
# it is placed at this repository's path inside the root); REHEARSE_MIRROR=URL for debootstrap (default: the
# first Debian URI of this machine's apt sources); REHEARSE_KEEP=1 keeps the root after a pass.
set -euo pipefail

SUITE=bookworm
GUEST_HOSTNAME=rehearse
HOST_IF=rehearse0        # the veth end on this machine; its peer becomes eth0 in the root's namespace
NET=10.213.13            # a /30: .1 here, .2 in the root
NFT_TABLE=slurm_eks_rehearse
GUEST_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'rehearse: %s\n' "$*"; }
die() { say "error: $*" >&2; exit 1; }

# --- inside the namespaces: PID 1 of a new PID namespace, before chroot -------------------------------------

inner_cleanup() {
  local rc=$? m
  # PID 1 of its own PID namespace only: kill -1 there reaches the namespace's processes, nothing outside.
  if [ "$$" = 1 ]; then kill -KILL -1 2>/dev/null || true; wait 2>/dev/null || true; fi
  # Deepest first; lazily when something still holds one. The namespace's end drops any that remain.
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
  exit "$rc"
}

inner() {
  [ "$$" = 1 ] || die "--inner is run by tools/rehearse.sh itself, as PID 1 of a new PID namespace"
  : "${ROOT:?}" "${STATE:?}" "${GUEST_REPO:?}"
  trap inner_cleanup EXIT
  local i
  for ((i = 0; i < 300; i++)); do
    if [ -e "$STATE/net-ready" ]; then break; fi
    sleep 0.1
  done
  [ -e "$STATE/net-ready" ] || die "the network namespace was not configured"
  hostname "$GUEST_HOSTNAME"

  # The root a mount point of its own, as / is on a machine or in a container: else `unshare --mount` inside
  # (the sssd tests use it) cannot make / private ("cannot change root filesystem propagation").
  mount --bind "$ROOT" "$ROOT"
  mount -t proc -o nosuid,nodev,noexec proc "$ROOT/proc"
  mount -t sysfs -o nosuid,nodev,noexec sysfs "$ROOT/sys"
  # This machine's cgroup hierarchy, as a booted machine has one (slurmd refuses to start without it).
  if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup "$ROOT/sys/fs/cgroup"; fi
  # /dev as a container runtime makes it: a tmpfs with the usual nodes and a devpts instance of its own.
  mount -t tmpfs -o nosuid,mode=755,size=64k dev "$ROOT/dev"
  local spec name
  for spec in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    IFS=: read -r name maj min <<< "$spec"
    mknod -m 666 "$ROOT/dev/$name" c "$maj" "$min"
  done
  ln -s /proc/self/fd "$ROOT/dev/fd"
  ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
  ln -s /proc/self/fd/1 "$ROOT/dev/stdout"
  ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
  mkdir "$ROOT/dev/pts" "$ROOT/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$ROOT/dev/pts"
  ln -s pts/ptmx "$ROOT/dev/ptmx"
  mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$ROOT/dev/shm"
  # /run as on a booted machine: a tmpfs, seeded with what the image has there (/run/lock, ...).
  local seed
  seed="$(mktemp -d "$STATE/run-seed.XXXXXX")"
  cp -a "$ROOT/run/." "$seed/"
  mount -t tmpfs -o nosuid,nodev,mode=755 run "$ROOT/run"
  cp -a "$seed/." "$ROOT/run/"
  rm -rf "$seed"
  local dir
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    mkdir -p "$ROOT$dir"
    mount --bind "$dir" "$ROOT$dir"
    mount -o remount,bind,ro "$ROOT$dir"
  done < "$STATE/binds"

  # The user's environment: root's login basics, CI=true, this machine's pip and CA settings, nothing else
  # (no AWS_*, no MAKEFLAGS from the make that started us).
  local env=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash PATH="$GUEST_PATH" LANG=C.UTF-8
             TERM="${TERM:-dumb}" CI=true DEBIAN_FRONTEND=noninteractive)
  local var
  for var in $(compgen -e); do
    case "$var" in
      PIP_*|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|GIT_SSL_CAINFO) env+=("$var=${!var}") ;;
    esac
  done

  local cmd start rc n=0
  while IFS= read -r cmd; do
    n=$((n + 1))
    say "==> phase $n: $cmd   ($(date '+%H:%M:%S'), in $GUEST_REPO inside the root)"
    start=$SECONDS
    printf '%s\t%s\n' "$cmd" "$(date +%s)" > "$STATE/current"
    set +e
    chroot "$ROOT" /usr/bin/env -i "${env[@]}" /bin/bash -c \
      "cd $(printf '%q' "$GUEST_REPO") && set -o pipefail && $cmd" < /dev/null
    rc=$?
    set -e
    printf '%s\t%s\t%s\n' "$cmd" "$((SECONDS - start))" "$rc" >> "$STATE/phases"
    rm -f "$STATE/current"
    say "<== phase $n: $cmd: $((SECONDS - start))s, exit $rc"
    [ "$rc" = 0 ] || exit 3
  done < "$STATE/commands"
}

if [ "${1:-}" = --inner ]; then
  inner
  exit 0
fi

# --- on this machine ---------------------------------------------------------------------------------------

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mount, chroot, network namespaces)"
[ "$(uname -s)" = Linux ] || die "needs Linux"

self="$(realpath "$0")"
repo="$(git -C "$(dirname "$self")/.." rev-parse --show-toplevel)"
src="$(realpath "${REHEARSE_REPO:-$repo}")"
STATE="$repo/build/rehearse"
ROOT="$STATE/root"
tarball="$STATE/$SUITE-minbase.tar"
export STATE ROOT GUEST_REPO="$repo"
mkdir -p "$STATE"

exec 9> "$STATE/.lock"
flock -n 9 || die "another rehearsal holds $STATE/.lock"

names=() secs=() results=() failed=
t0=$SECONDS
record() { names+=("$1"); secs+=("$2"); results+=("$3"); }

summary() {
  local i
  say "phase timings:"
  for i in "${!names[@]}"; do
    printf '  %6ss  %-12s %s\n' "${secs[$i]}" "${results[$i]}" "${names[$i]}"
  done
  printf '  %6ss  total\n' "$((SECONDS - t0))"
}

mounts_under() {  # mount points at or below $1 in this machine's mount namespace
  awk -v r="$1" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}

remove_tree() {  # never through a mount point: unmount anything found there first
  local m
  while read -r m; do
    say "unmounting a leftover mount $m"
    umount "$m" 2>/dev/null || umount -l "$m"
  done < <(mounts_under "$1")
  rm -rf --one-file-system "$1"
}

net_down() {  # the veth pair, the masquerade, ip_forward as it was; also what a killed rehearsal left
  ip link del "$HOST_IF" 2>/dev/null || true
  nft delete table ip "$NFT_TABLE" 2>/dev/null || true
  if [ -f "$STATE/ip_forward.orig" ]; then
    cat "$STATE/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward
    rm -f "$STATE/ip_forward.orig"
  fi
  rm -f "$STATE/net-ready"
}

ns_pid=
host_cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$ns_pid" ] && kill -0 "$ns_pid" 2>/dev/null; then
    # unshare --kill-child: its death SIGKILLs the namespace's PID 1, and with it every process inside.
    kill -TERM "$ns_pid" 2>/dev/null || true
    wait "$ns_pid" 2>/dev/null || true
  fi
  net_down
  local left
  left="$(mounts_under "$ROOT")"
  if [ -n "$left" ]; then
    say "error: mounts left under $ROOT (unmounting): $left" >&2
    remove_tree "$ROOT"
    rc=1
  fi
  exit "$rc"
}
collected=
collect_phases() {  # the README commands' phases, as the namespace recorded them
  local cmd s r
  [ -z "$collected" ] || return 0
  collected=1
  if [ -f "$STATE/phases" ]; then
    while IFS=$'\t' read -r cmd s r; do
      if [ "$r" = 0 ]; then record "$cmd" "$s" ok; else record "$cmd" "$s" "FAILED($r)"; failed="$cmd (exit $r)"; fi
    done < "$STATE/phases"
  fi
  if [ -f "$STATE/current" ]; then
    IFS=$'\t' read -r cmd s < "$STATE/current"
    record "$cmd" "$(($(date +%s) - s))" INTERRUPTED
    failed="$cmd (interrupted)"
    rm -f "$STATE/current"
  fi
}
interrupted() {
  say "interrupted by SIG$1: stopping the rehearsal" >&2
  collect_phases
  summary
  if [ -n "$failed" ]; then say "stopped in phase: $failed"; fi
  exit 130
}
trap host_cleanup EXIT
trap 'interrupted INT' INT
trap 'interrupted TERM' TERM
trap 'interrupted HUP' HUP

# What a rehearsal needs here (not in the root): install what is missing.
need=()
command -v debootstrap > /dev/null || need+=(debootstrap)
command -v nft > /dev/null || need+=(nftables)
command -v ip > /dev/null || need+=(iproute2)
if [ "${#need[@]}" -gt 0 ]; then
  say "installing ${need[*]} on this machine"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# A rehearsal killed outright (SIGKILL) can leave its nftables table and ip_forward setting: undo them now.
net_down
rm -f "$STATE/phases" "$STATE/current"

# The root grows to the size of a fresh `make test`: two venvs (torch, torch-xla), Debian packages, Slurm.
avail_gb="$(df --output=avail -B1G "$STATE" | tail -n1 | tr -d ' ')"
if [ "$avail_gb" -lt 30 ]; then say "warning: only ${avail_gb} GB free under $STATE; a rehearsal needs about 20"; fi

# --- phase: the debootstrap'ed minbase root, once ---
start=$SECONDS
if [ -f "$tarball" ]; then
  say "==> phase: debootstrap: cached $tarball"
  record "debootstrap (cached tarball)" 0 ok
else
  mirror="${REHEARSE_MIRROR:-}"
  if [ -z "$mirror" ]; then
    mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | sed -n -E 's#^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)(https?://[^[:space:]]*/debian)/?([[:space:]].*)?$#\3#p' \
      | head -n1 || true)"
  fi
  mirror="${mirror:-http://deb.debian.org/debian}"
  say "==> phase: debootstrap --variant=minbase $SUITE from $mirror (once; cached as $tarball)"
  remove_tree "$STATE/bootstrap.partial"
  # In a mount namespace of its own: the /proc and /sys debootstrap mounts in the target die with it.
  if ! unshare --mount --propagation private -- \
      debootstrap --variant=minbase "$SUITE" "$STATE/bootstrap.partial" "$mirror"; then
    record "debootstrap" "$((SECONDS - start))" FAILED
    summary
    die "FAILED in phase debootstrap"
  fi
  tar --numeric-owner -C "$STATE/bootstrap.partial" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
  remove_tree "$STATE/bootstrap.partial"
  record "debootstrap" "$((SECONDS - start))" ok
fi

# --- phase: a fresh root, this machine's apt/pip/CA settings, a clean clone of HEAD ---
start=$SECONDS
say "==> phase: fresh root at $ROOT"
remove_tree "$ROOT"
mkdir -p "$ROOT"
tar --numeric-owner -xpf "$tarball" -C "$ROOT"

rm -f "$ROOT/etc/resolv.conf"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
echo "$GUEST_HOSTNAME" > "$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$GUEST_HOSTNAME" \
  > "$ROOT/etc/hosts"

# apt: this machine's sources (only the files apt reads) and the keyrings they name, and the apt.conf.d files
# that set Acquire:: options (proxy, validity checks); nothing that hooks programs of this machine.
rm -f "$ROOT/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] || continue
  cp "$f" "$ROOT$f"
  while read -r key; do
    if [ -f "$key" ] && [ ! -e "$ROOT$key" ]; then
      mkdir -p "$(dirname "$ROOT$key")"
      cp "$key" "$ROOT$key"
    fi
  done < <(grep -o -E 'signed-by=[^] ]+|Signed-By:[[:space:]]*/[^[:space:]]+' "$f" | sed -E 's/^(signed-by=|Signed-By:[[:space:]]*)//')
done
for f in /etc/apt/apt.conf.d/*; do
  if [ -f "$f" ] && grep -q -E '^[[:space:]]*Acquire::' "$f"; then cp "$f" "$ROOT$f"; fi
done
# Extra CA certificates of this machine (a TLS-inspecting egress proxy's): ca-certificates adds them when the
# README's line installs it, as it would on this machine.
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp -a /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/"
fi
# pip: the global and user config files (user ones to /root), and read-only binds of the local directories
# they and the PIP_* variables name (find-links, file:// indexes; a .../simple index with its parent, whose
# files/ its links reach).
pip_files=()
for f in /etc/pip.conf /etc/xdg/pip/pip.conf "$HOME/.pip/pip.conf" "$HOME/.config/pip/pip.conf" \
         "${PIP_CONFIG_FILE:-}"; do
  if [ -n "$f" ] && [ -f "$f" ]; then pip_files+=("$f"); fi
done
if [ -d /etc/xdg/pip ]; then mkdir -p "$ROOT/etc/xdg"; cp -a /etc/xdg/pip "$ROOT/etc/xdg/"; fi
if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$ROOT/etc/pip.conf"; fi
for sub in .pip .config/pip; do
  if [ -d "$HOME/$sub" ]; then mkdir -p "$ROOT/root/$sub"; cp -a "$HOME/$sub/." "$ROOT/root/$sub/"; fi
done
if [ -n "${PIP_CONFIG_FILE:-}" ] && [ -f "$PIP_CONFIG_FILE" ]; then
  mkdir -p "$(dirname "$ROOT$PIP_CONFIG_FILE")"
  cp "$PIP_CONFIG_FILE" "$ROOT$PIP_CONFIG_FILE"
fi
{
  if [ "${#pip_files[@]}" -gt 0 ]; then
    # values of find-links / index-url / extra-index-url, continuation lines included; constraint files
    awk '/^[[:space:]]*[#;]/ {next}
         /^[^[:space:]]/ {key = ""; if (match($0, /^[A-Za-z_-]+[[:space:]]*=/)) {
             key = substr($0, 1, RLENGTH); gsub(/[[:space:]=]/, "", key); gsub(/_/, "-", key)
             sub(/^[A-Za-z_-]+[[:space:]]*=/, "")} else next}
         key ~ /^(find-links|index-url|extra-index-url|constraint|requirement)$/ {print}' "${pip_files[@]}"
  fi
  printf '%s\n' "${PIP_FIND_LINKS:-}" "${PIP_INDEX_URL:-}" "${PIP_EXTRA_INDEX_URL:-}" "${PIP_CONSTRAINT:-}"
} | tr -s '[:space:]' '\n' | sed -n -E 's#^(file://)?(/[^[:space:]]*)$#\2#p' | sort -u > "$STATE/pip-paths"
: > "$STATE/binds"
while IFS= read -r p; do
  p="${p%/}"
  if [ -f "$p" ]; then  # a constraint or requirements file outside the copied config
    if [ ! -e "$ROOT$p" ]; then mkdir -p "$(dirname "$ROOT$p")"; cp "$p" "$ROOT$p"; fi
  elif [ -d "$p" ]; then
    if [ "${p##*/}" = simple ]; then p="${p%/*}"; fi
    echo "$p" >> "$STATE/binds"
  fi
done < "$STATE/pip-paths"
# ../shared beside the repository, as the tests expect it (read-only).
if [ -d "$(dirname "$repo")/shared" ]; then echo "$(dirname "$repo")/shared" >> "$STATE/binds"; fi
sort -u -o "$STATE/binds" "$STATE/binds"

# A clean clone of the committed HEAD, at this repository's path inside the root.
head="$(git -C "$src" rev-parse HEAD)"
mkdir -p "$(dirname "$ROOT$repo")"
git clone --quiet --no-hardlinks "$src" "$ROOT$repo"
git -C "$ROOT$repo" checkout --quiet --detach "$head"
say "rehearsing the committed HEAD of $src: $(git -C "$src" log -1 --format='%h %s' | cut -c1-100)"
dirty="$(git -C "$src" status --porcelain | wc -l)"
[ "$dirty" = 0 ] || say "NOT included: $dirty uncommitted or untracked path(s) of $src (git status); commit them to rehearse them"

# The README's first ```bash block: its "# prerequisites: <command>" comment first (what a fresh machine lacks
# before `make` can run), then each command line, each a phase, run in order in the repository.
awk '/^```bash[[:space:]]*$/ && !seen {inside = 1; seen = 1; next} inside && /^```/ {exit} inside' \
  "$ROOT$repo/README.md" > "$STATE/block" || true
sed -n -E 's/^#[[:space:]]*prerequisites[^:]*:[[:space:]]*(.*)$/\1/p' "$STATE/block" > "$STATE/commands"
sed -E 's/[[:space:]]+#[[:space:]].*$//; s/^[[:space:]]+//; s/[[:space:]]+$//' "$STATE/block" | grep -v -E '^(#|$)' \
  >> "$STATE/commands" || true
if ! grep -q -E '^make plan([[:space:]]|$)' "$STATE/commands" \
   || ! grep -q -E '^make test([[:space:]]|$)' "$STATE/commands"; then
  die "the README's first \`\`\`bash block does not hold \`make plan\` and \`make test\`: $(tr '\n' '|' < "$STATE/commands")"
fi
grep -q -E '^(sudo[[:space:]]+)?apt(-get)?[[:space:]].*install' "$STATE/commands" \
  || say "note: the README's first commands install no prerequisites (no apt-get install line before make plan)"
say "the README's commands, run in $repo inside the root as root with CI=true:"
sed 's/^/    /' "$STATE/commands"
record "fresh root, settings, clone of HEAD" "$((SECONDS - start))" ok

# --- the README's commands, in the namespaces ---
# --fork --pid: the inner script is PID 1 of the new PID namespace; --kill-child: if unshare dies, so does it;
# setpriv --pdeathsig: if this script dies, even by SIGKILL, so does unshare.
# A background job of a script starts with SIGINT and SIGQUIT ignored, which its children would inherit (a
# Python child would then never see KeyboardInterrupt): env restores them.
setpriv --pdeathsig KILL -- unshare --mount --propagation private --pid --fork --kill-child --net --ipc --uts -- \
  env --default-signal=INT,QUIT bash "$self" --inner 9>&- &
ns_pid=$!
for ((i = 0; i < 100; i++)); do
  if [ "$(readlink "/proc/$ns_pid/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ]; then break; fi
  sleep 0.05
done
[ "$(readlink "/proc/$ns_pid/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ] \
  || die "unshare did not enter a new network namespace"
ip link add "$HOST_IF" type veth peer name "${HOST_IF%0}1"
ip link set "${HOST_IF%0}1" netns "$ns_pid"
ip addr add "$NET.1/30" dev "$HOST_IF"
ip link set "$HOST_IF" up
nsenter -t "$ns_pid" -n sh -c "ip link set lo up && ip link set ${HOST_IF%0}1 name eth0 &&
  ip addr add $NET.2/30 dev eth0 && ip link set eth0 up && ip route add default via $NET.1"
cat /proc/sys/net/ipv4/ip_forward > "$STATE/ip_forward.orig"
echo 1 > /proc/sys/net/ipv4/ip_forward
nft -f - <<EOF
table ip $NFT_TABLE {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr $NET.0/30 oifname != "$HOST_IF" masquerade
  }
}
EOF
touch "$STATE/net-ready"

rc=0
wait "$ns_pid" || rc=$?
ns_pid=
net_down

collect_phases
summary
if [ -n "$failed" ]; then
  say "FAILED in phase: $failed; the root is kept at $ROOT for inspection"
  exit 1
fi
[ "$rc" = 0 ] || die "FAILED before or between the README's commands (namespace setup, exit $rc); see above"
if [ "${REHEARSE_KEEP:-}" = 1 ]; then
  say "passed; the root is kept at $ROOT"
else
  say "removing $ROOT (a minute or two)"
  remove_tree "$ROOT"
  say "passed: the README's commands work on a fresh Debian 12 root (root removed; REHEARSE_KEEP=1 keeps it)"
fi
