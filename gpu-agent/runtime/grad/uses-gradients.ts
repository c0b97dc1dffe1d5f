// Whether a request records its forward pass for a backward: keeping each forward segment's inputs and outputs
// until the step ends costs memory, so only requests where some block's source names `backward` (an identifier,
// a property or a string: `ctx.backward(loss)`, `loss.backward()`) record; the others keep only what their forward
// pass needs. A block that reaches `backward` without naming it (`ctx['back' + 'ward']`) is told so (BackwardError).
import { tokenizer } from 'acorn';

export function usesGradients(source: string): boolean {
  if (!source.includes('backward')) return false;
  try {
    for (const t of tokenizer(source, {
      ecmaVersion: 'latest',
      allowAwaitOutsideFunction: true,
      allowReturnOutsideFunction: true,
    })) {
      if (
        (t.type.label === 'name' || t.type.label === 'string' || t.type.label === 'template') &&
        String((t as { value?: unknown }).value).includes('backward')
      )
        return true;
    }
    return false;
  } catch {
    // Not valid JavaScript: the block is refused anyway; say yes so nothing depends on the answer.
    return true;
  }
}
