// ndif keys new | create <label> [--trusted] [--priority] [--operator] | list | revoke <id>: operators' API keys.
// `new` makes a key text locally (no call) for NDIF_BOOTSTRAP_KEY, the first operator key of a fabric with auth on.
import { newKey } from '../../../auth/key-format.js';
import { boolOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { table } from '../output.js';

const ACTIONS = ['new', 'create', 'list', 'revoke'];

const command: CliCommand = {
  summary: 'API keys: make a bootstrap key (new), create one with tags, list them, revoke one',
  usage: 'new | create <label> [--trusted] [--priority] [--operator] | list | revoke <key-id>',
  positionals: [
    { name: 'action', required: true, description: ACTIONS.join(', ') },
    {
      name: 'label | key-id',
      required: false,
      description: "create: the key's label (1–200 characters); revoke: the key's id (16 hex digits)",
    },
  ],
  options: {
    trusted: { type: 'boolean', description: 'create: blocks of this key run in the agent, not the sandbox' },
    priority: { type: 'boolean', description: "create: this key's requests go to the priority ranks of the queue" },
    operator: { type: 'boolean', description: 'create: this key may call operator routes' },
  },
  details: [
    'new prints a fresh key without calling the fabric: start the API processes with NDIF_BOOTSTRAP_KEY=<it> and',
    'NDIF_AUTH=on, and that key is an operator key (trusted) from then on. The secret of a created key is shown',
    'once, in the answer of create; the fabric keeps only its hash.',
  ].join('\n'),
  async run(ctx, args) {
    const [action, arg, ...extra] = args.positionals as [string, string | undefined, ...string[]];
    if (!ACTIONS.includes(action))
      throw new UsageError(`unknown action ${JSON.stringify(action)}; use one of ${ACTIONS.join(', ')}`);
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
    const tagFlags = ['trusted', 'priority', 'operator'].filter((t) => boolOpt(args, t));
    if (action !== 'create' && tagFlags.length > 0) throw new UsageError(`--${tagFlags[0]} applies to create only`);
    if ((action === 'create' || action === 'revoke') && arg === undefined)
      throw new UsageError(`${action} needs ${action === 'create' ? '<label>' : '<key-id>'}`);
    if ((action === 'new' || action === 'list') && arg !== undefined)
      throw new UsageError(`${action} takes no argument, got ${JSON.stringify(arg)}`);

    if (action === 'new') {
      const { id, key } = newKey();
      if (ctx.out.json) ctx.out.printJson({ key, id });
      else {
        ctx.out.line(key);
        ctx.out.note(
          'start the API processes with NDIF_AUTH=on NDIF_BOOTSTRAP_KEY=<this key>; it is not stored anywhere yet',
        );
      }
      return ExitCode.ok;
    }
    if (action === 'create') {
      const r = await ctx.admin.createKey({
        label: arg!,
        trusted: boolOpt(args, 'trusted'),
        priority: boolOpt(args, 'priority'),
        operator: boolOpt(args, 'operator'),
      });
      if (ctx.out.json) ctx.out.printJson(r);
      else {
        ctx.out.line(r.key);
        const tags = Object.entries(r.tags)
          .filter(([, on]) => on)
          .map(([t]) => t);
        ctx.out.note(
          `key ${r.id} "${r.label}" (${tags.length ? tags.join(', ') : 'no tags'}); the secret is shown only now`,
        );
      }
      return ExitCode.ok;
    }
    if (action === 'list') {
      const r = await ctx.admin.listKeys();
      if (ctx.out.json) ctx.out.printJson(r);
      else {
        const tagsOf = (t: Record<string, boolean>) =>
          Object.entries(t)
            .filter(([, on]) => on)
            .map(([n]) => n)
            .join(',') || '-';
        ctx.out.stdout.write(
          `${table(
            ['ID', 'LABEL', 'TAGS', 'CREATED', 'BY', 'REVOKED'],
            r.keys.map((k) => [k.id, k.label, tagsOf(k.tags), k.createdAt, k.createdBy, k.revokedAt ?? '-']),
          )}\n`,
        );
      }
      return ExitCode.ok;
    }
    const r = await ctx.admin.revokeKey(arg!);
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`key ${r.id} revoked at ${r.revokedAt}`);
    return ExitCode.ok;
  },
};

export default command;
