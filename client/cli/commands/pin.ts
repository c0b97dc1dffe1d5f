// ndif pin <model>: marks a deployment so placement never evicts it to make room.
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: "pin a deployed model: placement never evicts it to make room (an operator's evict still removes it)",
  usage: '<model>',
  positionals: [{ name: 'model', required: true, description: 'a deployed model key' }],
  async run(ctx, args) {
    const model = args.positionals[0]!;
    const r = await ctx.admin.pin(model, true);
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`${r.model} ${r.pinned ? 'pinned' : 'unpinned'}`);
    return ExitCode.ok;
  },
};

export default command;
