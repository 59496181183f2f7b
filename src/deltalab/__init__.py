"""deltalab: what the notebooks and labs of the Delta Lake internals course share.

The course imports what it uses in most notebooks from the package itself::

    from deltalab import get_spark, workdir, check_parameters, show_tree, show_versions, read_log

and the tools of one topic from their module (``deltalab.concurrency``, ``deltalab.writers``, ``deltalab.jvm``,
``deltalab.curves``, ``deltalab.plots``, ``deltalab.schema``, ``deltalab.labs.lab02_log``, ...).
See ``src/deltalab/README.md`` for the layout and where new code goes.
"""

from deltalab.errors import DeltaLabError, SparkFailure, failure_of
from deltalab.files import data_files, directory_files, orphan_data_files, read_table, show_tree, spark_files
from deltalab.locations import dataset_path
from deltalab.log import checkpoint_versions, commit_info, commit_versions, latest_version, read_log, replay_log
from deltalab.params import check_parameters, parameter_rule
from deltalab.jvm import clear_delta_cache
from deltalab.session import get_spark, show_versions, temporary_conf
from deltalab.skipping import file_stats, scan_metrics, skipping_effectiveness
from deltalab.workdir import workdir

__all__ = [
    "DeltaLabError",
    "SparkFailure",
    "check_parameters",
    "checkpoint_versions",
    "clear_delta_cache",
    "commit_info",
    "commit_versions",
    "data_files",
    "dataset_path",
    "directory_files",
    "failure_of",
    "file_stats",
    "get_spark",
    "latest_version",
    "orphan_data_files",
    "parameter_rule",
    "read_log",
    "read_table",
    "replay_log",
    "scan_metrics",
    "show_tree",
    "show_versions",
    "skipping_effectiveness",
    "spark_files",
    "temporary_conf",
    "workdir",
]
