// The sandbox runner: one process per untrusted request, started by the agent (sandbox/launcher.ts) under
// the isolation plan. It talks to the agent over fd 3, a Unix socket pair:
//   agent → INIT (manifest, tokenizer)   runner → READY        (pre-warmed in the pool up to here)
//   agent → START (one request)          the block side (gpu-agent/block serveBlocks) runs the invokes;
//                                        every activation comes from the agent
//   runner → LOG… END/EXCEPTION per invoke; agent → STOP; the runner exits. It is never reused.
// It exits as soon as its agent goes: the socket ends, or its parent pid changes (polled, so a dead agent
// is noticed even if the socket is somehow kept open). Keep the import graph tiny: it sets spawn time. The
// agent runs it as one CommonJS bundle of this graph (runner-bundle.ts), so: no top-level await, no
// import.meta. Arguments: `--tokenizer-module=<path>` (the tokenizer library's CommonJS entry).
import { Socket } from 'node:net';
import { serveBlocks } from '../gpu-agent/block/index.js';
import { setProcessFaultPolicy } from '../gpu-agent/block/containment/fault-handlers.js';
import { containInLowestLive } from '../gpu-agent/block/containment/invoke-guard.js';
import { FRAME_VERSION, ProtocolError } from '../protocol/frames.js';
import type { BlockEndpoint, BlockToHost, HostToBlock } from '../protocol/interleave.js';
import type { Manifest } from '../protocol/manifest.js';
import { writeDrainMarkers } from './runner-drain.js';
import { LogQuota, logLimitsFromEnv } from '../protocol/log-limits.js';
import { captureOutput } from './runner-output.js';
import { lazyTokenizer } from './runner-tokenizer.js';
import { warmUp } from './runner-warmup.js';
import { runnerEnd } from './socket-channel.js';

const PARENT_POLL_MS = 100;

async function main(): Promise<void> {
  const exit = process.exit.bind(process);
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) exit(0);
  }, PARENT_POLL_MS).unref();
  const tokenizerModule =
    process.argv.find((a) => a.startsWith('--tokenizer-module='))?.slice('--tokenizer-module='.length) ?? null;

  const channel = runnerEnd(new Socket({ fd: 3, readable: true, writable: true }));
  channel.onEnd(() => exit(0));

  async function fail(code: string, message: string): Promise<never> {
    channel.send({ kind: 'FAILED', code, message });
    await channel.flush();
    return exit(1);
  }

  const init = await channel.receive();
  if (init.kind !== 'INIT') return fail('RUNNER_EXPECTED_INIT', `the first frame must be INIT, got ${init.kind}`);
  if (init.version !== FRAME_VERSION)
    return fail(
      'RUNNER_VERSION_MISMATCH',
      `the agent speaks frame version ${init.version}, this runner ${FRAME_VERSION}`,
    );

  let manifest: Manifest;
  try {
    manifest = JSON.parse(init.manifest) as Manifest;
    if (!manifest || !Array.isArray(manifest.modules)) throw new Error('it has no module list');
  } catch (e) {
    return fail('RUNNER_BAD_INIT', `the manifest of model ${init.model} is unusable: ${(e as Error).message}`);
  }
  // A runner serves one request: one log quota, for its invokes' lines and for writes outside them.
  const logQuota = new LogQuota(logLimitsFromEnv(process.env));
  const env = {
    manifest,
    tokenizer: lazyTokenizer(init.tokenizer, init.tokenizerFile, init.tokenizerConfig, tokenizerModule),
    logQuota,
  };

  // A block that calls process.exit gets an error it can see, not a dead runner; it cannot signal other
  // processes at all (the runner also runs as an unprivileged user where the agent is root).
  const unavailable = (what: string, instead: string) => () => {
    throw new Error(`${what} is not available to a block; ${instead}`);
  };
  process.exit = unavailable('process.exit()', 'return from the block instead') as typeof process.exit;
  process.kill = unavailable('process.kill()', 'blocks cannot signal processes') as typeof process.kill;
  for (const raw of ['_kill', '_debugProcess'] as const) {
    (process as unknown as Record<string, unknown>)[raw] = unavailable(
      `process.${raw}()`,
      'blocks cannot signal processes',
    );
  }

  // Every fault in a runner is its request's: one raised outside every invoke's context goes to the lowest
  // invoke still open, as writes do. Only with no invoke left does the runner end (it serves one request).
  setProcessFaultPolicy({
    exception: (e) => {
      if (!containInLowestLive(e, 'UncaughtException')) exit(1);
    },
    rejection: (r) => {
      if (!containInLowestLive(r, 'UnhandledRejection')) exit(1);
    },
  });

  // A block's writes are its invoke's (serveBlocks runs each invoke in its output context); writes made
  // outside every invoke's context go to the lowest invoke still running. Before the last END, the drain
  // markers follow whatever a block wrote straight to fd 1/2 (runner-drain.ts).
  const open = new Set<number>();
  const output = captureOutput(
    (msg) => {
      if (msg.kind !== 'LOG' || logQuota.admit(msg.line)) channel.send(msg);
    },
    () => (open.size > 0 ? Math.min(...open) : 0),
  );
  const endpoint: BlockEndpoint = {
    send(msg: BlockToHost) {
      if ((msg.kind === 'END' || msg.kind === 'EXCEPTION') && open.has(msg.invoke)) {
        output.flush();
        open.delete(msg.invoke);
        if (open.size === 0) writeDrainMarkers();
      }
      channel.send(msg);
    },
    async receive(): Promise<HostToBlock> {
      const msg = await channel.receive();
      if (msg.kind === 'INIT') throw new ProtocolError('FRAME_MALFORMED', 'INIT received twice');
      if (msg.kind === 'START') for (const inv of msg.invokes) open.add(inv.invoke);
      return msg;
    },
    close: () => channel.close(),
  };

  channel.send({
    kind: 'READY',
    version: FRAME_VERSION,
    pid: process.pid,
    startupMs: performance.now(),
    rssBytes: process.memoryUsage.rss(),
  });
  // While it waits in the pool: compile the request path once, so the user's request does not pay for it.
  await warmUp(env).catch(() => {});

  try {
    await serveBlocks(endpoint, env);
  } finally {
    output.restore();
  }
  await channel.flush();
  exit(0);
}

void main();
