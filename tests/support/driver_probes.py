"""Functions the tests ask a second driver to run (``driver.call("driver_probes.NAME", ...)``).

They live with the tests, not in the package: no lesson needs them. A driver finds this module
because the tests start it with this folder on its ``PYTHONPATH`` (:data:`PROBES_ENV`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The environment a test's driver needs to import this module.
PROBES_ENV = {"PYTHONPATH": str(Path(__file__).resolve().parent)}


def session_settings(spark: Any, keys: list[str]) -> dict[str, str | None]:
    """What the session has for each setting (None when unset): proof that settings took."""
    return {key: spark.conf.get(key, None) for key in keys}


def class_path_has(spark: Any, name: str) -> bool:
    """True if the driver's JVM can load the class (``a.b.C``) or resource (``a/b/file.txt``) ``name``."""
    resource = name if "/" in name else name.replace(".", "/") + ".class"
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return loader.getResource(resource) is not None


def append_held(spark: Any, path: str, writer: int, rows: int, hold: str) -> None:
    """Blind-append ``rows`` rows tagged ``writer`` (labelled ``writer-N`` in commitInfo), stopping
    at the hold ``hold`` (a ``deltalab.holds.Hold`` path) after Delta has taken its snapshot: the
    write has started its transaction (it knows the version it read) but written nothing yet."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    from deltalab.holds import hold_gate

    gate = F.udf(hold_gate(hold), BooleanType(), useArrow=False)
    (spark.range(0, rows, 1, 1)
     .withColumn("writer", F.lit(writer))
     .filter(gate(F.col("id")))
     .write.format("delta").mode("append")
     .option("userMetadata", f"writer-{writer}")
     .save(path))
