/**
 * The stack of open `tidy` scopes: every tensor handle created while one is
 * open is recorded in the innermost (see `tidy.ts`). Not exported from the
 * package.
 *
 * @module
 */

/** Anything with a `dispose` (a tensor handle). */
export interface Disposable {
  dispose(): void;
}

/** Open scopes, innermost last. */
export const scopes: Set<Disposable>[] = [];

/** Records a new handle in the innermost open scope, if any. */
export function track(t: Disposable): void {
  if (scopes.length > 0) scopes[scopes.length - 1].add(t);
}
