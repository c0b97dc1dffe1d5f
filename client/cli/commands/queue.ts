// ndif queue: each model's queue in order (position 0 is served next).
import { intOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { renderQueue } from '../render.js';

const command: CliCommand = {
  summary: 'show the queues: waiting requests per model in the order they will be served',
  usage: '[--model <key>] [--limit n] [--json]',
  options: {
    model: { type: 'string', value: '<key>', description: "only this model's queue" },
    limit: { type: 'string', value: '<n>', description: 'entries per queue (1–1000, default 100)' },
  },
  details: 'Order: rank (0 priority requeued, 1 priority, 2 normal requeued, 3 normal), then time enqueued.',
  async run(ctx, args) {
    const q = await ctx.admin.queue({ model: stringOpt(args, 'model'), limit: intOpt(args, 'limit', 1, 1000) });
    if (ctx.out.json) ctx.out.printJson(q);
    else ctx.out.stdout.write(renderQueue(q, Date.now()));
    return ExitCode.ok;
  },
};

export default command;
