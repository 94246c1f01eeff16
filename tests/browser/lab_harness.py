"""A real JupyterLab server on loopback and Debian's Chromium, driven by Playwright, for the browser tests.

Nothing here writes into the repository or the home folder: the server gets a
copy of the notebooks, a random token, a free port, and throwaway config, data,
runtime, settings, workspaces and IPython folders (and HOME) under one
temporary folder. The browser is `/usr/bin/chromium`, launched by Playwright
without any browser download. Both are stopped by their process ids.

`NotebookPage` drives one notebook the way a learner does (open it, Run All
Cells from the menu, read what every cell shows), and `PlaygroundView` one
playground's controls, Stop button and view.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
# Debian's Chromium by default; AGENTLAB_CHROMIUM names another Chromium-based browser, e.g. the Google Chrome that
# GitHub's ubuntu-latest runner image has preinstalled (.github/workflows/ci.yml), where Ubuntu's chromium-browser
# package is only a shim for a snap.
CHROMIUM = Path(os.environ.get("AGENTLAB_CHROMIUM") or "/usr/bin/chromium")
# Chromium on a machine whose network is closed but for package registries: no
# background traffic, no sandbox as root, no GPU, /tmp instead of a small /dev/shm.
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
)
# Throwaway user settings: start the kernel on open (JupyterLab 4.6 asks otherwise),
# and never reach for news or updates.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}
# A laptop's screen: what a learner sees without scrolling, and what the screenshots show.
LAPTOP = {"width": 1280, "height": 800}
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
SERVER_START_S = 90
STOP_WAIT_S = 30
KERNEL_IDLE_S = 90
RUN_ALL_S = 180
STDERR_MIME = "application/vnd.jupyter.stderr"


class HarnessError(AssertionError):
    """Something the browser test checks went wrong; the message says what and where to look."""


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, interval_s: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; raise HarnessError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_process(pid: int, sig: signal.Signals, wait_s: float = STOP_WAIT_S) -> None:
    """Send `sig` to `pid`, wait for it to go, then SIGKILL it if it is still there."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether `pid` is still running (a zombie child of ours is reaped and counts as gone)."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass  # not our child: fall back to signal 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- the JupyterLab server ---------------------------------------------------------------


@dataclass
class LabServer:
    """A running JupyterLab server: where it listens, its token, the notebooks copy and its log."""

    process: subprocess.Popen[bytes]
    base_url: str
    token: str
    root: Path
    log: Path

    def url(self, notebook: Path) -> str:
        """The address that opens `notebook` (relative to `root`) in a fresh workspace."""
        path = urllib.parse.quote(notebook.as_posix())
        return f"{self.base_url}/lab/tree/{path}?reset&token={self.token}"

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API; return the decoded JSON (None for an empty body)."""
        request = urllib.request.Request(
            f"{self.base_url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """End every session and its kernel, so notebooks do not pile kernels up on two cores."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_lab(workdir: Path, notebooks: Path) -> LabServer:
    """Copy `notebooks` into `workdir` and start JupyterLab on it, on 127.0.0.1, with throwaway folders."""
    root = workdir / "notebooks"
    shutil.copytree(notebooks, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = workdir / "lab-settings"
    for plugin, values in LAB_SETTINGS.items():
        file = settings / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    folders = {
        "HOME": workdir / "home",
        "JUPYTER_CONFIG_DIR": workdir / "jupyter-config",
        "JUPYTER_DATA_DIR": workdir / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": workdir / "jupyter-runtime",
        "JUPYTERLAB_SETTINGS_DIR": settings,
        "JUPYTERLAB_WORKSPACES_DIR": workdir / "lab-workspaces",
        "IPYTHONDIR": workdir / "ipython",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{name: str(folder) for name, folder in folders.items()}}
    env.pop("JUPYTER_PATH", None)
    port, token = free_port(), secrets.token_hex(24)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = workdir / "jupyterlab.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=sink, stderr=subprocess.STDOUT)
    server = LabServer(process, f"http://127.0.0.1:{port}", token, root, log)

    def answering() -> bool:
        if process.poll() is not None:
            raise HarnessError(f"JupyterLab exited with {process.returncode}:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status")
        except OSError:
            return False
        return True

    try:
        wait_for(f"JupyterLab to answer on {server.base_url}", answering, SERVER_START_S, 0.25)
    except BaseException:
        stop_lab(server)
        raise
    return server


def set_theme(server: LabServer, theme: str) -> None:
    """Choose the theme of the pages opened from now on (the user setting a page reads when it loads)."""
    file = server.root.parent / "lab-settings" / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"theme": theme}))


