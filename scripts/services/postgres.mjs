// A throwaway PostgreSQL cluster for the test run: initdb into a fresh temp folder, start on a free
// loopback port (trust auth, fsync on, its socket in the same folder), create a database, and hand
// back DATABASE_URL. Installs Debian's postgresql package when no server binaries are found.
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { aptInstall } from './apt.mjs';
import { freePort, isAlive, run, runOk, tail, terminate } from './procs.mjs';

const DATABASE = 'ndif_test';

function findBinDir() {
  const candidates = [];
  try {
    candidates.push(
      execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
    );
  } catch {
    /* no pg_config on PATH */
  }
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(base, v, 'bin')));
  }
  return candidates.find((d) => existsSync(join(d, 'initdb')) && existsSync(join(d, 'postgres')));
}

async function ensureBinDir() {
  let dir = findBinDir();
  if (dir) return dir;
  await aptInstall(['postgresql'], 'PostgreSQL server for the integration tests');
  // Debian starts a default cluster on install; the tests use their own, so stop that one.
  for (const version of readdirSync('/usr/lib/postgresql')) {
    await run('pg_ctlcluster', ['--mode', 'fast', version, 'main', 'stop']).catch(() => {});
  }
  dir = findBinDir();
  if (!dir)
    throw new Error('postgresql was installed but no initdb/postgres binaries were found under /usr/lib/postgresql');
  return dir;
}

/** initdb and postgres refuse to run as root: run them as the `postgres` system user then. */
async function serverUser() {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = () => {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('postgres:'));
    if (!line) return undefined;
    const [, , uid, gid] = line.split(':');
    return { uid: Number(uid), gid: Number(gid) };
  };
  let user = lookup();
  if (!user) {
    await runOk('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      '/nonexistent',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]);
    user = lookup();
  }
  return user;
}

async function waitReady(url, child, logFile, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    const client = new pg.Client({
      connectionString: url.replace(`/${DATABASE}`, '/postgres'),
      connectionTimeoutMillis: 1000,
    });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (e) {
      await client.end().catch(() => {});
      if (exited) {
        const log = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
        const err = new Error(`postgres exited during startup:\n${tail(log, 20)}`);
        err.portInUse = /could not bind|Address already in use/.test(log);
        throw err;
      }
      if (Date.now() > end) throw new Error(`postgres did not accept connections within ${timeoutMs} ms: ${e.message}`);
      await sleep(30);
    }
  }
}

/**
 * Starts a PostgreSQL cluster for this run. `reaper` (see reaper.mjs) removes it if this process dies.
 * Returns { env: { DATABASE_URL }, info, stop() }.
 */
export async function startPostgres({ reaper, id = 'postgres' } = {}) {
  const bin = await ensureBinDir();
  const user = await serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'ndif-pg-'));
  reaper?.set(id, [{ rm: dir }]);
  const asUser = user ? { uid: user.uid, gid: user.gid } : {};
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  let child;
  try {
    await runOk(
      join(bin, 'initdb'),
      ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'],
      {
        cwd: dir,
        ...asUser,
      },
    );
    let url;
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const log = openSync(logFile, 'a');
      child = spawn(
        join(bin, 'postgres'),
        [
          '-D',
          data,
          '-p',
          String(port),
          '-c',
          'listen_addresses=127.0.0.1',
          '-c',
          `unix_socket_directories=${dir}`,
          '-c',
          'fsync=on',
          '-c',
          'max_connections=300',
          '-c',
          'log_min_messages=warning',
        ],
        { cwd: dir, detached: true, stdio: ['ignore', log, log], ...asUser },
      );
      closeSync(log);
      child.unref();
      // SIGQUIT is postgres's immediate shutdown: right for a cluster that is thrown away anyway.
      reaper?.set(id, [{ kill: child.pid, signal: 'SIGQUIT', graceMs: 5000 }, { rm: dir }]);
      url = `postgres://postgres@127.0.0.1:${port}/${DATABASE}`;
      try {
        await waitReady(url, child, logFile, 20_000);
        break;
      } catch (e) {
        if (!e.portInUse || attempt >= 3) throw e;
      }
    }
    const admin = new pg.Client({ connectionString: url.replace(`/${DATABASE}`, '/postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    await admin.end();
    const pid = child.pid;
    return {
      env: { DATABASE_URL: url },
      info: { dir, pid, bin },
      async stop() {
        // SIGINT is postgres's fast shutdown (what pg_ctl stop -m fast sends).
        if (isAlive(pid)) await terminate(pid, { signal: 'SIGINT', graceMs: 10_000 });
        rmSync(dir, { recursive: true, force: true });
        reaper?.del(id);
      },
    };
  } catch (e) {
    if (child?.pid) await terminate(child.pid, { signal: 'SIGQUIT', graceMs: 3000 });
    rmSync(dir, { recursive: true, force: true });
    reaper?.del(id);
    throw e;
  }
}
