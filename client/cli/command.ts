// What one `ndif` subcommand is. Each lives in its own file, client/cli/commands/<name>.ts, whose default export
// is a CliCommand; the dispatcher finds it by its file name, so adding a command is adding a file.
import type { FabricAdmin } from '../sdk/admin.js';
import type { FabricHttp } from '../sdk/http.js';
import type { Output } from './output.js';
import type { ResolvedConfig } from './config.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** Placeholder shown in help, e.g. `<n>`. */
  value?: string;
  description: string;
}

export interface PositionalSpec {
  name: string;
  required: boolean;
  description: string;
}

export interface CommandArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export interface CommandContext {
  config: ResolvedConfig;
  http: FabricHttp;
  /** Operator calls; the first one checks the fabric's protocol version. */
  admin: FabricAdmin;
  out: Output;
  /** Fires on Ctrl-C. */
  signal: AbortSignal;
  env: Record<string, string | undefined>;
}

export interface CliCommand {
  /** One line for `ndif help`. */
  summary: string;
  /** Everything after `ndif <name>`, e.g. `<model> [options]`. */
  usage: string;
  /** More lines for `ndif <name> --help` (examples, notes). */
  details?: string;
  positionals?: PositionalSpec[];
  options?: Record<string, OptionSpec>;
  /** Returns the exit code (0 when it returns nothing). Throw UsageError for bad arguments. */
  run(ctx: CommandContext, args: CommandArgs): Promise<number | undefined>;
}

/** Bad arguments: printed with the command's usage line, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
