// ndif status [--watch]: the cluster (agents, GPU memory, deployments with replicas HOT/WARM/COLD).
import { boolOpt, durationOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { watchCluster } from '../cluster-watch.js';
import { ExitCode } from '../exit-codes.js';
import { renderCluster } from '../render.js';
import type { ClusterReply } from '../../sdk/wire.js';

const command: CliCommand = {
  summary: 'show the cluster: agents, GPU memory, deployments and their replicas (HOT/WARM/COLD)',
  usage: '[--watch [--interval d]] [--json]',
  options: {
    watch: { type: 'boolean', short: 'w', description: 'keep showing it, redrawn on every change, until Ctrl-C' },
    interval: { type: 'string', value: '<d>', description: 'with --watch: also redraw this often (default 5s)' },
  },
  details: `With --json --watch, each snapshot is one JSON line (NDJSON).`,
  async run(ctx, args) {
    const snapshot = () => ctx.admin.cluster(ctx.signal);
    if (!boolOpt(args, 'watch')) {
      const c = await snapshot();
      if (ctx.out.json) ctx.out.printJson(c);
      else ctx.out.stdout.write(renderCluster(c, ctx.http.url));
      return ExitCode.ok;
    }
    const intervalMs = durationOpt(args, 'interval') ?? 5000;
    const tty = ctx.out.stdout.isTTY === true && !ctx.out.json;
    let lastText = '';
    let busy: Promise<void> | null = null;
    let again = false;
    const draw = (c: ClusterReply) => {
      if (ctx.out.json) return void ctx.out.stdout.write(`${JSON.stringify(c)}\n`);
      const text = renderCluster(c, ctx.http.url);
      if (tty) ctx.out.stdout.write(`\x1b[H\x1b[2J${text}\n(watching; Ctrl-C to stop)\n`);
      else if (text !== lastText) ctx.out.stdout.write(`${lastText ? '\n' : ''}${text}`);
      lastText = text;
    };
    let failure: unknown = null;
    const refresh = () => {
      if (busy) {
        again = true;
        return;
      }
      busy = snapshot()
        .then(draw, (e: unknown) => {
          if (!ctx.signal.aborted) failure ??= e;
        })
        .finally(() => {
          busy = null;
          if (again && !ctx.signal.aborted) {
            again = false;
            refresh();
          }
        });
    };
    await ctx.admin.version();
    refresh();
    const timer = setInterval(refresh, intervalMs);
    try {
      await watchCluster(ctx.http, refresh, ctx.signal);
    } finally {
      clearInterval(timer);
      await busy;
    }
    if (failure) throw failure;
    return ExitCode.ok;
  },
};

export default command;
