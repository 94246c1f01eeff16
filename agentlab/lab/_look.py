"""The look of agentlab's HTML (trace, playground, approval desk, checker report): inline styles, one palette.

Why inline, and why these colours: JupyterLab does not trust a notebook it opens from disk, so it strips every
`<style>` block from the saved outputs, and keeps a `style=` attribute only for the declarations its CSS filter
accepts, which refuses `var(--jp-...)` and `inherit`. So the theme's variables cannot reach a saved output. The
colours below read on the light and on the dark theme alike instead: text keeps the theme's own colour, muted text
is that colour faded, backgrounds are translucent, and the accents are mid-tones. The same HTML then looks the same
as opened, after running, on GitHub and in VS Code. Standard library only: the trace is part of the core.
"""

from __future__ import annotations

RED = "#e5534b"
GREEN = "#2da44e"
AMBER = "#c08a1e"
BLUE = "#3b82f6"
LINE = "rgba(128,128,128,.35)"
MONO = "font-family:Menlo,Consolas,monospace;font-size:13px"
SANS = "font-family:system-ui,-apple-system,Roboto,Arial,sans-serif;font-size:13px"
MUTED = "opacity:.68"
BOX = f"border:1px solid {LINE};border-radius:6px;padding:8px 10px;max-width:60em;line-height:1.45;text-align:left"
# JupyterLab right-aligns table cells and stripes rows in outputs; an inline style outranks both.
TABLE = "border-collapse:collapse;width:100%;background:transparent;margin:0"
ROW = "background:transparent"
CELL = "padding:2px 6px;vertical-align:top;text-align:left;border:none;white-space:pre-wrap;overflow-wrap:break-word"
BAD_BACKGROUND = "background:rgba(229,83,75,.16)"
CHANGED_BACKGROUND = "background:rgba(214,160,40,.32)"


def attr(css: str) -> str:
    """A style attribute, single-quoted (no style here has a quote in it)."""
    return f" style='{css}'"