def stop_lab(server: LabServer) -> None:
    """SIGTERM the server by its pid (it shuts its kernels down), SIGKILL after a grace period."""
    stop_process(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=STOP_WAIT_S)


# -- Chromium ----------------------------------------------------------------------------


@dataclass
class Chromium:
    """Debian's Chromium, headless, launched by Playwright; `pid` is its browser process."""

    playwright: Any
    browser: Any
    pid: int


def start_chromium(home: Path) -> Chromium:
    """Launch /usr/bin/chromium through Playwright (no download) and learn its process id."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            env={**os.environ, "HOME": str(home)},
        )
        session = browser.new_browser_cdp_session()
        processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
        session.detach()
        pid = next(process["id"] for process in processes if process["type"] == "browser")
    except BaseException:
        playwright.stop()
        raise
    return Chromium(playwright, browser, pid)


def stop_chromium(chromium: Chromium) -> None:
    """Close the browser, kill its process by pid if it lingers, and stop Playwright's driver."""
    try:
        chromium.browser.close()
    except Exception:  # a browser that already died: its pid is handled below
        pass
    finally:
        stop_process(chromium.pid, signal.SIGKILL, wait_s=5)
        chromium.playwright.stop()


# -- one notebook in the browser ---------------------------------------------------------

# Read every cell of the open notebook: its kind, its prompt, and its outputs
# (mime type, text, and whether it is an agentlab trace shown on purpose).
_CELLS_JS = """
() => {
  const notebook = document.querySelector('.jp-NotebookPanel .jp-Notebook');
  if (!notebook) return null;
  return Array.from(notebook.querySelectorAll(':scope .jp-Cell')).map(cell => ({
    code: cell.classList.contains('jp-CodeCell'),
    prompt: (cell.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
    outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(output => ({
      mime: output.getAttribute('data-mime-type') || '',
      text: output.textContent.slice(0, 4000),
      agentError: !!output.querySelector('.agentlab-trace .head.bad'),
      widget: !!output.querySelector('.jupyter-widgets'),
    })),
  }));
}
"""


@dataclass
class CellState:
    index: int
    code: bool
    prompt: str
    outputs: list[dict[str, Any]]


