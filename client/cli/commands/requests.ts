// ndif requests: the requests waiting or running — who submitted them, which model, their phase and since when
// (GET /requests?active=true); --all adds the finished ones, newest first.
import { intOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { renderRequests } from '../render.js';

const command: CliCommand = {
  summary: 'show the requests waiting or running: submitter, model, phase, since when',
  usage: '[--model <key>] [--all] [--limit n] [--json]',
  options: {
    model: { type: 'string', value: '<key>', description: "only this model's requests" },
    all: { type: 'boolean', description: 'finished requests too (newest first)' },
    limit: { type: 'string', value: '<n>', description: 'at most this many (1–500, default 100)' },
  },
  details:
    'An operator sees every request, another key its own. PHASE is the status a user sees (QUEUED #n: its place in the queue); SINCE is how long it has been in that phase.',
  async run(ctx, args) {
    const r = await ctx.admin.requests({
      active: args.values.all === true ? undefined : true,
      model: stringOpt(args, 'model'),
      limit: intOpt(args, 'limit', 1, 500) ?? 100,
    });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.stdout.write(renderRequests(r, Date.now()));
    return ExitCode.ok;
  },
};

export default command;
