import { test } from 'node:test';
import assert from 'node:assert/strict';
import { intOpt, numberOpt, parseBytes, parseCommandArgs, parseDuration, splitCommand } from '../../client/cli/args.js';
import { UsageError } from '../../client/cli/command.js';
import type { CliCommand } from '../../client/cli/command.js';

const deployLike: CliCommand = {
  summary: 'x',
  usage: '<model> [options]',
  positionals: [{ name: 'model', required: true, description: 'model key' }],
  options: { gpus: { type: 'string', description: 'n' }, pinned: { type: 'boolean', description: 'p' } },
  run: async () => undefined,
};

test('the command word is found past global options and their values', () => {
  assert.deepEqual(splitCommand(['--url', 'http://h:1', 'deploy', 'gpt2', '--gpus', '2']), {
    command: 'deploy',
    rest: ['--url', 'http://h:1', 'gpt2', '--gpus', '2'],
  });
  assert.deepEqual(splitCommand(['--json', 'status']), { command: 'status', rest: ['--json'] });
  assert.deepEqual(splitCommand(['--api-key', 'k', '--url', 'u']), {
    command: null,
    rest: ['--api-key', 'k', '--url', 'u'],
  });
  assert.deepEqual(splitCommand([]), { command: null, rest: [] });
  assert.deepEqual(splitCommand(['kill', '--', '-odd-id']), { command: 'kill', rest: ['--', '-odd-id'] });
});

test('command arguments: options, positionals, globals anywhere', () => {
  const a = parseCommandArgs(deployLike, 'deploy', [
    'gpt2',
    '--gpus',
    '2',
    '--pinned',
    '--json',
    '--url',
    'http://x:1',
  ]);
  assert.deepEqual(a.positionals, ['gpt2']);
  assert.equal(a.values.gpus, '2');
  assert.equal(a.values.pinned, true);
  assert.equal(a.values.json, true);
  assert.equal(a.values.url, 'http://x:1');
  assert.equal(parseCommandArgs(deployLike, 'deploy', ['--help']).values.help, true, '--help needs no positionals');
});

test('bad arguments are usage errors that say what was wrong', () => {
  assert.throws(
    () => parseCommandArgs(deployLike, 'deploy', []),
    (e: unknown) => e instanceof UsageError && /missing <model> \(model key\)/.test(e.message),
  );
  assert.throws(
    () => parseCommandArgs(deployLike, 'deploy', ['gpt2', '--gpu', '2']),
    (e: unknown) =>
      e instanceof UsageError && /Unknown option '--gpu'/.test(e.message) && !/To specify/.test(e.message),
  );
  assert.throws(() => parseCommandArgs(deployLike, 'deploy', ['a', 'b']), /unexpected argument "b"/);
  assert.throws(() => parseCommandArgs(deployLike, 'deploy', ['gpt2', '--gpus']), /--gpus/);
});

test('typed readers check ranges and formats', () => {
  const a = { values: { n: '3', bad: '3.5', big: '99', f: '1.5', neg: '-1' }, positionals: [] };
  assert.equal(intOpt(a, 'n', 1, 16), 3);
  assert.equal(intOpt(a, 'absent', 1, 16), undefined);
  assert.throws(() => intOpt(a, 'bad', 1, 16), /--bad must be an integer, got "3.5"/);
  assert.throws(() => intOpt(a, 'big', 1, 16), /--big must be between 1 and 16, got 99/);
  assert.equal(numberOpt(a, 'f', 0, 10), 1.5);
  assert.throws(() => numberOpt(a, 'neg', 0, 10), /between 0 and 10/);
});

test('sizes and durations', () => {
  assert.equal(parseBytes('512MiB', 'x'), 512 * 1024 ** 2);
  assert.equal(parseBytes('1.5GiB', 'x'), 1.5 * 1024 ** 3);
  assert.equal(parseBytes('2g', 'x'), 2 * 1024 ** 3);
  assert.equal(parseBytes('1GB', 'x'), 1e9);
  assert.equal(parseBytes('1000', 'x'), 1000);
  assert.throws(() => parseBytes('lots', '--size'), /--size must be a size such as 512MiB/);
  assert.throws(() => parseBytes('3 parsecs', '--size'), UsageError);
  assert.equal(parseDuration('30', 'x'), 30_000);
  assert.equal(parseDuration('500ms', 'x'), 500);
  assert.equal(parseDuration('2m', 'x'), 120_000);
  assert.equal(parseDuration('1.5h', 'x'), 5_400_000);
  assert.throws(() => parseDuration('soon', '--wait'), /--wait must be a duration/);
});
