/**
 * The dashboard UI: a hash router over the pages. A page is one entry of ROUTES (and, unless it is a detail
 * page, of the navigation).
 */
import { render } from 'preact';
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { ServerConfig } from '../../contract.js';
import { get, storeToken, storedToken } from './api.js';
import { useLiveStatus } from './live.js';
import { DeadLettersPage } from './pages/DeadLettersPage.js';
import { OverviewPage } from './pages/OverviewPage.js';
import type { PageProps } from './pages/PageProps.js';
import { QueuesPage } from './pages/QueuesPage.js';
import { SchedulesPage } from './pages/SchedulesPage.js';
import { TaskPage } from './pages/TaskPage.js';
import { TasksPage } from './pages/TasksPage.js';
import { WorkersPage } from './pages/WorkersPage.js';
import { WorkflowPage } from './pages/WorkflowPage.js';
import { WorkflowsPage } from './pages/WorkflowsPage.js';
import './style.css';

interface Route {
  path: string;
  title: string;
  page: (props: PageProps) => JSX.Element;
  /** Shown in the navigation (a detail page is not). */
  nav: boolean;
}

const ROUTES: Route[] = [
  { path: '', title: 'Overview', page: OverviewPage, nav: true },
  { path: 'queues', title: 'Queues', page: QueuesPage, nav: true },
  { path: 'tasks', title: 'Tasks', page: TasksPage, nav: true },
  { path: 'task', title: 'Task', page: TaskPage, nav: false },
  { path: 'dead-letters', title: 'Dead letters', page: DeadLettersPage, nav: true },
  { path: 'workflows', title: 'Workflows', page: WorkflowsPage, nav: true },
  { path: 'workflow', title: 'Workflow', page: WorkflowPage, nav: false },
  { path: 'schedules', title: 'Schedules', page: SchedulesPage, nav: true },
  { path: 'workers', title: 'Workers', page: WorkersPage, nav: true },
];

function parseHash(hash: string): { parts: string[]; query: URLSearchParams } {
  const raw = hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = raw.split('?');
  return {
    parts: path.split('/').filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(search),
  };
}

// A link of the form #token=... hands the token over without sending it to the server (fragments stay local).
if (location.hash.startsWith('#token=')) {
  storeToken(decodeURIComponent(location.hash.slice('#token='.length)));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
}

function TokenBox(): JSX.Element {
  const [token, setToken] = useState(storedToken());
  const [editing, setEditing] = useState(false);
  if (token && !editing) {
    return (
      <span class="token">
        actions unlocked{' '}
        <button
          class="link"
          onClick={() => {
            storeToken('');
            setToken('');
          }}
        >
          lock
        </button>
      </span>
    );
  }
  return (
    <form
      class="token"
      onSubmit={(e) => {
        e.preventDefault();
        const value = (e.currentTarget.elements.namedItem('token') as HTMLInputElement).value.trim();
        storeToken(value);
        setToken(value);
        setEditing(false);
      }}
    >
      <input name="token" type="password" placeholder="token" aria-label="token" autocomplete="off" />
      <button type="submit">Unlock</button>
    </form>
  );
}

function Shell(props: { config: ServerConfig; current: string; children: ComponentChildren }): JSX.Element {
  const up = useLiveStatus();
  return (
    <>
      <header>
        <a class="brand" href="#/">
          horsies
        </a>
        <nav>
          {ROUTES.filter((r) => r.nav).map((r) => (
            <a key={r.path} href={`#/${r.path}`} class={r.path === props.current ? 'active' : ''}>
              {r.title}
            </a>
          ))}
        </nav>
        <span class={`live ${up ? 'up' : 'down'}`} title="live updates" data-testid="live">
          {up ? 'live' : 'reconnecting'}
        </span>
        {props.config.actions || props.config.readToken ? <TokenBox /> : <span class="token">read-only</span>}
      </header>
      <main>{props.children}</main>
    </>
  );
}

function App(): JSX.Element {
  const [hash, setHash] = useState(location.hash);
  const [config, setConfig] = useState<ServerConfig | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const onHash = (): void => setHash(location.hash);
    addEventListener('hashchange', onHash);
    // The hash may have changed between the first render and this effect, with nobody listening yet.
    onHash();
    get<ServerConfig>('config').then(setConfig, (e: Error) => setError(e.message));
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const { parts, query } = parseHash(hash);
  const [first = '', ...rest] = parts;
  const route = ROUTES.find((r) => r.path === first);
  const Page = route?.page;
  useTitle(route?.title ?? 'Not found');
  if (error) return <p class="error">The dashboard server did not answer: {error}</p>;
  if (!config) return <p class="muted">loading…</p>;
  if (config.readToken && !storedToken()) return <TokenGate />;
  return (
    <Shell config={config} current={first}>
      {Page ? <Page rest={rest} query={query} config={config} /> : <p>No such page.</p>}
    </Shell>
  );
}

/** The page of a dashboard whose reads need a token, before one is given. */
function TokenGate(): JSX.Element {
  return (
    <main>
      <h1>horsies dashboard</h1>
      <p>This dashboard needs a token to show anything.</p>
      <form
        class="search"
        data-testid="token-gate"
        onSubmit={(e) => {
          e.preventDefault();
          const value = (e.currentTarget.elements.namedItem('token') as HTMLInputElement).value.trim();
          storeToken(value);
          location.reload();
        }}
      >
        <input name="token" type="password" aria-label="token" autocomplete="off" />
        <button type="submit">Open</button>
      </form>
    </main>
  );
}

function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · horsies`;
  }, [title]);
}

render(<App />, document.getElementById('app')!);
