"""The notebook face of agentlab: for learners in JupyterLab, and for whoever writes a lesson.

    widgets.py    the playgrounds (ipywidgets): move a knob, watch the loop enforce its rule
    trace.py      a run shown as a trace, in HTML (notebooks) or text (scripts)
    scenarios.py  the runs the playgrounds drive, each with its knobs
    fakes.py      scripted models: no key, no network, the same answer every time
    examples.py   the example tools (a lookup, the weather) the lessons use
    _look.py      the shared inline styles of everything shown in a notebook

Everything here builds on the core (agentlab/loop.py and its neighbours); the
core never imports this folder, except to show a result or an error as a
trace when a notebook asks (`_repr_html_`, imported only then).
"""
