// ndif kill <request>: an operator cancels any request (a user key cancels its own).
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: 'cancel a request (an operator key kills any; a user key only its own)',
  usage: '<request-id>',
  positionals: [{ name: 'request-id', required: true, description: 'the id returned at submission' }],
  details: `A cancelled request is never run again. Exit code ${ExitCode.failed} when it already finished (CP_REQUEST_FINISHED) or is unknown.`,
  async run(ctx, args) {
    const id = args.positionals[0]!;
    const r = await ctx.admin.kill(id);
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(r.alreadyCancelled ? `${id} was already cancelled` : `${id} cancelled`);
    return ExitCode.ok;
  },
};

export default command;
