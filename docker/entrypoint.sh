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
        # python -m deltalab lab (src/deltalab/jupyterlab.py, as `make lab` runs it) puts the role's
        # Jupyter settings ($DELTALAB_JUPYTER_CONFIG/<role>, copied by the Dockerfile) first on
        # JUPYTER_CONFIG_PATH, serves the learner's copy of $DELTALAB_COURSE_DIR ($DELTALAB_LEARNER_DIR,
        # made or brought up to date first) and starts the instructor in labs/.
        # --check first: an unknown role, or an instructor without nbgrader or the labs, stops
        # here with the fix, before a token is made; it prints the file the role opens.
        jupyter_role="${DELTALAB_ROLE:-learner}"
        opens="$(python -m deltalab lab --role "$jupyter_role" --check)"
        if [ -z "${JUPYTER_TOKEN:-}" ]; then
            JUPYTER_TOKEN="$(python -c 'import secrets; print(secrets.token_hex(24))')"
            echo "deltalab: no JUPYTER_TOKEN given; generated token: ${JUPYTER_TOKEN}"
            echo "deltalab: open http://127.0.0.1:8888/lab/tree/${opens}?token=${JUPYTER_TOKEN} (use the host port you published)"
        fi
        # jupyter_server reads the token from the environment: it stays off the command line.
        export JUPYTER_TOKEN
        exec python -m deltalab lab --role "$jupyter_role" --no-browser --ip=0.0.0.0 --port=8888 -- "$@"
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
