// The one directory a runner may read (its only --allow-fs-read): the runner bundle, the tokenizer library
// and each model's tokenizer.json, copied in. Created by the agent with an unpredictable name, writable only
// by the agent, readable by the runner's unprivileged user; removed when the sandbox closes.
//
// One directory rather than several paths: Node 20.20's permission model lets readdir('/') through for some
// sets of three or more --allow-fs-read paths (two of them under a common parent, e.g. node_modules/… and
// .cache/…), found by tests/sandbox/escape.int.test.ts.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processRunning } from './process-alive.js';

export class RunnerDir {
  private files = 0;

  private constructor(readonly path: string) {}

  static create(): RunnerDir {
    sweepDeadAgents();
    const path = mkdtempSync(join(tmpdir(), `ndif-runner-${process.pid}-`));
    chmodSync(path, 0o755);
    return new RunnerDir(path);
  }

  /** The --allow-fs-read entry (trailing slash: the directory's contents). */
  get readPath(): string {
    return `${this.path}/`;
  }

  write(name: string, content: string): string {
    const file = join(this.path, name);
    writeFileSync(file, content, { mode: 0o644, flag: 'wx' });
    return file;
  }

  /** Copies `src` in under a fresh subdirectory (names of models never become paths), keeping its base name. */
  copy(src: string, baseName: string): string {
    const sub = join(this.path, String(++this.files));
    mkdirSync(sub, { mode: 0o755 });
    const file = join(sub, baseName);
    copyFileSync(src, file);
    chmodSync(file, 0o644);
    return file;
  }

  remove(): void {
    rmSync(this.path, { recursive: true, force: true });
  }
}

/** Removes runner directories of agents that died without closing their sandbox (ours only). */
export function sweepDeadAgents(): void {
  if (!existsSync('/proc/self')) return; // liveness below is read from /proc
  let names: string[];
  try {
    names = readdirSync(tmpdir()).filter((n) => /^ndif-runner-\d+-/.test(n));
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^ndif-runner-(\d+)-/.exec(name)![1]);
    if (pid === process.pid || processRunning(pid)) continue;
    const path = join(tmpdir(), name);
    try {
      if (statSync(path).uid === process.getuid?.()) rmSync(path, { recursive: true, force: true });
    } catch {
      /* gone meanwhile */
    }
  }
}