@dataclass
class NotebookPage:
    """One notebook open in its own browser page, as a learner has it."""

    page: Any
    name: str
    source: dict[str, Any]  # the notebook file as copied, for which cells have code and which may raise
    shots: Path
    console_errors: list[str] = field(default_factory=list)

    # -- what the notebook file says ---------------------------------------------------

    def runnable_cells(self) -> list[int]:
        """Indexes of the code cells with code in them (JupyterLab does not execute an empty cell)."""
        return [
            index
            for index, cell in enumerate(self.source["cells"])
            if cell["cell_type"] == "code" and "".join(cell["source"]).strip()
        ]

    def may_raise(self, index: int) -> bool:
        return "raises-exception" in self.source["cells"][index].get("metadata", {}).get("tags", [])

    # -- reading the page -----------------------------------------------------------------

    def cells(self) -> list[CellState]:
        raw = self.page.evaluate(_CELLS_JS) or []
        return [CellState(index, **cell) for index, cell in enumerate(raw)]

    def kernel_status(self) -> str:
        indicator = self.page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator")
        return (indicator.get_attribute("data-status") or "") if indicator.count() else ""

    def screenshot(self, label: str = "") -> Path:
        """The window as it is, once the notebook has drawn (a shot taken earlier came out blank)."""
        wait_for(
            f"{self.name} to draw its cells",
            lambda: self.page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea").first.is_visible(),
            30,
        )
        self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        path = self.shots / f"{self.name}{'-' + label if label else ''}.png"
        self.page.screenshot(path=str(path))
        return path

    # -- driving it --------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load JupyterLab on the notebook, wait for its cells and for its kernel to be idle."""
        self.page.goto(url)
        expected = len(self.source["cells"])
        wait_for(
            f"{self.name}'s {expected} cells to appear",
            lambda: len(self.cells()) == expected,
            KERNEL_IDLE_S,
        )
        self.wait_idle("the kernel to start and be idle")

    def wait_idle(self, what: str, timeout_s: float = KERNEL_IDLE_S) -> None:
        """Wait for the notebook's kernel to be connected and idle (toolbar indicator and status bar agree)."""

        def idle() -> bool:
            status_bar = self.page.locator("#jp-main-statusbar").inner_text()
            return self.kernel_status() == "idle" and re.search(r"\| Idle", status_bar) is not None

        wait_for(what, idle, timeout_s)

    def menu(self, menu: str, command: str) -> None:
        """Click a menu of the menu bar, then its item that runs `command`."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{re.escape(menu)}$")).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def switch_theme(self, theme: str) -> None:
        """Settings > Theme > `theme` in this page, as a learner switches it: no reload, the outputs restyle in place.

        JupyterLab saves the choice in the user settings too: the test resets them (set_theme) when it is done.
        """
        background = "() => getComputedStyle(document.querySelector('.jp-NotebookPanel .jp-Notebook')).backgroundColor"
        before = self.page.evaluate(background)
        self.page.locator(".lm-MenuBar-item", has_text=re.compile("^Settings$")).click()
        self.page.locator(".lm-Menu-item[data-type='submenu']", has_text=re.compile("^Theme")).hover()
        self.page.locator(".lm-Menu-item", has_text=re.compile(f"^{re.escape(theme)}")).first.click()
        wait_for(
            f"the theme to become {theme} and its colours to be drawn",
            lambda: (
                self.page.evaluate("() => document.body.dataset.jpThemeName") == theme
                and self.page.evaluate(background) != before
            ),
            30,
        )
        self.page.keyboard.press("Escape")  # a menu left open would sit over the outputs in the screenshots
        self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    def select_cell(self, index: int) -> None:
        """Click a cell's prompt: the cell becomes the selected one, in command mode."""
        self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index).locator(".jp-InputPrompt").click()

    def run_all(self) -> None:
        """Edit > Clear Outputs of All Cells, then Run > Run All Cells, as a learner starting afresh does.

        With the saved outputs cleared first, every prompt number and output
        seen afterwards comes from this run. JupyterLab ignores a Run All
        clicked while the kernel is not attached (the prompts stay empty):
        then wait for the kernel and click again.
        """
        self.menu("Edit", "editmenu:clear-all")
        runnable = self.runnable_cells()
        wait_for(
            "the saved outputs to be cleared",
            lambda: all(not cell.outputs for cell in self.cells()),
            10,
        )
        for _attempt in range(3):
            self.menu("Run", "runmenu:run-all")
            try:
                wait_for(
                    "a cell to be queued or executed",
                    lambda: any(re.search(r"\[(\*|\d+)\]", self.cells()[i].prompt) for i in runnable),
                    10,
                    0.05,
                )
                return
            except HarnessError:
                self.wait_idle("the kernel to be idle before running all cells again")
        raise HarnessError(f"{self.name}: Run All Cells did nothing three times (no prompt changed)")

    def wait_all_executed(self) -> list[CellState]:
        """Wait until the run is over: the kernel idle and no cell queued or running, for a second.

        Returns the cells; `problems` then says which cells did not execute
        (JupyterLab aborts the cells after one that raised) and what went wrong.
        """
        quiet_since: list[float] = []

        def over() -> list[CellState] | None:
            cells = self.cells()
            busy = self.kernel_status() != "idle" or any("*" in cell.prompt for cell in cells)
            if busy:
                quiet_since.clear()
                return None
            quiet_since.append(time.monotonic())
            return cells if quiet_since[-1] - quiet_since[0] >= 1 else None

        try:
            return wait_for(f"every code cell of {self.name} to execute", over, RUN_ALL_S, 0.25)
        except HarnessError as error:
            pending = [f"cell {i}: {self.cells()[i].prompt.strip() or '[ ]'}" for i in self.runnable_cells()]
            raise HarnessError(f"{error}; prompts: {', '.join(pending)}") from None

    def problems(self, cells: list[CellState], saved: bool = False) -> list[str]:
        """Every output a learner would read as broken: a traceback, stderr, a widget that failed.

        After a run, also every code cell that did not execute. With `saved`,
        the notebook as opened (saved outputs, nothing run yet): only what the
        saved outputs show.
        """
        found = [
            f"cell {index} did not execute (prompt {cells[index].prompt.strip() or '[ ]'})"
            for index in ([] if saved else self.runnable_cells())
            if not re.fullmatch(r"\[\d+\]:", cells[index].prompt.strip())
        ]
        for cell in cells:
            for output in cell.outputs:
                text = output["text"].strip()
                if output["mime"] == STDERR_MIME and not self.may_raise(cell.index):
                    found.append(f"cell {cell.index} shows an error or stderr output:\n{text[:1500]}")
                elif "Error displaying widget" in text or "model not found" in text:
                    found.append(f"cell {cell.index}: a widget failed to render: {text[:300]}")
        return found

    def right_aligned_tables(self) -> list[str]:
        """agentlab's own tables (trace, checker report, write preview) whose text JupyterLab aligns right."""
        return self.page.evaluate(
            """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell')).flatMap(
                 (cell, index) => Array.from(cell.querySelectorAll(
                   '.agentlab-trace td:not(:empty), .agentlab-check td:not(:empty), .agentlab-change td:not(:empty)'))
                   .filter(td => !['left', 'start'].includes(getComputedStyle(td).textAlign))
                   .slice(0, 1)
                   .map(td => `cell ${index}: .${td.closest('[class^=agentlab-]').className} td is `
                              + getComputedStyle(td).textAlign))"""
        )

    def look(self) -> list[str]:
        """What is wrong with how agentlab's outputs look: lost styles, right-aligned cells, bars, contrast < 3:1."""
        return self.page.evaluate(_LOOK_JS)

    def wait_widgets_rendered(self) -> None:
        """Wait until no output still says 'Loading widget...' (the widget manager is slow on first use)."""

        def rendered() -> bool:
            return not any("Loading widget" in o["text"] for cell in self.cells() for o in cell.outputs)

        wait_for(f"{self.name}'s widgets to render", rendered, 30)


