// ndif scale <model> <replicas>: sets the number of live replicas (copying the newest HOT one's settings).
import { boolOpt, durationOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { formatMs } from '../output.js';
import { waitForHot } from '../wait-ready.js';

const command: CliCommand = {
  summary: 'set the number of live replicas of a deployed model (added ones copy the newest HOT replica)',
  usage: '<model> <replicas> [--wait d | --no-wait]',
  positionals: [
    { name: 'model', required: true, description: 'a deployed model key' },
    { name: 'replicas', required: true, description: 'the number of live replicas wanted (0–64)' },
  ],
  options: {
    wait: { type: 'string', value: '<d>', description: 'how long to wait for added replicas to be HOT (default 10m)' },
    'no-wait': { type: 'boolean', description: 'return once the change is accepted' },
  },
  details: `Exit code ${ExitCode.notReady} when an added replica is refused, fails to load, or is not HOT within --wait.`,
  async run(ctx, args) {
    const [model, n] = args.positionals as [string, string];
    if (!/^\d+$/.test(n) || Number(n) > 64)
      throw new UsageError(`<replicas> must be an integer 0–64, got ${JSON.stringify(n)}`);
    const noWait = boolOpt(args, 'no-wait');
    if (noWait && stringOpt(args, 'wait') !== undefined) throw new UsageError('give --wait or --no-wait, not both');
    const waitMs = durationOpt(args, 'wait') ?? 600_000;
    const r = await ctx.admin.scale(model, Number(n));
    const describe = `${model}: ${r.replicas} replica(s)${r.replicaIds.length ? `, adding ${r.replicaIds.join(', ')}` : ''}${r.evicting.length ? `, evicting ${r.evicting.join(', ')}` : ''}`;
    if (noWait || r.replicaIds.length === 0) {
      if (ctx.out.json) ctx.out.printJson(r);
      else ctx.out.line(describe);
      return ExitCode.ok;
    }
    ctx.out.note(`${describe}; waiting up to ${formatMs(waitMs)} for HOT`);
    const ready = await waitForHot(ctx.admin, model, r.replicaIds, {
      waitMs,
      signal: ctx.signal,
      onChange: (id, state) => ctx.out.note(`  ${id} ${state}`),
    });
    if (ctx.out.json) ctx.out.printJson({ ...r, ready: true, replicas: ready });
    else ctx.out.line(`${describe}: all HOT`);
    return ExitCode.ok;
  },
};

export default command;
