// A fabric process started by a fault test: its stdout (waited on for a ready line), its stderr kept (the JSON
// log lines, searched for logged errors), its exit, and the two ways to end it: SIGTERM (and the exit code) or
// kill -9. Nothing is left running: `kill9` and `stop` wait for the exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export interface LoggedLine {
  level: number;
  msg?: string;
  [k: string]: unknown;
}

export class FabricProcess {
  private out = '';
  private err = '';
  private readonly exit: Promise<[number | null, NodeJS.Signals | null]>;
  /** Every JSON log line this process wrote on stderr at level >= 50 (error, fatal). */
  readonly errors: LoggedLine[] = [];

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (this.out += d));
    let partial = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      if (process.env.NDIF_TEST_LOG_LEVEL) process.stderr.write(`[${name}] ${d}`);
      this.err = (this.err + d).slice(-200_000);
      const lines = (partial + d).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        try {
          const j = JSON.parse(line) as LoggedLine;
          if (typeof j.level === 'number' && j.level >= 50) this.errors.push(j);
        } catch {
          // not a log line
        }
      }
    });
    this.exit = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  }

  /** Starts `dist/fabric/<entry>.js` and waits for `ready` on its stdout. */
  static async start(
    name: string,
    entry: string,
    env: NodeJS.ProcessEnv,
    ready: RegExp,
    timeoutMs = 90_000,
  ): Promise<{ proc: FabricProcess; match: RegExpExecArray }> {
    const path = fileURLToPath(new URL(`../../fabric/${entry}.js`, import.meta.url));
    const child = spawn(process.execPath, ['--enable-source-maps', path], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn', ...env },
    });
    const proc = new FabricProcess(name, child);
    const end = Date.now() + timeoutMs;
    for (;;) {
      const m = ready.exec(proc.out);
      if (m) return { proc, match: m };
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > end) {
        child.kill('SIGKILL');
        throw new Error(
          `${name} did not start (exit ${String(child.exitCode)}): ${proc.out}\n${proc.err.slice(-4000)}`,
        );
      }
      await sleep(25);
    }
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  stdout(): string {
    return this.out;
  }

  stderrTail(chars = 4000): string {
    return this.err.slice(-chars);
  }

  /** kill -9, and wait until it is gone. */
  async kill9(): Promise<void> {
    if (this.alive) this.child.kill('SIGKILL');
    await this.exit;
  }

  /** SIGTERM; resolves with the exit code (SIGKILL after `graceMs`). */
  async stop(graceMs = 25_000): Promise<number | null> {
    if (!this.alive) return (await this.exit)[0];
    this.child.kill('SIGTERM');
    const force = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const [code] = await this.exit;
    clearTimeout(force);
    return code;
  }
}

/** The pids of `parent`'s children whose command line contains `needle`. */
export function childrenOf(parent: number, needle: string): number[] {
  let text: string;
  try {
    text = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8');
  } catch {
    return [];
  }
  return text
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle);
      } catch {
        return false;
      }
    });
}

/**
 * The pids of `ancestor`'s descendants (children, their children, …) whose command line contains `needle`: the
 * embedded fabric's top process supervises the control plane, which runs the agent.
 */
export function descendantsOf(ancestor: number, needle: string): number[] {
  const out: number[] = [];
  const walk = (pid: number, depth: number) => {
    if (depth > 4) return;
    for (const child of childrenOf(pid, '')) {
      try {
        if (readFileSync(`/proc/${child}/cmdline`, 'utf8').includes(needle)) out.push(child);
      } catch {
        continue;
      }
      walk(child, depth + 1);
    }
  };
  walk(ancestor, 0);
  return out;
}

/** The embedded fabric's control-plane process under its supervisor (the process `npm start` runs). */
export const controlPlaneOf = (fabricPid: number): number | undefined =>
  childrenOf(fabricPid, 'control-plane-process.js')[0];

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
