#!/usr/bin/env bash
# CI route for the course image (issue 8), with podman because the CI machine has no Docker
# engine and no registry:
#   1. base image localhost/debian:bookworm-slim from debootstrap (skipped when it exists and was made
#      by this recipe: its label org.deltalab.base-recipe is BASE_RECIPE),
#   2. podman build of docker/Dockerfile (runc, lowered ulimits via docker/containers.conf; the
#      host CA bundle reaches pip and Ivy as a build secret and stays out of the image),
#   3. the image's test inside the container (docker/test-image.sh, `deltalab-test-image`): as the
#      non-root user, --network=none, once `deltalab doctor` there finds the JVM class archive the
#      image built for its jars, nbval over the notebooks that use what only the image brings
#      (IMAGE_NOTEBOOKS: its Java runtime, its baked jars, class archive, second drivers, the S3
#      server, delta-rs; `make test` runs every notebook natively), and the labs' solution notebooks
#      DELTALAB_IMAGE_LABS names, mounted read-only (none by default: `make test-labs` runs them),
#   4. a classroom in the container (issue 39), in a second container beside step 3's: JupyterHub
#      started by deltalab.classroom, three students and an instructor, notebook 00 in three servers at once, a lab through nbgrader's
#      exchange (tests/test_classroom*.py -m classroom, the tests and labs/source mounted read-only;
#      the idle culler's test on a hub of its own beside them, on a second pytest worker; -rP prints
#      what they measured: each student's memory),
#   5. JupyterLab in the container on a published 127.0.0.1 port refuses requests without the
#      token and answers with it; the image's healthcheck passes,
# and prints the timings. Run from anywhere: bash .ci/container.sh [all|build|test]: build does steps 1
# and 2 (.ci/run starts it in the background beside make test-cluster, which leaves a third of the
# two cores idle; the build waits on the network and the disk much of its time), test does steps 3 to 5 on the image build made; all (the default) does both.
# Environment: DELTALAB_IMAGE (tag, default localhost/deltalab-course:ci),
# DELTALAB_REBUILD_BASE=1 (redo debootstrap), DELTALAB_CONTAINER_WORKERS (pytest-xdist workers
# for the in-container suite, default 2), DELTALAB_IMAGE_NOTEBOOKS (the notebooks step 3 runs: names
# without .ipynb separated by spaces, or all; default IMAGE_NOTEBOOKS below), DELTALAB_IMAGE_LABS (labs
# whose solution notebooks also run under nbval in the container: folder names of labs/source/, or all;
# default none), DEBIAN_MIRROR, HOST_CA_BUNDLE.
set -euo pipefail

PHASE="${1:-all}"
case "$PHASE" in all|build|test) ;; *) echo "usage: bash .ci/container.sh [all|build|test]" >&2; exit 2 ;; esac

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${DELTALAB_IMAGE:-localhost/deltalab-course:ci}"
BASE="localhost/debian:bookworm-slim"
# The base's recipe, kept as a label of the image: a base made by an older recipe is made again.
# 2: like Docker Hub's, no docs, man pages or translations of the packages debootstrap installed, and
# apt's downloaded packages deleted after every install (docker-clean): 49 MB and 143 MB less in the image.
BASE_RECIPE=2
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
export CONTAINERS_CONF="$REPO/docker/containers.conf"
RUNTIME_FLAGS=(--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
# What the image's notebooks prove beyond the native run of every notebook (make test): 11 the S3A jars,
# the S3 and DynamoDB server on the container's loopback and second drivers (start_driver), 12 delta-rs and
# Delta Kernel; both run on the image's jlink Java with its baked jars and class archive. Notebook 00 is
# not here: the classroom (step 4) runs it in three students' servers of the same image. Nor 02 (its second
# driver, killed): 11 starts second drivers too, and a kill is a signal, the same in a container.
IMAGE_NOTEBOOKS="11_object_stores 12_other_engines"

log() { echo "container.sh: $*"; }
die() { echo "container.sh: FAILED: $*" >&2; exit 1; }
now() { date +%s; }
declare -A TIMES=()
START_ALL=$(now)

command -v podman >/dev/null || die "podman is not installed (run: bash .ci/system-packages.sh)"
command -v curl >/dev/null || die "curl is not installed (run: bash .ci/system-packages.sh)"
[ -f "$REPO/docker/Dockerfile" ] || die "no docker/Dockerfile under $REPO"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ "$PHASE" != test ]; then
# --- 1. base image -----------------------------------------------------------------------
t=$(now)
base_recipe() { podman image inspect --format '{{index .Labels "org.deltalab.base-recipe"}}' "$BASE" 2>/dev/null || true; }
if [ "${DELTALAB_REBUILD_BASE:-0}" != 1 ] && podman image exists "$BASE" && [ "$(base_recipe)" = "$BASE_RECIPE" ]; then
    log "base image $BASE exists, recipe $BASE_RECIPE (DELTALAB_REBUILD_BASE=1 rebuilds it)"
