// ndif why <request-id|replica-id|agent-id>: the causal chain from the log (GET /why/:id): who or what decided each
// step, when, and the numbers the decision used. The text is rendered by the fabric (?format=text).
import { intOpt, stringOpt } from '../args.js';
import { UsageError, type CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { FabricHttp } from '../../sdk/http.js';

const KINDS = ['request', 'replica', 'agent'];

const command: CliCommand = {
  summary: 'explain a request, replica or agent from the log: each step, who decided it, the numbers it used',
  usage:
    '<request-id|replica-id|agent-id> [--kind request|replica|agent] [--depth n] [--effects n] [--no-positions] [--json]',
  positionals: [{ name: 'id', required: true, description: 'a request id, a replica id (<model>#<n>) or an agent id' }],
  options: {
    kind: {
      type: 'string',
      value: '<kind>',
      description: 'what the id names (default: <model>#<n> is a replica, else a request, else an agent)',
    },
    depth: { type: 'string', value: '<n>', description: 'longest causal chain followed per step (1–32, default 8)' },
    effects: {
      type: 'string',
      value: '<n>',
      description: 'events listed per step as what it caused (0–200, default 20)',
    },
    'no-positions': {
      type: 'boolean',
      description: 'skip the queue positions at enqueue (they fold the log up to the request)',
    },
  },
  details:
    'Operator only. Each step shows the event, its actor (an API key, agent:<id>, system:scheduler), the rule and numbers of the\n' +
    'decision, the chain of events that caused it (← lines) and what it caused elsewhere (→ lines). Example: ndif why gpt2#3',
  async run(ctx, args) {
    const id = args.positionals[0]!;
    const kind = stringOpt(args, 'kind');
    if (kind !== undefined && !KINDS.includes(kind))
      throw new UsageError(`--kind must be one of ${KINDS.join(', ')}, got ${JSON.stringify(kind)}`);
    const query = {
      kind,
      depth: intOpt(args, 'depth', 1, 32),
      effects: intOpt(args, 'effects', 0, 200),
      positions: args.values['no-positions'] === true ? 'false' : undefined,
    };
    await ctx.admin.version();
    // Longer than the default per-call timeout: the queue positions fold the log up to the request.
    const http = new FabricHttp({
      url: ctx.http.url,
      apiKey: ctx.http.apiKey,
      protocolVersion: ctx.http.protocolVersion,
      timeoutMs: 2 * 60_000,
    });
    const path = `/why/${encodeURIComponent(id)}`;
    if (ctx.out.json) {
      ctx.out.printJson(await http.json('GET', path, { query, signal: ctx.signal }));
      return ExitCode.ok;
    }
    const r = await http.call<Uint8Array>('GET', path, {
      query: { ...query, format: 'text' },
      binary: true,
      signal: ctx.signal,
    });
    ctx.out.stdout.write(new TextDecoder().decode(r.body));
    return ExitCode.ok;
  },
};

export default command;
