/** Statements of `horsies check`. */
import { statement } from './Database.js';

/** Sends a notification on `channel` (the LISTEN/NOTIFY round trip of the live check). */
export const NotifySend = statement<{ channel: string; payload: string }, { sent: boolean }>(
  'NotifySend',
  `SELECT pg_notify($1, $2) IS NULL AS sent`,
  ({ channel, payload }) => [channel, payload],
);
