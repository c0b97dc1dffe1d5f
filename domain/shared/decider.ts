// The shape every aggregate of the control plane has (Emmett-style): pure, no I/O, no clock, no randomness.
// Structurally the same as eventstore/handle-command.ts's Decider, so a domain decider plugs into the retrying
// command handler without an adapter.

export interface Decider<Command, State, Event> {
  initialState(): State;
  evolve(state: State, event: Event): State;
  /** The events the command produces in this state ([] when there is nothing to do); throws a DomainError to refuse. */
  decide(command: Command, state: State): readonly Event[];
}
