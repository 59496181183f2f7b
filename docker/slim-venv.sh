#!/usr/bin/env bash
# Build-time helper (docker/Dockerfile runs it in the layer that installs the packages, so what it
# removes never reaches the image): deletes what the course never runs from the image's virtual
# environment. Measured on pyspark 4.2.0: 225 MiB of Spark's own jars, up to 73 MiB of tests and
# headers (258 MiB in all in the image's build, whose packages have fewer tests), pyarrow's Flight and
# JupyterHub's unused page assets.
#   slim-venv.sh SITE_PACKAGES [--dry-run]     --dry-run lists what would go, with sizes.
# Kept on purpose: every jar a local or standalone session loads (spark-core/sql/catalyst, the
# UI's kvstore, antlr4, arrow, icu4j for collations, hive-storage-api for ORC, commons-pool, which
# Delta's own tree needs too), so the course, its labs and a Spark standalone cluster run as before
# (CI runs the whole notebook suite, the labs and a classroom in the image).
set -euo pipefail

site="${1:?usage: slim-venv.sh SITE_PACKAGES [--dry-run]}"
dry_run="${2:-}"
jars="$site/pyspark/jars"
[ -d "$jars" ] || { echo "slim-venv: no pyspark jars under $site" >&2; exit 2; }

# Spark jars by what needs them; none of it is loaded unless a session asks for it.
patterns=(
    # RocksDB: a streaming state store and the UI's disk store; the course uses the default
    # HDFS-backed state store and keeps the UI off.
    'rocksdbjni-*.jar'
    # Spark Connect's server and its REPL: the course runs classic PySpark.
    'spark-connect_*.jar' 'connect-repl'
    # Hive's metastore, server and command line (enableHiveSupport); not ORC's hive-storage-api.
    'spark-hive_*.jar' 'spark-hive-thriftserver_*.jar' 'hive-beeline-*.jar' 'hive-cli-*.jar' 'hive-common-*.jar'
    'hive-exec-*.jar' 'hive-jdbc-*.jar' 'hive-metastore-*.jar' 'hive-serde-*.jar' 'hive-service-rpc-*.jar'
    'hive-shims-*.jar' 'derby-*.jar' 'derbyshared-*.jar' 'derbytools-*.jar' 'datanucleus-*.jar' 'HikariCP-*.jar'
    'javax.jdo-*.jar' 'jdo-api-*.jar' 'javolution-*.jar' 'libfb303-*.jar'
    # MLlib and its linear algebra: pyspark.ml is not part of the course.
    'spark-mllib_*.jar' 'spark-mllib-local_*.jar' 'breeze_*.jar' 'breeze-macros_*.jar' 'spire_*.jar' 'spire-*_*.jar'
    'algebra_*.jar' 'cats-kernel_*.jar' 'arpack-*.jar' 'arpack_combined_all-*.jar' 'blas-*.jar' 'lapack-*.jar'
    'JTransforms-*.jar' 'JLargeArrays-*.jar'
    # Kubernetes as a cluster manager: the course runs local or on a standalone master.
    'spark-kubernetes_*.jar' 'kubernetes-*.jar'
    # The Scala shell (spark-shell) and the Scala compiler it runs; the course's JVMs never load
    # scala.tools.nsc (none of its classes is in the class archive of a whole run of the course).
    'spark-repl_*.jar' 'scala-compiler-*.jar'
    # Netty's BoringSSL for other systems (macOS, Windows); Linux's, for x86-64 and ARM, stay.
    'netty-tcnative-boringssl-static-*-osx-*.jar' 'netty-tcnative-boringssl-static-*-windows-*.jar'
)
# The test suites of libraries (none is imported at run time) and pyarrow's C++ headers.
folders=(pandas/tests numpy/_core/tests numpy/lib/tests numpy/linalg/tests numpy/fft/tests numpy/random/tests
         numpy/ma/tests numpy/polynomial/tests numpy/typing/tests numpy/f2py/tests numpy/testing/tests
         pyarrow/tests pyarrow/include matplotlib/tests)
# pyarrow's Flight (an RPC framework; `import pyarrow.flight` only): 32 MiB, and only its own modules
# link it (ldd). Not Substrait, which pyarrow's core libraries link.
flight_files=(pyarrow/libarrow_flight.so.* pyarrow/libarrow_python_flight.so* pyarrow/_flight.cpython-*.so
              pyarrow/flight.py pyarrow/_flight.pyx)

# JupyterHub's page assets (the hub's pages): Font Awesome's SVGs, sprites, metadata and scripts (about
# 30 MB in 5,800 files); its style sheets import only Font Awesome's css/ and webfonts/, which stay.
share="$(cd "$site/../../.." && pwd)/share"
fontawesome="$share/jupyterhub/static/components/@fortawesome/fontawesome-free"
hub_assets=("$fontawesome/svgs" "$fontawesome/svgs-full" "$fontawesome/sprites" "$fontawesome/sprites-full"
            "$fontawesome/metadata" "$fontawesome/js" "$fontawesome/scss" "$fontawesome/less"
            "$share/jupyterhub/static/components/requirejs/bin")

targets=()
for pattern in "${patterns[@]}"; do
    matched=("$jars"/$pattern)
    [ -e "${matched[0]}" ] || { echo "slim-venv: no jar matches $pattern in $jars (a new pyspark? update the list)" >&2; exit 1; }
    targets+=("${matched[@]}")
done
for folder in "${folders[@]}"; do
    [ -e "$site/$folder" ] && targets+=("$site/$folder")
done
for pattern in "${flight_files[@]}"; do
    for file in "$site"/$pattern; do
        [ -e "$file" ] && targets+=("$file")
    done
done
for path in "${hub_assets[@]}"; do
    [ -e "$path" ] && targets+=("$path")
done
size_kb=$(du -sck --apparent-size "${targets[@]}" | tail -1 | cut -f1)
if [ "$dry_run" = --dry-run ]; then
    printf '%s\n' "${targets[@]}"
    echo "slim-venv: would remove ${#targets[@]} paths, $(( size_kb / 1024 )) MiB"
    exit 0
fi
rm -rf "${targets[@]}"
echo "slim-venv: removed ${#targets[@]} paths, $(( size_kb / 1024 )) MiB"
