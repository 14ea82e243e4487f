/**
 * Task ids: UUIDv7, generated in this process rather than by the database so that a send knows its ids before the
 * insert (a COPY returns none) and so that the tasks of one bulk send keep their order in the claim index. The
 * generator's state (a pool of random bytes, the last time and counter) lives here and nowhere else.
 */
import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

/** Random bytes for {@link nextTaskId}, drawn for 256 ids at a time. */
const idRandomness = { bytes: new Uint8Array(0), offset: 0 };
/** The time and counter of the last generated id, as uuid's own `v7()` keeps them. */
const idClock = { msecs: Number.NEGATIVE_INFINITY, seq: 0 };

/**
 * A new UUIDv7 task id, greater than every id generated before it in this process, so the tasks of one bulk send
 * keep their order in the claim index. This is uuid's `v7()` with the same clock and counter rules, except that
 * the random bytes come from a pool: `v7()` draws them with one `crypto.getRandomValues` call per id, which costs
 * more than the rest of a bulk send's work on each task.
 */
export function nextTaskId(): string {
  if (idRandomness.offset + 16 > idRandomness.bytes.length) {
    idRandomness.bytes = randomFillSync(new Uint8Array(16 * 256));
    idRandomness.offset = 0;
  }
  const random = idRandomness.bytes.subarray(idRandomness.offset, idRandomness.offset + 16);
  idRandomness.offset += 16;
  const now = Date.now();
  if (now > idClock.msecs) {
    idClock.msecs = now;
    idClock.seq = freshCounter(random);
  } else {
    idClock.seq = (idClock.seq + 1) | 0;
    if (idClock.seq === 0) idClock.msecs += 1;
  }
  return uuidv7({ msecs: idClock.msecs, seq: idClock.seq, random });
}

/** The counter a new millisecond starts from: 31 of the id's own random bytes, as uuid's `v7()` takes it. */
function freshCounter(random: Uint8Array): number {
  return new DataView(random.buffer, random.byteOffset, random.byteLength).getUint32(6) & 0x7fffffff;
}
