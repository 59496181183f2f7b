#!/usr/bin/env bash
# Entry point of the course image; tini (PID 1) runs it. The first argument picks the role:
#   lab              JupyterLab on 0.0.0.0:8888 (the default). Token: $JUPYTER_TOKEN, or a
#                    random one printed to the log. As a learner sees it (`make lab`): no nbgrader
#                    tools, no news prompt. DELTALAB_ROLE=instructor gives the instructor's
#                    JupyterLab (`make instructor`), which needs nbgrader and the labs mounted.
#   master           Spark standalone master: port 7077, web UI 8080.
#   worker [URL]     Spark standalone worker for URL (default $SPARK_MASTER), web UI 8081.
#   anything else    run as a command, e.g. `pytest notebooks`, `python -m deltalab doctor`, `bash`.
set -euo pipefail

role="${1:-lab}"
[ "$#" -gt 0 ] && shift
echo "$role" > /tmp/deltalab-role

case "$role" in
    lab)
        # The role's Jupyter settings (src/deltalab/jupyter/<role>, copied by the Dockerfile) go
        # first on JUPYTER_CONFIG_PATH, as `make lab` does.
        jupyter_role="${DELTALAB_ROLE:-learner}"
        opens=notebooks/README.md
        case "$jupyter_role" in
            learner) ;;
            instructor)
                if ! python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("nbgrader") is None)'; then
                    echo "deltalab: DELTALAB_ROLE=instructor needs nbgrader, which this image does not install (pip install -c requirements.lock nbgrader in a derived image, or run \`make instructor\` from a checkout)." >&2
                    exit 2
                fi
                if [ ! -f "${DELTALAB_COURSE_DIR}/labs/nbgrader_config.py" ]; then
                    echo "deltalab: DELTALAB_ROLE=instructor needs the labs: mount your checkout's labs/ at ${DELTALAB_COURSE_DIR}/labs." >&2
                    exit 2
                fi
                # nbgrader reads labs/nbgrader_config.py and labs/gradebook.db from its working directory.
                cd "${DELTALAB_COURSE_DIR}/labs"
                opens=labs/README.md
                ;;
            *)
                echo "deltalab: DELTALAB_ROLE=${jupyter_role} is not a JupyterLab role: leave it unset (learner) or set it to instructor." >&2
                exit 2
                ;;
        esac
        export JUPYTER_CONFIG_PATH="${DELTALAB_JUPYTER_CONFIG}/${jupyter_role}${JUPYTER_CONFIG_PATH:+:${JUPYTER_CONFIG_PATH}}"
        if [ -z "${JUPYTER_TOKEN:-}" ]; then
            JUPYTER_TOKEN="$(python -c 'import secrets; print(secrets.token_hex(24))')"
            echo "deltalab: no JUPYTER_TOKEN given; generated token: ${JUPYTER_TOKEN}"
            echo "deltalab: open http://127.0.0.1:8888/lab/tree/${opens}?token=${JUPYTER_TOKEN} (use the host port you published)"
        fi
        # jupyter_server reads the token from the environment: it stays off the command line.
        export JUPYTER_TOKEN
        exec jupyter lab --no-browser --ip=0.0.0.0 --port=8888 \
            --ServerApp.root_dir="${DELTALAB_COURSE_DIR}" "$@"
        ;;
    master)
        exec spark-class org.apache.spark.deploy.master.Master \
            --host "${SPARK_MASTER_HOST:-$(hostname)}" --port 7077 --webui-port 8080 "$@"
        ;;
    worker)
        url="${1:-${SPARK_MASTER:-}}"
        [ "$#" -gt 0 ] && shift
        if [ -z "$url" ]; then
            echo "deltalab: the worker needs the master's URL: pass it (worker spark://HOST:7077) or set SPARK_MASTER." >&2
            exit 2
        fi
        exec spark-class org.apache.spark.deploy.worker.Worker "$url" \
            --cores "${SPARK_WORKER_CORES:-4}" --memory "${SPARK_WORKER_MEMORY:-4g}" \
            --work-dir "${SPARK_WORKER_DIR:-/home/deltalab/spark-work}" --webui-port 8081 "$@"
        ;;
    *)
        exec "$role" "$@"
        ;;
esac
