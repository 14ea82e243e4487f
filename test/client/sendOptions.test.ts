import { describe, expect, it } from 'vitest';
import { checkOptions, optionProblems } from '../../src/client/sendOptions.js';
import type { SendOptions } from '../../src/client/sendOptions.js';
import { SendOptionsError, UnknownQueueError } from '../../src/errors.js';
import type { ConfigProblem } from '../../src/errors.js';

// The options arrive from JavaScript callers too: the checks must hold for values their types rule out.
const loose = (options: Record<string, unknown>): SendOptions => options as SendOptions;

const invalidDate = new Date('not a date');
const chars = (n: number): string => 'x'.repeat(n);
const YEAR_MS = 365.25 * 24 * 3600 * 1000;
const MAX_DEBOUNCE_MS = 2 ** 31 - 1;

const problem = (field: string, value: unknown, message: string): ConfigProblem => ({
  field,
  value,
  message,
});

describe('optionProblems', () => {
  it('finds none in empty options or in every option given well', () => {
    expect(optionProblems({})).toEqual([]);
    expect(
      optionProblems({
        delayMs: 1.5,
        goodUntil: new Date(),
        sentAt: new Date(0),
        priority: 100,
        queue: 'not checked here',
        id: chars(36),
        idempotencyKey: chars(255),
        group: chars(255),
      }),
    ).toEqual([]);
    expect(
      optionProblems({ runAt: new Date(), priority: 1, id: 'a', idempotencyKey: 'k', group: 'g' }),
    ).toEqual([]);
    expect(optionProblems({ delayMs: 0 })).toEqual([]);
  });

  it.each([-1, -0.001, Number.NaN, Number.POSITIVE_INFINITY, '5', null])('refuses delayMs %s', (delayMs) => {
    expect(optionProblems(loose({ delayMs }))).toEqual([
      problem('delayMs', delayMs, 'must be a finite number >= 0'),
    ]);
  });

  it.each(['runAt', 'goodUntil', 'sentAt'])('refuses a %s that is not a valid Date', (field) => {
    for (const value of [invalidDate, '2030-01-01', Date.now(), null]) {
      expect(optionProblems(loose({ [field]: value }))).toEqual([
        problem(field, value, 'must be a valid Date'),
      ]);
    }
  });

  it('refuses delayMs and runAt together, after any problem with either', () => {
    const runAt = new Date();
    expect(optionProblems({ delayMs: 0, runAt })).toEqual([
      problem('runAt', runAt, 'give delayMs or runAt, not both'),
    ]);
    expect(optionProblems({ delayMs: -1, runAt: invalidDate })).toEqual([
      problem('delayMs', -1, 'must be a finite number >= 0'),
      problem('runAt', invalidDate, 'must be a valid Date'),
      problem('runAt', invalidDate, 'give delayMs or runAt, not both'),
    ]);
  });

  it.each([0, 101, 1.5, -5, Number.NaN, '10'])('refuses priority %s', (priority) => {
    expect(optionProblems(loose({ priority }))).toEqual([
      problem('priority', priority, 'must be an integer from 1 to 100'),
    ]);
  });

  it.each(['', chars(37), 42, null])('refuses id %s', (id) => {
    expect(optionProblems(loose({ id }))).toEqual([
      problem('id', id, 'must be a string of 1 to 36 characters'),
    ]);
  });

  it.each(['idempotencyKey', 'group'])('refuses a %s that is empty, too long or not a string', (field) => {
    for (const value of ['', chars(256), 7, null]) {
      expect(optionProblems(loose({ [field]: value }))).toEqual([
        problem(field, value, 'must be a string of 1 to 255 characters'),
      ]);
    }
  });

  it('lists every problem, in a fixed order', () => {
    const options = loose({
      delayMs: -1,
      runAt: invalidDate,
      goodUntil: invalidDate,
      sentAt: invalidDate,
      priority: 0,
      id: '',
      idempotencyKey: '',
      group: '',
    });
    expect(optionProblems(options).map((p) => p.field)).toEqual([
      'delayMs',
      'runAt',
      'runAt',
      'goodUntil',
      'sentAt',
      'priority',
      'id',
      'idempotencyKey',
      'group',
    ]);
  });
});

