// The reaper cleans up after the test runner when the runner dies without doing it itself (crash,
// SIGKILL). It is a detached process reading cleanup plans from a pipe; the runner holds the pipe's
// other end, so the runner's death (however it happens) closes it, and the reaper then runs every
// plan still registered: end processes, remove folders. A runner that stops its services itself
// unregisters the plans first, and the reaper exits doing nothing.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { terminate } from './procs.mjs';

/**
 * A plan is a list of steps, run in order:
 *   { kill: pid, group?: boolean, signal?: string, graceMs?: number }
 *   { rm: path }
 */
async function runPlan(steps) {
  for (const step of steps) {
    try {
      if (step.kill) await terminate(step.kill, step);
      else if (step.rm) rmSync(step.rm, { recursive: true, force: true });
    } catch {
      /* best effort: keep going with the rest */
    }
  }
}

async function reaperMain() {
  const plans = new Map();
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    try {
      const msg = JSON.parse(line);
      if (msg.op === 'set') plans.set(msg.id, msg.steps);
      else if (msg.op === 'del') plans.delete(msg.id);
    } catch {
      /* ignore a torn line */
    }
  });
  await new Promise((resolve) => rl.on('close', resolve));
  await Promise.all([...plans.values()].map(runPlan));
  process.exit(0);
}

/** Starts a reaper for this process; returns {set(id, steps), del(id), close()}. */
export function startReaper() {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--reaper'], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.unref();
  child.stdin.on('error', () => {});
  // Not referenced: the pipe must not keep the runner alive, only die with it.
  child.stdin._handle?.unref?.();
  const send = (msg) => child.stdin.write(`${JSON.stringify(msg)}\n`);
  return {
    pid: child.pid,
    set: (id, steps) => send({ op: 'set', id, steps }),
    del: (id) => send({ op: 'del', id }),
    close: () => new Promise((resolve) => child.stdin.end(resolve)),
  };
}

if (process.argv[2] === '--reaper') {
  process.on('SIGINT', () => {}); // a terminal's Ctrl-C is for the runner; the reaper cleans up after it
  process.on('SIGHUP', () => {});
  reaperMain();
}
