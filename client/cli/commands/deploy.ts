// ndif deploy <model>: adds replicas of a model and waits until they are HOT.
import { boolOpt, bytesOpt, durationOpt, intOpt, numberOpt, stringOpt } from '../args.js';
import type { CliCommand } from '../command.js';
import { UsageError } from '../command.js';
import { ExitCode } from '../exit-codes.js';
import { formatBytes, formatMs } from '../output.js';
import { waitForHot } from '../wait-ready.js';
import type { DeployBody } from '../../sdk/wire.js';

const command: CliCommand = {
  summary: 'deploy a model: add replicas with these settings and wait until they are HOT',
  usage:
    '<model> [--replicas n] [--gpus n] [--size bytes] [--padding f] [--dtype t] [--gradients] [--timeout d] [--pinned] [--force] [--wait d | --no-wait]',
  positionals: [
    { name: 'model', required: true, description: 'model key from the catalog (`ndif status` lists deployed ones)' },
  ],
  options: {
    replicas: { type: 'string', value: '<n>', description: 'replicas to add (1–16, default 1); deploy is additive' },
    gpus: { type: 'string', value: '<n>', description: "GPUs per replica (default: the catalog entry's)" },
    size: {
      type: 'string',
      value: '<bytes>',
      description:
        "memory per replica, e.g. 2GiB (default: the larger of weights × (1 + padding) + bias and the runtime's estimate of a forward pass: weights + packed weights + activations)",
    },
    padding: { type: 'string', value: '<f>', description: 'padding factor over the weights (default 0.15)' },
    bias: { type: 'string', value: '<bytes>', description: 'fixed bytes added to the size (default 500MiB)' },
    dtype: {
      type: 'string',
      value: '<t>',
      description:
        "int8 or int4: quantize a Hugging Face snapshot's linear layers at load (weight-only, blocks of 32); else the weights dtype label (default: the catalog entry's)",
    },
    gradients: {
      type: 'boolean',
      description: "reserve room for a backward pass's activations (default: sized for forward passes)",
    },
    timeout: { type: 'string', value: '<d>', description: 'execution limit of its requests, e.g. 60s (default: none)' },
    concurrency: { type: 'string', value: '<n>', description: 'requests in flight per replica (default 4)' },
    pinned: { type: 'boolean', description: 'never evict it to make room' },
    force: { type: 'boolean', description: 'make room even by evicting pinned or young replicas' },
    wait: { type: 'string', value: '<d>', description: 'how long to wait for HOT (default 10m)' },
    'no-wait': { type: 'boolean', description: 'return once the deployment is accepted' },
  },
  details: `Exit code ${ExitCode.notReady} when a replica is refused (the message gives the numbers: bytes needed, best free GPU,
evictable bytes, why each agent was excluded), fails to load, or is not HOT within --wait.

Sizes (GPT-2 small shape, 124M parameters, float32 weights 475 MiB; activations for one row of 1,024 tokens):
  default             weights + packed weights + a forward's activations (465 MiB)    1.38 GiB
  --gradients         weights + packed weights + a backward's activations (6.1 GiB)   7.02 GiB
  --dtype int8        141 MiB of codes and scales; NDIF's floor (weights × 1.15 + 500 MiB) 0.73 GiB
  --dtype int4        100 MiB (the head stays 8-bit)                                  0.65 GiB
int8 and int4 replicas keep the module tree, reads, swaps and generation; gradients through them are refused
(BLOCK_NOT_DIFFERENTIABLE); accuracy measured in docs/runtime.md ("Quantized replicas").

examples:
  ndif deploy gpt2-tiny
  ndif deploy smollm2-135m --dtype int8
  ndif deploy gpt2-small-random --replicas 2 --pinned --wait 2m`,
  async run(ctx, args) {
    const model = args.positionals[0]!;
    const body: DeployBody = { model };
    const replicas = intOpt(args, 'replicas', 1, 16);
    if (replicas !== undefined) body.replicas = replicas;
    const gpus = intOpt(args, 'gpus', 1, 16);
    if (gpus !== undefined) body.gpus = gpus;
    const size = bytesOpt(args, 'size');
    if (size !== undefined) body.sizeBytes = size;
    const padding = numberOpt(args, 'padding', 0, 10);
    if (padding !== undefined) body.paddingFactor = padding;
    const bias = bytesOpt(args, 'bias');
    if (bias !== undefined) body.biasBytes = bias;
    const dtype = stringOpt(args, 'dtype');
    if (dtype !== undefined) body.dtype = dtype;
    if (boolOpt(args, 'gradients')) body.gradients = true;
    const timeout = durationOpt(args, 'timeout');
    if (timeout !== undefined) body.timeoutMs = timeout;
    const concurrency = intOpt(args, 'concurrency', 1, 64);
    if (concurrency !== undefined) body.concurrency = concurrency;
    if (boolOpt(args, 'pinned')) body.pinned = true;
    if (boolOpt(args, 'force')) body.force = true;
    const noWait = boolOpt(args, 'no-wait');
    if (noWait && stringOpt(args, 'wait') !== undefined) throw new UsageError('give --wait or --no-wait, not both');
    const waitMs = durationOpt(args, 'wait') ?? 600_000;

    const started = Date.now();
    const accepted = await ctx.admin.deploy(body);
    if (noWait) {
      if (ctx.out.json) ctx.out.printJson({ ...accepted, waited: false });
      else ctx.out.line(`${model}: deployment accepted, replicas ${accepted.replicaIds.join(', ')} (not waiting)`);
      return ExitCode.ok;
    }
    ctx.out.note(`${model}: deploying ${accepted.replicaIds.join(', ')}; waiting up to ${formatMs(waitMs)} for HOT`);
    const ready = await waitForHot(ctx.admin, model, accepted.replicaIds, {
      waitMs,
      signal: ctx.signal,
      onChange: (id, state, r) =>
        ctx.out.note(`  ${id} ${state}${r?.agentId ? ` on ${r.agentId} GPU ${r.gpus.join(',')}` : ''}`),
    });
    const waitedMs = Date.now() - started;
    if (ctx.out.json)
      ctx.out.printJson({ model, replicaIds: accepted.replicaIds, ready: true, replicas: ready, waitedMs });
    else
      for (const r of ready)
        ctx.out.line(
          `${r.replicaId} HOT on ${r.agentId} GPU ${r.gpus.join(',')} (${formatBytes(r.bytesPerGpu)} per GPU) after ${formatMs(waitedMs)}`,
        );
    return ExitCode.ok;
  },
};

export default command;
