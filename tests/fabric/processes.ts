// Starting the fabric's entry points (dist/fabric/*.js) as real processes in tests: wait for a line on stdout,
// stop with SIGTERM and get the exit code.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export interface FabricProcess {
  name: string;
  child: ChildProcess;
  /** The match of `ready` on stdout. */
  match: RegExpExecArray;
  out(): string;
  stop(): Promise<number | null>;
}

export function entry(name: string): string {
  return fileURLToPath(new URL(`../../fabric/${name}.js`, import.meta.url));
}

export async function startProcess(
  name: string,
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  timeoutMs = 60_000,
): Promise<FabricProcess> {
  const child = spawn(process.execPath, ['--enable-source-maps', entry(name)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn', ...env },
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    if (process.env.NDIF_TEST_LOG_LEVEL) process.stderr.write(`[${name}] ${d}`);
  });
  const exited = once(child, 'exit') as Promise<[number | null]>;
  const end = Date.now() + timeoutMs;
  for (;;) {
    const m = ready.exec(out);
    if (m) {
      return {
        name,
        child,
        match: m,
        out: () => out,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          const [code] = await exited;
          return code;
        },
      };
    }
    if (child.exitCode !== null || Date.now() > end) {
      child.kill('SIGKILL');
      throw new Error(`${name} did not start (exit ${String(child.exitCode)}): ${out}\n${err.slice(-3000)}`);
    }
    await sleep(25);
  }
}

export async function getJson(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(url, init);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

export async function waitForStatus(
  queryUrl: string,
  requestId: string,
  status: string,
  timeoutMs = 40_000,
): Promise<Record<string, unknown>> {
  const end = Date.now() + timeoutMs;
  let last: Record<string, unknown> = {};
  while (Date.now() < end) {
    const r = await getJson(`${queryUrl}/requests/${encodeURIComponent(requestId)}`);
    last = r.body;
    if (last.status === status) return last;
    await sleep(50);
  }
  throw new Error(
    `request ${requestId} is ${String(last.status)}, not ${status}: ${JSON.stringify(last).slice(0, 1500)}`,
  );
}
