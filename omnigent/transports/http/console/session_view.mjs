// One session: its conversation as it streams, the composer, its pending approvals,
// the sub-agent tree, background tasks, terminals (read-only screens) and usage.

import { api } from "./api.mjs";
import { ApprovalCard } from "./approvals.mjs";
import { Conversation, parseJson } from "./conversation.mjs";
import { isActive } from "./sessions.mjs";
import { useEffect, useMemo, useRef, useState } from "./vendor/hooks.mjs";
import { Component, ErrorNote, href, html, pretty, sessionName, StatusBadge, useStore, when } from "./ui.mjs";

const PAGE = 150; // entries drawn at first; "Show earlier" adds as many again

// An entry re-renders only when its object changed (entries are replaced, never mutated).
class Entry extends Component {
  shouldComponentUpdate(next) {
    return next.entry !== this.props.entry;
  }

  render({ entry }) {
    switch (entry.kind) {
      case "user":
        return html`<article class="msg user" aria-label="You"><div class="who">You</div><div class="text">${entry.text}</div></article>`;
      case "assistant":
        return html`<article class=${`msg assistant${entry.streaming ? " streaming" : ""}`} aria-label="Assistant">
          <div class="who">Assistant${entry.incomplete ? html` <span class="muted">(cut short)</span>` : null}</div>
          <div class="text">${entry.text}${entry.streaming ? html`<span class="caret" aria-hidden="true"></span>` : null}</div></article>`;
      case "system":
        return html`<article class="msg system"><div class="who">System</div><div class="text">${entry.text}</div></article>`;
      case "tool": {
        const failed = typeof entry.output === "string" && entry.output.startsWith("Error:");
        const state = entry.output === undefined ? "running" : failed ? "error" : "done";
        return html`<details class=${`tool ${state}`}>
          <summary><span class="tool-icon" aria-hidden="true">⚙</span> <code>${entry.name}</code>
            <span class="muted">${state === "running" ? "running…" : state === "error" ? "error" : "done"}</span></summary>
          <div class="tool-body">
            <div class="label">arguments</div><pre class="args">${pretty(entry.args)}</pre>
            ${entry.output !== undefined ? html`<div class="label">result</div><pre class="result">${pretty(entry.output)}</pre>` : null}
          </div></details>`;
      }
      case "error":
        return html`<div class="turn-error" role="alert"><strong>The turn failed:</strong> ${entry.error.message || "error"}
          ${entry.error.code ? html` <code>${entry.error.code}</code>` : null}</div>`;
      case "cancelled":
        return html`<div class="turn-note">Turn cancelled</div>`;
      default:
        return html`<details class="tool other"><summary><code>${entry.type}</code></summary><pre class="result">${pretty(entry.body)}</pre></details>`;
    }
  }
}

function Transcript({ conversation }) {
  const [limit, setLimit] = useState(PAGE);
  const list = useRef(null);
  const pinned = useRef(true);
  const entries = conversation.entries;
  const start = Math.max(0, entries.length - limit);
  const shown = entries.slice(start);
  // Follow the stream while the reader is at the bottom; leave them be if they scrolled up.
  useEffect(() => {
    const element = list.current;
    if (element && pinned.current) element.scrollTop = element.scrollHeight;
  });
  const onScroll = (event) => {
    const element = event.currentTarget;
    pinned.current = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
  };
  return html`
    <div class="transcript" ref=${list} onScroll=${onScroll} role="log" aria-label="Conversation" aria-live="polite" tabindex="0">
      ${start > 0
        ? html`<button class="link earlier" onClick=${() => setLimit(limit + PAGE)}>Show earlier (${start} more)</button>`
        : null}
      ${entries.length === 0 && conversation.connection !== "connecting"
        ? html`<p class="empty">No messages yet. Say something below.</p>`
        : null}
      ${shown.map((entry) => html`<${Entry} key=${entry.key} entry=${entry} />`)}
    </div>`;
}

