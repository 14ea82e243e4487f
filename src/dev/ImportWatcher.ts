/**
 * Watches the files the app imports, for `horsies dev`: a change to one of them restarts the worker; a change to any
 * other file (a new test, a tsconfig.json, a note) does not. The worker child reports the files it loads (see
 * `importHooks.ts`); each child's report replaces the last one's, so a file no longer imported stops counting.
 *
 * The folders of those files are watched, not the files themselves, so an editor that saves by writing a new file
 * and renaming it over the old one is seen. While the worker is down because its code failed to load, any source
 * file in those folders counts: the fix may be a file the failed import was looking for.
 */
import { watch } from 'node:fs';
import type { FSWatcher } from 'node:fs';
import { dirname, extname, join } from 'node:path';

const SOURCE_EXTENSIONS = new Set(['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts', '.tsx', '.jsx', '.json']);

/** Settings of an {@link ImportWatcher}. */
export interface ImportWatcherOptions {
  /** Called once per burst of changes to imported files, with the last one. */
  onChange: (file: string) => void;
  /** Called for a change the watcher passes over (a file the app does not import). */
  onIgnored?: (file: string) => void;
  /** How long a burst of changes is collected before `onChange`. Default 150 ms. */
  debounceMs?: number;
}

/** See the module comment. */
export class ImportWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private imported = new Set<string>();
  private next = new Set<string>();
  private failed = false;
  private timer: NodeJS.Timeout | null = null;
  private last = '';
  private readonly ignored = new Set<string>();
  private closed = false;

  constructor(
    entry: string,
    private readonly options: ImportWatcherOptions,
  ) {
    this.imported.add(entry);
    this.next.add(entry);
    this.watchFolder(dirname(entry));
  }

  /** A new worker child starts: the files it reports from now on replace the current set once it runs. */
  childStarted(): void {
    this.next = new Set();
  }

  /** Files the current child imported. */
  add(files: readonly string[]): void {
    for (const file of files) {
      this.next.add(file);
      this.imported.add(file);
      this.watchFolder(dirname(file));
    }
  }

  /** The current child runs: what it imported is the whole set. */
  childReady(): void {
    this.imported = this.next;
    this.failed = false;
  }

  /** The current child exited on its own (its code failed to load): any source file counts until the next start. */
  childFailed(): void {
    this.failed = true;
  }

  /** Stops watching. Idempotent. */
  stop(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private watchFolder(dir: string): void {
    if (this.closed || this.watchers.has(dir)) return;
    try {
      const watcher = watch(dir, (_event, name) => {
        if (name) this.changed(join(dir, name.toString()));
      });
      watcher.on('error', () => {
        watcher.close();
        this.watchers.delete(dir);
      });
      this.watchers.set(dir, watcher);
    } catch {
      // gone meanwhile, or not a folder we may read: its files are not watched
    }
  }

  // One save is often several events (a write, a rename, a change of mode): a burst is reported once.
  private changed(file: string): void {
    const counts =
      this.imported.has(file) || this.next.has(file) || (this.failed && SOURCE_EXTENSIONS.has(extname(file)));
    if (counts) this.last = file;
    else this.ignored.add(file);
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      const ignored = [...this.ignored];
      this.ignored.clear();
      for (const other of ignored) if (other !== this.last) this.options.onIgnored?.(other);
      if (this.last) this.options.onChange(this.last);
      this.last = '';
    }, this.options.debounceMs ?? 150);
  }
}
