// Routes kafkajs's log lines to the transport's `log` option.
import kafkajs from 'kafkajs';
import type { logCreator as LogCreator, logLevel as LogLevel } from 'kafkajs';
import type { KafkaLog, KafkaLogLevel } from './options.js';

const { logLevel } = kafkajs;

const LEVELS: Record<number, KafkaLogLevel> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/** kafkajs logs every retriable error response at ERROR before retrying it; those are not failures. */
function isNoise(message: string): boolean {
  return /^(\[?Connection\]?:? )?Response /.test(message);
}

export const defaultLog: KafkaLog = (level, message, extra) => {
  if (level !== 'error' || isNoise(message)) return;
  process.stderr.write(`kafka transport: ${message} ${JSON.stringify(extra)}\n`);
};

export function logCreator(log: KafkaLog): LogCreator {
  return () => (entry) => {
    const { message, ...extra } = entry.log;
    const level = LEVELS[entry.level] ?? 'debug';
    if (isNoise(String(message)) && level === 'error') {
      log('debug', `${entry.namespace} ${message}`, extra);
      return;
    }
    // kafkajs logs a failed attempt it is about to retry at ERROR; a final failure reaches the caller
    if (level === 'error' && 'retryCount' in extra) {
      log('warn', `${entry.namespace ? `${entry.namespace}: ` : ''}${message}`, extra);
      return;
    }
    log(level, `${entry.namespace ? `${entry.namespace}: ` : ''}${message}`, extra);
  };
}

/** The kafkajs level to ask for: nothing below what `log` can show is worth producing. */
export function kafkajsLevel(custom: boolean): LogLevel {
  return custom ? logLevel.DEBUG : logLevel.ERROR;
}
