#!/usr/bin/env bash
# Container healthcheck: the role's HTTP endpoint answers on localhost.
#   lab: JupyterLab's /api (answers without a token); master: web UI 8080; worker: web UI 8081.
# Other commands (pytest, bash, ...) have no server and count as healthy.
set -euo pipefail

case "$(cat /tmp/deltalab-role 2>/dev/null || echo lab)" in
    lab) url="http://127.0.0.1:8888/api" ;;
    master) url="http://127.0.0.1:8080/json/" ;;
    worker) url="http://127.0.0.1:8081/json/" ;;
    *) exit 0 ;;
esac
exec python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$url"
