// What this host can enforce on a runner, probed once, and the command line that enforces it:
//   prlimit --core=0 --cpu=S[:S+1] [--data=B]  (RLIMIT_CPU backstop, no core dumps, memory rlimit fallback)
//   unshare -n -S <uid> -G <gid>                (own network namespace: no interface but a down loopback;
//                                                then drop root for an unprivileged user, so a block cannot
//                                                signal the agent or any other process it does not own)
//   node --experimental-permission --allow-fs-read=<runner code only> --max-old-space-size=H runner-main.js
// prlimit and unshare exec the next program, so the runner keeps the pid the agent spawned.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { RunnerLimits } from './config.js';
import { findMemoryCgroupParent } from './memory-cgroup.js';
import type { MemoryCgroupParent } from './memory-cgroup.js';

export interface Isolation {
  /** netns: own network namespace. none: Node 20's permission model does not cover the network. */
  network: 'netns' | 'none';
  /** How the memory cap is enforced beyond the V8 heap limit. */
  memory: 'cgroup-v1' | 'cgroup-v2' | 'rlimit-data' | 'v8-heap-only';
  cpu: 'rlimit-cpu' | 'wall-timeout-only';
  filesystem: 'permission-model';
  childProcesses: 'permission-model';
  workers: 'permission-model';
  environment: 'allowlist';
  /** unprivileged: runners run as NDIF_SANDBOX_UID (default nobody, 65534); agent: as the agent's own user. */
  user: 'unprivileged' | 'agent';
  /** Why a weaker option applied, when one did. */
  notes: string[];
}

export interface IsolationPlan {
  isolation: Isolation;
  cgroupParent: MemoryCgroupParent | undefined;
  /** The argv (program first) that starts a runner executing `script` with `args`, reading only `readPaths`. */
  argv(script: string, readPaths: string[], args?: string[]): string[];
}

function findProgram(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/bin', '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  return undefined;
}

function canUnshareNet(unshare: string): boolean {
  if (process.platform !== 'linux') return false;
  const r = spawnSync(unshare, ['-n', 'true'], { stdio: 'ignore', timeout: 5000 });
  return r.status === 0;
}

export interface PlanOptions {
  limits: RunnerLimits;
  networkNamespace: boolean;
  /** uid/gid runners drop to when the agent is root (default 65534, nobody). */
  uid?: number;
  gid?: number;
  /** Force the memory mechanism (tests of the fallbacks). */
  memory?: Isolation['memory'];
}

/** The permission model's flag: `--permission` from Node 22.13 on (Node 26 knows no other), before it the experimental one. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has('--permission')
  ? '--permission'
  : '--experimental-permission';
/**
 * Node 26's permission model also gates the network, the runner's own channel included (a socket on an inherited
 * fd). The network stays the network namespace's to block, as on Node 20–24, whose permission model has no
 * network scope: where the flag exists the runner gets it.
 */
const NET_FLAGS = process.allowedNodeEnvironmentFlags.has('--allow-net') ? ['--allow-net'] : [];

export function planIsolation(opts: PlanOptions): IsolationPlan {
  const notes: string[] = [];
  const prlimit = process.platform === 'linux' ? findProgram('prlimit') : undefined;
  const unshare = findProgram('unshare');

  let network: Isolation['network'] = 'none';
  if (!opts.networkNamespace) notes.push('network namespace disabled by NDIF_SANDBOX_NETNS=0');
  else if (!unshare) notes.push('no unshare(1): blocks can open network connections');
  else if (canUnshareNet(unshare)) network = 'netns';
  else notes.push('unshare -n failed (needs root or CAP_SYS_ADMIN): blocks can open network connections');

  let cgroupParent: MemoryCgroupParent | undefined;
  let memory: Isolation['memory'];
  if (opts.memory === undefined || opts.memory === 'cgroup-v1' || opts.memory === 'cgroup-v2') {
    cgroupParent = findMemoryCgroupParent();
    if (cgroupParent && (opts.memory === undefined || opts.memory === cgroupParent.kind)) memory = cgroupParent.kind;
    else {
      cgroupParent = undefined;
      memory = prlimit ? 'rlimit-data' : 'v8-heap-only';
      notes.push(`no writable memory cgroup: memory capped by ${memory}`);
    }
  } else {
    memory = opts.memory === 'rlimit-data' && !prlimit ? 'v8-heap-only' : opts.memory;
  }
  const cpu: Isolation['cpu'] = prlimit ? 'rlimit-cpu' : 'wall-timeout-only';
  const root = process.getuid?.() === 0;
  const setpriv = findProgram('setpriv');
  const uid = opts.uid ?? 65534;
  const gid = opts.gid ?? 65534;
  // unshare sets the ids itself after making the namespace; without one, setpriv drops them.
  const dropVia: 'unshare' | 'setpriv' | undefined = !root
    ? undefined
    : network === 'netns'
      ? 'unshare'
      : setpriv
        ? 'setpriv'
        : undefined;
  if (!root)
    notes.push(
      'the agent is not root: runners run as its own user (a block could signal its processes if it reached process.kill)',
    );
  else if (!dropVia) notes.push('no setpriv(1): runners run as root');
  if (!prlimit) notes.push('no prlimit(1): a spinning block outlives a dead agent until killed');

  const { limits } = opts;
  const isolation: Isolation = {
    network,
    memory,
    cpu,
    filesystem: 'permission-model',
    childProcesses: 'permission-model',
    workers: 'permission-model',
    environment: 'allowlist',
    user: dropVia ? 'unprivileged' : 'agent',
    notes,
  };

  return {
    isolation,
    cgroupParent,
    argv(script, readPaths, args = []) {
      const argv: string[] = [];
      if (prlimit) {
        argv.push(prlimit, '--core=0', `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`);
        if (memory === 'rlimit-data') argv.push(`--data=${limits.memoryMb * 1024 * 1024}`);
        argv.push('--');
      }
      if (network === 'netns' && unshare)
        argv.push(unshare, '-n', ...(dropVia === 'unshare' ? ['-S', String(uid), '-G', String(gid)] : []), '--');
      else if (dropVia === 'setpriv' && setpriv)
        argv.push(setpriv, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--');
      argv.push(
        process.execPath,
        PERMISSION_FLAG,
        ...readPaths.map((p) => `--allow-fs-read=${p}`),
        ...NET_FLAGS,
        '--disable-warning=ExperimentalWarning',
        `--max-old-space-size=${limits.heapMb}`,
        script,
        ...args,
      );
      return argv;
    },
  };
}
