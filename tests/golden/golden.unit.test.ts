// Golden logs: each recorded log (tests/fixtures/golden/<scenario>/events.jsonl) folded with today's projections
// equals the recorded final state, and each scenario run again with today's deciders, handlers and scheduler
// writes the recorded log event for event. A change that alters history fails here, naming the first difference.
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { foldControlPlane } from '../../projections/control-plane/state.js';
import { requestStream } from '../../domain/shared/ids.js';
import { currentVersion, isDomainEventType, upcast } from '../../domain/events/registry.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { eventLine, GOLDEN_DIR, parseEventLines, RE_RECORD, readFixture, recordScenario, stateJson } from './record.js';
import { SCENARIOS } from './scenarios.js';

/** The first path where two JSON values differ, with both sides (short). */
function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (JSON.stringify(a) === JSON.stringify(b)) return undefined;
  if (
    a !== null &&
    b !== null &&
    typeof a === 'object' &&
    typeof b === 'object' &&
    Array.isArray(a) === Array.isArray(b)
  ) {
    const keys = [...new Set([...Object.keys(a as object), ...Object.keys(b as object)])];
    for (const k of keys) {
      const d = firstDifference(
        (a as Record<string, unknown>)[k],
        (b as Record<string, unknown>)[k],
        Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`,
      );
      if (d !== undefined) return d;
    }
  }
  const show = (v: unknown) => {
    const s = JSON.stringify(v) ?? 'undefined';
    return s.length > 300 ? `${s.slice(0, 300)}…` : s;
  };
  return `${path}: recorded ${show(a)}, now ${show(b)}`;
}

/** An event as today's readers see it: an older schema version upcast to the current one. */
function asReadToday(e: StoredEvent): StoredEvent {
  if (!isDomainEventType(e.type) || e.version === currentVersion(e.type)) return e;
  return {
    ...e,
    version: currentVersion(e.type),
    data: upcast(e.type, e.version, e.data)!.data as StoredEvent['data'],
  };
}

/** The logs an earlier build wrote (tests/fixtures/golden-v1): folded today, they give the state recorded then. */

/** Like firstDifference, but fields the recorded state does not have (added to the projections since) are not compared. */
function firstChangedField(recorded: unknown, now: unknown, path = '$'): string | undefined {
  if (
    recorded !== null &&
    now !== null &&
    typeof recorded === 'object' &&
    typeof now === 'object' &&
    Array.isArray(recorded) === Array.isArray(now)
  ) {
    if (Array.isArray(recorded) && recorded.length !== (now as unknown[]).length)
      return `${path}: recorded ${recorded.length} entries, now ${(now as unknown[]).length}`;
    for (const k of Object.keys(recorded as object)) {
      const d = firstChangedField(
        (recorded as Record<string, unknown>)[k],
        (now as Record<string, unknown>)[k],
        Array.isArray(recorded) ? `${path}[${k}]` : `${path}.${k}`,
      );
      if (d !== undefined) return d;
    }
    return undefined;
  }
  return firstDifference(recorded, now, path);
}
const LEGACY_DIR = join(GOLDEN_DIR, '..', 'golden-v1');

const reRecord = `If the change is deliberate, re-record with \`${RE_RECORD}\` and commit tests/fixtures/golden with it.`;

describe('golden logs', () => {
  for (const s of SCENARIOS) {
    describe(s.name, () => {
      const fixture = readFixture(s.name);

      it('is small and covers what the scenario is about', () => {
        for (const f of ['events.jsonl', 'state.json'])
          assert.ok(statSync(join(GOLDEN_DIR, s.name, f)).size < 1024 * 1024, `${f} stays under 1 MB`);
        const types = new Set(fixture.events.map((e) => e.type));
        const reasons = new Set(
          fixture.events.filter((e) => e.type === 'RequestRequeued').map((e) => (e.data as { reason: string }).reason),
        );
        const want: Record<string, string[]> = {
          'normal-day': [
            'RequestCompleted',
            'RequestCancelled',
            'DeploymentScaled',
            'DeploymentEvicted',
            'RequestFailed',
          ],
          'eviction-storm': [
            'ReplicaDemotionRequested',
            'ReplicaDemoted',
            'ReplicaEvictionRequested',
            'ReplicaRestored',
            'DeploymentRefused',
            'RequestRequeued',
            'RequestCancelled',
          ],
          'agent-loss': ['AgentUnresponsive', 'AgentLost', 'ReplicaReloadRequired', 'RequestRequeued'],
        };
        for (const t of want[s.name] ?? []) assert.ok(types.has(t), `${s.name} has ${t}`);
        if (s.name === 'eviction-storm') assert.ok(reasons.has('PREEMPTED'));
        if (s.name === 'agent-loss') assert.deepEqual([...reasons].sort(), ['AGENT_LOST', 'AGENT_RESTARTED']);
        assert.deepEqual(
          fixture.events.map((e) => e.position),
          fixture.events.map((_, i) => i + 1),
          'positions 1…n',
        );
      });

      it("folded with today's projections, the recorded log gives the recorded final state", () => {
        const now = JSON.parse(stateJson(foldControlPlane(fixture.events)));
        const diff = firstDifference(fixture.state, now);
        assert.equal(
          diff,
          undefined,
          `${s.name}/state.json differs from a fold of events.jsonl with today's projections at ${diff}. ${reRecord}`,
        );
      });

      it("run again with today's deciders and scheduler, the scenario writes the recorded log", async () => {
        const produced = await recordScenario(s);
        const recorded = fixture.events;
        for (let i = 0; i < Math.max(recorded.length, produced.events.length); i++) {
          // The recorded logs keep the schema versions they were written with (RequestLogged v1): today's run must
          // write the same history as today's readers read the recorded one.
          const a = recorded[i] === undefined ? undefined : asReadToday(recorded[i]!);
          const b = produced.events[i];
          if (a === undefined || b === undefined) {
            assert.fail(
              `${s.name}: the recorded log has ${recorded.length} events, today's run ${produced.events.length}; the first extra one is at position ${i + 1}: ` +
                `${eventLine((a ?? b)!).slice(0, 400)}. ${reRecord}`,
            );
          }
          if (eventLine(a) !== eventLine(b)) {
            const diff = firstDifference(JSON.parse(eventLine(a)), JSON.parse(eventLine(b)));
            assert.fail(
              `${s.name}: history changed at event ${i + 1} (recorded ${a.type} in ${a.streamId}, now ${b.type} in ${b.streamId}): ${diff}. ${reRecord}`,
            );
          }
        }
        assert.equal(
          produced.stateText,
          fixture.stateText,
          `${s.name}: the final state of today's run differs from state.json. ${reRecord}`,
        );
      });
    });
  }
});

type RecordedState = { audit?: { modelOfStream?: [string, string][] } };

/**
 * The control plane's view no longer keeps the model of each request stream in its audit index (it reads a request's
 * model from the requests view, one map fewer per request): states recorded before that list them, and that one
 * removal is set aside. The check fails if one is still there today.
 */
function withoutRequestStreamModels(state: RecordedState): RecordedState {
  const pairs = state.audit?.modelOfStream;
  if (pairs !== undefined)
    state.audit!.modelOfStream = pairs.filter(([stream]) => !stream.startsWith(requestStream('')));
  return state;
}

describe('golden logs written by an earlier build', () => {
  for (const s of SCENARIOS) {
    it(`${s.name}: folded with today's projections (older schema versions upcast), it gives the state recorded then (fields added since aside)`, () => {
      const events = parseEventLines(readFileSync(join(LEGACY_DIR, s.name, 'events.jsonl'), 'utf8'));
      assert.ok(
        events.some((e) => e.type === 'RequestLogged' && e.version === 1),
        'the old log holds RequestLogged v1 events',
      );
      const then = withoutRequestStreamModels(
        JSON.parse(readFileSync(join(LEGACY_DIR, s.name, 'state.json'), 'utf8')) as RecordedState,
      );
      const diff = firstChangedField(then, JSON.parse(stateJson(foldControlPlane(events))));
      assert.equal(diff, undefined, `${s.name} (earlier build) reads differently today at ${diff}`);
    });
  }
});
