// One HTTP exchange on node's http client: undici's fetch cost the SDK ~0.75 ms of CPU per call here (its web
// streams and timing bookkeeping), on the path of every request it submits; node:http with the default keep-alive
// agent costs a fraction of that. Idle pooled sockets do not keep a script's process alive.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface Exchange {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** Where an exchange failed: before a reply came (nothing answering), or while its body was read. */
export class ExchangeError extends Error {
  constructor(
    readonly phase: 'request' | 'reply',
    override readonly cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

function toHeaders(h: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.append(k, x);
    else out.set(k, v);
  }
  return out;
}

export function exchange(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: Uint8Array | string | undefined,
  signal: AbortSignal,
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send =
      body === undefined
        ? headers
        : {
            ...headers,
            'content-length': String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength),
          };
    let replied = false;
    const req = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
      target,
      { method, headers: send, signal },
      (res) => {
        replied = true;
        const chunks: Buffer[] = [];
        let size = 0;
        let ended = false;
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          size += c.byteLength;
        });
        res.on('end', () => {
          ended = true;
          resolve({
            status: res.statusCode ?? 0,
            headers: toHeaders(res.headers),
            body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size),
          });
        });
        res.on('error', (e) => reject(new ExchangeError('reply', e)));
        res.on('close', () => {
          if (!ended) reject(new ExchangeError('reply', new Error('the connection closed before the reply ended')));
        });
      },
    );
    req.on('error', (e) => reject(new ExchangeError(replied ? 'reply' : 'request', e)));
    req.end(body);
  });
}
