/**
 * A signal to a wait node (`wf.waitFor`), from the node's detail: a JSON payload and a Send button. The server
 * validates it with the schema the app declares for the node's signal; its refusal (bad JSON, a payload that fails
 * the schema, actions disabled) is shown as the action's message.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ActionMessage, useAction } from '../components.js';

export function SignalForm(props: { workflowId: string; nodeId: string; onDone: () => void }): JSX.Element {
  const [text, setText] = useState('{}');
  const [state, run] = useAction(props.onDone);
  const [invalid, setInvalid] = useState<string | null>(null);
  const send = (event: Event): void => {
    event.preventDefault();
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch (error) {
      setInvalid(`not JSON: ${(error as Error).message}`);
      return;
    }
    setInvalid(null);
    run(
      `workflows/${encodeURIComponent(props.workflowId)}/signal`,
      { node: props.nodeId, payload },
      'signal sent',
    );
  };
  return (
    <form class="signal-form" data-testid="signal-form" onSubmit={send}>
      <h4>Signal</h4>
      <textarea
        aria-label="signal payload (JSON)"
        rows={3}
        value={text}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
      />
      <button type="submit" disabled={state.busy}>
        Send signal
      </button>
      {invalid ? <p class="error">{invalid}</p> : <ActionMessage state={state} />}
    </form>
  );
}
