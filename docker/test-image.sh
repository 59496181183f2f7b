#!/usr/bin/env bash
# The test of the course image, run inside a container of it; the Dockerfile installs it as
# deltalab-test-image. CI (.ci/container.sh, step 3) and `make -C docker test` both run:
#   <docker|podman> run --rm --network=none IMAGE deltalab-test-image
# It checks, in this order, and stops at the first failure with a non-zero exit:
#   1. the container runs as a non-root user;
#   2. the network is off (only the loopback interface);
#   3. `python -m deltalab doctor` finds the JVM class archive the image built for its jars;
#   4. the nbval suite over notebooks/ passes (pytest-xdist, one scope per worker), with a fresh
#      work root named like the native suite's (tests/conftest.py), which the sanitizers know: every
#      notebook, or those DELTALAB_IMAGE_NOTEBOOKS names (CI: the few that use the image's Java, jars,
#      class archive and servers; the native `make test` runs them all);
#   5. when labs/source/ is mounted (read-only: the image never carries the solutions; `make -C
#      docker test` mounts the checkout's, CI only the labs DELTALAB_IMAGE_LABS names), every lab's
#      solution runs clean in a kernel of the image (nbval-lax: every
#      check cell passes, or raises), all its checks on tables of one seed, printed.
# Environment: DELTALAB_CONTAINER_WORKERS (pytest-xdist workers, default 2), DELTALAB_IMAGE_NOTEBOOKS
# (notebook names without .ipynb, separated by spaces; default: every notebook), DELTALAB_CHECK_SEED
# (the labs' seed; default: drawn). Arguments are passed on to pytest (e.g. -k hello).
set -euo pipefail

fail() { echo "deltalab-test-image: $*" >&2; exit 1; }

test "$(id -u)" -ne 0 || fail "running as root"
test "$(ls /sys/class/net)" = lo || fail "network is not off: $(ls /sys/class/net)"
# Only the class archive's line is the question here, not the doctor's exit status.
doctor="$(python -m deltalab doctor || true)"
if ! grep -q "Class archive .*sessions start in seconds" <<<"$doctor"; then
    echo "$doctor" >&2
    fail "the image carries no class archive its sessions can use"
fi

cd "${DELTALAB_COURSE_DIR:?is not set: run this in the course image}"
DELTALAB_WORKDIR="$(mktemp -d /tmp/deltalab-tests-XXXXXXXX)"
export DELTALAB_WORKDIR
notebooks=(notebooks)
if [ -n "${DELTALAB_IMAGE_NOTEBOOKS:-}" ]; then
    notebooks=()
    for name in ${DELTALAB_IMAGE_NOTEBOOKS}; do
        [ -f "notebooks/${name%.ipynb}.ipynb" ] || fail "DELTALAB_IMAGE_NOTEBOOKS names ${name}, which notebooks/ does not have"
        notebooks+=("notebooks/${name%.ipynb}.ipynb")
    done
fi
python -m pytest -n "${DELTALAB_CONTAINER_WORKERS:-2}" --dist loadfile "${notebooks[@]}" -p no:cacheprovider "$@"
if [ -d labs/source ]; then
    DELTALAB_CHECK_SEED="${DELTALAB_CHECK_SEED:-$(python -c 'import random; print(random.SystemRandom().randrange(1, 2**31))')}"
    export DELTALAB_CHECK_SEED
    echo "deltalab-test-image: the labs' solutions, on the tables of DELTALAB_CHECK_SEED=${DELTALAB_CHECK_SEED}"
    # Exit status 5: the arguments (-k hello) selected no lab, which is no failure.
    python -m pytest -n "${DELTALAB_CONTAINER_WORKERS:-2}" --dist loadfile --nbval-lax labs/source -p no:cacheprovider "$@" \
        || { status=$?; [ "$status" -eq 5 ] || exit "$status"; }
fi
