"""nbgrader configuration for the course labs. Run every nbgrader command from this folder (labs/)."""

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.CourseDirectory.course_id = "deltalab-labs"
# Everything nbgrader writes (gradebook.db, submitted/, autograded/, feedback/, solution/) lands in
# this folder; only source/ and release/ are kept in git.
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# The student version replaces each solution region with this stub; the checks recognise it.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# A lab cell starts Spark or runs OPTIMIZE on a shared machine: give cells time (seconds).
c.Execute.timeout = 600
