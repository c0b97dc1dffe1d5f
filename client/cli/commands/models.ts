// ndif models add <key> <dir> [--replace] | remove <key> | disable <key> --reason "…" | enable <key> | list: the
// catalog, as events. `add` has the control plane
// inspect the folder (model.onnx with its external data, config.json, tokenizer.json; the runtime loads it) and
// record ModelRegistered with the files' sha256 fingerprint; `remove` is refused while the model is deployed;
// `disable` takes a model offline (submissions refused with the reason, never deployed) until `enable`.
import { resolve } from 'node:path';
import { boolOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { formatBytes, table } from '../output.js';

const ACTIONS = ['add', 'remove', 'disable', 'enable', 'list'];

const command: CliCommand = {
  summary: 'the model catalog: register a model folder (add), remove, disable or enable a model, list them',
  usage: 'add <key> <dir> [--replace] | remove <key> | disable <key> --reason <text> | enable <key> | list',
  positionals: [
    { name: 'action', required: true, description: ACTIONS.join(', ') },
    {
      name: 'key',
      required: false,
      description: 'add, remove, disable, enable: the model key users name (letters, digits and . _ / -)',
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
    reason: {
      type: 'string',
      value: '<text>',
      description: 'disable: why (1–500 characters); researchers whose submissions are refused see it',
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
    '  ndif models disable gpt2 --reason "weights being replaced until 14:00"',
    '  ndif models enable gpt2',
    '',
    'While a model is disabled, submissions and deployments for it are refused (API_MODEL_DISABLED, with the',
    'reason) and the scheduler does not deploy it on demand; requests already queued keep their place and run',
    'on replicas still live, or once it is enabled. To take it off the GPUs too: disable, then ndif evict --model.',
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
    if (
      (action === 'remove' || action === 'disable' || action === 'enable') &&
      (key === undefined || dir !== undefined)
    )
      throw new UsageError(`${action} needs <key> (only)`);
    const reason = stringOpt(args, 'reason');
    if (action === 'disable' && (reason === undefined || reason.trim() === ''))
      throw new UsageError('disable needs --reason <text>: say why, researchers see it');
    if (action !== 'disable' && reason !== undefined) throw new UsageError('--reason applies to disable only');
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
    if (action === 'disable' || action === 'enable') {
      const r = action === 'disable' ? await ctx.admin.disableModel(key!, reason!) : await ctx.admin.enableModel(key!);
      if (ctx.out.json) ctx.out.printJson(r);
      else ctx.out.line(`${r.model} ${r.changed ? '' : 'already '}${r.disabled ? 'disabled' : 'enabled'}`);
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
        m.disabled === undefined ? m.phase : `DISABLED (${m.disabled.reason})`,
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
