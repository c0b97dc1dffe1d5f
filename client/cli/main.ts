// `ndif`: finds the command, parses its arguments, runs it, and turns every failure into a message and an exit
// code (client/cli/exit-codes.ts). bin.mjs calls main() and exits with what it returns.
import { FabricAdmin } from '../sdk/admin.js';
import { resolveClientConfig } from '../sdk/config.js';
import { FabricHttp } from '../sdk/http.js';
import { parseCommandArgs, splitCommand, stringOpt } from './args.js';
import { UsageError } from './command.js';
import type { CliCommand, CommandArgs } from './command.js';
import { exitCodeOf, renderError } from './failures.js';
import { commandHelp, overallHelp } from './help.js';
import { createOutput } from './output.js';
import type { Stream } from './output.js';
import { commandNames, loadAllCommands, loadCommand, nearestNames } from './registry.js';
import { ExitCode } from './exit-codes.js';

export interface CliIo {
  stdout: Stream;
  stderr: Stream;
  env: Record<string, string | undefined>;
  /** Aborts a waiting command (Ctrl-C). */
  signal?: AbortSignal;
}

export async function main(
  argv: string[],
  io: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  const { command, rest } = splitCommand(argv);
  const wantsJson = rest.includes('--json');
  const out = createOutput(io.stdout, io.stderr, wantsJson);
  try {
    if (command === null || command === 'help') {
      const target = command === 'help' ? rest.find((a) => !a.startsWith('-')) : undefined;
      if (target) {
        const cmd = await loadCommand(target);
        if (!cmd) throw unknownCommand(target);
        out.stdout.write(commandHelp(target, cmd));
        return ExitCode.ok;
      }
      out.stdout.write(overallHelp(await loadAllCommands()));
      return command === null && !rest.includes('--help') && !rest.includes('-h') ? ExitCode.usage : ExitCode.ok;
    }
    const cmd = await loadCommand(command);
    if (!cmd) throw unknownCommand(command);
    return await runCommand(command, cmd, rest, io);
  } catch (e) {
    out.stderr.write(renderError(e, command));
    if (wantsJson) out.printJson({ error: errorJson(e) });
    return exitCodeOf(e);
  }
}

async function runCommand(name: string, cmd: CliCommand, rest: string[], io: CliIo): Promise<number> {
  let args: CommandArgs;
  try {
    args = parseCommandArgs(cmd, name, rest);
  } catch (e) {
    if (e instanceof UsageError)
      e.message = `${e.message}\nusage: ndif ${name} ${cmd.usage}\n(see \`ndif ${name} --help\`)`;
    throw e;
  }
  if (args.values.help) {
    io.stdout.write(commandHelp(name, cmd));
    return ExitCode.ok;
  }
  const resolved = resolveClientConfig({ url: stringOpt(args, 'url'), apiKey: stringOpt(args, 'api-key') }, io.env);
  const config = { ...resolved, json: args.values.json === true };
  let http: FabricHttp;
  try {
    http = new FabricHttp({ url: config.url, apiKey: config.apiKey });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const out = createOutput(io.stdout, io.stderr, config.json);
  const code = await cmd.run(
    { config, http, admin: new FabricAdmin(http), out, signal: io.signal ?? new AbortController().signal, env: io.env },
    args,
  );
  return code ?? ExitCode.ok;
}

function unknownCommand(name: string): UsageError {
  const near = nearestNames(name, commandNames());
  return new UsageError(
    `unknown command ${JSON.stringify(name)}${near.length ? `; did you mean ${near.map((n) => `\`ndif ${n}\``).join(' or ')}?` : ''} (\`ndif help\` lists them)`,
  );
}

function errorJson(e: unknown): Record<string, unknown> {
  const o = e as { code?: unknown; message?: unknown; hint?: unknown; details?: unknown; name?: unknown };
  return {
    name: o.name ?? 'Error',
    code: o.code ?? null,
    message: o.message ?? String(e),
    hint: o.hint ?? null,
    details: o.details ?? null,
    exitCode: exitCodeOf(e),
  };
}
