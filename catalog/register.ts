// Registering a model folder, the one path `POST /models`, `ndif models add` and NDIF_MODELS at start all take:
// inspect the folder (catalog/inspect.ts), then the RegisterModel command with the number of replicas the cluster
// view has deployed (the decider refuses to replace files under running replicas).
import type { ControlPlaneCommands, CommandOutcome } from '../command-api/handlers/service.js';
import type { ModelFacts } from '../domain/events/model.js';
import { MODEL_KEY } from '../domain/shared/ids.js';
import { FabricError } from '../protocol/errors.js';
import { activeReplicas } from '../projections/cluster/queries.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';
import type { FabricModelCatalog } from './catalog.js';
import { CatalogErrorCode } from './errors.js';
import { inspectModelFolder } from './inspect.js';

export interface RegisterDeps {
  local: FabricModelCatalog;
  commands: ControlPlaneCommands;
  view: ControlPlaneView;
}

export interface RegisterInput {
  key: string;
  dir: string;
  replace: boolean;
  actor: string;
  commandId: string;
  at: string;
  correlationId?: string;
}

export async function registerModelFolder(
  deps: RegisterDeps,
  input: RegisterInput,
): Promise<{ outcome: CommandOutcome; facts: ModelFacts }> {
  if (!MODEL_KEY.test(input.key)) {
    throw new FabricError(CatalogErrorCode.KeyInvalid, 400, `${JSON.stringify(input.key)} is not a model key`, {
      hint: 'a key is letters, digits and . _ / - (up to 128), starting with a letter or digit',
    });
  }
  const { facts } = await inspectModelFolder(deps.local, input.key, input.dir);
  const deployedReplicas = activeReplicas(deps.view.state.cluster, input.key).length;
  const outcome = await deps.commands.execute(
    {
      type: 'RegisterModel',
      modelKey: input.key,
      actor: input.actor,
      replace: input.replace,
      deployedReplicas,
      model: facts,
    },
    {
      commandId: input.commandId,
      actor: input.actor,
      at: input.at,
      ...(input.correlationId === undefined ? {} : { correlationId: input.correlationId }),
    },
  );
  return { outcome, facts };
}