# agentlab's outputs as a learner sees them (NotebookPage.look): each finding names the output and what is wrong.
# Contrast is the theme's background (and any translucent layers) against the text, faded by its opacity.
_LOOK_JS = r"""
() => {
  const found = [];
  const rgba = text => {
    const m = text.match(/rgba?\(([^)]+)\)/);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(',').map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {  // a translucent colour laid over an opaque one
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const backgroundOf = el => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const colour = rgba(getComputedStyle(node).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    let result = [255, 255, 255, 1];
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = c => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const contrast = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const opacity = el => {
    let value = 1;
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      value *= Number(getComputedStyle(node).opacity);
    }
    return value;
  };
  const name = el => (el.className && typeof el.className === 'string' ? el.className.split(' ')[0] : el.tagName);
  const roots = document.querySelectorAll(
    '.jp-Notebook .agentlab-trace, .jp-Notebook .agentlab-check, .jp-Notebook .agentlab-change, ' +
    '.jp-Notebook .agentlab-playground, .jp-Notebook .agentlab-desk');
  roots.forEach((root, n) => {
    const where = `${name(root)} #${n + 1}`;
    if (!root.getAttribute('style')) found.push(`${where} lost its inline style (sanitized away)`);
    if (root.matches('.agentlab-trace, .agentlab-change')
        && getComputedStyle(root).borderTopStyle !== 'solid') found.push(`${where} has no border`);
    root.querySelectorAll('td, th').forEach(cell => {
      if (getComputedStyle(cell).textAlign !== 'left' && cell.textContent.trim())
        found.push(`${where}: a cell aligned ${getComputedStyle(cell).textAlign}: "${cell.textContent.slice(0, 40)}"`);
    });
    root.querySelectorAll('.bar').forEach(bar => {
      if (bar.getBoundingClientRect().height < 4) found.push(`${where}: a gauge drawn without its bar`);
    });
    const texts = Array.from(root.querySelectorAll('td, th, span, div, code')).filter(
      el => Array.from(el.childNodes).some(c => c.nodeType === 3 && c.textContent.trim()));
    texts.forEach(el => {
      const style = getComputedStyle(el);
      const background = backgroundOf(el);
      const colour = over([...rgba(style.color).slice(0, 3), rgba(style.color)[3] * opacity(el)], background);
      const ratio = contrast(colour, background);
      if (ratio < 3) found.push(`${where}: "${el.textContent.trim().slice(0, 40)}" reads at ${ratio.toFixed(1)}:1`);
    });
  });
  return found.slice(0, 12);
}
"""


@contextlib.contextmanager
def notebook_page(browser: Any, name: str, source_file: Path, shots: Path) -> Iterator[NotebookPage]:
    """A fresh browser context and page for one notebook; closed when the caller is done."""
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        notebook = NotebookPage(page, name, json.loads(source_file.read_text()), shots)
        page.on("pageerror", lambda error: notebook.console_errors.append(str(error)))
        yield notebook
    finally:
        context.close()
