#!/usr/bin/env bash
# Build-time helper (docker/Dockerfile copies it to /opt/deltalab/build and runs it): runs
# `python -m deltalab fetch-jars`, which resolves Delta's jars with Ivy inside spark-submit's
# launcher JVM. If a CA bundle is given ($1, the build secret host_ca) and holds certificates
# Debian's bundle lacks (a TLS-intercepting proxy's CA), they are added to a throwaway copy of
# Java's trust store under /tmp, named through SPARK_SUBMIT_OPTS for this step only.
set -euo pipefail

bundle="${1:-}"
if [ -n "$bundle" ] && [ -s "$bundle" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    cp "${JAVA_HOME:?}/lib/security/cacerts" "$tmp/truststore"
    python3 - "$bundle" "$tmp" <<'PY'
import pathlib
import re
import sys

pem = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)
known = {"".join(c.split()) for c in pem.findall(pathlib.Path("/etc/ssl/certs/ca-certificates.crt").read_text())}
extra = [c for c in pem.findall(pathlib.Path(sys.argv[1]).read_text()) if "".join(c.split()) not in known]
for number, cert in enumerate(extra, 1):
    (pathlib.Path(sys.argv[2]) / f"extra-{number}.pem").write_text(cert + "\n")
print(f"fetch-jars: {len(extra)} build-time CA certificate(s) added to a temporary trust store")
PY
    for cert in "$tmp"/extra-*.pem; do
        [ -e "$cert" ] || continue
        keytool -importcert -noprompt -keystore "$tmp/truststore" -storepass changeit \
            -alias "build-$(basename "$cert" .pem)" -file "$cert" >/dev/null
    done
    export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:-} -Djavax.net.ssl.trustStore=$tmp/truststore -Djavax.net.ssl.trustStorePassword=changeit"
fi

python -m deltalab fetch-jars
rm -rf "${HOME:-/root}/.ivy2" "${HOME:-/root}/.ivy2.5.2"
