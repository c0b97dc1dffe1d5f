// Records the golden logs: runs each scenario of tests/golden/scenarios.ts (real deciders, command handlers,
// projections and scheduler on a SQLite store, scripted agents, injected clock) and writes
// tests/fixtures/golden/<scenario>/{events.jsonl,state.json,README.md}. Run it only to change history on purpose:
//   npx tsc -p . && node dist/scripts/record-golden.js [scenario…]
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GOLDEN_DIR, readme, recordScenario } from '../tests/golden/record.js';
import { SCENARIOS } from '../tests/golden/scenarios.js';

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !SCENARIOS.some((s) => s.name === w));
if (unknown.length > 0) {
  console.error(`unknown scenario(s) ${unknown.join(', ')}; scenarios: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  process.exit(2);
}
for (const s of SCENARIOS) {
  if (wanted.length > 0 && !wanted.includes(s.name)) continue;
  const t0 = performance.now();
  const r = await recordScenario(s);
  const dir = join(GOLDEN_DIR, s.name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'events.jsonl'), r.eventsText);
  writeFileSync(join(dir, 'state.json'), r.stateText);
  writeFileSync(join(dir, 'README.md'), readme(r));
  const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  console.log(
    `${s.name}: ${r.events.length} events, events.jsonl ${kib(Buffer.byteLength(r.eventsText))}, state.json ${kib(Buffer.byteLength(r.stateText))}, ${Math.round(performance.now() - t0)} ms`,
  );
}
