// `npm run bench -- block-startup`: how fast a cold node process has the block side (gpu-agent/block/index.js)
// loaded, the part of a sandbox runner's start-up that is ours (its budget, the whole runner: 150 ms).
//   import_ms   the import itself (median of --runs, default 10)
//   ready_ms    from process start to the block side loaded (median)
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, round } from './_numbers.js';

const entry = join(dirname(fileURLToPath(import.meta.url)), '..', 'gpu-agent', 'block', 'index.js');

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const at = args.indexOf('--runs');
  const runs = at >= 0 ? Number(args[at + 1]) : 10;
  const script = `const t0 = performance.now(); await import(${JSON.stringify(entry)}); console.log(JSON.stringify({ importMs: performance.now() - t0, readyMs: performance.now() }));`;
  const importMs: number[] = [];
  const readyMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`the block side did not load: ${r.stderr}`);
    const m = JSON.parse(r.stdout) as { importMs: number; readyMs: number };
    importMs.push(m.importMs);
    readyMs.push(m.readyMs);
  }
  return { bench: 'block-startup', runs, import_ms: round(median(importMs), 1), ready_ms: round(median(readyMs), 1) };
}
