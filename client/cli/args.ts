// Argument parsing for `ndif`: global options (--url, --api-key, --json, --help) may stand anywhere; the first
// other word is the command; the rest is parsed against the command's own options with node:util parseArgs.
import { parseArgs } from 'node:util';
import type { CliCommand, CommandArgs, OptionSpec } from './command.js';
import { UsageError } from './command.js';

export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  url: { type: 'string', value: '<url>', description: 'the fabric API (default: $NDIF_URL or http://127.0.0.1:8080)' },
  'api-key': { type: 'string', value: '<key>', description: 'API key (default: $NDIF_API_KEY)' },
  json: { type: 'boolean', description: 'print JSON instead of text' },
  help: { type: 'boolean', short: 'h', description: 'show help' },
};

export interface SplitArgs {
  command: string | null;
  rest: string[];
}

/** Finds the command word, skipping global options and their values. */
export function splitCommand(argv: string[]): SplitArgs {
  const rest: string[] = [];
  let command: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (command === null && !a.startsWith('-')) {
      command = a;
      continue;
    }
    if (a === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    rest.push(a);
    if (command === null && (a === '--url' || a === '--api-key') && i + 1 < argv.length) rest.push(argv[++i]!);
  }
  return { command, rest };
}

/** Parses a command's arguments (global options included); throws UsageError with what was wrong. */
export function parseCommandArgs(cmd: CliCommand, name: string, rest: string[]): CommandArgs {
  const specs: Record<string, OptionSpec> = { ...GLOBAL_OPTIONS, ...cmd.options };
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const [k, s] of Object.entries(specs))
    options[k] = { type: s.type, ...(s.short ? { short: s.short } : {}), ...(s.multiple ? { multiple: true } : {}) };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(`${name}: ${cleanParseError((e as Error).message)}`);
  }
  const values = parsed.values as CommandArgs['values'];
  if (values.help) return { values, positionals: parsed.positionals };
  const pos = cmd.positionals ?? [];
  const required = pos.filter((p) => p.required).length;
  if (parsed.positionals.length < required) {
    const missing = pos.filter((p) => p.required)[parsed.positionals.length]!;
    throw new UsageError(`${name}: missing <${missing.name}> (${missing.description})`);
  }
  if (parsed.positionals.length > pos.length) {
    throw new UsageError(`${name}: unexpected argument ${JSON.stringify(parsed.positionals[pos.length])}`);
  }
  return { values, positionals: parsed.positionals };
}

function cleanParseError(msg: string): string {
  // parseArgs says e.g. "Unknown option '--gpu'. To specify a positional argument starting with a '-', …"
  return msg
    .replace(/\. To specify a positional argument.*$/s, '')
    .replace(/^Option '(.+?)' argument missing$/, "option '$1' needs a value");
}

// ---------------------------------------------------------------- typed option readers

export function stringOpt(a: CommandArgs, name: string): string | undefined {
  const v = a.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function boolOpt(a: CommandArgs, name: string): boolean {
  return a.values[name] === true;
}

/** An integer option within [min, max], or undefined when absent. */
export function intOpt(a: CommandArgs, name: string, min: number, max: number): number | undefined {
  const v = stringOpt(a, name);
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v.trim())) throw new UsageError(`--${name} must be an integer, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** A number option within [min, max]. */
export function numberOpt(a: CommandArgs, name: string, min: number, max: number): number | undefined {
  const v = stringOpt(a, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1000 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1000 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1000 ** 4,
  tib: 1024 ** 4,
};

/** `512MiB`, `1.5GiB`, `2g`, `1000000` → bytes. */
export function parseBytes(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined)
    throw new UsageError(
      `${what} must be a size such as 512MiB, 2GiB or a number of bytes, got ${JSON.stringify(text)}`,
    );
  return Math.round(Number(m[1]) * unit);
}

/** `30`, `30s`, `500ms`, `2m`, `1h` → milliseconds (a bare number is seconds). */
export function parseDuration(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) throw new UsageError(`${what} must be a duration such as 30s, 500ms, 2m or 1h, got ${JSON.stringify(text)}`);
  const k = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * k);
}

export function durationOpt(a: CommandArgs, name: string): number | undefined {
  const v = stringOpt(a, name);
  return v === undefined ? undefined : parseDuration(v, `--${name}`);
}

export function bytesOpt(a: CommandArgs, name: string): number | undefined {
  const v = stringOpt(a, name);
  return v === undefined ? undefined : parseBytes(v, `--${name}`);
}
