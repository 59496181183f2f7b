"""nbgrader configuration for the course labs. Run every nbgrader command from this folder (labs/)."""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.CourseDirectory.course_id = "deltalab-labs"
# Everything nbgrader writes (gradebook.db, submitted/, autograded/, feedback/, solution/) lands in
# this folder; only source/ and release/ are kept in git.
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# The student version replaces each solution region with this stub; the checks recognise it.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# A lab cell starts Spark or runs OPTIMIZE on a shared machine: give cells time (seconds).
c.Execute.timeout = 600
# The exchange nbgrader's release/collect use (and the formgrader checks for): a folder of the
# instructor's instead of /srv/nbgrader/exchange, which only root can create (the formgrader then
# says "The exchange directory ... does not exist"). nbgrader never creates it: this file does. A
# folder shared by a classroom server's users through DELTALAB_NBGRADER_EXCHANGE.
c.Exchange.root = os.environ.get("DELTALAB_NBGRADER_EXCHANGE") or os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"),
    "deltalab", "nbgrader-exchange")
try:
    os.makedirs(c.Exchange.root, exist_ok=True)
except OSError:
    pass  # nbgrader names the folder it cannot use when Release/Collect are tried
