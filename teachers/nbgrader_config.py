"""The nbgrader course of agentlab's workbooks: run nbgrader's commands in this folder (see docs/teachers.md)."""

c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "agentlab"
c.CourseDirectory.root = "."
# The check cells print a report and end with `report.points`: nbgrader gives that number as the cell's partial credit.
