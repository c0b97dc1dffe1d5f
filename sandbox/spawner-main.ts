// The runner spawner: a small process the agent starts once, which starts every runner for it. fork+exec
// from the agent itself blocks the agent's event loop for tens of milliseconds (the cost grows with the
// agent's address space, and a model host is large); from this ~40 MB process it is a few milliseconds and
// blocks nothing that serves requests.
//
// IPC with the agent (JSON messages on the Node IPC channel, handles attached):
//   agent → {op:'spawn', id, argv, env, nice}   (nice: start at this niceness; the agent restores 0 on claim)
//   spawner → {op:'spawned', id, pid} + the agent's end of the runner's socket pair (fd 3)
//             {op:'stdout', id} + the runner's stdout pipe, {op:'stderr', id} + its stderr pipe
//             {op:'exit', id, code, signal}      {op:'failed', id, message}   (spawn itself failed)
// When the agent goes (the IPC channel disconnects, or the parent pid changes) the spawner SIGKILLs the
// process group of every runner it started and exits.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';

interface SpawnCommand {
  op: 'spawn';
  id: string;
  argv: string[];
  env: Record<string, string>;
  nice: number;
}

const children = new Map<string, ChildProcess>();

function send(msg: Record<string, unknown>, handle?: unknown): void {
  if (!process.connected) return;
  process.send!(msg, handle as never, {}, () => {});
}

/** Stops node from reading the pipe into this process (no public API: the socket's libuv handle). */
function stopReading(pipe: unknown): void {
  const handle = (pipe as { _handle?: { reading?: boolean; readStop?: () => number } } | null)?._handle;
  if (!handle?.readStop) return;
  handle.reading = false;
  handle.readStop();
}

function killAll(): void {
  for (const c of children.values()) {
    if (c.pid === undefined) continue;
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

function agentGone(): never {
  killAll();
  process.exit(0);
}

process.on('disconnect', agentGone);
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) agentGone();
}, 200).unref();

process.on('message', (m: SpawnCommand) => {
  if (m?.op !== 'spawn') return;
  let child: ChildProcess;
  try {
    child = spawn(m.argv[0]!, m.argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: m.env,
      detached: true,
      cwd: '/',
    });
  } catch (e) {
    return send({ op: 'failed', id: m.id, message: (e as Error).message });
  }
  child.once('error', (e) => {
    if (child.pid === undefined) send({ op: 'failed', id: m.id, message: e.message });
  });
  if (child.pid === undefined) return;
  if (m.nice !== 0) {
    try {
      setPriority(child.pid, m.nice);
    } catch {
      /* runs at normal priority */
    }
  }
  children.set(m.id, child);
  child.once('exit', (code, signal) => {
    children.delete(m.id);
    send({ op: 'exit', id: m.id, code, signal });
  });
  // The pipes go to the agent unread. node starts reading a child's pipe as soon as it makes its socket, and what
  // this process had read before handing the pipe on went with its copy of the socket: on a loaded machine the
  // agent got a runner's last stderr line without the error above it (a handle message waits for the agent's
  // acknowledgement of the one before). Stopped here, the bytes stay in the pipe until the agent reads them.
  for (const pipe of [child.stdio[3], child.stdout, child.stderr]) stopReading(pipe);
  send({ op: 'spawned', id: m.id, pid: child.pid }, child.stdio[3]);
  send({ op: 'stdout', id: m.id }, child.stdout);
  send({ op: 'stderr', id: m.id }, child.stderr);
});
