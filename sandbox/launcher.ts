// Starts one isolated runner for a model and resolves once it is READY: spawn (own process group, an
// allowlisted environment, the isolation plan's command line), put it in its memory cgroup, send INIT
// (manifest and tokenizer), wait for READY. A runner that exits, refuses or stalls before READY is killed
// and reported with a code (SANDBOX_RUNNER_START_FAILED | _REFUSED | _START_TIMEOUT) and its stderr.
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FRAME_VERSION, encodeAgentToRunner } from '../protocol/frames.js';
import type { RunnerLimits } from './config.js';
import { SandboxError } from './errors.js';
import type { IsolationPlan } from './isolation.js';
import { MemoryCgroup } from './memory-cgroup.js';
import { type RunnerExit, RunnerProcess } from './runner-process.js';
import { runnerEnv } from './runner-env.js';
import { bundleRunnerSource } from './runner-bundle.js';
import { RunnerDir } from './runner-dir.js';
import { agentEnd } from './socket-channel.js';
import { RunnerSpawner, type SpawnedRunner } from './spawner.js';

/** What a runner gets about its model at INIT. */
export interface ModelAssets {
  name: string;
  /** The manifest (protocol/manifest.ts) as JSON text. */
  manifest: string;
  /** tokenizer.json as text, or null. */
  tokenizer: string | null;
  /** tokenizer_config.json as text, or null. */
  tokenizerConfig: string | null;
  /** tokenizer.json on disk: runners read it on first use instead of receiving `tokenizer` at INIT. */
  tokenizerFile?: string | null;
}

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The runner's entry point as ES modules, and what it may read then: its compiled code. */
export const RUNNER_SCRIPT = join(distRoot, 'sandbox', 'runner-main.js');
export const RUNNER_ESM_READ_PATHS = ['sandbox', 'protocol', join('gpu-agent', 'block')].map(
  (d) => `${join(distRoot, d)}/`,
);

const require = createRequire(import.meta.url);
/** The tokenizer library's CommonJS entry (one self-contained file); runners load it on first ctx.encode/decode. */
export const TOKENIZER_MODULE = require.resolve('@huggingface/tokenizers');

/** How runners are started: one CommonJS bundle (fast), or the ES modules when bundling was refused. */
export interface RunnerEntry {
  mode: 'bundle' | 'esm';
  script: string;
  /** Everything the runner may read: the runner directory, plus the compiled modules in 'esm' mode. */
  readPaths: string[];
  tokenizerModule: string;
  /** Why the ES modules are used, when they are. */
  note?: string;
}

export interface LauncherOptions {
  plan: IsolationPlan;
  limits: RunnerLimits;
  script?: string;
  readPaths?: string[];
  agentEnv?: NodeJS.ProcessEnv;
  /** Niceness a runner starts at (default: 19 where it can be restored, else 0). */
  warmupNice?: number;
}

let launched = 0;

/**
 * Warm-up is background work: a starting runner runs at this niceness so it yields the CPU to requests
 * being served, and gets normal priority back when a request claims it. Only where the agent may raise a
 * priority again (root, or CAP_SYS_NICE); elsewhere runners start at normal priority.
 */
const WARMUP_NICE = process.getuid?.() === 0 ? 19 : 0;

export class RunnerLauncher {
  private readonly spawner: RunnerSpawner;

  constructor(private readonly opts: LauncherOptions) {
    this.spawner = new RunnerSpawner(runnerEnv(opts.agentEnv));
  }

  private get nice(): number {
    return this.opts.warmupNice ?? WARMUP_NICE;
  }

  /** The spawner process's pid, once started. */
  get spawnerPid(): number | undefined {
    return this.spawner.pid;
  }

  private entryCache: RunnerEntry | undefined;
  private runnerDir: RunnerDir | undefined;
  private readonly tokenizerCopies = new WeakMap<ModelAssets, string>();

  private get dir(): RunnerDir {
    this.runnerDir ??= RunnerDir.create();
    return this.runnerDir;
  }

  /** The runner entry: bundled into the runner directory on first use (unless a script was given). */
  get entry(): RunnerEntry {
    if (this.entryCache) return this.entryCache;
    const dir = this.dir;
    const tokenizerModule = dir.copy(TOKENIZER_MODULE, 'tokenizers.cjs');
    if (this.opts.script !== undefined) {
      this.entryCache = {
        mode: 'esm',
        script: this.opts.script,
        readPaths: [...(this.opts.readPaths ?? []), dir.readPath],
        tokenizerModule,
      };
      return this.entryCache;
    }
    try {
      const script = dir.write('runner.cjs', bundleRunnerSource(RUNNER_SCRIPT, distRoot).source);
      this.entryCache = { mode: 'bundle', script, readPaths: [dir.readPath], tokenizerModule };
    } catch (e) {
      this.entryCache = {
        mode: 'esm',
        script: RUNNER_SCRIPT,
        readPaths: [...RUNNER_ESM_READ_PATHS, dir.readPath],
        tokenizerModule,
        note: (e as Error).message,
      };
    }
    return this.entryCache;
  }

  /** The model's tokenizer.json as copied into the runner directory (once per model). */
  private tokenizerFile(model: ModelAssets): string | null {
    if (!model.tokenizerFile) return null;
    let copy = this.tokenizerCopies.get(model);
    if (!copy) {
      copy = this.dir.copy(model.tokenizerFile, 'tokenizer.json');
      this.tokenizerCopies.set(model, copy);
    }
    return copy;
  }

