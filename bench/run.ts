// `npm run bench -- <name>`: runs bench/<name>.ts and prints its result as one JSON object on the last line.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname } from 'node:path';
import { withAgentFlags } from '../fabric/agent-node-flags.js';

export interface BenchModule {
  /** Runs the benchmark; returns the JSON object printed as the last line. Must finish in under 45 s. */
  run(args: string[]): Promise<Record<string, unknown>>;
}

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.js') && f !== 'run.js' && !f.startsWith('_'))
  .map((f) => f.slice(0, -3))
  .sort();

const [name, ...args] = process.argv.slice(2);
if (!name || !available.includes(name)) {
  console.error(name ? `unknown benchmark ${JSON.stringify(name)}` : 'no benchmark named');
  console.error(`usage: npm run bench -- <name>   (available: ${available.join(', ') || 'none'})`);
  process.exit(2);
}
// A bench measures the runtime as a GPU agent runs it: under the agent's V8 flags (fabric/agent-node-flags.ts).
const again = withAgentFlags(process.execArgv, fileURLToPath(import.meta.url), process.argv.slice(2));
if (again !== null) {
  const r = spawnSync(process.execPath, again, { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const mod = (await import(`./${name}.js`)) as BenchModule;
const result = await mod.run(args);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