describe('optionProblems: dedupe', () => {
  it('accepts each scope, and windowMs with scope finished only', () => {
    expect(optionProblems({ dedupe: { key: 'k' } })).toEqual([]);
    expect(optionProblems({ dedupe: { key: chars(255), scope: 'pending' } })).toEqual([]);
    expect(optionProblems({ dedupe: { key: 'k', scope: 'running' } })).toEqual([]);
    // The window is rounded to whole milliseconds before the check: 0.5 rounds to 1.
    for (const windowMs of [1, 0.5, 100 * YEAR_MS]) {
      expect(optionProblems({ dedupe: { key: 'k', scope: 'finished', windowMs } })).toEqual([]);
    }
  });

  it('accepts dedupe beside the options it goes with', () => {
    const dedupe = { key: 'k' };
    expect(
      optionProblems({ dedupe, delayMs: 5, goodUntil: new Date(), priority: 3, queue: 'q', group: 'g' }),
    ).toEqual([]);
    expect(optionProblems({ dedupe, runAt: new Date() })).toEqual([]);
  });

  it.each([null, 'k', 5])('refuses a dedupe that is not an object: %s', (dedupe) => {
    expect(optionProblems(loose({ dedupe }))).toEqual([
      problem('dedupe', dedupe, 'must be an object { key, scope?, windowMs? }'),
    ]);
  });

  it.each(['', chars(256), 5, undefined])('refuses dedupe.key %s', (key) => {
    expect(optionProblems(loose({ dedupe: { key } }))).toEqual([
      problem('dedupe.key', key, 'must be a string of 1 to 255 characters'),
    ]);
  });

  it.each(['done', 'debounce', 'PENDING', null])('refuses dedupe.scope %s', (scope) => {
    expect(optionProblems(loose({ dedupe: { key: 'k', scope } }))).toEqual([
      problem('dedupe.scope', scope, "must be 'pending', 'running' or 'finished'"),
    ]);
  });

  it.each([undefined, 0, 0.4, -1, Number.NaN, Number.POSITIVE_INFINITY, 100 * YEAR_MS + 1, '60000'])(
    "refuses dedupe.windowMs %s with scope 'finished'",
    (windowMs) => {
      expect(optionProblems(loose({ dedupe: { key: 'k', scope: 'finished', windowMs } }))).toEqual([
        problem(
          'dedupe.windowMs',
          windowMs,
          "must be a number from 1 to 100 years in ms with scope 'finished'",
        ),
      ]);
    },
  );

  it.each([undefined, 'pending', 'running'])('refuses dedupe.windowMs with scope %s', (scope) => {
    expect(optionProblems(loose({ dedupe: { key: 'k', scope, windowMs: 1000 } }))).toEqual([
      problem('dedupe.windowMs', 1000, "is given only with scope 'finished'"),
    ]);
  });

  it('refuses id and idempotencyKey beside dedupe', () => {
    expect(optionProblems({ dedupe: { key: 'k' }, id: 'a', idempotencyKey: 'b' })).toEqual([
      problem('id', 'a', 'cannot be combined with dedupe'),
      problem('idempotencyKey', 'b', 'cannot be combined with dedupe'),
    ]);
  });

  it('lists every problem of a bad dedupe together with the other options', () => {
    expect(
      optionProblems(
        loose({
          priority: 0,
          id: '',
          dedupe: { key: '', scope: 'done', windowMs: 5 },
          idempotencyKey: chars(256),
        }),
      ),
    ).toEqual([
      problem('priority', 0, 'must be an integer from 1 to 100'),
      problem('id', '', 'must be a string of 1 to 36 characters'),
      problem('id', '', 'cannot be combined with dedupe'),
      problem('idempotencyKey', chars(256), 'cannot be combined with dedupe'),
      problem('dedupe.key', '', 'must be a string of 1 to 255 characters'),
      problem('dedupe.scope', 'done', "must be 'pending', 'running' or 'finished'"),
      problem('dedupe.windowMs', 5, "is given only with scope 'finished'"),
      problem('idempotencyKey', chars(256), 'must be a string of 1 to 255 characters'),
    ]);
  });
});

