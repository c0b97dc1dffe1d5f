// ndif unpin <model>: lets placement evict the deployment again to make room.
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: 'unpin a deployed model: placement may evict it again to make room',
  usage: '<model>',
  positionals: [{ name: 'model', required: true, description: 'a deployed model key' }],
  async run(ctx, args) {
    const model = args.positionals[0]!;
    const r = await ctx.admin.pin(model, false);
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`${r.model} ${r.pinned ? 'pinned' : 'unpinned'}`);
    return ExitCode.ok;
  },
};

export default command;
