// Refusals about a request name it as its caller does: the id in the URL, not the recorded (scoped) one, so a
// miss in the caller's scope reads exactly like a request that does not exist.
import { FabricError, isFabricError } from '../../protocol/errors.js';

export async function asRequestOf<T>(shownId: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (!isFabricError(e) || e.code !== 'CP_REQUEST_NOT_FOUND') throw e;
    throw new FabricError(e.code, e.httpStatus, `request ${shownId} does not exist`, {
      hint: e.hint,
      details: { requestId: shownId },
    });
  }
}
