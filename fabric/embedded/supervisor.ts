// The embedded fabric's top process supervises its control plane (fabric/embedded/control-plane-process.ts, which in
// turn supervises the GPU agent child): no request may take a fabric process down, and if one dies anyway it comes
// back. A control plane that dies after it listened (kill -9, a fatal V8 error, an uncaught fault) is started again
// on the same port after a backoff (500 ms doubling up to 10 s, back to 500 ms after a minute of running); queued and
// running requests live in the event store and go on. Each restart is counted and logged, and the next process is told
// how the previous one ended (NDIF_CONTROL_PLANE_PREVIOUS_EXIT: exit code or signal, stderr tail, restarts so far),
// which its /metrics, its log and `ndif status` show.
//
// The process tree stays one unit: SIGTERM/SIGINT of this process stops the control plane cleanly (its agent with it)
// and exits with its code; SIGKILL of this process closes the IPC channel, on which the control plane kills itself
// (and its agent, whose channel closes in turn, exits). A control plane that never listened (a bad setting, a port in
// use) is not restarted: this process exits with its code.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';

const ENTRY = fileURLToPath(new URL('./control-plane-process.js', import.meta.url));
const STDERR_TAIL_LINES = 20;

/** How a control-plane process ended, as its supervisor saw it (passed to the next one as JSON). */
export interface ControlPlaneExit {
  pid: number;
  code: number | null;
  signal: string | null;
  at: string;
  /** Its last stderr lines (a fatal error's report is there). */
  stderrTail: string[];
  /** Restarts of the control plane since the fabric started, this one included. */
  restarts: number;
}

/** The IPC messages a control-plane process sends its supervisor. */
export type ControlPlaneMessage = { type: 'listening'; port: number };

export interface SupervisorOptions {
  log: Logger;
  /** The control plane's environment (secrets included: it reads and scrubs them). */
  env: NodeJS.ProcessEnv;
  restartDelayMs?: number;
  restartResetMs?: number;
  /** Told when this supervisor is done (the control plane stopped or could not start): the exit code to use. */
  onEnd: (code: number) => void;
}

export class ControlPlaneSupervisor {
  private child: ChildProcess | undefined;
  private stopping = false;
  private delay: number;
  private timer: NodeJS.Timeout | undefined;
  /** The port the first process listened on: every restart listens there again (clients keep their URL). */
  private port: number | undefined;
  restarts = 0;
  lastExit: ControlPlaneExit | undefined;

  constructor(private readonly options: SupervisorOptions) {
    this.delay = options.restartDelayMs ?? 500;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    if (this.stopping) return;
    const startedAt = Date.now();
    const env: NodeJS.ProcessEnv = {
      ...this.options.env,
      ...(this.port === undefined ? {} : { NDIF_PORT: String(this.port) }),
      ...(this.lastExit === undefined ? {} : { NDIF_CONTROL_PLANE_PREVIOUS_EXIT: JSON.stringify(this.lastExit) }),
    };
    const child = fork(ENTRY, [], { env, stdio: ['ignore', 'inherit', 'pipe', 'ipc'], execArgv: process.execArgv });
    this.child = child;
    let listened = false;
    child.on('message', (m: ControlPlaneMessage) => {
      if (m?.type !== 'listening') return;
      listened = true;
      this.port ??= m.port;
    });
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
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (this.stopping) return this.options.onEnd(code ?? 1);
      if (partial !== '') tail.push(partial.slice(0, 1000));
      // Never listened, and never did before: a start-up failure (a setting, the port), not a crash.
      if (!listened && this.port === undefined) {
        this.options.log.error({ code, signal }, 'the control plane did not start; not restarting it');
        return this.options.onEnd(code ?? 1);
      }
      if (Date.now() - startedAt > (this.options.restartResetMs ?? 60_000))
        this.delay = this.options.restartDelayMs ?? 500;
      this.restarts++;
      this.lastExit = {
        pid: child.pid!,
        code,
        signal,
        at: new Date().toISOString(),
        stderrTail: tail.slice(-STDERR_TAIL_LINES),
        restarts: this.restarts,
      };
      this.options.log.error(
        {
          code,
          signal,
          controlPlanePid: child.pid,
          restarts: this.restarts,
          restartInMs: this.delay,
          stderrTail: tail.slice(-5),
        },
        'the control plane died; starting it again',
      );
      this.timer = setTimeout(() => this.start(), this.delay);
      this.delay = Math.min(this.delay * 2, 10_000);
    });
  }

  /** Passes `signal` on to the control plane (a clean stop, its agent with it) and ends when it has exited. */
  stop(signal: NodeJS.Signals): void {
    if (this.stopping) {
      this.child?.kill(signal);
      return;
    }
    this.stopping = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const child = this.child;
    if (child === undefined) this.options.onEnd(0);
    else child.kill(signal);
  }
}
