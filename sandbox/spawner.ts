// The agent's side of the runner spawner (spawner-main.ts): starts it on first use (and again if it died),
// asks it for runners, and assembles what comes back (socket, stdout, stderr, later the exit) into a
// SpawnedRunner.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SandboxError } from './errors.js';

export interface SpawnedRunner {
  pid: number;
  /** The agent's end of the runner's socket pair. */
  socket: Socket;
  stdout: Socket;
  stderr: Socket;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

interface Pending {
  resolve: (r: SpawnedRunner) => void;
  reject: (e: Error) => void;
  pid?: number;
  socket?: Socket;
  stdout?: Socket;
  exit: (v: { code: number | null; signal: NodeJS.Signals | null }) => void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export const SPAWNER_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'spawner-main.js');

type SpawnerMessage =
  | { op: 'spawned'; id: string; pid: number }
  | { op: 'stdout' | 'stderr'; id: string }
  | { op: 'exit'; id: string; code: number | null; signal: NodeJS.Signals | null }
  | { op: 'failed'; id: string; message: string };

export class RunnerSpawner {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<string, Pending>();
  /** Runners handed out whose exit has not been reported yet. */
  private readonly live = new Map<string, Pending>();
  private closed = false;

  constructor(private readonly env: Record<string, string>) {}

  /** The spawner's pid (starting it if needed); for tests and diagnostics. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private ensure(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null && this.child.connected)
      return this.child;
    const child = spawn(process.execPath, [SPAWNER_SCRIPT], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: this.env,
      serialization: 'json',
    });
    child.on('message', (m: SpawnerMessage, handle: unknown) => this.onMessage(m, handle as Socket | undefined));
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      // Its runners were killed with it (or notice their parent is gone); report every one as exited.
      const why = `the runner spawner exited (${signal ? `signal ${signal}` : `code ${code}`})`;
      for (const [id, p] of this.pending) {
        p.reject(new SandboxError('SANDBOX_RUNNER_START_FAILED', `${why} while starting runner ${id}`));
        p.exit({ code: null, signal: 'SIGKILL' });
      }
      this.pending.clear();
      for (const p of this.live.values()) {
        if (p.pid !== undefined) {
          try {
            process.kill(-p.pid, 'SIGKILL');
          } catch {
            /* already gone */
          }
        }
        p.exit({ code: null, signal: 'SIGKILL' });
      }
      this.live.clear();
    });
    child.on('error', () => {
      /* reported through exit */
    });
    this.child = child;
    return child;
  }

  private onMessage(m: SpawnerMessage, handle: Socket | undefined): void {
    const p = this.pending.get(m.id) ?? this.live.get(m.id);
    if (!p) return;
    switch (m.op) {
      case 'spawned':
        p.pid = m.pid;
        p.socket = handle;
        break;
      case 'stdout':
        p.stdout = handle;
        break;
      case 'stderr':
        this.pending.delete(m.id);
        this.live.set(m.id, p);
        p.resolve({ pid: p.pid!, socket: p.socket!, stdout: p.stdout!, stderr: handle!, exited: p.exited });
        break;
      case 'exit':
        this.pending.delete(m.id);
        this.live.delete(m.id);
        p.exit({ code: m.code, signal: m.signal });
        break;
      case 'failed':
        this.pending.delete(m.id);
        p.reject(
          new SandboxError('SANDBOX_RUNNER_START_FAILED', `could not spawn a sandbox runner: ${m.message}`, {
            hint: 'check that node, prlimit and unshare are installed where the agent looks for them',
          }),
        );
        break;
    }
  }

  spawn(id: string, argv: string[], env: Record<string, string>, nice = 0): Promise<SpawnedRunner> {
    if (this.closed) return Promise.reject(new SandboxError('SANDBOX_CLOSED', 'the sandbox is closed'));
    const child = this.ensure();
    let exit!: Pending['exit'];
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => (exit = r));
    return new Promise<SpawnedRunner>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, exit, exited });
      child.send({ op: 'spawn', id, argv, env, nice });
    });
  }

  /** Stops the spawner; it SIGKILLs every runner it started as it goes. */
  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (!child) return;
    const gone = new Promise((r) => child.once('exit', r));
    if (child.connected) child.disconnect();
    else child.kill('SIGKILL');
    await gone;
  }
}
