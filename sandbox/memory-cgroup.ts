// A memory cgroup per runner, nested under the agent's own memory cgroup so the host's limits still hold.
// cgroup v1 (`/sys/fs/cgroup/memory/...`) when its hierarchy is writable, else cgroup v2 when the agent's
// cgroup already delegates the memory controller to its children. The kernel OOM-kills the runner when
// its cgroup hits the limit; `oomKills()` tells the agent that is what happened.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processRunning } from './process-alive.js';

export type CgroupKind = 'cgroup-v1' | 'cgroup-v2';

export interface MemoryCgroupParent {
  kind: CgroupKind;
  /** Directory under which per-runner cgroups are created. */
  dir: string;
}

function ownCgroupPath(controller: string | null): string | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [, controllers, path] = line.split(':');
    if (path === undefined || controllers === undefined) continue;
    if (controller === null ? controllers === '' : controllers.split(',').includes(controller)) return path;
  }
  return undefined;
}

function cgroup2Mount(): string | undefined {
  try {
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      const sep = line.indexOf(' - ');
      if (sep < 0) continue;
      if (line.slice(sep + 3).startsWith('cgroup2 ')) return line.split(' ')[4];
    }
  } catch {
    /* not Linux */
  }
  return undefined;
}

/** Removes the per-agent cgroups of agents that died without cleaning up (SIGKILL). */
function sweepDeadAgents(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^ndif-sandbox-\d+(-\d+)?$/.test(n));
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^ndif-sandbox-(\d+)/.exec(name)![1]);
    if (pid === process.pid || processRunning(pid)) continue;
    removeCgroupParent({ kind: 'cgroup-v1', dir: join(dir, name) });
  }
}

let parents = 0;

function probeWritable(dir: string, kind: CgroupKind): MemoryCgroupParent | undefined {
  sweepDeadAgents(dir);
  // One parent per sandbox, so closing one sandbox never removes another's.
  const parent = join(dir, `ndif-sandbox-${process.pid}-${++parents}`);
  try {
    mkdirSync(parent, { recursive: true });
    if (kind === 'cgroup-v2') {
      // Children get memory.max only if this cgroup hands them the controller.
      const sub = readFileSync(join(parent, 'cgroup.subtree_control'), 'utf8');
      if (!sub.split(/\s+/).includes('memory')) writeFileSync(join(parent, 'cgroup.subtree_control'), '+memory');
    }
    return { kind, dir: parent };
  } catch {
    try {
      rmdirSync(parent);
    } catch {
      /* it was not created */
    }
    return undefined;
  }
}

/** The directories per-agent cgroups would be created in (v1 memory and v2), where they exist. */
function candidateDirs(): string[] {
  const out: string[] = [];
  const v1 = ownCgroupPath('memory');
  if (v1 !== undefined) out.push(join('/sys/fs/cgroup/memory', v1));
  const v2 = ownCgroupPath(null);
  const mount = cgroup2Mount();
  if (v2 !== undefined && mount !== undefined) out.push(join(mount, v2));
  return out.filter((d) => existsSync(d));
}

/** Removes cgroups left by agents of this cgroup that died (SIGKILL) without closing their sandbox. */
export function sweepStaleCgroups(): void {
  for (const d of candidateDirs()) sweepDeadAgents(d);
}

/** Finds where per-runner memory cgroups can be made, or undefined (then the launcher falls back to an rlimit). */
export function findMemoryCgroupParent(override = process.env.NDIF_SANDBOX_CGROUP): MemoryCgroupParent | undefined {
  if (override) {
    const kind: CgroupKind = existsSync(join(override, 'memory.limit_in_bytes')) ? 'cgroup-v1' : 'cgroup-v2';
    return probeWritable(override, kind);
  }
  const v1 = ownCgroupPath('memory');
  if (v1 !== undefined && existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) {
    const found = probeWritable(join('/sys/fs/cgroup/memory', v1), 'cgroup-v1');
    if (found) return found;
  }
  const v2 = ownCgroupPath(null);
  const mount = cgroup2Mount();
  if (v2 !== undefined && mount !== undefined) {
    const own = join(mount, v2);
    try {
      if (readFileSync(join(own, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory'))
        return probeWritable(own, 'cgroup-v2');
    } catch {
      /* no memory controller here */
    }
  }
  return undefined;
}

/** One runner's memory cgroup. */
export class MemoryCgroup {
  private constructor(
    readonly kind: CgroupKind,
    readonly dir: string,
  ) {}

  static create(parent: MemoryCgroupParent, name: string, limitBytes: number): MemoryCgroup {
    const dir = join(parent.dir, name);
    mkdirSync(dir, { recursive: true });
    const cg = new MemoryCgroup(parent.kind, dir);
    try {
      if (parent.kind === 'cgroup-v1') {
        writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
        // Swap would let the runner exceed the cap; set memory+swap to the same limit where accounted.
        if (existsSync(join(dir, 'memory.memsw.limit_in_bytes')))
          writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
        // Charge what the runner already holds to its own cgroup when it moves in.
        try {
          writeFileSync(join(dir, 'memory.move_charge_at_immigrate'), '3');
        } catch {
          /* removed in newer kernels' v1 */
        }
      } else {
        writeFileSync(join(dir, 'memory.max'), String(limitBytes));
        if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
      }
    } catch (e) {
      cg.remove();
      throw e;
    }
    return cg;
  }

  add(pid: number): void {
    writeFileSync(join(this.dir, 'cgroup.procs'), String(pid));
  }

  /** How many times the kernel OOM-killed a process of this cgroup. */
  oomKills(): number {
    try {
      const file = this.kind === 'cgroup-v1' ? 'memory.oom_control' : 'memory.events';
      const m = /(?:^|\n)oom_kill (\d+)/.exec(readFileSync(join(this.dir, file), 'utf8'));
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  }

  /** Peak usage in bytes (v1 only; v2 reports memory.peak on newer kernels). */
  peakBytes(): number | undefined {
    try {
      return Number(
        readFileSync(join(this.dir, this.kind === 'cgroup-v1' ? 'memory.max_usage_in_bytes' : 'memory.peak'), 'utf8'),
      );
    } catch {
      return undefined;
    }
  }

  /** Removes the (empty) cgroup; a cgroup with live tasks cannot be removed, so call after the runner exited. */
  remove(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      /* already gone or still has a dying task; the parent's removal retries */
    }
  }
}

/** Removes the per-agent parent and any leftover runner cgroups in it. */
export function removeCgroupParent(parent: MemoryCgroupParent): void {
  try {
    for (const entry of readdirSync(parent.dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      try {
        rmdirSync(join(parent.dir, entry.name));
      } catch {
        /* still has tasks */
      }
    }
    rmdirSync(parent.dir);
  } catch {
    /* still in use or already gone */
  }
}
