// ndif generate <model> <prompt>: generates text and prints it as the tokens are produced (the SDK's stream).
import { boolOpt, intOpt, numberOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { Fabric } from '../../sdk/fabric.js';
import type { GenerationFields } from '../../sdk/request-body.js';

const command: CliCommand = {
  summary: 'generate text from a prompt on a hosted model, printed as the tokens are produced',
  usage:
    '<model> <prompt> [--max-new-tokens n] [--temperature t] [--top-k k] [--top-p p] [--seed n] [--stop s]… [--ignore-eos] [--no-cache] [--json]',
  positionals: [
    { name: 'model', required: true, description: 'a model key of the catalog, e.g. gpt2-tiny' },
    { name: 'prompt', required: true, description: 'the text to continue' },
  ],
  options: {
    'max-new-tokens': { type: 'string', short: 'n', value: '<n>', description: 'tokens to generate (default 32)' },
    temperature: { type: 'string', value: '<t>', description: 'sample at this temperature (default: greedy)' },
    'top-k': { type: 'string', value: '<k>', description: 'sample among the k most likely tokens' },
    'top-p': {
      type: 'string',
      value: '<p>',
      description: 'sample among the most likely tokens holding p of the probability (0 < p <= 1)',
    },
    seed: { type: 'string', value: '<n>', description: 'the same seed gives the same tokens' },
    'repetition-penalty': { type: 'string', value: '<r>', description: 'above 1 discourages repeating tokens' },
    stop: {
      type: 'string',
      multiple: true,
      value: '<text>',
      description: 'end generation when the text appears (repeatable)',
    },
    'ignore-eos': { type: 'boolean', description: "do not stop at the model's EOS token" },
    'no-cache': { type: 'boolean', description: 'run the whole sequence each step (no KV cache)' },
  },
  details: `Text goes to stdout as it is generated, then why generation ended on stderr (eos, stop-string, length…).
With --json, each streamed token is one JSON line ({ step, invoke, token, text, finish? }), then the result's
metadata (tokens, finish, seeds, cache) as the last line.`,
  async run(ctx, args) {
    const [model, prompt] = args.positionals as [string, string];
    const gen: GenerationFields = { maxNewTokens: intOpt(args, 'max-new-tokens', 1, 4095) ?? 32 };
    const t = numberOpt(args, 'temperature', 0, 1e6);
    if (t !== undefined) gen.temperature = t;
    const k = intOpt(args, 'top-k', 1, 1_000_000);
    if (k !== undefined) gen.topK = k;
    const p = numberOpt(args, 'top-p', 0, 1);
    if (p !== undefined) gen.topP = p;
    const seed = intOpt(args, 'seed', 0, Number.MAX_SAFE_INTEGER);
    if (seed !== undefined) gen.seed = seed;
    const r = numberOpt(args, 'repetition-penalty', 0, 1e6);
    if (r !== undefined) gen.repetitionPenalty = r;
    const stop = args.values.stop;
    if (Array.isArray(stop) && stop.length > 0) gen.stop = stop;
    else if (typeof stop === 'string') gen.stop = [stop];
    if (boolOpt(args, 'ignore-eos')) gen.ignoreEos = true;
    if (boolOpt(args, 'no-cache')) gen.cache = false;
    const ndif = new Fabric({
      url: ctx.config.url,
      apiKey: ctx.config.apiKey ?? undefined,
      progress: false,
      onLog: (l) => ctx.out.note(l.line),
    });
    try {
      const s = ndif.stream(model, prompt, undefined, { ...gen, signal: ctx.signal });
      for await (const token of s) {
        if (ctx.out.json) ctx.out.line(JSON.stringify(token));
        else if (token.text !== undefined) ctx.out.stdout.write(token.text);
      }
      const res = await s.result;
      const finish = (res.meta.finish as Array<{ reason: string; match?: unknown } | null> | undefined)?.[0];
      if (ctx.out.json)
        ctx.out.line(
          JSON.stringify({
            requestId: res.requestId,
            generated: res.meta.generated,
            finish: res.meta.finish,
            seeds: res.meta.seeds,
            cache: res.meta.cache,
          }),
        );
      else {
        ctx.out.stdout.write('\n');
        ctx.out.note(
          `[${res.requestId}] ${finish ? `${finish.reason}${finish.match !== undefined ? ` ${JSON.stringify(finish.match)}` : ''}` : 'done'} · ${(res.meta.generated as number[][])[0]!.length} tokens · cache ${String(res.meta.cache)}${(res.meta.seeds as Array<number | null>)[0] != null ? ` · seed ${(res.meta.seeds as number[])[0]}` : ''}`,
        );
      }
      return ExitCode.ok;
    } finally {
      ndif.close();
    }
  },
};

export default command;
