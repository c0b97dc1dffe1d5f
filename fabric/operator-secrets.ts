// Operator-grade secrets: values that give more than an agent's role when read — the bootstrap operator key,
// event-store and blob-store database URLs, the secret that signs result URLs. No agent process (and so no trusted
// block, which runs inside the agent) may see one: the agent's environment is built from an allowlist
// (fabric/agent-env.ts), and a process that was started with one in its environment overwrites it in its own
// environment block (`scrubOwnEnvironment`) once it has read it, so /proc/<pid>/environ no longer shows it.
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';

/** Variables whose value is operator-grade wherever it appears. */
export const OPERATOR_SECRET_ENV = [
  'NDIF_BOOTSTRAP_KEY',
  'NDIF_RESULT_SECRET',
  'DATABASE_URL',
  'BLOB_DATABASE_URL',
  'KURRENTDB_URL',
] as const;

/** Names that look like a credential whatever their prefix (an operator's own additions to the environment). */
export const SECRET_NAME = /(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|DATABASE_URL|_DB_URL)/i;

export interface VisibleSecret {
  /** Where it was seen: `env:<NAME>` or a file path. */
  where: string;
  /** Which secret (its variable name), never its value. */
  secret: string;
}

/**
 * The operator-grade secrets of `secrets` (name → value, e.g. the control plane's environment) that appear in
 * `env` (by value, under any name) or in the text of any of `files` that can be read. What a trusted block can
 * see is `operatorSecretsVisible(controlPlaneSecrets, process.env, ['/proc/<ppid>/environ', …])` run inside it.
 */
export function operatorSecretsVisible(
  secrets: Record<string, string | undefined>,
  env: NodeJS.ProcessEnv,
  files: readonly string[] = [],
): VisibleSecret[] {
  const wanted = Object.entries(secrets).filter(
    (e): e is [string, string] => typeof e[1] === 'string' && e[1].length >= 8,
  );
  const out: VisibleSecret[] = [];
  for (const [name, value] of Object.entries(env)) {
    for (const [secret, s] of wanted) if (value?.includes(s)) out.push({ where: `env:${name}`, secret });
  }
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'latin1');
    } catch {
      continue;
    }
    for (const [secret, s] of wanted) if (text.includes(s)) out.push({ where: file, secret });
  }
  return out;
}

/** The operator-grade secrets set in `env`, by name. */
export function operatorSecretsOf(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of OPERATOR_SECRET_ENV) {
    const v = env[name];
    if (v !== undefined && v !== '') out[name] = v;
  }
  return out;
}

/**
 * Overwrites the values of `names` in this process's original environment block (what /proc/<pid>/environ
 * shows to any process of the same user) with `*`, and removes them from process.env. Node has no other way to
 * take a value out of that block: deleting it from process.env only drops the pointer. Returns the names that
 * were overwritten; a kernel that refuses writes to /proc/self/mem leaves the block as it was (logged by the caller).
 */
export function scrubOwnEnvironment(names: readonly string[]): string[] {
  const present = names.filter((n) => process.env[n] !== undefined);
  for (const n of present) delete process.env[n];
  if (present.length === 0 || process.platform !== 'linux') return [];
  const done: string[] = [];
  let fd: number | undefined;
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 50 and 51 of /proc/pid/stat (env_start, env_end); 0-based after the command name: 47 and 48.
    const start = Number(fields[47]);
    const end = Number(fields[48]);
    if (!(start > 0 && end > start && end - start < 1 << 24)) return [];
    fd = openSync('/proc/self/mem', 'r+');
    const block = Buffer.alloc(end - start);
    readSync(fd, block, 0, block.length, start);
    for (const n of present) {
      let at = 0;
      for (;;) {
        const i = block.indexOf(`${n}=`, at, 'latin1');
        if (i < 0) break;
        at = i + 1;
        if (i > 0 && block[i - 1] !== 0) continue;
        const valueAt = i + n.length + 1;
        let stop = block.indexOf(0, valueAt);
        if (stop < 0) stop = block.length;
        if (stop > valueAt) {
          const stars = Buffer.alloc(stop - valueAt, '*');
          writeSync(fd, stars, 0, stars.length, start + valueAt);
          stars.copy(block, valueAt);
        }
        if (!done.includes(n)) done.push(n);
      }
    }
  } catch {
    /* no /proc or writes refused: the caller reports what was not overwritten */
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return done;
}
