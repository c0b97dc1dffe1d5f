// Untrusted blocks run in the sandbox (sandbox/): one pre-warmed runner process per request. The sandbox is
// created on the first untrusted request (probing the host's isolation costs time and most embedded requests are
// trusted); each model is registered with it once, so its runners get the manifest and tokenizer at start.
import type { Sandbox } from '../../sandbox/index.js';
import type { HostedModel, OpenChannel } from '../runtime/index.js';
import type { UntrustedOpener } from './requests.js';

export function sandboxOpener(make: () => Promise<Sandbox>): {
  open: UntrustedOpener;
  close(): Promise<void>;
  current(): Sandbox | undefined;
} {
  let sandbox: Promise<Sandbox> | undefined;
  let started: Sandbox | undefined;
  const registered = new WeakSet<HostedModel>();
  return {
    async open(model, opts): Promise<OpenChannel> {
      sandbox ??= make();
      const sb = await sandbox;
      started = sb;
      if (!registered.has(model)) {
        const { modelAssets } = await import('../../sandbox/index.js');
        sb.register(modelAssets(model));
        registered.add(model);
      }
      return sb.opener(model.key, opts);
    },
    /** The sandbox once the first untrusted request started it. */
    current: () => started,
    async close() {
      if (sandbox !== undefined) await (await sandbox).close();
    },
  };
}
