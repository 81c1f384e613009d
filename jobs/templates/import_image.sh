# import_image URI FILE: pull a container image once into a squashfs file on /shared, which every step
# then starts from (`srun --container-image=FILE`) instead of pulling the image again on every node.
# `enroot import -o FILE docker://[REGISTRY#]IMAGE[:TAG]` (NVIDIA/enroot doc/cmd/import.md) refuses an
# existing FILE and writes it in place, so concurrent callers take turns on a lock file (flock(1); /shared
# is mounted with `flock`, components/storage/fsx.py) and the image is written under a temporary name and
# renamed, so no job ever starts from half a file. Shared by the job scripts and `slurm-eks job image pull`.
import_image() {
  local uri="$1" file="$2"
  if [[ -s "${file}" ]]; then
    return 0
  fi
  mkdir -p "$(dirname "${file}")"
  (
    flock 9
    if [[ -s "${file}" ]]; then
      exit 0  # another job imported it while this one waited for the lock
    fi
    rm -f "${file}.partial"  # left by an import that was killed
    echo "slurm-eks: importing ${uri} into ${file} (once for every job of yours that uses it)"
    if ! enroot import -o "${file}.partial" "${uri}"; then
      rm -f "${file}.partial"
      echo "slurm-eks: enroot import of ${uri} failed; see its message above" >&2
      exit 1
    fi
    mv -f "${file}.partial" "${file}"
  ) 9>"${file}.lock"
}
