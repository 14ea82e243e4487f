/**
 * Listening for notifications in tests. PostgreSQL delivers notifications in the order their transactions
 * committed, so a notification the listener sends itself after an action arrives after every notification that
 * action committed: waiting for it replaces a timed wait when a test counts what arrived.
 */
import pg from 'pg';
import { databaseUrl } from './db.js';

export interface Received {
  channel: string;
  payload: string | undefined;
}

export interface Listening {
  /** The notifications received so far on the channels listened to, in order. */
  readonly received: Received[];
  /** Resolves once every notification committed before this call has been received. */
  settled(): Promise<void>;
  end(): Promise<void>;
}

/** Listens to `channels` on a connection of its own. */
export async function listenTo(channels: string[]): Promise<Listening> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  const sentinel = `horsies_test_sentinel_${process.pid}_${Math.random().toString(36).slice(2)}`;
  const received: Received[] = [];
  let reached: (() => void) | null = null;
  client.on('notification', (msg) => {
    if (msg.channel === sentinel) reached?.();
    else received.push({ channel: msg.channel, payload: msg.payload });
  });
  for (const channel of [...channels, sentinel]) await client.query(`LISTEN "${channel}"`);
  return {
    received,
    async settled() {
      const arrived = new Promise<void>((resolve) => (reached = resolve));
      await client.query('SELECT pg_notify($1, NULL)', [sentinel]);
      await arrived;
    },
    end: () => client.end(),
  };
}
