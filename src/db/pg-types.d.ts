// The default text parsers of pg-types (pg's type parsers), registered by `init` into whatever map it is given.
declare module 'pg-types/lib/textParsers.js' {
  const textParsers: {
    init(register: (oid: number, parser: (value: string) => unknown) => void): void;
  };
  export = textParsers;
}
