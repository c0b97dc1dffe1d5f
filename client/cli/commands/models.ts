// ndif models add <key> <dir> [--replace] | remove <key> | list: the catalog, as events. `add` has the control plane
// inspect the folder (model.onnx with its external data, config.json, tokenizer.json; the runtime loads it) and
// record ModelRegistered with the files' sha256 fingerprint; `remove` is refused while the model is deployed.
import { resolve } from 'node:path';
import { boolOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { formatBytes, table } from '../output.js';

const ACTIONS = ['add', 'remove', 'list'];

const command: CliCommand = {
  summary: 'the model catalog: register a model folder (add), remove a model, list the registered ones',
  usage: 'add <key> <dir> [--replace] | remove <key> | list',
  positionals: [
    { name: 'action', required: true, description: ACTIONS.join(', ') },
    {
      name: 'key',
      required: false,
      description: 'add, remove: the model key users name (letters, digits and . _ / -)',
    },
    {
      name: 'dir',
      required: false,
      description:
        "add: the model folder, as the control plane's machine sees it (a relative path is made absolute here)",
    },
  ],
  options: {
    replace: {
      type: 'boolean',
      description: 'add: the key may name other files than it does now (refused while the model is deployed)',
    },
  },
  details: [
    'A model folder holds model.onnx (with its external data, e.g. model.onnx.data), config.json and tokenizer.json',
    '(tokenizer_config.json too where the tokenizer has one), as transformers and torch.onnx.export write them',
    '(docs/runtime.md, "Exporting a model"). Registration is refused with a code naming the file and the fix when',
    'one is missing, a file is corrupt, an op or input is not supported, or the export fixed the batch size.',
    '',
    'examples:',
    '  ndif models add llama-tiny /models/llama-tiny',
    '  ndif models add gpt2 /models/gpt2-v2 --replace',
    '  ndif models remove llama-tiny',
  ].join('\n'),
  async run(ctx, args) {
    const [action, key, dir, ...extra] = args.positionals as [
      string,
      string | undefined,
      string | undefined,
      ...string[],
    ];
    if (!ACTIONS.includes(action))
      throw new UsageError(`unknown action ${JSON.stringify(action)}; use one of ${ACTIONS.join(', ')}`);
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
    if (action !== 'add' && boolOpt(args, 'replace')) throw new UsageError('--replace applies to add only');
    if (action === 'add' && (key === undefined || dir === undefined)) throw new UsageError('add needs <key> <dir>');
    if (action === 'remove' && (key === undefined || dir !== undefined))
      throw new UsageError('remove needs <key> (only)');
    if (action === 'list' && key !== undefined)
      throw new UsageError(`list takes no argument, got ${JSON.stringify(key)}`);

    if (action === 'add') {
      const r = await ctx.admin.registerModel({
        model: key!,
        dir: resolve(dir!),
        ...(boolOpt(args, 'replace') ? { replace: true } : {}),
      });
      if (ctx.out.json) ctx.out.printJson(r);
      else {
        const e = r.entry;
        ctx.out.line(
          `${r.model} ${r.registered ? 'registered' : 'already registered with these files'}: sha256 ${r.fingerprint}`,
        );
        if (e)
          ctx.out.note(
            `  ${e.description}; inputs ${e.inputs.join(', ')}; ${e.moduleCount} modules; padding ${e.padding}; files ${e.files.map((f) => `${f.name} (${formatBytes(f.bytes)})`).join(', ')}`,
          );
      }
      return ExitCode.ok;
    }
    if (action === 'remove') {
      const r = await ctx.admin.removeModel(key!);
      if (ctx.out.json) ctx.out.printJson(r);
      else ctx.out.line(`${r.model} ${r.removed ? 'removed' : 'was not removed'}`);
      return ExitCode.ok;
    }
    const r = await ctx.admin.models();
    if (ctx.out.json) ctx.out.printJson(r);
    else {
      const rows = r.models.map((m) => [
        m.key,
        m.architecture ?? m.family ?? '-',
        m.defaults.dtype,
        formatBytes(m.weightsBytes),
        m.fingerprint ? `${m.fingerprint.slice(0, 12)}…` : '-',
        m.phase,
        `${m.replicas.HOT ?? 0}/${m.replicas.WARM ?? 0}/${m.replicas.COLD ?? 0}`,
      ]);
      ctx.out.stdout.write(
        `${table(['KEY', 'ARCHITECTURE', 'DTYPE', 'WEIGHTS', 'SHA256', 'PHASE', 'HOT/WARM/COLD'], rows)}\n`,
      );
    }
    return ExitCode.ok;
  },
};

export default command;
