// Golden logs on disk: tests/fixtures/golden/<scenario>/events.jsonl (every event with its metadata, one JSON object
// a line, in position order), state.json (the control-plane projection's state after the last event, as its
// snapshot serializes it) and README.md. Shared by scripts/record-golden.ts (writes) and the golden test (reads).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StoredEvent } from '../../eventstore/port.js';
import { controlPlaneToSnapshot, foldControlPlane } from '../../projections/control-plane/state.js';
import type { JsonValue } from '../../eventstore/port.js';
import type { Scenario } from './scenarios.js';

/** The repository root, from this file compiled at <dist>/tests/golden/record.js. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const GOLDEN_DIR = join(REPO_ROOT, 'tests', 'fixtures', 'golden');

export const RE_RECORD = 'npx tsc -p . && node dist/scripts/record-golden.js [scenario…]';

/** One event as a line of events.jsonl: fixed key order, so equal events are equal strings. */
export function eventLine(e: StoredEvent): string {
  return JSON.stringify({
    position: e.position,
    streamId: e.streamId,
    revision: e.revision,
    id: e.id,
    type: e.type,
    version: e.version,
    data: e.data,
    metadata: e.metadata,
  });
}

export function parseEventLines(text: string): StoredEvent[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as StoredEvent);
}

export function stateJson(state: Parameters<typeof controlPlaneToSnapshot>[0]): string {
  return `${JSON.stringify(controlPlaneToSnapshot(state), null, 1)}\n`;
}

export interface Recording {
  scenario: Scenario;
  events: StoredEvent[];
  /** events.jsonl */
  eventsText: string;
  /** state.json: the live view's state after the scenario. */
  stateText: string;
}

export async function recordScenario(s: Scenario): Promise<Recording> {
  const h = await s.run();
  try {
    await h.view.catchUp();
    const events = await h.events();
    const stateText = stateJson(h.state());
    const folded = stateJson(foldControlPlane(events));
    if (folded !== stateText)
      throw new Error(
        `scenario ${s.name}: the live view's state differs from a fold of its own log; fix the projection before recording`,
      );
    return { scenario: s, events, eventsText: events.map((e) => `${eventLine(e)}\n`).join(''), stateText };
  } finally {
    await h.close();
  }
}

export function readFixture(name: string): {
  events: StoredEvent[];
  eventsText: string;
  state: JsonValue;
  stateText: string;
} {
  const dir = join(GOLDEN_DIR, name);
  const eventsText = readFileSync(join(dir, 'events.jsonl'), 'utf8');
  const stateText = readFileSync(join(dir, 'state.json'), 'utf8');
  return { events: parseEventLines(eventsText), eventsText, state: JSON.parse(stateText) as JsonValue, stateText };
}

export function readme(r: Recording): string {
  const counts = new Map<string, number>();
  for (const e of r.events) counts.set(e.type, (counts.get(e.type) ?? 0) + 1);
  const rows = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([t, c]) => `| \`${t}\` | ${c} |`);
  const first = r.events[0]?.metadata.at ?? '-';
  const last = r.events[r.events.length - 1]?.metadata.at ?? '-';
  return [
    `# Golden log: ${r.scenario.name}`,
    '',
    r.scenario.description,
    '',
    `Recorded by \`scripts/record-golden.ts\` from \`tests/golden/scenarios.ts\` with the real deciders, command handlers, projections and`,
    `scheduler on a SQLite store, scripted agents and an injected clock: ${r.events.length} events from ${first} to ${last}.`,
    '',
    '- `events.jsonl`: every event with its metadata, in position order (`position, streamId, revision, id, type, version, data, metadata`).',
    "- `state.json`: the control-plane projection's state after the last event (`controlPlaneToSnapshot`).",
    '',
    '`tests/golden/golden.unit.test.ts` folds `events.jsonl` with the current code and compares with `state.json`, and runs the',
    'scenario again and compares the log it writes with `events.jsonl`. When a change alters history on purpose, re-record with',
    `\`${RE_RECORD}\` and commit the new files with the change.`,
    '',
    '| event | count |',
    '|---|---|',
    ...rows,
    '',
  ].join('\n');
}
