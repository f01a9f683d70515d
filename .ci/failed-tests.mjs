// The tests that kept a run from passing, each with the first lines of its message: printed where CI's log
// is read from its tail (the end of a failed row, the end of the matrix).
//
//   node .ci/failed-tests.mjs NAME=RUN_JSON...   (each run record under its row's name)
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** Print each failed or errored test of a run record (not expected failures, not informative ones). */
export function printFailed(run, lines = 12, indent = '  ', most = Infinity) {
  const bad = (run.tests ?? []).filter((t) => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure && !t.informative);
  // The FAILs first: an ERROR beside them says nothing about the target.
  bad.sort((a, b) => (a.state === 'failed' ? 0 : 1) - (b.state === 'failed' ? 0 : 1));
  if (bad.length > most) console.log(`${indent}(the first ${most} of ${bad.length})`);
  for (const t of bad.slice(0, most)) {
    console.log(`${indent}${t.state === 'failed' ? 'FAIL' : 'ERROR'} ${t.file} > ${t.fullName}`);
    const text = (t.errors ?? []).join('\n').split('\n').filter((l) => l.trim() !== '').slice(0, lines);
    for (const l of text) console.log(`${indent}  ${l.length > 400 ? `${l.slice(0, 400)}...` : l}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const arg of process.argv.slice(2)) {
    const at = arg.indexOf('=');
    const [name, file] = at > 0 ? [arg.slice(0, at), arg.slice(at + 1)] : [arg, arg];
    let run;
    try {
      run = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      console.log(`${name}: no run record (${file}): its own output above says why`);
      continue;
    }
    const n = run.summary ?? {};
    console.log(`${name}: ${n.passed ?? 0} passed, ${n.failed ?? 0} failed, ${n.errored ?? 0} errored`);
    printFailed(run, 3, '  ', 8);
  }
}
