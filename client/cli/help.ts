// Help text: `ndif help` lists every command; `ndif <cmd> --help` shows one.
import { GLOBAL_OPTIONS } from './args.js';
import type { CliCommand, OptionSpec } from './command.js';
import { ExitCode } from './exit-codes.js';

function optionLines(opts: Record<string, OptionSpec>): string[] {
  const rows = Object.entries(opts).map(
    ([k, s]) =>
      [
        `${s.short ? `-${s.short}, ` : '    '}--${k}${s.type === 'string' ? ` ${s.value ?? '<value>'}` : ''}`,
        s.description,
      ] as const,
  );
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([a, b]) => `  ${a.padEnd(w)}  ${b}`);
}

export function commandHelp(name: string, cmd: CliCommand): string {
  const lines = [`usage: ndif ${name} ${cmd.usage}`.trimEnd(), '', cmd.summary];
  if (cmd.positionals?.length) {
    lines.push('', 'arguments:');
    const w = Math.max(...cmd.positionals.map((p) => p.name.length + 2));
    for (const p of cmd.positionals)
      lines.push(`  ${`<${p.name}>`.padEnd(w)}  ${p.description}${p.required ? '' : ' (optional)'}`);
  }
  if (cmd.options && Object.keys(cmd.options).length) lines.push('', 'options:', ...optionLines(cmd.options));
  lines.push('', 'global options:', ...optionLines(GLOBAL_OPTIONS));
  if (cmd.details) lines.push('', cmd.details.trimEnd());
  return `${lines.join('\n')}\n`;
}

export function overallHelp(commands: Array<[string, CliCommand]>): string {
  const w = Math.max(...commands.map(([n]) => n.length));
  return [
    'usage: ndif <command> [arguments] [options]',
    '',
    'Operate an NDIF fabric: deploy and scale models, watch the cluster and the queues, kill requests.',
    '',
    'commands:',
    ...commands.map(([n, c]) => `  ${n.padEnd(w)}  ${c.summary}`),
    '',
    'global options:',
    ...optionLines(GLOBAL_OPTIONS),
    '',
    "Run `ndif <command> --help` for a command's options.",
    `Exit codes: ${ExitCode.ok} ok, ${ExitCode.failed} refused/failed, ${ExitCode.usage} usage, ${ExitCode.unreachable} unreachable, ` +
      `${ExitCode.notReady} deploy not ready, ${ExitCode.protocolMismatch} protocol mismatch, ${ExitCode.interrupted} interrupted.`,
    '',
  ].join('\n');
}