function Composer({ sessionId, conversation, active }) {
  const [text, setText] = useState("");
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  async function send() {
    const message = text.trim();
    if (!message || sending) return;
    setSending(true);
    setError(null);
    const key = conversation.sending(message);
    setText("");
    try {
      const answer = await api.send(sessionId, message);
      conversation.sent(key, answer.item_id);
    } catch (caught) {
      conversation.unsent(key);
      setText(message);
      setError(caught);
    } finally {
      setSending(false);
    }
  }
  async function act(call) {
    setError(null);
    try {
      await call(sessionId);
    } catch (caught) {
      setError(caught);
    }
  }
  const onKey = (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  };
  return html`
    <div class="composer">
      <${ErrorNote} error=${error} />
      <div class="composer-row">
        <textarea aria-label="Message" placeholder="Message (Enter sends, Shift+Enter for a new line)" rows="2"
          value=${text} onInput=${(e) => setText(e.currentTarget.value)} onKeyDown=${onKey}></textarea>
        <div class="composer-actions">
          <button class="primary" onClick=${send} disabled=${sending || !text.trim()}>Send</button>
          ${active
            ? html`<button onClick=${() => act(api.interrupt)} title="End the running turn">Interrupt</button>
                   <button class="danger" onClick=${() => act(api.stop)} title="End the turn, background tasks and sub-agents">Stop</button>`
            : null}
        </div>
      </div>
    </div>`;
}

function SubAgents({ store, sessionId, previews }) {
  const children = store.childrenIndex();
  const render = (parentId, depth) => {
    const kids = children.get(parentId) || [];
    if (!kids.length) return null;
    return html`<ul class="subtree">${kids.map(
      (child) => html`<li key=${child.id}>
        <a href=${href(`/s/${child.id}`)}>${sessionName(child)}</a> <${StatusBadge} status=${child.status} busy=${child.busy} />
        ${depth === 0 && previews.get(child.id)?.preview ? html`<div class="preview muted">${previews.get(child.id).preview}</div>` : null}
        ${render(child.id, depth + 1)}
      </li>`,
    )}</ul>`;
  };
  const tree = render(sessionId, 0);
  return html`<section class="panel" aria-label="Sub-agents"><h2>Sub-agents</h2>${tree || html`<p class="muted">None.</p>`}</section>`;
}

function Tasks({ conversation }) {
  const tasks = useMemo(() => conversation.backgroundTasks(), [conversation.version]);
  return html`<section class="panel" aria-label="Background tasks"><h2>Background tasks${conversation.inbox
    ? html` <span class="badge">${conversation.inbox} in inbox</span>`
    : null}</h2>
    ${tasks.length
      ? html`<ul class="plain">${tasks.map(
          (task) => html`<li key=${task.id}><code>${task.tool}</code> <span class=${`badge task-${task.state}`}>${task.state}</span> <span class="muted">${task.id}</span></li>`,
        )}</ul>`
      : html`<p class="muted">None.</p>`}
  </section>`;
}

function Terminal({ sessionId, resource, tick }) {
  const [open, setOpen] = useState(false);
  const [screen, setScreen] = useState(null);
  const [error, setError] = useState(null);
  const last = useRef(0);
  const load = () =>
    api.screen(sessionId, resource.id).then((answer) => setScreen(answer.screen), setError);
  useEffect(() => {
    if (!open) return undefined;
    // Refreshed when the session's stream moves, at most once a second.
    const wait = Math.max(0, 1000 - (Date.now() - last.current));
    const timer = setTimeout(() => {
      last.current = Date.now();
      load();
    }, wait);
    return () => clearTimeout(timer);
  }, [open, tick]);
  const meta = resource.metadata || {};
  return html`<details class="terminal" onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary><code>${meta.terminal_name || resource.id}</code> <span class="muted">${meta.session_key || ""}</span></summary>
    <${ErrorNote} error=${error} />
    <pre class="screen" aria-label=${`Screen of ${meta.terminal_name || resource.id}`}>${screen ?? "…"}</pre>
    <button class="link" onClick=${load}>Refresh</button>
  </details>`;
}

function Terminals({ session, tick }) {
  const resources = (session && session.resources) || [];
  return html`<section class="panel" aria-label="Terminals"><h2>Terminals</h2>
    ${resources.length
      ? resources.map((r) => html`<${Terminal} key=${r.id} sessionId=${session.id} resource=${r} tick=${tick} />`)
      : html`<p class="muted">None running.</p>`}
  </section>`;
}

