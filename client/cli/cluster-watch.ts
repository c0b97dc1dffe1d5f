// Follows the status websocket's cluster topic (`{ type: "watch", topic: "cluster" }`): calls `changed` on every
// `changed` message (the server sends at most 4 a second). Resolves when the signal aborts; rejects when the
// socket cannot be opened or closes.
import WebSocket from 'ws';
import { UnreachableError } from '../sdk/errors.js';
import type { FabricHttp } from '../sdk/http.js';
import { errorBodyOf, httpFailure } from '../sdk/http.js';

export function watchCluster(http: FabricHttp, changed: () => void, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(http.resolve('/ws', undefined, true), {
      headers: http.headers(),
      perMessageDeflate: false,
    });
    let open = false;
    const stop = () => {
      ws.close(1000);
      resolve();
    };
    signal.addEventListener('abort', stop, { once: true });
    ws.on('unexpected-response', (_q, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        reject(
          httpFailure(
            http.url,
            res.statusCode ?? 0,
            errorBodyOf(res.statusCode ?? 0, new Uint8Array(Buffer.concat(chunks))),
            'GET /ws',
          ),
        ),
      );
    });
    ws.on('open', () => {
      open = true;
      ws.send(JSON.stringify({ type: 'watch', topic: 'cluster' }));
    });
    ws.on('message', (data) => {
      try {
        if ((JSON.parse(String(data)) as { type?: string }).type === 'changed') changed();
      } catch {
        // a frame that is not JSON: ignore, the next change redraws anyway
      }
    });
    ws.on('error', (e) => {
      if (!open) reject(new UnreachableError(http.url, 'opening the status websocket', e));
    });
    ws.on('close', () => {
      signal.removeEventListener('abort', stop);
      if (signal.aborted) resolve();
      else reject(new UnreachableError(http.url, 'the status websocket closed', new Error('connection closed')));
    });
  });
}
