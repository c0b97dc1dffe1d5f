// One logger per process, on stderr, so stdout stays for what people and parent processes read (the embedded
// fabric's URL, an agent's ready line). On a terminal the lines are for people (pino-pretty: time, level, process,
// message, then the fields); elsewhere JSON lines (pino) for log shippers. NDIF_LOG_FORMAT=json|pretty overrides
// the choice, NDIF_LOG_LEVEL (fatal|error|warn|info|debug|trace|silent) sets the level.
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { FabricError } from '../protocol/errors.js';

export type LogFormat = 'json' | 'pretty';

/** NDIF_LOG_FORMAT when given, else pretty when stderr is a terminal. */
export function logFormatFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  stderrIsTty = process.stderr.isTTY === true,
): LogFormat {
  const raw = env.NDIF_LOG_FORMAT;
  if (raw === undefined || raw === '') return stderrIsTty ? 'pretty' : 'json';
  if (raw === 'json' || raw === 'pretty') return raw;
  throw new FabricError(
    'FABRIC_CONFIG_INVALID',
    500,
    `NDIF_LOG_FORMAT=${JSON.stringify(raw)} is not valid: json or pretty`,
    {
      hint: 'unset NDIF_LOG_FORMAT to get readable lines on a terminal and JSON elsewhere, or set it to json or pretty',
    },
  );
}

export function processLogger(name: string, env: NodeJS.ProcessEnv = process.env): Logger {
  const options = { name, level: env.NDIF_LOG_LEVEL || 'info' };
  if (logFormatFromEnv(env) === 'json') return pino(options, pino.destination({ fd: 2, sync: false }));
  // In this thread (no transport worker): a terminal reader is a person, not a log pipeline.
  const stream = pretty({
    destination: 2,
    sync: false,
    colorize: process.stderr.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
  });
  return pino(options, stream);
}
