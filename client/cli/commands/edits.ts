// ndif edits add <model> <name> <file> [--public] | ls <model> | rm <model>@<name>: persistent edits (nnsight's
// model.edit()). An edit is a block whose interventions run with every block of the requests to its variant
// `<model>@<name>`, started first; requests to the model itself do not run it.
import { readFileSync } from 'node:fs';
import { boolOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { table } from '../output.js';

const ACTIONS = ['add', 'ls', 'rm'];

const command: CliCommand = {
  summary: "persistent edits of a model (nnsight's model.edit()): register (add), list (ls), remove (rm)",
  usage: 'add <model> <name> <file> [--public] | ls <model> | rm <model>@<name>',
  positionals: [
    { name: 'action', required: true, description: ACTIONS.join(', ') },
    { name: 'target', required: false, description: 'add, ls: the model key; rm: the variant <model>@<name>' },
    { name: 'name', required: false, description: 'add: the edit name (lowercase letters, digits, . _ -)' },
    { name: 'file', required: false, description: "add: a file holding the edit's block source (- reads stdin)" },
  ],
  options: {
    public: {
      type: 'boolean',
      description: 'add: every key may use the variant (operators only); default: only your key',
    },
  },
  details: [
    'The edit is a block, async (m, ctx) => { … }, compiled (never run) when it is registered. Submit to the',
    'variant <model>@<name> and its interventions run with your block in every trace, on the same m and ctx,',
    'where your block runs (in-process for a trusted key, in a sandbox otherwise). ndif why and ndif audit name',
    'the edit (and its source sha256) a request ran with. A removed edit is gone: submissions to it are refused.',
    '',
    'examples:',
    "  echo 'async (m) => { m.transformer.h[0].output = (await m.transformer.h[0].output).mul(0); }' > ablate.js",
    '  ndif edits add gpt2 ablate-h0 ablate.js',
    '  ndif edits ls gpt2',
    '  ndif edits rm gpt2@ablate-h0',
  ].join('\n'),
  async run(ctx, args) {
    const [action, target, name, file, ...extra] = args.positionals as Array<string | undefined>;
    if (!ACTIONS.includes(action!))
      throw new UsageError(`unknown action ${JSON.stringify(action)}; use one of ${ACTIONS.join(', ')}`);
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
    if (action !== 'add' && boolOpt(args, 'public')) throw new UsageError('--public applies to add only');
    if (action === 'add') {
      if (target === undefined || name === undefined || file === undefined)
        throw new UsageError('add needs <model> <name> <file>');
      const source = readFileSync(file === '-' ? 0 : file, 'utf8');
      const r = await ctx.admin.registerEdit({
        model: target,
        name,
        source,
        visibility: boolOpt(args, 'public') ? 'public' : 'private',
      });
      if (ctx.out.json) ctx.out.printJson(r);
      else
        ctx.out.line(
          `${r.variant} ${r.registered ? 'registered' : 'already registered with this source'} (${r.visibility}): sha256 ${r.fingerprint}`,
        );
      return ExitCode.ok;
    }
    if (target === undefined || name !== undefined)
      throw new UsageError(`${action} needs <${action === 'ls' ? 'model' : 'model>@<name'}> (only)`);
    if (action === 'ls') {
      const r = await ctx.admin.edits(target);
      if (ctx.out.json) ctx.out.printJson(r);
      else
        ctx.out.stdout.write(
          `${table(
            ['VARIANT', 'VISIBILITY', 'AUTHOR', 'SHA256', 'REGISTERED'],
            r.edits.map((e) => [e.variant, e.visibility, e.author, `${e.fingerprint.slice(0, 12)}…`, e.registeredAt]),
          )}\n`,
        );
      return ExitCode.ok;
    }
    const at = target.indexOf('@');
    if (at < 0) throw new UsageError(`rm needs a variant <model>@<name>, got ${JSON.stringify(target)}`);
    const r = await ctx.admin.removeEdit(target.slice(0, at), target.slice(at + 1));
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`${r.variant} ${r.removed ? 'removed' : 'was not removed'}`);
    return ExitCode.ok;
  },
};

export default command;
