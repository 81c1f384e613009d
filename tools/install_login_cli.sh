#!/usr/bin/env bash
# Install the slurm-eks CLI for everyone on the login pods, as root, without running anyone's code as root.
#
#   git clone --depth 1 --branch <release tag> https://github.com/<org>/slurm-eks /root/slurm-eks
#   /root/slurm-eks/tools/install_login_cli.sh /root/slurm-eks
#
# Root on a login pod can read slurm.key and so forge any user's credential: whatever it runs must be code no user
# could have written. So the source must be a tree root owns with nothing in it that group or others may write (a
# fresh clone in root's own home, never a checkout on /shared), and it is installed as a wheel (not `pip install
# -e`, whose code would stay in that tree) into a virtualenv on /shared that only root can write, built beside the
# old one and swapped in whole. Users run it (`export PATH=/shared/slurm-eks-cli/bin:$PATH`); nobody can change it.
set -euo pipefail

src="${1:?usage: install_login_cli.sh <source tree: a clone only root can write>}"
dest="${SLURM_EKS_CLI_DIR:-/shared/slurm-eks-cli}"

fail() { echo "install_login_cli: $*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || fail "run it as root on a login pod (it installs for every user)"
src="$(cd "${src}" && pwd -P)"
[[ -f "${src}/pyproject.toml" ]] || fail "${src} is not a slurm-eks source tree (no pyproject.toml)"
# Everything root will build and install: root's, and writable by no one else (a symlink's own mode is moot).
foreign="$(find "${src}" \( ! -user 0 -o \( ! -type l -perm /022 \) \) -print -quit)"
[[ -z "${foreign}" ]] || fail "${foreign} is not root's or is writable by others: clone the release into root's own \
home (git clone --branch <tag> ... /root/slurm-eks) and install from there, never from a tree a user can change"
releases="${dest}.d"  # one directory per install; ${dest} is root's symlink to the current one
for path in "$(dirname "${dest}")" "${releases}"; do
  if [[ -e "${path}" && ( -L "${path}" || ! -O "${path}" ) ]]; then
    fail "${path} exists and is not root's own directory: remove it (someone else made it), then run this again"
  fi
done
if [[ -e "${dest}" || -L "${dest}" ]] && [[ ! -L "${dest}" || "$(stat -c %u "${dest}")" != 0 ]]; then
  fail "${dest} exists and is not root's link to the installed CLI: remove it (someone else made it), then run this again"
fi

python3 -c 'import venv, ensurepip' 2>/dev/null || fail "python3-venv is missing: apt-get install -y python3-venv"
umask 022
install -d -o 0 -g 0 -m 0755 "${releases}"
release="$(mktemp -d "${releases}/$(date -u +%Y%m%dT%H%M%SZ).XXXXXX")"
trap 'rm -rf "${release}"' EXIT
python3 -m venv "${release}"
# Not editable: the wheel's files are copied into the venv, so the source tree can go once this is done.
"${release}/bin/pip" install --quiet --no-cache-dir "${src}"
# The stacks the CLI reads (`job render --stack prod`): components/config/stackfile.py looks beside the packages.
site="$("${release}/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cp -r "${src}/stacks" "${site}/stacks"
"${release}/bin/slurm-eks" --help >/dev/null || fail "the installed CLI does not start; ${dest} is left as it was"
chown -R 0:0 "${release}"
chmod -R go-w "${release}"
chmod 0755 "${release}"
# Swap the link in one rename: a user's shell sees the old CLI or the new one, never half of either.
ln -s "${release}" "${releases}/current"
mv -T "${releases}/current" "${dest}"
trap - EXIT
find "${releases}" -mindepth 1 -maxdepth 1 ! -path "${release}" -exec rm -rf {} +
echo "install_login_cli: installed ${src} into ${release}; ${dest} points at it"
echo "install_login_cli: users add it with: export PATH=${dest}/bin:\$PATH"