else
    podman image exists "$BASE" && log "base image $BASE has recipe '$(base_recipe)', not $BASE_RECIPE: making it again"
    command -v debootstrap >/dev/null || die "debootstrap is not installed (run: bash .ci/system-packages.sh)"
    rootfs="$(mktemp -d /var/tmp/deltalab-rootfs.XXXXXX)"
    log "debootstrap --variant=minbase bookworm ($MIRROR) into $rootfs"
    if ! $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1; then
        tail -20 "$rootfs.log" >&2
        die "debootstrap failed (log: $rootfs.log)"
    fi
    # Make it look like Docker Hub's debian:bookworm-slim: its apt sources (with updates and
    # security), no docs or man pages, no recommends, empty apt caches.
    $SUDO rm -f "$rootfs/etc/apt/sources.list"
    $SUDO tee "$rootfs/etc/apt/sources.list.d/debian.sources" >/dev/null <<SOURCES
Types: deb
URIs: ${MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    $SUDO tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
DPKG
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
        | $SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-no-recommends" >/dev/null
    # apt deletes the packages it downloaded after each install, as in Docker Hub's image.
    $SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'CLEAN'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CLEAN
    # What the dpkg excludes above keep out of later packages, out of debootstrap's packages too.
    $SUDO find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    $SUDO find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    $SUDO rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/groff/* "$rootfs"/usr/share/info/*
    $SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/log/*.log
    $SUDO tar -C "$rootfs" --numeric-owner -c . \
        | podman import --quiet --change "LABEL org.deltalab.base-recipe=$BASE_RECIPE" - "$BASE" >/dev/null
    $SUDO rm -rf "$rootfs" "$rootfs.log"
    log "imported $BASE"
fi
TIMES[base]=$(( $(now) - t ))

# --- 2. image ----------------------------------------------------------------------------
t=$(now)
# --jobs 2: the Java stage beside the Python steps of the second (docker/Dockerfile copies /opt/java late).
build_args=(--format docker --layers --jobs 2 "${RUNTIME_FLAGS[@]}"
    --build-arg "BASE_IMAGE=$BASE" --pull=never
    --ignorefile "$REPO/docker/Dockerfile.dockerignore"
    -f "$REPO/docker/Dockerfile" -t "$IMAGE")
# The pip cache `make setup` filled on this machine, for the build's pip (docker/Dockerfile): it holds the
# wheel pip built from pyspark's 430 MB source archive, which the build then neither downloads nor builds.
PIP_CACHE="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
if [ -d "$PIP_CACHE/wheels" ]; then
    build_args+=(--volume "$PIP_CACHE:/tmp/host-pip-cache")
fi
if [ -s "$CA_BUNDLE" ]; then
    build_args+=(--secret "id=host_ca,src=$CA_BUNDLE")
else
    log "no CA bundle at $CA_BUNDLE: building without the host_ca secret"
fi
log "building $IMAGE"
# Each line of the log starts with the seconds since the build started: what each step costs.
stamp() { local start=$SECONDS line; while IFS= read -r line; do printf '%4d %s\n' $(( SECONDS - start )) "$line"; done; }
if ! podman build "${build_args[@]}" "$REPO" 2>&1 | stamp >/tmp/deltalab-image-build.log; then
    tail -40 /tmp/deltalab-image-build.log >&2
    die "podman build failed (full log: /tmp/deltalab-image-build.log)"
fi
TIMES[build]=$(( $(now) - t ))
size_bytes=$(podman image inspect --format '{{.Size}}' "$IMAGE")
size_mb=$(( size_bytes / 1000000 ))
log "built $IMAGE: ${size_mb} MB in ${TIMES[build]} s (log: /tmp/deltalab-image-build.log)"

# No copy of the build-time CA may have landed in the image.
if [ -s "$CA_BUNDLE" ]; then
    podman run --rm --network=none --no-healthcheck "${RUNTIME_FLAGS[@]}" --entrypoint /bin/sh "$IMAGE" -c \
        'test ! -e /run/secrets/host_ca && ! ls /tmp/*truststore* >/dev/null 2>&1 && ! keytool -list -cacerts -storepass changeit 2>/dev/null | grep -q "^build-"' \
        || die "the image contains a build-time CA file or trust store entry"
fi

if [ "$PHASE" = build ]; then
    log "timings: base ${TIMES[base]} s, image build ${TIMES[build]} s (${size_mb} MB)"
    exit 0
fi
fi
podman image exists "$IMAGE" || die "no image $IMAGE: run bash .ci/container.sh build first"

# --- 3. nbval suite inside the container --------------------------------------------------
t=$(now)
image_notebooks="${DELTALAB_IMAGE_NOTEBOOKS:-$IMAGE_NOTEBOOKS}"
[ "$image_notebooks" != all ] || image_notebooks=""
log "nbval in the container (non-root, --network=none): ${image_notebooks:-every notebook}"
# The image's test, docker/test-image.sh (also `make -C docker test`): non-root, network off, the
# class archive found by `deltalab doctor`, then pytest -n WORKERS over the notebooks named, then over
# the labs' solution notebooks this run mounts (read-only; the image carries the student versions only).
# Which solution notebooks: DELTALAB_IMAGE_LABS, names of labs/source/ folders, or "all" (as
# `make -C docker test`); by default none: make test-labs runs them natively, and what the image could
# break in a lab (its Java, jars, Spark) the notebooks above already run.
IMAGE_LABS="${DELTALAB_IMAGE_LABS:-}"
lab_mounts=()
if [ "$IMAGE_LABS" = all ]; then
    lab_mounts=(-v "$REPO/labs/source:/home/deltalab/course/labs/source:ro")
else
    for lab in $IMAGE_LABS; do
        [ -d "$REPO/labs/source/$lab" ] || die "DELTALAB_IMAGE_LABS names $lab, which labs/source/ does not have"
        lab_mounts+=(-v "$REPO/labs/source/$lab:/home/deltalab/course/labs/source/$lab:ro")
    done
fi
[ -z "$IMAGE_LABS" ] || log "the labs' solution notebooks in the container: $IMAGE_LABS"
# Steps 3 and 4 run side by side, in two containers: the classroom's tests spend much of their time
# waiting (a hub and servers starting, the idle culler's minute), which the notebooks' kernels use.
# The nbval container's output goes to a log, printed once both are done.
nbval_log="$(mktemp /tmp/deltalab-image-nbval.XXXXXX)"
# Its own seconds, written when it ends (waited for after the classroom's end, it would report theirs).
nbval_seconds="$(mktemp /tmp/deltalab-image-nbval-seconds.XXXXXX)"
nbval_name="deltalab-ci-nbval-$$"
trap 'podman rm -f "$nbval_name" >/dev/null 2>&1 || true' EXIT
(
    status=0
    podman run --rm --name "$nbval_name" --network=none --no-healthcheck "${RUNTIME_FLAGS[@]}" "${lab_mounts[@]}" \
        -e "DELTALAB_CONTAINER_WORKERS=${DELTALAB_CONTAINER_WORKERS:-2}" -e "DELTALAB_IMAGE_NOTEBOOKS=$image_notebooks" \
        "$IMAGE" deltalab-test-image >"$nbval_log" 2>&1 || status=$?
    echo $(( $(now) - t )) >"$nbval_seconds"
    exit "$status"
) &
nbval_pid=$!

# --- 4. a classroom in the container ---------------------------------------------------------
log "a classroom in the container, beside it: JupyterHub, three students, an instructor, nbgrader's exchange (--network=none)"
# The hub, its proxy, every student's server and kernel run inside one container as its non-root
# user, on the container's loopback; the test drives them as a browser and the users would.
classroom_status=0
podman run --rm --network=none --no-healthcheck "${RUNTIME_FLAGS[@]}" \
    -v "$REPO/tests:/home/deltalab/course/tests:ro" -v "$REPO/labs/source:/home/deltalab/course/labs/source:ro" \
    "$IMAGE" python -m pytest -n 2 --dist loadfile -rP -m classroom tests/test_classroom.py tests/test_classroom_culler.py \
    -p no:cacheprovider \
    || classroom_status=$?
TIMES[classroom]=$(( $(now) - t ))
nbval_status=0
wait "$nbval_pid" || nbval_status=$?
TIMES[nbval]="$(cat "$nbval_seconds" 2>/dev/null || echo "?")"
rm -f "$nbval_seconds"
log "the in-container nbval suite's output:"
cat "$nbval_log"
trap - EXIT
[ "$nbval_status" -eq 0 ] || die "the in-container nbval suite failed"
[ "$classroom_status" -eq 0 ] || die "the classroom tests failed in the container"

# --- 5. JupyterLab token check ------------------------------------------------------------
t=$(now)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
name="deltalab-ci-lab-$$"
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# --health-interval=disable: no systemd timer here; the check runs once by hand below.
podman run -d --name "$name" --health-interval=disable "${RUNTIME_FLAGS[@]}" -p "127.0.0.1:${port}:8888" \
    -e "JUPYTER_TOKEN=$token" "$IMAGE" >/dev/null 2>/tmp/deltalab-lab-run.err \
    || { cat /tmp/deltalab-lab-run.err >&2; die "podman could not start the JupyterLab container"; }
# (podman warns on stderr that it cannot add systemd healthcheck timers; that is expected here)
url="http://127.0.0.1:${port}"
for _ in $(seq 1 90); do
    curl -fsS -o /dev/null "$url/api" 2>/dev/null && break
    sleep 1
done
curl -fsS -o /dev/null "$url/api" || { podman logs "$name" >&2; die "JupyterLab did not answer on $url"; }
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/contents")
[ "$code" = 403 ] || die "GET /api/contents without the token answered $code, expected 403"
location=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$url/lab")
case "$location" in "302 "*"/login"*) ;; *) die "GET /lab without the token answered '$location', expected a 302 to /login" ;; esac
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/contents?token=wrong$token")
[ "$code" = 403 ] || die "GET /api/contents with a wrong token answered $code, expected 403"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: token $token" "$url/api/contents/notebooks")
[ "$code" = 200 ] || die "GET /api/contents/notebooks with the token answered $code, expected 200"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/lab?token=$token")
[ "$code" = 200 ] || die "GET /lab?token=... answered $code, expected 200"
# It serves the learner's own copy of the course (DELTALAB_LEARNER_DIR), notebooks without outputs.
served=$(podman exec "$name" python -c 'import json, os; print(json.load(open(os.path.join(os.environ["DELTALAB_LEARNER_DIR"], "notebooks", "00_hello_delta.ipynb")))["cells"][-1].get("outputs"))') \
    || { podman logs "$name" >&2; die "the learner's copy of the course was not made in the container"; }
[ "$served" = "[]" ] || die "the learner's copy of notebook 00 in the container has outputs: $served"
podman exec "$name" sh -c 'test -f "$DELTALAB_LEARNER_DIR/labs/lab02_log/lab02_log.ipynb" && test ! -e "$DELTALAB_LEARNER_DIR/labs/source"' \
    || die "the learner's copy of the course in the container lacks the labs' student versions, or has their sources"
curl -fsS -H "Authorization: token $token" "$url/api/contents/notebooks/00_hello_delta.ipynb" \
    | python3 -c 'import json, sys; cells = json.load(sys.stdin)["content"]["cells"]; sys.exit(any(c.get("outputs") for c in cells))' \
    || die "JupyterLab in the container serves notebook 00 with outputs: not the learner's copy"
podman healthcheck run "$name" >/dev/null || die "the image's healthcheck failed on a running JupyterLab"
user=$(podman exec "$name" id -u)
[ "$user" != 0 ] || die "JupyterLab runs as root in the container"
cleanup
trap - EXIT
TIMES[token]=$(( $(now) - t ))
log "JupyterLab on 127.0.0.1:$port: 403/302 without the token, 200 with it; the learner's copy served; healthcheck ok; uid $user"

TIMES[total]=$(( $(now) - START_ALL ))
built=""
[ "$PHASE" = test ] || built="base ${TIMES[base]} s, image build ${TIMES[build]} s (${size_mb} MB), "
log "timings: ${built}in-container nbval ${TIMES[nbval]} s and classroom ${TIMES[classroom]} s (side by side), token check ${TIMES[token]} s, total ${TIMES[total]} s"
