// Finds the CLI's subcommands: every file client/cli/commands/<name>.js is the command `<name>` (its default
// export). Only the named command's file is imported for a run; `ndif help` imports them all.
import { readdirSync } from 'node:fs';
import type { CliCommand } from './command.js';

const COMMANDS_DIR = new URL('./commands/', import.meta.url);
const NAME = /^[a-z][a-z0-9-]*$/;

export function commandNames(): string[] {
  return readdirSync(COMMANDS_DIR)
    .filter((f) => f.endsWith('.js'))
    .map((f) => f.slice(0, -3))
    .filter((n) => NAME.test(n))
    .sort();
}

export async function loadCommand(name: string): Promise<CliCommand | undefined> {
  if (!NAME.test(name) || !commandNames().includes(name)) return undefined;
  const mod = (await import(new URL(`${name}.js`, COMMANDS_DIR).href)) as { default?: CliCommand };
  if (!mod.default || typeof mod.default.run !== 'function')
    throw new Error(`client/cli/commands/${name}.js has no default export CliCommand`);
  return mod.default;
}

export async function loadAllCommands(): Promise<Array<[string, CliCommand]>> {
  const out: Array<[string, CliCommand]> = [];
  for (const n of commandNames()) {
    const c = await loadCommand(n);
    if (c) out.push([n, c]);
  }
  return out;
}

/** Nearest command names by edit distance, for "did you mean". */
export function nearestNames(name: string, names: string[]): string[] {
  const d = (a: string, b: string) => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0]!;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = row[j]!;
        row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return row[b.length]!;
  };
  return names
    .map((n) => [n, d(name, n)] as const)
    .filter(([n, k]) => k <= Math.max(2, Math.floor(n.length / 3)) || n.startsWith(name))
    .sort((a, b) => a[1] - b[1])
    .map(([n]) => n)
    .slice(0, 3);
}
