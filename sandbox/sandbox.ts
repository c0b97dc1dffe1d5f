// The agent's entry to untrusted execution. Register each hosted model once (its manifest and tokenizer
// go to every runner at INIT); runUntrusted() takes a pre-warmed runner from the model's pool and returns
// a BlockChannel for the model host, exactly where the in-process channel would go.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { sandboxConfigFromEnv } from './config.js';
import type { SandboxConfig } from './config.js';
import { SandboxError } from './errors.js';
import { planIsolation } from './isolation.js';
import type { Isolation, IsolationPlan } from './isolation.js';
import type { BlockChannel, StartRequest } from '../protocol/interleave.js';
import type { Manifest } from '../protocol/manifest.js';
import { RunnerLauncher } from './launcher.js';
import type { ModelAssets, RunnerEntry } from './launcher.js';
import { removeCgroupParent } from './memory-cgroup.js';
import { RunnerPool } from './pool.js';
import type { PoolStats } from './pool.js';
import { SandboxSession, type SessionReport } from './session.js';

export interface SandboxOptions {
  config?: SandboxConfig;
  /** Defaults to probing this host (planIsolation). */
  plan?: IsolationPlan;
  /** The environment runners' allowlisted variables are taken from (default: process.env). */
  agentEnv?: NodeJS.ProcessEnv;
  /** Runner entry point and readable paths (default: the compiled runner next to this file). */
  script?: string;
  readPaths?: string[];
  /** Told of each runner that started, ms from spawn to READY (the agent's ndif_sandbox_spawn_seconds). */
  onRunnerSpawned?: (ms: number) => void;
  /** Told of every runner that died under a request, with what it printed as it died (not shown to the user). */
  onRunnerCrashed?: (report: SessionReport) => void;
}

/** The parts of a hosted model (gpu-agent/runtime HostedModel) a runner needs, typed structurally. */
export interface ModelSource {
  key: string;
  /** The model directory; its tokenizer.json, when there, is what runners read. */
  dir?: string;
  manifest(): Manifest;
  tokenizer: { json: string; config: Record<string, unknown> } | null;
}

/**
 * INIT's payload for a hosted model, serialised once per model: the manifest as JSON text, and the
 * tokenizer by path when its file is on disk (else inline).
 */
export function modelAssets(model: ModelSource): ModelAssets {
  const file = model.tokenizer && model.dir ? join(model.dir, 'tokenizer.json') : undefined;
  return {
    name: model.key,
    manifest: JSON.stringify(model.manifest()),
    tokenizer: model.tokenizer?.json ?? null,
    tokenizerConfig: model.tokenizer ? JSON.stringify(model.tokenizer.config) : null,
    tokenizerFile: file !== undefined && existsSync(file) ? file : null,
  };
}

export interface RunUntrustedOptions {
  model: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export class Sandbox {
  readonly config: SandboxConfig;
  readonly plan: IsolationPlan;
  private readonly launcher: RunnerLauncher;
  private readonly pools = new Map<string, RunnerPool>();
  private readonly sessions = new Set<SandboxSession>();
  private closed = false;
  private readonly onRunnerSpawned: ((ms: number) => void) | undefined;
  private readonly onRunnerCrashed: ((report: SessionReport) => void) | undefined;

  constructor(opts: SandboxOptions = {}) {
    this.onRunnerSpawned = opts.onRunnerSpawned;
    this.onRunnerCrashed = opts.onRunnerCrashed;
    this.config = opts.config ?? sandboxConfigFromEnv();
    this.plan =
      opts.plan ??
      planIsolation({
        limits: this.config.limits,
        networkNamespace: this.config.networkNamespace,
        uid: this.config.uid,
        gid: this.config.gid,
      });
    this.launcher = new RunnerLauncher({
      plan: this.plan,
      limits: this.config.limits,
      ...(opts.script === undefined ? {} : { script: opts.script }),
      ...(opts.readPaths === undefined ? {} : { readPaths: opts.readPaths }),
      ...(opts.agentEnv === undefined ? {} : { agentEnv: opts.agentEnv }),
    });
  }

  /** What this host enforces on every runner (reported by the agent at registration). */
  get isolation(): Isolation {
    return this.plan.isolation;
  }

  /** How runners start: 'bundle' (one CommonJS file) or 'esm' with the reason bundling was refused. */
  get runnerEntry(): RunnerEntry {
    return this.launcher.entry;
  }

  /** Makes a model available to untrusted requests and starts warming its pool. */
  register(model: ModelAssets): RunnerPool {
    if (this.closed) throw new SandboxError('SANDBOX_CLOSED', 'the sandbox is closed');
    const existing = this.pools.get(model.name);
    if (existing) return existing;
    const pool = new RunnerPool(model.name, () => this.launcher.launch(model), {
      size: this.config.poolSize,
      maxSize: this.config.maxPoolSize,
      ...(this.onRunnerSpawned === undefined ? {} : { onSpawned: this.onRunnerSpawned }),
    });
    this.pools.set(model.name, pool);
    pool.warm();
    return pool;
  }

  pool(model: string): RunnerPool {
    const pool = this.pools.get(model);
    if (!pool) {
      throw new SandboxError(
        'SANDBOX_UNKNOWN_MODEL',
        `model ${JSON.stringify(model)} is not registered with the sandbox`,
        {
          hint: 'the agent registers each model it hosts (Sandbox.register) before serving untrusted requests for it',
          details: { model, registered: [...this.pools.keys()] },
        },
      );
    }
    return pool;
  }

  stats(model: string): PoolStats {
    return this.pool(model).stats();
  }

  /** Every registered model's pool stats. */
  allStats(): { model: string; stats: PoolStats }[] {
    return [...this.pools].map(([model, pool]) => ({ model, stats: pool.stats() }));
  }

  /** A fresh runner for one request, as the host's BlockChannel. Throws SandboxError when none can start. */
  async runUntrusted(opts: RunUntrustedOptions): Promise<SandboxSession> {
    const pool = this.pool(opts.model);
    if (opts.signal?.aborted)
      throw new SandboxError('SANDBOX_CANCELLED', 'the request was cancelled before it got a sandbox runner');
    const runner = await pool.acquire();
    const session = new SandboxSession(runner, {
      limits: this.config.limits,
      onExecuted: (ms) => pool.recordExecute(ms),
      ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
    this.sessions.add(session);
    void session.report
      .then((r) => {
        if (r.outcome === 'crashed') this.onRunnerCrashed?.(r);
      })
      .finally(() => this.sessions.delete(session));
    return session;
  }

  /**
   * The untrusted counterpart of the in-process channel factory, for HostedModel.run(req, open): each call
   * takes a fresh runner. The host sends START through the channel and closes it at the end (which kills
   * the runner); its own deadline and signal apply, `opts` adds the sandbox's own on top.
   */
  opener(model: string, opts: Omit<RunUntrustedOptions, 'model'> = {}): (start: StartRequest) => Promise<BlockChannel> {
    this.pool(model);
    return () => this.runUntrusted({ ...opts, model });
  }

  /** Kills every runner (warm and in use) and removes the memory cgroups. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sessions) s.close();
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    await Promise.all([...this.sessions].map((s) => s.report));
    await this.launcher.close();
    if (this.plan.cgroupParent) removeCgroupParent(this.plan.cgroupParent);
  }
}
