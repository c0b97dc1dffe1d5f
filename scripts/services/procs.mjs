// Small process helpers shared by the service starters: run a command to completion, wait for a pid to
// die, end a process group, find a free loopback port.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Runs a command to completion; resolves {code, stdout, stderr}; never rejects on a non-zero exit. */
export function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}

/** Like run(), but throws with the command's output when it exits non-zero. */
export async function runOk(cmd, args, opts = {}) {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    const out = `${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-30).join('\n');
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.code}:\n${out}`);
  }
  return r;
}

export function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Waits until pid is gone; returns false when it is still alive after timeoutMs. */
export async function waitGone(pid, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > end) return false;
    await sleep(25);
  }
  return true;
}

/**
 * Sends `signal` to a process (or its whole group when `group`), waits up to graceMs, then SIGKILLs.
 * Works for processes that are not our children (a reaper cleaning up after a dead runner).
 */
export async function terminate(pid, { signal = 'SIGTERM', group = false, graceMs = 5000 } = {}) {
  const target = group ? -pid : pid;
  const send = (sig) => {
    try {
      process.kill(target, sig);
    } catch {
      /* already gone */
    }
  };
  if (!isAlive(pid)) {
    if (group) send('SIGKILL'); // stragglers of the group
    return;
  }
  send(signal);
  if (!(await waitGone(pid, graceMs))) {
    send('SIGKILL');
    await waitGone(pid, 5000);
  }
  if (group) send('SIGKILL');
}

/** A port that was free on 127.0.0.1 a moment ago (callers retry on a bind failure). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export function tail(text, lines = 40) {
  return String(text).trimEnd().split('\n').slice(-lines).join('\n');
}
