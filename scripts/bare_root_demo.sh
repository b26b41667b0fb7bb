#!/bin/bash
# `make demo` as on a bare Debian 12 machine: a debootstrap root (Debian's required and important
# packages only), `make` installed, a clone of this repository's HEAD, then `make demo` inside it,
# timed. This is how README's demo time is measured, and it catches a build package that only
# machines with more installed happen to have (docs/benchmarks.md, "Fresh build of the CLI").
#
#   scripts/bare_root_demo.sh [ROOT]      as root; ROOT defaults to /tmp/fusionopt-bare-root
#
# Needs debootstrap (apt-get install debootstrap) and Debian's mirror. ROOT is replaced.
set -euo pipefail
root=${1:-/tmp/fusionopt-bare-root}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
[ "$(id -u)" = 0 ] || { echo "bare_root_demo.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "bare_root_demo.sh: apt-get install debootstrap first" >&2; exit 2; }

unmount() { for d in dev/pts dev sys proc; do umount "$root/$d" 2>/dev/null || true; done; }
trap unmount EXIT
unmount
rm -rf "$root"
debootstrap bookworm "$root" http://deb.debian.org/debian >/dev/null
git clone -q "$repo" "$root/root/fusionopt"
for d in proc sys dev dev/pts; do mount --bind "/$d" "$root/$d"; done
cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" env DEBIAN_FRONTEND=noninteractive bash -c \
  'apt-get update -qq && apt-get install -y -qq make >/dev/null'
start=$(date +%s)
chroot "$root" bash -c 'cd /root/fusionopt && make demo'
echo "bare-root make demo: $(( $(date +%s) - start )) s"
