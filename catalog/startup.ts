// NDIF_MODELS as a start-up shortcut: every configured folder is registered with the same command `POST /models`
// issues, replacing what its key named before (the configuration says which files the key names now). A folder
// that cannot be registered is logged with its code and skipped; the others are served.
import type { Logger } from 'pino';
import type { FabricModelCatalog } from './catalog.js';
import { registerModelFolder, type RegisterDeps } from './register.js';

export const STARTUP_ACTOR = 'system:ndif-models';

export interface StartupResult {
  registered: string[];
  failed: Array<{ key: string; code: string; message: string }>;
  /** Log position of the last registration event appended (undefined: nothing new). */
  position: number | undefined;
}

export async function registerConfiguredModels(
  deps: RegisterDeps,
  local: FabricModelCatalog,
  at: () => string,
  log: Logger,
): Promise<StartupResult> {
  const result: StartupResult = { registered: [], failed: [], position: undefined };
  for (const entry of local.list()) {
    try {
      const { outcome, facts } = await registerModelFolder(deps, {
        key: entry.key,
        dir: entry.dir,
        replace: true,
        actor: STARTUP_ACTOR,
        commandId:
          `${STARTUP_ACTOR}:${entry.key}:${local.weights(entry.key, entry.dir).fingerprint.slice(0, 16)}:${entry.dir}`.slice(
            0,
            200,
          ),
        at: at(),
      });
      result.registered.push(entry.key);
      if (outcome.position !== undefined) result.position = outcome.position;
      if (outcome.events.length > 0)
        log.info(
          { model: entry.key, fingerprint: facts.fingerprint, dir: facts.dir },
          'model registered from NDIF_MODELS',
        );
    } catch (err) {
      const e = err as { code?: string; message?: string };
      result.failed.push({ key: entry.key, code: e.code ?? 'ERROR', message: e.message ?? String(err) });
      log.error(
        { err, model: entry.key, dir: entry.dir },
        `NDIF_MODELS entry ${entry.key} was not registered: ${e.code ?? ''} ${e.message ?? ''}`,
      );
    }
  }
  return result;
}
