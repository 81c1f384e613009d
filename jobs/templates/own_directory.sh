# own_directory ROOT [HINT]: print ROOT/<your user name>, a directory only you can enter. ROOT is made once for
# everyone like /tmp (`install -d -m 1777`: anyone may add a directory, nobody may remove or rename another's),
# and yours is made with its mode (`mkdir -m 0700`, never open to others in between). One that is a symlink, not
# yours, or open to others' writes is refused: a job never runs, loads or resumes from what someone else could
# have written (docs/security.md). Shared by checkpoints, the image cache and the Neuron compile cache.
own_directory() {
  local root="$1" hint="${2:-have it removed}" own mode
  if [[ ! -d "${root}" ]]; then
    echo "slurm-eks: ${root} does not exist; make it once for everyone: install -d -m 1777 ${root}" >&2
    return 1
  fi
  own="${root}/$(id -un)"
  mkdir -m 0700 "${own}" 2>/dev/null || true
  if [[ -L "${own}" || ! -d "${own}" || ! -O "${own}" ]]; then
    echo "slurm-eks: ${own} is not a directory of yours: ${hint}" >&2
    return 1
  fi
  mode="$(stat -c %a "${own}")"
  if (( 8#${mode} & 8#022 )); then
    echo "slurm-eks: ${own} is writable by others (mode ${mode}): chmod 0700 ${own}" >&2
    return 1
  fi
  printf '%s\n' "${own}"
}