describe('optionProblems: debounce', () => {
  it('accepts a well-formed debounce, its delay from 0 to 2^31 - 1 ms', () => {
    for (const delayMs of [0, 1.5, MAX_DEBOUNCE_MS]) {
      expect(optionProblems({ debounce: { key: 'k', delayMs } })).toEqual([]);
    }
    expect(
      optionProblems({
        debounce: { key: chars(255), delayMs: 10 },
        goodUntil: new Date(),
        priority: 3,
        queue: 'q',
        group: 'g',
        sentAt: new Date(),
      }),
    ).toEqual([]);
  });

  it.each([null, 'k', 5])('refuses a debounce that is not an object: %s', (debounce) => {
    expect(optionProblems(loose({ debounce }))).toEqual([
      problem('debounce', debounce, 'must be an object { key, delayMs }'),
    ]);
  });

  it.each(['', chars(256), 5, undefined])('refuses debounce.key %s', (key) => {
    expect(optionProblems(loose({ debounce: { key, delayMs: 0 } }))).toEqual([
      problem('debounce.key', key, 'must be a string of 1 to 255 characters'),
    ]);
  });

  it.each([undefined, -1, Number.NaN, Number.POSITIVE_INFINITY, MAX_DEBOUNCE_MS + 1, '100'])(
    'refuses debounce.delayMs %s',
    (delayMs) => {
      expect(optionProblems(loose({ debounce: { key: 'k', delayMs } }))).toEqual([
        problem('debounce.delayMs', delayMs, 'must be a number from 0 to 2147483647 (about 24.8 days)'),
      ]);
    },
  );

  it('refuses delayMs and runAt beside debounce', () => {
    const debounce = { key: 'k', delayMs: 10 };
    const runAt = new Date();
    const message = 'cannot be combined with debounce (give debounce.delayMs)';
    expect(optionProblems({ debounce, delayMs: 5 })).toEqual([problem('delayMs', 5, message)]);
    expect(optionProblems({ debounce, runAt })).toEqual([problem('runAt', runAt, message)]);
    expect(optionProblems({ debounce, delayMs: 5, runAt })).toEqual([
      problem('runAt', runAt, 'give delayMs or runAt, not both'),
      problem('delayMs', 5, message),
      problem('runAt', runAt, message),
    ]);
  });

  it('refuses id and idempotencyKey beside debounce', () => {
    expect(optionProblems({ debounce: { key: 'k', delayMs: 0 }, id: 'a', idempotencyKey: 'b' })).toEqual([
      problem('id', 'a', 'cannot be combined with debounce'),
      problem('idempotencyKey', 'b', 'cannot be combined with debounce'),
    ]);
  });

  it('refuses dedupe and debounce together, and checks both', () => {
    const dedupe = { key: 'd', scope: 'finished' as const };
    const debounce = { key: '', delayMs: -1 };
    expect(optionProblems({ dedupe, debounce, id: 'a' })).toEqual([
      problem('debounce', debounce, 'give dedupe or debounce, not both'),
      problem('id', 'a', 'cannot be combined with dedupe'),
      problem(
        'dedupe.windowMs',
        undefined,
        "must be a number from 1 to 100 years in ms with scope 'finished'",
      ),
      problem('debounce.key', '', 'must be a string of 1 to 255 characters'),
      problem('debounce.delayMs', -1, 'must be a number from 0 to 2147483647 (about 24.8 days)'),
    ]);
  });
});

describe('checkOptions', () => {
  const queues = ['default', 'emails'] as const;

  it('returns on valid options and a queue the app declares', () => {
    expect(checkOptions('t.ok', queues, {})).toBeUndefined();
    expect(
      checkOptions('t.ok', queues, { queue: 'emails', priority: 5, dedupe: { key: 'k' } }),
    ).toBeUndefined();
  });

  it('throws a SendOptionsError naming the task and listing every problem', () => {
    const options = loose({ delayMs: -1, priority: 0 });
    let thrown: unknown;
    try {
      checkOptions('t.bad', queues, options);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SendOptionsError);
    const error = thrown as SendOptionsError;
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(error.problems).toEqual(optionProblems(options));
    expect(error.problems).toHaveLength(2);
    expect(error.message).toBe(
      'invalid send options for task "t.bad":\n' +
        '  - delayMs: must be a finite number >= 0 (got -1)\n' +
        '  - priority: must be an integer from 1 to 100 (got 0)',
    );
  });

  it('throws an UnknownQueueError for an undeclared queue, before any other problem', () => {
    for (const options of [{ queue: 'nope' }, loose({ queue: 'nope', delayMs: -1, priority: 0 })]) {
      let thrown: unknown;
      try {
        checkOptions('t.queue', queues, options);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(UnknownQueueError);
      expect((thrown as UnknownQueueError).code).toBe('UNKNOWN_QUEUE');
      expect((thrown as UnknownQueueError).queue).toBe('nope');
      expect((thrown as UnknownQueueError).message).toBe(
        'unknown queue "nope"; the app declares: default, emails',
      );
    }
  });
});
