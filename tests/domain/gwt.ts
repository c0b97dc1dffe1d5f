// Given/when/then for deciders: given past events, when a command, then these events (each checked against its
// schema) or this refusal code.
import assert from 'node:assert/strict';
import { isDomainError } from '../../domain/shared/errors.js';
import type { Decider } from '../../domain/shared/decider.js';
import { validateEvent } from '../../domain/events/registry.js';
import type { DomainEvent } from '../../domain/events/types.js';

export interface Then<E> {
  /** The decided events equal these. */
  then(expected: E[]): E[];
  /** The decided events satisfy the check (for events whose data holds texts and long lists). */
  thenMatch(check: (events: E[]) => void): E[];
  /** The command is refused with this code and nothing is decided. */
  thenRefused(code: string, message?: RegExp): void;
}

export function given<C, S, E extends { type: string; data: unknown }>(decider: Decider<C, S, E>, history: E[] = []) {
  let state = decider.initialState();
  for (const e of history) state = decider.evolve(state, e);
  return {
    state,
    when(command: C): Then<E> {
      const run = (): E[] => {
        const events = [...decider.decide(command, state)];
        for (const e of events) validateEvent(e as unknown as DomainEvent);
        return events;
      };
      return {
        // biome-ignore lint/suspicious/noThenProperty: given/when/then is the test vocabulary; nothing awaits this object
        then(expected) {
          const events = run();
          assert.deepEqual(events, expected);
          return events;
        },
        thenMatch(check) {
          const events = run();
          check(events);
          return events;
        },
        thenRefused(code, message) {
          assert.throws(run, (e: unknown) => {
            assert.ok(isDomainError(e), `expected a DomainError, got ${String(e)}`);
            assert.equal(e.code, code);
            if (message) assert.match(e.message, message);
            return true;
          });
        },
      };
    },
  };
}

/** Folds events into a state (for checks on evolve). */
export function fold<C, S, E>(decider: Decider<C, S, E>, events: E[]): S {
  return events.reduce((s, e) => decider.evolve(s, e), decider.initialState());
}
