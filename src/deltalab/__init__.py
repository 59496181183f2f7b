"""deltalab: what the notebooks and labs of the Delta Lake internals course share.

The course calls these instead of copying code between notebooks::

    from deltalab import get_spark, workdir, check_parameters, show_tree, show_versions
"""

from deltalab.errors import DeltaLabError
from deltalab.log import read_log, replay_log
from deltalab.params import check_parameters
from deltalab.session import get_spark, stop_spark, temporary_conf
from deltalab.skipping import file_stats, scan_metrics, skipping_effectiveness
from deltalab.tree import show_tree
from deltalab.versions import show_versions
from deltalab.workdir import workdir

__all__ = [
    "DeltaLabError",
    "check_parameters",
    "file_stats",
    "get_spark",
    "read_log",
    "replay_log",
    "scan_metrics",
    "show_tree",
    "show_versions",
    "skipping_effectiveness",
    "stop_spark",
    "temporary_conf",
    "workdir",
]
