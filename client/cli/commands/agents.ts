// ndif agents: the GPU agents with their health.
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { renderAgents } from '../render.js';

const command: CliCommand = {
  summary: 'show the GPU agents: state, health, GPUs, boot',
  usage: '[--json]',
  async run(ctx) {
    const a = await ctx.admin.agents();
    if (ctx.out.json) ctx.out.printJson(a);
    else ctx.out.stdout.write(renderAgents(a, Date.now()));
    return ExitCode.ok;
  },
};

export default command;
