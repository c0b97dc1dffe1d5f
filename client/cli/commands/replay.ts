// ndif replay --to <position|time> [--from <position|time>]: the cluster and queues as they were (GET /replay): the
// fabric copies the log up to that point into a throwaway store and rebuilds every projection there. With --from,
// what changed between the two points.
import { intOpt, stringOpt } from '../args.js';
import { UsageError, type CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { FabricHttp } from '../../sdk/http.js';

/** A log position or an ISO-8601 UTC time, as the fabric's REPLAY_BAD_TARGET check accepts them. */
function isReplayPoint(v: string): boolean {
  if (/^\d{1,15}$/.test(v)) return true;
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/.test(v) && Number.isFinite(Date.parse(v));
}

const command: CliCommand = {
  summary: 'show the cluster and queues as they were at a log position or time (rebuilt in a throwaway store)',
  usage: '--to <position|time> [--from <position|time>] [--queue n] [--json]',
  options: {
    to: {
      type: 'string',
      value: '<position|time>',
      description: 'a log position (integer) or an ISO-8601 UTC time, e.g. 2025-03-01T10:00:00Z',
    },
    from: {
      type: 'string',
      value: '<position|time>',
      description: 'also replay this earlier point and show what changed from it to --to',
    },
    queue: { type: 'string', value: '<n>', description: 'queue entries shown per model (0–1000, default 20)' },
  },
  details:
    'Operator only. A time T includes every event up to the first one recorded after T. The source log is only read; the\n' +
    'throwaway store is removed afterwards. One replay runs at a time per server (REPLAY_BUSY otherwise).',
  async run(ctx, args) {
    const to = stringOpt(args, 'to');
    if (to === undefined) throw new UsageError('replay: --to <position|time> is required');
    for (const [name, v] of [
      ['to', to],
      ['from', stringOpt(args, 'from')],
    ] as const) {
      if (v !== undefined && !isReplayPoint(v))
        throw new UsageError(
          `replay: --${name} ${JSON.stringify(v)} is neither a log position (an integer >= 0) nor an ISO-8601 UTC time (2025-03-01T10:00:00Z)`,
        );
    }
    const query = { to, from: stringOpt(args, 'from'), queue: intOpt(args, 'queue', 0, 1000) };
    await ctx.admin.version();
    // Longer than the default per-call timeout: a replay copies and folds the log up to the point: minutes on a large log.
    const http = new FabricHttp({
      url: ctx.http.url,
      apiKey: ctx.http.apiKey,
      protocolVersion: ctx.http.protocolVersion,
      timeoutMs: 10 * 60_000,
    });
    if (ctx.out.json) {
      ctx.out.printJson(await http.json('GET', '/replay', { query, signal: ctx.signal }));
      return ExitCode.ok;
    }
    const r = await http.call<Uint8Array>('GET', '/replay', {
      query: { ...query, format: 'text' },
      binary: true,
      signal: ctx.signal,
    });
    ctx.out.stdout.write(new TextDecoder().decode(r.body));
    return ExitCode.ok;
  },
};

export default command;
