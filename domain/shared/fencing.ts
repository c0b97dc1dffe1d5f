// Fencing of the commands a scheduler leader issues (docs/control-plane.md, "Several schedulers"). Each leader
// holds a lease with an epoch that grows with every change of leader and sends it with its commands; the events
// such a command decides carry it. An aggregate remembers the highest epoch among its events and refuses a command
// from an older one, so a leader that lost its lease (paused, cut off) cannot change what a newer leader has
// decided on. Commands without an epoch (users, operators, agents) are not fenced. Pure: wraps any decider.
import type { Decider } from './decider.js';
import { DomainErrorCode, refuse } from './errors.js';

/** A decided or stored event with the leader epoch of the command that decided it (none: not a leader's). */
export interface Stamped<E> {
  readonly event: E;
  readonly leaderEpoch?: number;
}

export interface FencedState<S> {
  readonly inner: S;
  /** The highest leader epoch among the stream's events (0: none). */
  readonly epoch: number;
}

export type FencedCommand<C> = C & { readonly leaderEpoch?: number };

export function fenced<C, S, E>(decider: Decider<C, S, E>): Decider<FencedCommand<C>, FencedState<S>, Stamped<E>> {
  return {
    initialState: () => ({ inner: decider.initialState(), epoch: 0 }),
    evolve: (s, e) => ({
      inner: decider.evolve(s.inner, e.event),
      epoch: e.leaderEpoch !== undefined && e.leaderEpoch > s.epoch ? e.leaderEpoch : s.epoch,
    }),
    decide(c, s) {
      const epoch = c.leaderEpoch;
      if (epoch !== undefined && epoch < s.epoch)
        refuse(
          DomainErrorCode.leaderEpochStale,
          `the command comes from scheduler leader epoch ${epoch}; this aggregate already has decisions of epoch ${s.epoch}`,
          'a newer scheduler leader took over: this process lost its lease and must stop issuing commands',
          { epoch, current: s.epoch },
        );
      const events = decider.decide(c, s.inner);
      return epoch === undefined
        ? events.map((event) => ({ event }))
        : events.map((event) => ({ event, leaderEpoch: epoch }));
    },
  };
}
