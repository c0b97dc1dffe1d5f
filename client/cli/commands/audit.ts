// ndif audit: events by actor, model, correlation id, causation id, type, stream prefix and time window (GET
// /audit), answered from indexes. The fabric refuses a filter on metadata it never recorded
// (AUDIT_FILTER_NOT_RECORDED) instead of answering unfiltered; --filter name=value passes any filter name through.
import { intOpt, stringOpt } from '../args.js';
import { UsageError, type CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';

const FLAGS: Record<string, string> = {
  actor: 'actor',
  model: 'modelKey',
  correlation: 'correlationId',
  causation: 'causationId',
  type: 'type',
  'stream-prefix': 'streamPrefix',
  from: 'fromAt',
  to: 'toAt',
};

const command: CliCommand = {
  summary: 'list the events an actor, model, operation or time window touched (indexed audit query)',
  usage:
    '[--actor a] [--model m] [--correlation id] [--causation id] [--type T] [--stream-prefix p] [--from t] [--to t] [--filter name=value]… [--after n] [--limit n] [--data] [--json]',
  options: {
    actor: {
      type: 'string',
      value: '<actor>',
      description: 'an API key actor (key:<id>), agent:<id> or system:scheduler',
    },
    model: { type: 'string', value: '<key>', description: "the model's deployment and every event of its requests" },
    correlation: {
      type: 'string',
      value: '<id>',
      description: 'one operation (e.g. a request and the decisions taken for it)',
    },
    causation: { type: 'string', value: '<id>', description: 'events caused by this event or command id' },
    type: {
      type: 'string',
      value: '<type>',
      description: 'an event type, e.g. RequestRequeued (DeploymentPinned: pins only; DeploymentUnpinned: unpins only)',
    },
    'stream-prefix': {
      type: 'string',
      value: '<prefix>',
      description: 'stream ids starting with this, e.g. request-r1 or deployment-gpt2',
    },
    from: { type: 'string', value: '<time>', description: 'at or after this ISO-8601 UTC time' },
    to: { type: 'string', value: '<time>', description: 'before this ISO-8601 UTC time' },
    filter: {
      type: 'string',
      multiple: true,
      value: '<name=value>',
      description: 'any filter by its API name (refused by the fabric when not recorded)',
    },
    after: { type: 'string', value: '<position>', description: 'only events after this log position (paging)' },
    limit: { type: 'string', value: '<n>', description: 'events per page (1–10000, default 1000)' },
    data: { type: 'boolean', description: "include each event's data (JSON output)" },
  },
  details:
    'Operator only. Filters combine with AND; with none, the last hour (--from one hour ago). Example: ndif audit --model gpt2 --type RequestRequeued',
  async run(ctx, args) {
    const query: Record<string, string | number | undefined> = {};
    for (const [flag, name] of Object.entries(FLAGS)) query[name] = stringOpt(args, flag);
    for (const f of (args.values.filter as string[] | undefined) ?? []) {
      const eq = f.indexOf('=');
      if (eq <= 0) throw new UsageError(`--filter takes name=value, got ${JSON.stringify(f)}`);
      query[f.slice(0, eq)] = f.slice(eq + 1);
    }
    if (Object.values(query).every((v) => v === undefined)) {
      // No filter: the last hour (the fabric never answers with the whole log).
      query.fromAt = new Date(Date.now() - 3_600_000).toISOString();
      if (!ctx.out.json) ctx.out.stderr.write(`no filter given: the last hour's events (--from ${query.fromAt})\n`);
    }
    query.afterPosition = intOpt(args, 'after', 0, Number.MAX_SAFE_INTEGER);
    query.limit = intOpt(args, 'limit', 1, 10_000);
    if (args.values.data === true) query.data = 'true';
    await ctx.admin.version();
    if (ctx.out.json) {
      ctx.out.printJson(await ctx.http.json('GET', '/audit', { query, signal: ctx.signal }));
      return ExitCode.ok;
    }
    const r = await ctx.http.call<Uint8Array>('GET', '/audit', {
      query: { ...query, format: 'text' },
      binary: true,
      signal: ctx.signal,
    });
    ctx.out.stdout.write(new TextDecoder().decode(r.body));
    return ExitCode.ok;
  },
};

export default command;
