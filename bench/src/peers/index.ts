/** Every subject the harness knows, in table order. Add a peer or a variant here. */
import { bullmqSubject } from './bullmq.js';
import { FLOOR_VARIANTS, floorSubject } from './floor.js';
import { GRAPHILE_VARIANTS, graphileSubject } from './graphile-worker.js';
import { HORSIES_VARIANTS, horsiesSubject } from './horsies.js';
import { pgBossSubject } from './pg-boss.js';
import type { Subject } from './types.js';

export const ALL_SUBJECTS: Subject[] = [
  ...HORSIES_VARIANTS.map(horsiesSubject),
  ...GRAPHILE_VARIANTS.map(graphileSubject),
  pgBossSubject(),
  bullmqSubject('redis'),
  bullmqSubject('postgres'),
  ...FLOOR_VARIANTS.map(floorSubject),
];

/** The npm packages measured, for the versions line. */
export const PEER_PACKAGES = ['graphile-worker', 'pg-boss', 'bullmq', 'ioredis', 'pg'];
