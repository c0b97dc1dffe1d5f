// ndif drain <agent>: an operator stops new work going to an agent (POST /agents/:id/drain); what runs there
// finishes, nothing new is placed or dispatched on it.
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: 'drain an agent: no new replicas or requests go to it; what runs there finishes',
  usage: '<agent-id> [--json]',
  positionals: [{ name: 'agent-id', required: true, description: 'the agent, as `ndif agents` lists it' }],
  details: `Operator only. Exit code ${ExitCode.failed} when the fabric refuses it (an unknown agent, CP_AGENT_*).`,
  async run(ctx, args) {
    const id = args.positionals[0]!;
    const r = await ctx.admin.drain(id);
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`${id} draining: no new work goes to it (log position ${r.logPosition ?? '-'})`);
    return ExitCode.ok;
  },
};

export default command;
