/**
 * The dashboard's HTTP surface, generated: raw request targets (dot segments, encoded traversal, bad percent
 * escapes, NUL, lone surrogates, protocol-relative and absolute forms), query strings (tabs, filters, dates,
 * cursors, page sizes), ids, and action requests with any body, token or none. Every answer is below 500 and a 4xx
 * carries a JSON message; a refused action stores nothing; no file outside the UI's folder is ever served; a body
 * over the bound gets 413 before it is read whole. Requests go through `node:http` so that their targets reach the
 * server as generated (fetch would normalize them).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { serveDashboard } from '../dashboard/support.js';
import { factoriesFor } from '../support/factories.js';
import { useTestSchema } from '../support/db.js';
import { fuzzParams, fuzzTimeout, hostileString, rowCounter } from './support.js';

const TOKEN = 'fuzz-token';
const SECRET = 'SECRET-OUTSIDE-THE-UI';
const MAX_BODY = 64 * 1024;

// A UI folder with two files, and secrets beside it: in its parent, and in a folder whose name starts like it.
const root = mkdtempSync(join(tmpdir(), 'horsies-fuzz-ui-'));
const uiDir = join(root, 'ui');
mkdirSync(join(uiDir, 'assets'), { recursive: true });
mkdirSync(join(root, 'ui-other'));
const INDEX = '<!doctype html><title>index</title>';
const SCRIPT = 'console.log("app");';
writeFileSync(join(uiDir, 'index.html'), INDEX);
writeFileSync(join(uiDir, 'assets', 'app.js'), SCRIPT);
writeFileSync(join(root, 'secret.txt'), SECRET);
writeFileSync(join(root, 'ui-other', 'secret.txt'), SECRET);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const t = await useTestSchema();
const app = t.app();
const { insertTask } = factoriesFor(t);
const ids = [
  await insertTask({ taskName: 'fuzz.dash', queue: 'q1' }),
  await insertTask({ taskName: 'fuzz.dash', queue: 'q1', status: 'FAILED' }),
  await insertTask({ taskName: 'fuzz.dash', queue: 'q2', status: 'COMPLETED' }),
];
const served = await serveDashboard(app, { token: TOKEN, uiDir });
const { port } = new URL(served.url);
const counts = await rowCounter(t);

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One request with `target` sent as it is; resolves when the answer is read (or the connection ends). */
function send(
  method: string,
  target: string,
  options: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      // A connection of its own: a kept-alive one the server closed meanwhile would hang up on a reuse.
      {
        host: '127.0.0.1',
        port,
        method,
        path: target,
        headers: options.headers,
        timeout: 15_000,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${target}`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The property every answer holds: below 500, and a 4xx from the API is JSON with a message. */
function expectSound(answer: Answer, target: string): void {
  expect(answer.status, `${target}: ${answer.text}`).toBeLessThan(500);
  expect(answer.status).toBeGreaterThanOrEqual(200);
  expect(answer.text).not.toContain(SECRET);
  if (
    answer.status >= 400 &&
    answer.text !== '' &&
    String(answer.headers['content-type']).startsWith('application/json')
  ) {
    const body = JSON.parse(answer.text) as { error?: unknown };
    expect(typeof body.error, `${target}: ${answer.text}`).toBe('string');
  }
}

// Encodes what the generator made so that node:http sends it (it refuses spaces and control characters).
function encode(text: string): string {
  return Array.from(text)
    .map((ch) => (/^[A-Za-z0-9._~!$&'()*+,;=:@-]$/.test(ch) ? ch : encodeUnit(ch)))
    .join('');
}
function encodeUnit(ch: string): string {
  try {
    return encodeURIComponent(ch);
  } catch {
    // A lone surrogate: encodeURIComponent refuses it; send its code unit as a (bad) UTF-8 escape.
    return `%${(ch.charCodeAt(0) >> 8).toString(16)}%${(ch.charCodeAt(0) & 0xff).toString(16)}`;
  }
}

const segment = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('api', 'tasks', 'workflows', 'nodes', 'timeline', 'queues') },
  { weight: 2, arbitrary: fc.constantFrom('schedules', 'dead-letters', 'config', 'overview', 'workers') },
  {
    weight: 2,
    arbitrary: fc.constantFrom('..', '.', '%2e%2e', '%2E%2e', '.%2e', '%2e', '...', '%252e%252e'),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom('%2f', '%5c', '%00', '%', '%zz', '%e', '%ED%A0%80', '%C0%AE', '%FF'),
  },
  { weight: 2, arbitrary: fc.constantFrom('index.html', 'assets', 'app.js', 'secret.txt', 'ui-other', 'ui') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('cancel', 'resubmit', 'pause', 'resume', 'trigger', 'retry-failed'),
  },
  { weight: 1, arbitrary: fc.constantFrom(...ids, '-1', '0', '1e3', '2147483648', 'NaN', '') },
  { weight: 2, arbitrary: hostileString.map(encode) },
);
const separator = fc.constantFrom('/', '/', '/', '//', '\\', '%2f', '/./', '/../');
const path = fc
  .tuple(fc.array(fc.tuple(segment, separator), { maxLength: 7 }), segment)
  .map(([pairs, last]) => pairs.map(([s, sep]) => s + sep).join('') + last);
const target = fc.oneof(
  { weight: 6, arbitrary: path.map((p) => `/${p}`) },
  { weight: 2, arbitrary: path.map((p) => `/api/${p}`) },
  { weight: 1, arbitrary: path.map((p) => `//${p}`) },
  { weight: 1, arbitrary: path.map((p) => `http://elsewhere/${p}`) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('//', '/\\', '//%', '//[', '//a:b@', '//x:99999', '*', '/%', '/api/%'),
  },
);

const cursor = fc.oneof(
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  fc
    .array(fc.oneof(fc.string(), fc.integer(), fc.double(), fc.constant('2026-01-01T00:00:00Z')), {
      maxLength: 5,
    })
    .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  hostileString,
);
const queryValue = fc.oneof(
  hostileString,
  cursor,
  fc.integer().map(String),
  fc.double().map(String),
  fc.date({ noInvalidDate: false }).map((d) => (Number.isNaN(d.getTime()) ? 'Invalid' : d.toISOString())),
  fc.constantFrom(
    'pending',
    'running',
    'failed',
    'completed',
    'RUNNING',
    'COMPLETED',
    '0',
    '500',
    '501',
    '1e2',
  ),
);
const queryKey = fc.constantFrom(
  'tab',
  'queue',
  'task',
  'error',
  'from',
  'to',
  'cursor',
  'limit',
  'status',
  'name',
);
const query = fc
  .array(fc.tuple(fc.oneof(queryKey, hostileString), queryValue), { maxLength: 6 })
  .map((pairs) => pairs.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&'));
const apiTarget = fc
  .tuple(
    fc.constantFrom('tasks', 'workflows', 'schedules', 'queues', 'dead-letters', 'overview', 'workers'),
    query,
  )
  .map(([endpoint, q]) => `/api/${endpoint}?${q}`);

describe('dashboard API, generated', () => {
  it(
    'answers any request target below 500, and serves nothing outside the UI folder',
    async () => {
      await fc.assert(
        fc.asyncProperty(target, fc.constantFrom('GET', 'HEAD'), async (tgt, method) => {
          const answer = await send(method, tgt);
          expectSound(answer, tgt);
          if (method === 'HEAD') expect(answer.text).toBe('');
          if (
            answer.status === 200 &&
            !String(answer.headers['content-type']).startsWith('application/json')
          ) {
            if (method === 'GET') expect([INDEX, SCRIPT]).toContain(answer.text);
          }
        }),
        fuzzParams<[string, string]>([
          ['//', 'GET'],
          ['/%', 'GET'],
          ['/api/tasks/%ED%A0%80', 'GET'],
          ['/..%2f..%2fsecret.txt', 'GET'],
          ['/%2e%2e/secret.txt', 'GET'],
          ['/..%5csecret.txt', 'GET'],
        ]),
      );
    },
    fuzzTimeout(1, 20),
  );

  it(
    'answers any query string of the lists below 500, with a JSON message for a 4xx',
    async () => {
      await fc.assert(
        fc.asyncProperty(apiTarget, async (tgt) => {
          const answer = await send('GET', tgt);
          expectSound(answer, tgt);
          expect(answer.headers['content-type']).toMatch(/^application\/json/);
        }),
        fuzzParams(),
      );
    },
    fuzzTimeout(1, 20),
  );

  it(
    'refuses a bad action with a 4xx and a JSON message, and stores nothing',
    async () => {
      const action = fc.tuple(
        fc.oneof(
          path.map((p) => `/api/${p}`),
          fc
            .tuple(
              fc.constantFrom('tasks', 'queues', 'workflows', 'schedules', 'dead-letters'),
              fc.oneof(fc.constantFrom(...ids, 'resubmit'), hostileString.map(encode)),
              fc.constantFrom('cancel', 'resubmit', 'pause', 'resume', 'trigger', 'retry-failed', ''),
            )
            .map(([a, b, c]) => `/api/${a}/${b}/${c}`),
        ),
        fc.oneof(
          fc.jsonValue().map((v) => JSON.stringify(v)),
          fc.record({ status: fc.anything(), taskName: fc.anything(), queue: fc.anything() }).map((v) => {
            try {
              return JSON.stringify(v) ?? '';
            } catch {
              return '{';
            }
          }),
          hostileString,
          fc.constantFrom('', '{', 'null', '[]', '"x"', '{"status":["FAILED","RUNNING"]}'),
        ),
        fc.constantFrom<Record<string, string>>(
          { 'x-horsies-token': TOKEN },
          { 'x-horsies-token': TOKEN, 'content-type': 'application/json' },
          { 'x-horsies-token': TOKEN, origin: 'http://evil.example' },
          { 'x-horsies-token': TOKEN, 'sec-fetch-site': 'cross-site' },
          { 'x-horsies-token': 'wrong' },
          {},
        ),
        fc.constantFrom('POST', 'POST', 'PUT', 'DELETE', 'PATCH'),
      );
      await fc.assert(
        fc.asyncProperty(action, async ([tgt, body, headers, method]) => {
          const before = await counts();
          const answer = await send(method, tgt, { headers, body });
          expectSound(answer, tgt);
          if (answer.status >= 400) expect(await counts()).toEqual(before);
        }),
        fuzzParams(),
      );
    },
    fuzzTimeout(1, 30),
  );

  it('answers 413 to a body over the bound, before it is read whole', async () => {
    const headers = { 'x-horsies-token': TOKEN, 'content-type': 'application/json' };
    // Declared too large: refused on the header, though the body never comes.
    const declared = await new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/dead-letters/resubmit',
          headers: { ...headers, 'content-length': String(100 * 1024 * 1024) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(chunks).toString(),
            });
            req.destroy();
          });
        },
      );
      req.on('error', reject);
      req.write('{"status":"FAILED"');
    });
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.text)).toEqual({ error: expect.stringContaining('too large') });
    // Streamed without a length: refused once past the bound, while the sender has more to send.
    const streamed = await new Promise<Answer>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, method: 'POST', path: '/api/dead-letters/resubmit', headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(chunks).toString(),
            });
            req.destroy();
          });
        },
      );
      req.on('error', reject);
      req.write(' '.repeat(MAX_BODY + 1));
    });
    expect(streamed.status).toBe(413);
    // A body at the bound is read.
    const atBound = await send('POST', '/api/dead-letters/resubmit', {
      headers,
      body: `{"queue":"none"}${' '.repeat(MAX_BODY - 16)}`,
    });
    expect(atBound.status).toBe(200);
  });
});
