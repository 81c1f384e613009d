#!/bin/bash
# slurm-eks node health check for accelerator Slurm nodes. One script, three callers:
#   check   slurm.conf HealthCheckProgram. slurmd runs it as root with an EMPTY environment except
#           SLURMD_NODENAME and kills it after 60 s (SchedMD/slurm src/slurmd/slurmd/slurmd.c
#           run_script_health_check, tags slurm-22-05-8-1 and slurm-25-11-6-1: env_array_create,
#           setenvf SLURMD_NODENAME, .max_wait = 60 * 1000, argv[1] = NULL).
#   prolog  slurm.conf Prolog: fast checks only, then dcgm-exporter job mapping.
#   epilog  slurm.conf Epilog: cleanup only, always exit 0 (a failing epilog drains the node).
# slurmd says which one it is in SLURM_SCRIPT_CONTEXT=prolog_slurmd|epilog_slurmd, set for the
# slurmd prolog/epilog in both versions (src/plugins/prep/script/prep_script_slurmd.c _build_env,
# slurm-22-05-8-1 and slurm-25-11-6-1); an explicit first argument check|prolog|epilog overrides.
# The same _build_env sets SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_USER and SLURMD_NODENAME, and merges
# gres_job_env, which carries SLURM_JOB_GPUS (comma-separated GPU indexes): gres_common_epilog_set_env
# (22.05.8) / gres_common_prep_set_env (25.11.6) in src/plugins/gres/common/gres_common.c.
#
# A failure drains the node with `slurm-eks: <check>: <detail>` (slurm/agent/health/reasons.py). It never
# resumes a node: a flapping GPU must stay drained until the repair controller replaces the node,
# and a drain set by a person (reason without the slurm-eks: prefix) is never touched.

PATH="${SLURM_EKS_HEALTH_PATH:+$SLURM_EKS_HEALTH_PATH:}/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH
LC_ALL=C
export LC_ALL

log() { printf 'slurm-eks health: %s\n' "$*"; }

# ---- mode -------------------------------------------------------------------------------------
MODE=""
case "${1:-}" in
  check|prolog|epilog) MODE="$1" ;;
  "") ;;
  *) log "unknown mode '$1' (want check|prolog|epilog)"; exit 2 ;;
esac
if [[ -z "$MODE" ]]; then
  case "${SLURM_SCRIPT_CONTEXT:-}" in
    prolog_slurmd) MODE=prolog ;;
    epilog_slurmd) MODE=epilog ;;
    *) MODE=check ;;
  esac
fi

# ---- config -----------------------------------------------------------------------------------
ENV_FILE="${SLURM_EKS_HEALTH_ENV:-/etc/slurm-eks/health.env}"
if [[ ! -r "$ENV_FILE" ]]; then
  log "no $ENV_FILE: not a slurm-eks accelerator node, nothing to check"
  exit 0
fi

GPUS=0
EFA=0
NEURON_DEVICES=0
SHARED_MOUNT=""
DISK_PATHS="/"
MIN_FREE_MB=1024
DCGM_DIAG_LEVEL=0
JOB_MAP_DIR=""
# Hardware Xids that need a GPU reset or replacement; only ones with an NVIDIA source:
#   46, 48: CRITICAL / drain in https://docs.nvidia.com/health-validation/reference/checks/xid.md
#   48 (DBE), 63 (row remap recorded, reset to activate), 64 (row remap failed), 94 (contained ECC),
#   95 (uncontained ECC): https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html
#   79 (GPU has fallen off the bus): the driver's own line, NVIDIA/open-gpu-kernel-modules issue #1151;
#   DCGM dcgmlib/dcgm_errors.h DCGM_FR_FALLEN_OFF_BUS (NVIDIA/DCGM v4.5.3).
# Application Xids (13, 31, 43, 45, 68, 109) are what NVIDIA's own device plugin ignores
# (NVIDIA/k8s-device-plugin v0.20.0 internal/rm/health.go ignoredXids); they are not in this set.
XID_CRITICAL="46 48 63 64 79 94 95"