const USAGE_FIELDS = [
  ["input_tokens", "tokens in"],
  ["cached_input_tokens", "cached"],
  ["output_tokens", "tokens out"],
  ["model_calls", "model calls"],
  ["context_tokens", "in context now"],
];

function UsageFacts({ usage, label }) {
  const cost = typeof usage.cost_usd === "number" ? usage.cost_usd : null;
  return html`<dl class="facts" aria-label=${label}>${USAGE_FIELDS.map(
    ([name, title]) => html`<dt>${title}</dt><dd data-usage=${name}>${(usage[name] || 0).toLocaleString()}</dd>`,
  )}${cost === null ? null : html`<dt>cost</dt><dd data-usage="cost_usd">$${cost.toFixed(6)}</dd>`}</dl>`;
}

// What the session's model calls used, as its snapshot keeps it (summed by the server,
// kept live by the sessions feed): the session's own turns, and with its sub-sessions
// when they added to it. Nothing until a model reported usage.
function Usage({ session }) {
  const own = session?.usage;
  const tree = session?.tree_usage;
  if (!own || !tree || !tree.model_calls) return null;
  const withChildren = tree.model_calls > own.model_calls;
  return html`<section class="panel" aria-label="Usage"><h2>Usage</h2>
    ${own.model_calls ? html`<${UsageFacts} usage=${own} label="This session" />` : null}
    ${withChildren ? html`<h3>With sub-sessions</h3><${UsageFacts} usage=${tree} label="With sub-sessions" />` : null}
  </section>`;
}

export function SessionView({ store, sessionId }) {
  const conversation = useMemo(() => new Conversation(sessionId), [sessionId]);
  useEffect(() => {
    conversation.open();
    return () => conversation.close();
  }, [conversation]);
  useStore(conversation);
  const session = store.get(sessionId);
  const status = conversation.status || session?.status;
  const active = ["launching", "running", "waiting"].includes(status) || (session && isActive(session));
  const pending = [...conversation.pending.values()];
  const parent = session?.parent_session_id ? store.get(session.parent_session_id) : null;
  if (conversation.loadError && !conversation.entries.length && conversation.loadError.status === 404) {
    return html`<main class="page"><h1>Session not found</h1><p>It may have been deleted, or it is not shared with you.</p><a href="#/">Back to sessions</a></main>`;
  }
  return html`
    <main class="session" aria-labelledby="session-title" data-session=${sessionId}>
      <div class="session-head">
        <a class="back" href=${parent ? href(`/s/${parent.id}`) : "#/"}>${parent ? `← ${sessionName(parent)}` : "← Sessions"}</a>
        <h1 id="session-title">${session ? sessionName(session) : sessionId}</h1>
        <div class="facts-line">
          <${StatusBadge} status=${status} busy=${session?.busy} />
          ${session ? html`<span><span class="muted">agent</span> ${session.agent_name}</span>
            <span><span class="muted">harness</span> ${session.harness}${session.model ? ` · ${session.model}` : ""}</span>
            ${session.runner_id ? html`<span><span class="muted">runner</span> ${session.runner_id}</span>` : null}
            <span class="muted">${when(session.created_at)}</span>` : null}
          ${conversation.connection === "reconnecting" ? html`<span class="badge warn">reconnecting…</span>` : null}
        </div>
        ${conversation.error ? html`<${ErrorNote} error=${conversation.error} />` : null}
      </div>
      <div class="session-body">
        <div class="main-col">
          <${Transcript} conversation=${conversation} />
          ${pending.length
            ? html`<div class="cards inline" aria-label="Waiting for an answer">${pending.map(
                (request) => html`<${ApprovalCard} key=${request.elicitation_id} request=${request}
                  session=${store.get(request.params?.target_session_id || sessionId)} showSession=${Boolean(request.params?.target_session_id)} />`,
              )}</div>`
            : null}
          <${Composer} sessionId=${sessionId} conversation=${conversation} active=${active} />
        </div>
        <aside class="side-col">
          <${SubAgents} store=${store} sessionId=${sessionId} previews=${conversation.previews} />
          <${Tasks} conversation=${conversation} />
          <${Terminals} session=${session} tick=${conversation.version} />
          <${Usage} session=${session} />
        </aside>
      </div>
    </main>`;
}

export { parseJson };
