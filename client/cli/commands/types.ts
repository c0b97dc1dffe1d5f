// ndif types <model>: the model's module tree as TypeScript declarations, from its manifest (GET /models/:key/manifest),
// for `ndif.trace<typeof Name>(…)`: `ndif types gpt2-tiny > gpt2-tiny.d.ts`.
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import type { Manifest } from '../../../protocol/manifest.js';
import { declareModel, typeNameOf } from '../../sdk/declare-model.js';

const command: CliCommand = {
  summary: "print a model's module tree as TypeScript types (for typed blocks: ndif.trace<typeof Name>)",
  usage: '<model> [--name <Name>] [--from <module>]',
  positionals: [{ name: 'model', required: true, description: 'a model key of the catalog, e.g. gpt2-tiny' }],
  options: {
    name: {
      type: 'string',
      value: '<Name>',
      description: 'the declared model (default: the key in PascalCase, gpt2-tiny → Gpt2Tiny)',
    },
    from: {
      type: 'string',
      value: '<module>',
      description: "where the SDK's types are imported from (default @ndif/sdk)",
    },
  },
  details: `Writes to stdout, e.g. \`ndif types gpt2-tiny > gpt2-tiny.d.ts\`, then in TypeScript:

  import type { Gpt2Tiny } from './gpt2-tiny.js';
  await ndif.trace<typeof Gpt2Tiny>('gpt2-tiny', 'Hello', async (m) => (await m.transformer.h[1].mlp.output).shape);

Every module is a property (lists as ModuleList, indexable and iterable); a child named like a block API member
(output, input, …) is reached with .module('<name>'). A misspelt module is a compile error.`,
  async run(ctx, args) {
    const [model] = args.positionals as [string];
    const name = typeof args.values.name === 'string' ? args.values.name : typeNameOf(model);
    if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name))
      throw new UsageError(`--name ${JSON.stringify(name)} is not a TypeScript identifier`);
    const manifest = await ctx.http.json<Manifest>('GET', `/models/${encodeURIComponent(model)}/manifest`);
    ctx.out.stdout.write(
      declareModel(manifest, { name, ...(typeof args.values.from === 'string' ? { from: args.values.from } : {}) }),
    );
    return ExitCode.ok;
  },
};

export default command;
