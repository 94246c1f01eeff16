// The Pyodide smoke test (tests/test_pyodide.py runs it; `make test` includes it): agentlab in npm's Pyodide
// under Node, no browser, no network. It copies the package's source into Pyodide's file system and runs a
// Python script given on the command line (one file), printing what the script returns as JSON on stdout.
import fs from "node:fs";
import path from "node:path";
import { loadPyodide } from "pyodide";

const [packageDir, scriptPath] = process.argv.slice(2);
if (!packageDir || !scriptPath) {
  console.error("usage: node smoke.mjs AGENTLAB_PACKAGE_DIR SCRIPT.py");
  process.exit(2);
}

function copyTree(from, to, pyodide) {
  pyodide.FS.mkdirTree(to);
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (entry.name === "__pycache__") continue;
    const source = path.join(from, entry.name);
    const target = `${to}/${entry.name}`;
    if (entry.isDirectory()) copyTree(source, target, pyodide);
    else pyodide.FS.writeFile(target, fs.readFileSync(source));
  }
}

const pyodide = await loadPyodide({ stdout: (line) => console.error(line), stderr: (line) => console.error(line) });
copyTree(path.resolve(packageDir), "/home/pyodide/agentlab", pyodide);
let answer;
try {
  answer = await pyodide.runPythonAsync(fs.readFileSync(scriptPath, "utf8"));
} catch (error) {
  console.error(String(error.message || error)); // a PythonError's message is the Python traceback
  process.exit(1);
}
process.stdout.write(String(answer) + "\n");
// Tasks the script abandoned may still hold timers: the answer is given, so do not wait for them.
process.exit(0);
