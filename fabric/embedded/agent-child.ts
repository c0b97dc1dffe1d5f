// The embedded fabric's GPU agent: a child process (dist/fabric/gpu-agent.js) on the IPC transport, restarted
// when it dies (kill -9 included) after a short backoff, so a crashed agent comes back within the scheduler's
// grace period as a new boot of the same agent. It is forked with an IPC channel: when this process dies, the
// channel closes and the agent exits (it also exits when the transport socket closes).
// It is the agent's supervisor: it keeps the last lines the process wrote on stderr (passed through to this
// process's stderr as they come) and tells the next process how the previous one ended (NDIF_AGENT_PREVIOUS_EXIT:
// boot, exit code or signal, stderr tail), which the agent reports with its registration. An agent that refuses its
// configuration (exit 78, a coded `gpu-agent: CODE: …` line) is not started again: `configFault` says why.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { CONFIG_FAULT_EXIT } from '../health.js';
import { AGENT_NODE_FLAGS } from '../agent-node-flags.js';

export interface AgentChildOptions {
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** First restart delay; doubles up to 10 s, back to this after `restartResetMs` of running. Default 500 ms. */
  restartDelayMs?: number;
  /** A process that ran this long before dying is restarted after the first delay again. Default 60 s. */
  restartResetMs?: number;
}

const ENTRY = fileURLToPath(new URL('../gpu-agent.js', import.meta.url));
const STDERR_TAIL_LINES = 30;

/** How an agent process ended, as this supervisor saw it. */
export interface ObservedExit {
  bootId: string;
  code: number | null;
  signal: string | null;
  stderrTail: string[];
}

export class AgentChild {
  private child: ChildProcess | undefined;
  private stopping = false;
  private delay: number;
  private timer: NodeJS.Timeout | undefined;
  private readyWaiters: Array<(bootId: string) => void> = [];
  private faultWaiters: Array<(fault: { code: string; message: string }) => void> = [];
  starts = 0;
  bootId: string | undefined;
  /** The agent's health and metrics server (`…/health`; `/metrics` beside it), when NDIF_HEALTH_PORT gives it one. */
  healthUrl: string | undefined;
  /** The end of the last process that died (not one this supervisor stopped). */
  lastExit: ObservedExit | undefined;
  /** Set when the agent refused its configuration (exit 78, e.g. AGENT_HEALTH_PORT_IN_USE): it is not restarted. */
  configFault: { code: string; message: string; at: string } | undefined;

  constructor(private readonly options: AgentChildOptions) {
    this.delay = options.restartDelayMs ?? 500;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    if (this.stopping) return;
    this.starts++;
    const startedAt = Date.now();
    const previous = this.lastExit;
    const env =
      previous === undefined
        ? this.options.env
        : { ...this.options.env, NDIF_AGENT_PREVIOUS_EXIT: JSON.stringify(previous) };
    const child = fork(ENTRY, [], {
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      execArgv: ['--enable-source-maps', ...AGENT_NODE_FLAGS],
    });
    this.child = child;
    const tail: string[] = [];
    let partial = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      process.stderr.write(d);
      const lines = (partial + d).split('\n');
      partial = lines.pop()!.slice(-4096);
      for (const l of lines) {
        tail.push(l.slice(0, 1000));
        if (tail.length > STDERR_TAIL_LINES) tail.shift();
      }
    });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out = (out + d).slice(-4096);
      const m = /agent (\S+) ready boot (\S+)(?: health (\S+))?\n/.exec(out);
      if (m && this.child === child && this.bootId !== m[2]) {
        this.bootId = m[2];
        this.healthUrl = m[3];
        this.options.log.info({ agentId: m[1], bootId: m[2], pid: child.pid }, 'agent ready');
        for (const w of this.readyWaiters.splice(0)) w(m[2]);
      }
    });
    let bootOfChild: string | undefined;
    const onReady = (b: string) => (bootOfChild = b);
    this.readyWaiters.push(onReady);
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      this.readyWaiters = this.readyWaiters.filter((w) => w !== onReady);
      if (this.stopping) return;
      if (partial !== '') tail.push(partial.slice(0, 1000));
      if (bootOfChild !== undefined)
        this.lastExit = { bootId: bootOfChild, code, signal, stderrTail: tail.slice(-STDERR_TAIL_LINES) };
      if (code === CONFIG_FAULT_EXIT) {
        const line = [...tail].reverse().find((l) => l.startsWith('gpu-agent: ')) ?? 'gpu-agent: configuration refused';
        const m = /^gpu-agent: ([A-Z][A-Z0-9_]+): (.*)$/.exec(line);
        const at = new Date().toISOString();
        this.configFault = m
          ? { code: m[1]!, message: m[2]!, at }
          : { code: 'AGENT_CONFIG_INVALID', message: line, at };
        this.options.log.error(this.configFault, 'the agent refused its configuration; it is not started again');
        for (const w of this.faultWaiters.splice(0)) w(this.configFault);
        return;
      }
      if (Date.now() - startedAt > (this.options.restartResetMs ?? 60_000))
        this.delay = this.options.restartDelayMs ?? 500;
      this.options.log.warn({ code, signal, restartInMs: this.delay }, 'agent process exited; starting it again');
      this.timer = setTimeout(() => this.start(), this.delay);
      this.delay = Math.min(this.delay * 2, 10_000);
    });
  }

  /** Resolves with the boot id of the next (or current) ready agent process; rejects on a configuration fault. */
  ready(timeoutMs = 60_000): Promise<string> {
    if (this.bootId !== undefined && this.child !== undefined) return Promise.resolve(this.bootId);
    const faulted = (f: { code: string; message: string }) =>
      Object.assign(new Error(`${f.code}: ${f.message}`), { code: f.code });
    if (this.configFault !== undefined) return Promise.reject(faulted(this.configFault));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the agent process was not ready within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.readyWaiters.push((b) => {
        clearTimeout(timer);
        resolve(b);
      });
      this.faultWaiters.push((f) => {
        clearTimeout(timer);
        reject(faulted(f));
      });
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`; no restart. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(force);
  }
}
