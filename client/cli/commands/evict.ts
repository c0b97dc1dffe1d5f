// ndif evict: removes a model's replicas, one replica, or everything. An operator's evict bypasses pin and age
// on the fabric; the CLI asks for --force before evicting a pinned model or everything.
import { boolOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const command: CliCommand = {
  summary: 'evict a model (--model), one replica (--replica) or every deployment (--all)',
  usage: '(--model <key> | --replica <model#n> | --all) [--force]',
  options: {
    model: { type: 'string', value: '<key>', description: 'evict every replica of this model' },
    replica: { type: 'string', value: '<id>', description: 'evict this replica, e.g. gpt2-tiny#2' },
    all: { type: 'boolean', description: 'evict every deployment (needs --force)' },
    force: { type: 'boolean', description: 'confirm evicting everything or a pinned model' },
  },
  details: `Requests running on an evicted replica go back to the queue (they are never killed by an eviction).

examples:
  ndif evict --model gpt2-tiny
  ndif evict --replica gpt2-tiny#2
  ndif evict --all --force`,
  async run(ctx, args) {
    const model = stringOpt(args, 'model');
    const replica = stringOpt(args, 'replica');
    const all = boolOpt(args, 'all');
    const force = boolOpt(args, 'force');
    const given = [model !== undefined, replica !== undefined, all].filter(Boolean).length;
    if (given !== 1) throw new UsageError('give exactly one of --model <key>, --replica <model#n>, --all');
    if (all && !force) throw new UsageError('--all evicts every deployment; add --force to confirm');
    if (model !== undefined && !force) {
      const dep = (await ctx.admin.cluster()).deployments.find((d) => d.modelKey === model);
      if (dep?.pinned)
        throw new UsageError(`${model} is pinned; add --force to evict it anyway (or \`ndif unpin ${model}\` first)`);
    }
    const r = await ctx.admin.evict(all ? { all: true } : model !== undefined ? { model } : { replica: replica! });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(r.evicted.length ? `evicting ${r.evicted.join(', ')}` : 'nothing to evict');
    return ExitCode.ok;
  },
};

export default command;
