"""The classroom: for teachers, and for learners checking their own loop in a workbook.

    check.py     the checker: `check(agent_loop, step=...)` runs the reference behaviours
                 (agentlab/behaviours.py) against a learner's loop and says what to fix
    grading.py   grading a class, each submission in a process of its own
                 (`python -m agentlab check`, `python -m agentlab grade`)
    student.py   the learners' copies of the workbooks, released with nbgrader
                 (`python -m agentlab student`, `make student`)
    template.py  a GitHub Classroom starter repository whose workflow grades every push
                 (`python -m agentlab classroom init`, `python -m agentlab classroom row`)

See docs/teachers.md. Nothing in the core imports this folder.
"""
