#!/usr/bin/env bash
# Build Slurm from the upstream source tarball, once per tarball and build recipe, and link LINK to it.
# The tree is built into CACHE/slurm-<hash>, the hash being of the tarball and of this script, so every
# checkout on the machine shares one build (about 10 minutes on 2 cores) and a new tarball or recipe builds
# anew; the binaries find their libraries there (rpath), so the tree is never moved once built. The tests run
# this Slurm (the version the cluster runs), not Debian's 22.05.
#
# Usage: tools/build_slurm.sh TARBALL LINK CACHE
# The build dependencies (configure looks for them; ../shared/upstream/slurm/README.md) are Debian packages
# the Makefile installs first (SLURM_BUILD_PACKAGES).
set -euo pipefail
tarball="$(realpath "$1")"
link="$2"
cache="$(realpath -m "$3")"
want="$(cat "$tarball" "$0" | sha256sum | cut -d' ' -f1)"
prefix="$cache/slurm-${want:0:16}"
point_link() {
  mkdir -p "$(dirname "$link")"
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    rm -rf "$link"  # a tree built in place by an earlier recipe
  fi
  ln -sfn "$prefix" "$link"
}
if [ -f "$prefix/.source-sha256" ] && [ "$(cat "$prefix/.source-sha256")" = "$want" ] \
   && [ -x "$prefix/sbin/slurmctld" ]; then
  point_link
  exit 0
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/slurm-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "building Slurm from $(basename "$tarball") into $prefix (about 10 minutes on 2 cores)"
tar -xzf "$tarball" -C "$work"
src="$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n1)"
# A half-built tree must never look finished: install into a staging root, then move it in place.
staging="$work/staging"
cd "$src"
# --sysconfdir inside the prefix: this build never reads the machine's /etc/slurm (Debian's Slurm may be there).
./configure --quiet --prefix="$prefix" --sysconfdir="$prefix/etc" --disable-debug \
  --with-munge --with-jwt --with-yaml --with-json --with-http-parser --with-hwloc \
  > "$work/configure.log" 2>&1 || { tail -n 40 "$work/configure.log"; exit 1; }
make -j"$(nproc)" --quiet > "$work/make.log" 2>&1 || { tail -n 60 "$work/make.log"; exit 1; }
make install DESTDIR="$staging" --quiet > "$work/install.log" 2>&1 || { tail -n 40 "$work/install.log"; exit 1; }
echo "$want" > "$staging$prefix/.source-sha256"
mkdir -p "$cache"
rm -rf "$prefix"
mv "$staging$prefix" "$prefix"
point_link
"$prefix/sbin/slurmctld" -V