  /** Stops the spawner, which kills any runner still alive, and removes the runner directory. */
  async close(): Promise<void> {
    await this.spawner.close();
    this.runnerDir?.remove();
    this.runnerDir = undefined;
    this.entryCache = undefined;
  }

  get plan(): IsolationPlan {
    return this.opts.plan;
  }

  private readonly initFrames = new WeakMap<ModelAssets, Buffer>();

  /** INIT is the same bytes for every runner of a model (the tokenizer alone is ~1.3 MB): encode it once. */
  private initFrame(model: ModelAssets): Buffer {
    let frame = this.initFrames.get(model);
    if (!frame) {
      const file = this.tokenizerFile(model);
      frame = encodeAgentToRunner({
        kind: 'INIT',
        version: FRAME_VERSION,
        model: model.name,
        manifest: model.manifest,
        tokenizer: file === null ? model.tokenizer : null,
        tokenizerConfig: model.tokenizerConfig,
        tokenizerFile: file,
      });
      this.initFrames.set(model, frame);
    }
    return frame;
  }

  async launch(model: ModelAssets): Promise<RunnerProcess> {
    const { plan, limits } = this.opts;
    const id = `runner-${process.pid}-${++launched}`;
    const entry = this.entry;
    const argv = plan.argv(entry.script, entry.readPaths, [`--tokenizer-module=${entry.tokenizerModule}`]);
    const cgroup = plan.cgroupParent ? createCgroup(plan, id, limits) : undefined;
    const spawnedAt = performance.now();
    let spawned: SpawnedRunner;
    try {
      spawned = await this.spawner.spawn(id, argv, runnerEnv(this.opts.agentEnv), this.nice);
    } catch (e) {
      cgroup?.remove();
      throw e;
    }
    const channel = agentEnd(spawned.socket);
    const runner = new RunnerProcess(id, spawned, channel, cgroup, spawnedAt, this.nice !== 0);
    try {
      cgroup?.add(spawned.pid);
    } catch (e) {
      // ESRCH: the runner already exited (a script that cannot load ends in milliseconds); say why it did.
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') throw exitedBeforeReady(runner, await runner.exited);
      runner.kill('refused');
      await runner.exited;
      throw new SandboxError(
        'SANDBOX_RUNNER_START_FAILED',
        `could not move runner ${spawned.pid} into its memory cgroup ${cgroup!.dir}: ${(e as Error).message}`,
        { cause: e },
      );
    }
    channel.sendFrame(this.initFrame(model));

    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => {
      timer = setTimeout(() => r('timeout'), limits.startTimeoutMs);
    });
    try {
      const first = await Promise.race([
        channel.receive().catch(() => 'closed' as const),
        runner.exited.then(() => 'exited' as const),
        timeout,
      ]);
      if (first === 'timeout') {
        runner.kill('start-timeout');
        throw new SandboxError(
          'SANDBOX_RUNNER_START_TIMEOUT',
          `sandbox runner ${runner.pid} was not ready within ${limits.startTimeoutMs} ms`,
          {
            hint: 'the host may be overloaded; raise NDIF_SANDBOX_START_TIMEOUT_MS or lower the pool size',
            details: { pid: runner.pid, stderr: runner.exit?.stderrTail },
          },
        );
      }
      if (first === 'closed' || first === 'exited') {
        runner.kill('refused');
        throw exitedBeforeReady(runner, await runner.exited);
      }
      if (first.kind === 'FAILED') {
        runner.kill('refused');
        throw new SandboxError(
          'SANDBOX_RUNNER_REFUSED',
          `sandbox runner refused to start: ${first.code}: ${first.message}`,
          { details: { code: first.code } },
        );
      }
      if (first.kind !== 'READY' || first.version !== FRAME_VERSION) {
        runner.kill('refused');
        throw new SandboxError(
          'SANDBOX_RUNNER_REFUSED',
          `sandbox runner answered INIT with ${first.kind === 'READY' ? `frame version ${first.version}, expected ${FRAME_VERSION}` : first.kind}`,
          {
            hint: 'the agent and the runner come from different builds; rebuild dist/',
          },
        );
      }
      runner.ready = first;
      runner.readyAt = performance.now();
      return runner;
    } finally {
      clearTimeout(timer);
    }
  }
}

function exitedBeforeReady(runner: RunnerProcess, exit: RunnerExit): SandboxError {
  return new SandboxError(
    'SANDBOX_RUNNER_START_FAILED',
    `sandbox runner ${runner.pid} exited before it was ready (${describeExit(exit.code, exit.signal)})${exit.stderrTail.length ? `: ${exit.stderrTail.join(' | ')}` : ''}`,
    {
      hint: 'run `npm run build` so dist/ holds the runner, and check the stderr lines above',
      details: { pid: runner.pid, code: exit.code, signal: exit.signal, stderr: exit.stderrTail },
    },
  );
}

function createCgroup(plan: IsolationPlan, id: string, limits: RunnerLimits): MemoryCgroup {
  try {
    return MemoryCgroup.create(plan.cgroupParent!, id, limits.memoryMb * 1024 * 1024);
  } catch (e) {
    throw new SandboxError(
      'SANDBOX_RUNNER_START_FAILED',
      `could not create the runner's memory cgroup under ${plan.cgroupParent!.dir}: ${(e as Error).message}`,
      {
        hint: 'the agent needs write access to its memory cgroup; set NDIF_SANDBOX_CGROUP to a delegated one',
        cause: e,
      },
    );
  }
}

export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `signal ${signal}` : `exit code ${code}`;
}
