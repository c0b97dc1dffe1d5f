// A tiny decider for command-handler tests: each increment records the count it leads to, so a lost update
// (a decision on stale state that still got appended) shows up as a repeated or skipped `to`.
import type { Decider } from '../../eventstore/handle-command.js';

export interface Increment {
  commandId: string;
  by: number;
  /** Refuse when the count would pass this. */
  max?: number;
}
export interface CounterEvent {
  type: 'Incremented';
  data: { by: number; to: number };
}
export interface Counter {
  count: number;
}

export const counterDecider: Decider<Increment, Counter, CounterEvent> = {
  initialState: () => ({ count: 0 }),
  evolve: (_s, e) => ({ count: e.data.to }),
  decide: (c, s) => {
    if (c.max !== undefined && s.count + c.by > c.max) throw new Error(`count would pass ${c.max}`);
    return [{ type: 'Incremented', data: { by: c.by, to: s.count + c.by } }];
  },
};
