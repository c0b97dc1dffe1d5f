// The embedded fabric's real processes for a benchmark: `node <dist>/fabric/embedded/main.js` on a free port over
// `dataDir`, with `env` on top of this process's; resolves with its URL once it listens (its stderr kept).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(distDir, '..');

export interface EmbeddedFabric {
  child: ChildProcess;
  url: string;
  /** The line it printed when it listened (URL, store, models, agent, metrics). */
  banner: string;
  /** The last 20 kB of its stderr. */
  log(): string;
  /** The control-plane process under the fabric's supervisor (`child`), if one runs now. */
  controlPlanePid(): number | undefined;
}

function controlPlaneOf(supervisor: number | undefined): number | undefined {
  if (supervisor === undefined) return undefined;
  try {
    const children = readFileSync(`/proc/${supervisor}/task/${supervisor}/children`, 'utf8').trim().split(/\s+/);
    return children
      .filter(Boolean)
      .map(Number)
      .find((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('control-plane-process.js');
        } catch {
          return false;
        }
      });
  } catch {
    return undefined;
  }
}

export async function startEmbeddedFabric(dataDir: string, env: Record<string, string>): Promise<EmbeddedFabric> {
  // NDIF_BENCH_CPU_PROF=<folder>: the fabric's processes write V8 CPU profiles there (the supervisor passes its
  // node flags on to the control plane it forks).
  const prof = process.env.NDIF_BENCH_CPU_PROF;
  const flags = prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [];
  const child = spawn(process.execPath, [...flags, join(distDir, 'fabric', 'embedded', 'main.js')], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_PORT: '0',
      NDIF_DATA_DIR: dataDir,
      NDIF_LOG_LEVEL: process.env.NDIF_LOG_LEVEL ?? 'warn',
      ...env,
    },
  });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log = (log + d).slice(-20_000)));
  const { url, banner } = await new Promise<{ url: string; banner: string }>((ok, fail) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /^NDIF fabric listening on (http:\/\/\S+).*$/m.exec(out);
      if (m) ok({ url: m[1]!, banner: m[0] });
    });
    child.once('exit', (code) => fail(new Error(`the fabric exited (${code}) before it listened:\n${out}\n${log}`)));
  });
  return { child, url, banner, log: () => log, controlPlanePid: () => controlPlaneOf(child.pid) };
}

/** Ends the fabric (SIGTERM, its agent with it) and waits for it to exit; nothing when it already has. */
export async function stopEmbeddedFabric(f: EmbeddedFabric | undefined): Promise<void> {
  if (f === undefined || f.child.exitCode !== null || f.child.signalCode !== null) return;
  const exited = new Promise((r) => f.child.once('exit', r));
  f.child.kill('SIGTERM');
  await exited;
}
