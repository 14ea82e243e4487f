/**
 * Typed references: `node.result.body` stands for the `body` field of a node's result, checked by `tsc` against
 * the input field it feeds. At run time a reference is a proxy that only records its source and path; the
 * definition turns every reference found in a node's input into a stored reference (see `wiring.ts`).
 */
import type { PathStep, StoredRef } from './wiring.js';

declare const refType: unique symbol;

type Primitive = string | number | boolean | bigint | symbol | null | undefined;

/**
 * A reference to a value of type `T` that exists only once the workflow runs (an upstream node's result, or a
 * start parameter). Its fields are references too.
 */
export type Ref<T> = { readonly [refType]: T } & (T extends Primitive
  ? unknown
  : T extends readonly unknown[]
    ? { readonly [K in keyof T & number]: Ref<T[K]> }
    : { readonly [K in keyof T]-?: Ref<T[K]> });

/**
 * A value of type `T` as a node's input may give it: the value itself, a {@link Ref} to a value of a type
 * assignable to `T`, or (for objects and arrays) a structure whose fields are wired the same way.
 */
export type Wired<T> = Ref<T> | WiredParts<T>;

type WiredParts<T> = T extends Primitive
  ? T
  : T extends readonly (infer E)[]
    ? ReadonlyArray<Wired<E>>
    : { [K in keyof T]: Wired<T[K]> };

const REF = Symbol('horsies.ref');

/** Where a reference points, before the definition gives nodes their indexes. */
export interface RefSource {
  kind: StoredRef['kind'];
  /** The node object, or null for the parameters. */
  node: object | null;
  path: PathStep[];
}

/** Makes a reference proxy for `source`. */
export function makeRef<T>(source: RefSource): Ref<T> {
  return new Proxy(Object.create(null) as object, {
    get(_target, key) {
      if (key === REF) return source;
      // Not a field: a reference must not look like a promise, or awaiting it would read `then` forever.
      if (typeof key === 'symbol' || key === 'then') return undefined;
      return makeRef({ ...source, path: [...source.path, /^(0|[1-9]\d*)$/.test(key) ? Number(key) : key] });
    },
  }) as Ref<T>;
}

/** The source of a reference, or null when `value` is not one. */
export function refSource(value: unknown): RefSource | null {
  if (value === null || typeof value !== 'object') return null;
  return ((value as Record<symbol, unknown>)[REF] as RefSource | undefined) ?? null;
}
