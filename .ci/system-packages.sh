#!/usr/bin/env bash
# Installs the Debian packages CI needs for the container, browser and cluster tests:
# podman + runc (build/run the course image without a Docker engine), debootstrap (the base
# image, since no registry is reachable), uidmap/slirp4netns/fuse-overlayfs (podman helpers),
# chromium (headless browser test), curl. Idempotent and quiet: does nothing when all are present.
set -euo pipefail

PACKAGES=(podman runc debootstrap uidmap slirp4netns fuse-overlayfs chromium curl ca-certificates)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "system-packages: all present (${PACKAGES[*]})"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "system-packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "system-packages: done in $(( $(date +%s) - start )) s"
