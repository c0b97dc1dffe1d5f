// The scheduler's command executor: the control plane's command handlers, with the fencing epoch of this
// process's leader lease on every command (docs/control-plane.md, "Several schedulers"); none without a lease.
import type { CommandMetadata } from '../command-api/handlers/codec.js';
import type { ControlPlaneCommand } from '../command-api/handlers/commands.js';
import type { CommandOutcome, ControlPlaneCommands } from '../command-api/handlers/service.js';

export class LeaderCommands {
  epoch: number | undefined;

  constructor(private readonly inner: ControlPlaneCommands) {}

  execute(command: ControlPlaneCommand, meta: CommandMetadata): Promise<CommandOutcome> {
    return this.inner.execute(command, this.epoch === undefined ? meta : { ...meta, leaderEpoch: this.epoch });
  }
}
