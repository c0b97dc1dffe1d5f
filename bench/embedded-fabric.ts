// A benchmark's embedded fabric: `node <dist>/fabric/embedded/main.js` as `npm start` runs it (control plane and
// GPU agent child, real processes) on a free port, serving the given models; stopped with SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(distDir, '..');

export interface BenchFabric {
  child: ChildProcess;
  url: string;
  /** The first line the fabric printed (URL, store, models, agent, metrics). */
  banner: string;
  log: () => string;
  stop(): Promise<void>;
}

export async function startEmbeddedFabric(dataDir: string, models: string, env: NodeJS.ProcessEnv = {}): Promise<BenchFabric> {
  const child = spawn(process.execPath, [join(distDir, 'fabric', 'embedded', 'main.js')], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_PORT: '0',
      NDIF_DATA_DIR: dataDir,
      NDIF_MODELS: models,
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_LOG_LEVEL: process.env.NDIF_LOG_LEVEL ?? 'warn',
      ...env,
    },
  });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log = (log + d).slice(-20_000)));
  const { url, banner } = await new Promise<{ url: string; banner: string }>((resolveUrl, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /^NDIF fabric listening on (http:\/\/\S+).*$/m.exec(out);
      if (m) resolveUrl({ url: m[1]!, banner: m[0] });
    });
    child.once('exit', (code) => reject(new Error(`the fabric exited (${code}) before it listened:\n${out}\n${log}`)));
  });
  return {
    child,
    url,
    banner,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