# KEY=value lines, optionally quoted; anything else is ignored. Never sourced: a config file must
# not run code as root.
while IFS= read -r line || [[ -n "$line" ]]; do
  [[ "$line" =~ ^[[:space:]]*(GPUS|EFA|NEURON_DEVICES|SHARED_MOUNT|DISK_PATHS|MIN_FREE_MB|DCGM_DIAG_LEVEL|JOB_MAP_DIR|XID_CRITICAL)=(.*)$ ]] || continue
  key="${BASH_REMATCH[1]}"
  val="${BASH_REMATCH[2]}"
  val="${val%"${val##*[![:space:]]}"}"
  if [[ "$val" =~ ^\"(.*)\"$ || "$val" =~ ^\'(.*)\'$ ]]; then
    val="${BASH_REMATCH[1]}"
  fi
  printf -v "$key" '%s' "$val"
done < "$ENV_FILE"

for key in GPUS EFA NEURON_DEVICES MIN_FREE_MB DCGM_DIAG_LEVEL; do
  if [[ ! "${!key}" =~ ^[0-9]+$ ]]; then
    log "config: $key='${!key}' is not a number, using 0"
    printf -v "$key" '%s' 0
  fi
done

# ---- failures and draining --------------------------------------------------------------------
FAIL_CHECKS=()
FAIL_DETAILS=()
fail() {
  FAIL_CHECKS+=("$1")
  FAIL_DETAILS+=("$2")
  printf 'slurm-eks: %s: %s\n' "$1" "$2"
}

# The reason format of slurm/agent/health/reasons.py drain_reason: one line, detail <= 200 chars.
drain() {
  local check="$1" detail="$2" node="${SLURMD_NODENAME:-}" record state reason
  detail="$(printf '%s' "$detail" | tr -s '[:space:]' ' ')"
  detail="${detail# }"
  detail="${detail% }"
  detail="${detail:0:200}"
  if [[ -z "$node" ]]; then
    log "SLURMD_NODENAME unset; cannot drain (slurm-eks: $check: $detail)"
    return
  fi
  # `scontrol show node` prints State=<base>[+DRAIN...] and, on its own line,
  # Reason=<text> [user@time] (SchedMD/slurm src/api/node_info.c, both tags).
  if record="$(timeout 20 scontrol show node "$node" 2>/dev/null)"; then
    state="$(printf '%s\n' "$record" | gawk 'match($0, /(^|[[:space:]])State=([^[:space:]]+)/, m) { print m[2]; exit }')"
    reason="$(printf '%s\n' "$record" | gawk 'match($0, /^[[:space:]]*Reason=(.*)$/, m) { r = m[1]; sub(/ \[[^]]*@[^]]*\]$/, "", r); print r; exit }')"
    if [[ "$state" == *DRAIN* ]]; then
      if [[ "$reason" == slurm-eks:* ]]; then
        log "node $node already drained by slurm-eks ($reason); keeping that reason"
      else
        log "node $node drained by a person ($reason); leaving it as it is"
      fi
      return
    fi
  else
    log "scontrol show node $node failed; draining anyway"
  fi
  timeout 20 scontrol update nodename="$node" state=drain reason="slurm-eks: $check: $detail" \
    || log "scontrol update failed for $node"
}

drain_first_failure() {
  ((${#FAIL_CHECKS[@]})) && drain "${FAIL_CHECKS[0]}" "${FAIL_DETAILS[0]}"
}

# ---- checks -----------------------------------------------------------------------------------
GPU_OK=0
check_gpu_count() {
  ((GPUS > 0)) || return 0
  local out rc n
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    fail gpu-driver "nvidia-smi not found, GRES expects $GPUS GPUs"
    return
  fi
  # --query-gpu=index --format=csv,noheader: one line per GPU (nvidia-smi --help-query-gpu).
  out="$(timeout 20 nvidia-smi --query-gpu=index --format=csv,noheader 2>&1)"
  rc=$?
  if ((rc != 0)); then
    fail gpu-driver "nvidia-smi failed (rc $rc): $(printf '%s' "$out" | head -n 1)"
    return
  fi
  n="$(printf '%s\n' "$out" | grep -c '^[[:space:]]*[0-9][0-9]*[[:space:]]*$')"
  if ((n != GPUS)); then
    fail gpu-count "nvidia-smi sees $n GPUs, GRES expects $GPUS"
    return
  fi
  GPU_OK=1
}

check_ecc() {
  ((GPUS > 0 && GPU_OK)) || return 0
  local out bad
  # Row-remap state (remapped_rows.*) is not read here: its nvidia-smi field names could not be
  # checked against NVIDIA docs. Xid 63/64 in the xid check cover pending and failed remaps.
  out="$(timeout 20 nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits 2>/dev/null)" || {
    log "ecc: nvidia-smi ECC query failed; skipping"
    return 0
  }
  # "[N/A]" (ECC off or unsupported) is not a number and is ignored.
  bad="$(printf '%s\n' "$out" | gawk -F',' '{ gsub(/[[:space:]]/, "", $1); gsub(/[[:space:]]/, "", $2) }
    $2 ~ /^[0-9]+$/ && $2 > 0 { printf "%sGPU %s: %s", sep, $1, $2; sep = ", " }')"
  [[ -z "$bad" ]] || fail ecc "uncorrectable volatile ECC errors: $bad"
}

check_xid() {
  ((GPUS > 0)) || return 0
  local out found
  if ! out="$(timeout 20 dmesg 2>/dev/null)"; then
    log "xid: dmesg failed (kernel log restricted?); skipping the Xid check"
    return 0
  fi
  # Driver lines: "NVRM: Xid (PCI:0000:10:1c): 79, pid=..., <text>".
  found="$(printf '%s\n' "$out" | gawk -v crit="$XID_CRITICAL" '
    BEGIN { n = split(crit, c, /[[:space:],]+/); for (i = 1; i <= n; i++) if (c[i] != "") want[c[i]] = 1 }
    match($0, /NVRM: Xid \(([^)]*)\): ([0-9]+)/, m) && (m[2] in want) {
      key = "Xid " m[2] " on " m[1]
      if (!(key in seen)) { seen[key] = 1; printf "%s%s", sep, key; sep = ", " }
    }')"
  [[ -z "$found" ]] || fail xid "critical $found"
}

check_dcgm() {
  ((GPUS > 0 && DCGM_DIAG_LEVEL >= 1)) || return 0
  if ! command -v dcgmi >/dev/null 2>&1; then
    log "dcgm: dcgmi not found; skipping the DCGM diag"
    return 0
  fi
  local out rc failed
  # Level 1 only: higher levels run for minutes and slurmd kills the health check after 60 s.
  out="$(timeout 45 dcgmi diag -r 1 2>&1)"
  rc=$?
  # dcgmi prints a table "| <test> | Pass|Fail|Skip|Warn |" with per-entity rows "|  | GPU0: Fail |"
  # (NVIDIA/DCGM v4.5.3 dcgmi/Diag.cpp DIAG_DATA, HelperDisplayDiagResult,
  # HelperDisplayEntityResults) and exits non-zero when a test reported an error.
  failed="$(printf '%s\n' "$out" | gawk -F'|' '
    /^\|/ && NF >= 4 {
      name = $2; res = $3
      gsub(/^[[:space:]]+|[[:space:]]+$/, "", name); gsub(/^[[:space:]]+|[[:space:]]+$/, "", res)
      if (name != "" && name !~ /^(Warning|Info)/) last = name
      if (res == "Fail" && name != "") bad[name] = 1
      else if (name == "" && res ~ /: Fail$/ && last != "") bad[last] = 1
    }
    END { for (t in bad) { printf "%s%s", sep, t; sep = ", " } }')"
  if [[ -n "$failed" ]]; then
    fail dcgm "dcgmi diag -r 1 failed: $failed"
  elif ((rc == 124)); then
    fail dcgm "dcgmi diag -r 1 timed out after 45 s"
  elif ((rc != 0)); then
    fail dcgm "dcgmi diag -r 1 exited $rc: $(printf '%s' "$out" | grep -v '^[+|]' | head -n 1)"
  fi
}

# EFA and Neuron are counted where the kernel and the device plugins put them, with no tool of the image:
# Slinky's slurmd and slurmd-pyxis images install neither libfabric's fi_info nor the Neuron tools
# (SlinkyProject/containers schedmd/slurm/25.11/ubuntu24.04 Dockerfile and Dockerfile.pyxis), and no NodeSet
# mounts the host's /opt/amazon/efa or /opt/aws/neuron. SLURM_EKS_HEALTH_DEV and SLURM_EKS_HEALTH_SYS exist for
# tests only (slurmd runs this with an empty environment).
DEV_DIR="${SLURM_EKS_HEALTH_DEV:-/dev}"
SYS_DIR="${SLURM_EKS_HEALTH_SYS:-/sys}"

check_efa() {
  ((EFA > 0)) || return 0
  local dev n=0 ibdev state down=()
  # The EFA device plugin gives the container one /dev/infiniband/uverbs<N> per EFA interface its limits
  # ask for (aws-efa-k8s-device-plugin). The kernel names each one's RDMA device in
  # /sys/class/infiniband_verbs/uverbs<N>/ibdev and that device's port state in
  # /sys/class/infiniband/<ibdev>/ports/1/state, "4: ACTIVE" when the port is up (Linux
  # Documentation/ABI/stable/sysfs-class-infiniband; drivers/infiniband/core/sysfs.c state_show).
  for dev in "$DEV_DIR"/infiniband/uverbs*; do
    [[ -c "$dev" ]] || continue
    n=$((n + 1))
    ibdev="$(cat "$SYS_DIR/class/infiniband_verbs/${dev##*/}/ibdev" 2>/dev/null)"
    state="$(cat "$SYS_DIR/class/infiniband/$ibdev/ports/1/state" 2>/dev/null)"
    [[ -n "$ibdev" && "$state" == *": ACTIVE"* ]] || down+=("${dev##*/}=${ibdev:-?} (${state:-no port state})")
  done
  if ((n != EFA)); then
    fail efa "the pod has $n EFA devices (/dev/infiniband/uverbs*), expected $EFA"
  elif ((${#down[@]})); then
    fail efa "EFA port not ACTIVE: ${down[*]}"
  fi
}

check_neuron() {
  ((NEURON_DEVICES > 0)) || return 0
  local dev n=0
  # The Neuron device plugin gives the container one Neuron driver device, /dev/neuron<N>, per
  # aws.amazon.com/neuron it asked for ("allocating entire Neuron devices to containers": Neuron SDK
  # deploy/eks/setup; the device files as docker's --device=/dev/neuron0: containers/tutorials/build-run-neuron-container).
  for dev in "$DEV_DIR"/neuron[0-9]*; do
    [[ -c "$dev" ]] && n=$((n + 1))
  done
  ((n == NEURON_DEVICES)) || fail neuron "the pod has $n Neuron devices (/dev/neuron*), expected $NEURON_DEVICES"
}

check_shared() {
  [[ -n "$SHARED_MOUNT" ]] || return 0
  local rc
  # Both under timeout: a hung Lustre/NFS mount blocks stat forever.
  timeout 10 mountpoint -q "$SHARED_MOUNT"
  rc=$?
  if ((rc == 124)); then
    fail shared "$SHARED_MOUNT hangs (mountpoint timed out after 10 s)"
    return
  elif ((rc != 0)); then
    fail shared "$SHARED_MOUNT is not mounted"
    return
  fi
  timeout 10 stat -f "$SHARED_MOUNT" >/dev/null 2>&1
  rc=$?
  if ((rc == 124)); then
    fail shared "$SHARED_MOUNT hangs (stat -f timed out after 10 s)"
  elif ((rc != 0)); then
    fail shared "stat -f $SHARED_MOUNT failed (rc $rc)"
  fi
}

check_disk() {
  local p free
  for p in $DISK_PATHS; do
    # df -P: POSIX format, one line per file system, never wrapped; -m: 1M blocks, so
    # column 4 (Available) is MB (GNU coreutils df manual).
    free="$(timeout 10 df -Pm "$p" 2>/dev/null | gawk 'NR == 2 { print $4 }')"
    if [[ ! "$free" =~ ^[0-9]+$ ]]; then
      fail disk "df -Pm $p failed"
    elif ((free < MIN_FREE_MB)); then
      fail disk "$p has $free MB free, needs $MIN_FREE_MB MB"
    fi
  done
}

# ---- dcgm-exporter HPC job mapping ------------------------------------------------------------
# dcgm-exporter --hpc-job-mapping-dir / DCGM_HPC_JOB_MAPPING_DIR reads every file named <gpu> or
# <gpu>.<gpu_instance> in that directory, one job id per line, and labels that GPU's metrics
# hpc_job=<id> (NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/hpc.go readFile,
# validGPUFile, const.go hpcJobAttribute; pkg/cmd/app.go). Other files (our .lock) are ignored.
map_lock() {
  { exec 9>"$JOB_MAP_DIR/.lock"; } 2>/dev/null && command -v flock >/dev/null 2>&1 && flock -w 10 9
}

map_add() {
  [[ -n "$JOB_MAP_DIR" && -n "${SLURM_JOB_GPUS:-}" && "${SLURM_JOB_ID:-}" =~ ^[0-9]+$ ]] || return 0
  mkdir -p "$JOB_MAP_DIR" || { log "cannot create $JOB_MAP_DIR"; return 0; }
  map_lock
  local gpu file
  for gpu in ${SLURM_JOB_GPUS//,/ }; do
    [[ "$gpu" =~ ^[0-9]+$ ]] || continue
    file="$JOB_MAP_DIR/$gpu"
    # A requeued job runs its prolog again: add the id once.
    grep -qxF "$SLURM_JOB_ID" "$file" 2>/dev/null || printf '%s\n' "$SLURM_JOB_ID" >> "$file"
  done
}

map_remove() {
  [[ -n "$JOB_MAP_DIR" && -d "$JOB_MAP_DIR" && "${SLURM_JOB_ID:-}" =~ ^[0-9]+$ ]] || return 0
  map_lock
  local file tmp
  for file in "$JOB_MAP_DIR"/*; do
    [[ -f "$file" && "${file##*/}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || continue
    grep -qxF "$SLURM_JOB_ID" "$file" || continue
    # Drop only this job's line: the file may list other jobs sharing the GPU.
    tmp="$(mktemp "$JOB_MAP_DIR/.tmp.XXXXXX")" || continue
    grep -vxF "$SLURM_JOB_ID" "$file" > "$tmp"
    if [[ -s "$tmp" ]]; then
      chmod 644 "$tmp"
      mv -f "$tmp" "$file"
    else
      rm -f "$tmp" "$file"
    fi
  done
}

# ---- /dev/shm cleanup -------------------------------------------------------------------------
# SLURM_EKS_HEALTH_SHM exists for tests and must itself lie under /dev/shm; nothing outside
# /dev/shm is ever removed.
shm_cleanup() {
  local shm="${SLURM_EKS_HEALTH_SHM:-/dev/shm}" uid="${SLURM_JOB_UID:-}" user="${SLURM_JOB_USER:-}" others
  [[ "$shm" == /dev/shm || "$shm" == /dev/shm/* ]] || { log "shm: $shm is not under /dev/shm"; return 0; }
  [[ "$shm" != *..* && -d "$shm" ]] || return 0
  [[ "$uid" =~ ^[0-9]+$ && "$uid" != 0 && -n "$user" && -n "${SLURMD_NODENAME:-}" ]] || return 0
  # squeue -h (no header) -w <node> -u <user> -o %i: the user's job ids on this node, this
  # completing job included (SchedMD/slurm doc/man/man1/squeue.1). If squeue fails, keep the files.
  if ! others="$(timeout 20 squeue -h -w "$SLURMD_NODENAME" -u "$user" -o %i 2>/dev/null)"; then
    log "shm: squeue failed; leaving $shm alone"
    return 0
  fi
  others="$(printf '%s\n' "$others" | gawk -v me="${SLURM_JOB_ID:-}" '$1 != "" && $1 != me' | head -n 1)"
  if [[ -n "$others" ]]; then
    log "shm: $user still has job $others on this node; leaving $shm alone"
    return 0
  fi
  # -xdev: stay on the tmpfs; find never follows symlinks, so only entries inside $shm go.
  find "$shm" -xdev -mindepth 1 -uid "$uid" ! -type d -delete 2>/dev/null
  find "$shm" -xdev -mindepth 1 -depth -uid "$uid" -type d -empty -delete 2>/dev/null
  return 0
}

# ---- main -------------------------------------------------------------------------------------
case "$MODE" in
  check)
    check_gpu_count
    check_ecc
    check_xid
    check_dcgm
    check_efa
    check_neuron
    check_shared
    check_disk
    if ((${#FAIL_CHECKS[@]})); then
      drain_first_failure
      exit 1
    fi
    log "check: all checks passed"
    exit 0
    ;;
  prolog)
    # Fast checks only: the job waits for the prolog.
    check_gpu_count
    check_neuron
    check_shared
    if ((${#FAIL_CHECKS[@]})); then
      # Our reason first; slurmd then drains (keeping it) and requeues the job.
      drain_first_failure
      exit 1
    fi
    map_add
    exit 0
    ;;
  epilog)
    map_remove
    shm_cleanup
    exit 0
    ;;
esac
