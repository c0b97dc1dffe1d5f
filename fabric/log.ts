// One logger per process: JSON lines (pino) on stderr, so stdout stays for what people and parent processes read
// (the embedded fabric's URL, an agent's ready line). NDIF_LOG_LEVEL: fatal|error|warn|info|debug|trace|silent.
import { pino, type Logger } from 'pino';

export function processLogger(name: string, env: NodeJS.ProcessEnv = process.env): Logger {
  return pino({ name, level: env.NDIF_LOG_LEVEL || 'info' }, pino.destination({ fd: 2, sync: false }));
}
