// The Sessions view (every readable session as a tree, filtered by status and agent)
// and the Agents view (the registered agents, their versions, their specs read-only).

import { api } from "./api.mjs";
import { isActive } from "./sessions.mjs";
import { useEffect, useState } from "./vendor/hooks.mjs";
import { ErrorNote, href, html, pretty, sessionName, StatusBadge, when } from "./ui.mjs";

const STATUSES = ["launching", "running", "waiting", "idle", "failed", "cancelled"];

function matches(session, filter) {
  if (filter.status === "active" && !isActive(session)) return false;
  if (filter.status && filter.status !== "active" && session.status !== filter.status) return false;
  if (filter.agent && session.agent_name !== filter.agent) return false;
  return true;
}

// A session is shown when it matches, or when one of its descendants does (for context).
function shown(session, children, filter, memo) {
  if (memo.has(session.id)) return memo.get(session.id);
  memo.set(session.id, false);
  let result = matches(session, filter);
  for (const child of children.get(session.id) || []) {
    if (shown(child, children, filter, memo)) result = true;
  }
  memo.set(session.id, result);
  return result;
}

function SessionRow({ session, children, filter, memo, runners, depth }) {
  const kids = (children.get(session.id) || []).filter((c) => shown(c, children, filter, memo));
  const waiting = (session.pending_elicitations || []).filter((r) => !r.params?.target_session_id).length;
  return html`
    <li class=${`tree-item${isActive(session) ? " is-active" : ""}`} data-session=${session.id}>
      <a class="row" href=${href(`/s/${session.id}`)} style=${`--depth:${depth}`}>
        <span class="cell title">${sessionName(session)}</span>
        <span class="cell status"><${StatusBadge} status=${session.status} busy=${session.busy} />${waiting
          ? html`<span class="badge ask" title="waiting for an answer">${waiting} to answer</span>`
          : null}</span>
        <span class="cell agent">${session.agent_name}</span>
        ${runners ? html`<span class="cell runner">${session.runner_id || "—"}</span>` : null}
        <span class="cell time">${when(session.created_at)}</span>
      </a>
      ${kids.length
        ? html`<ul class="tree" aria-label=${`Sub-agents of ${sessionName(session)}`}>${kids.map(
            (child) => html`<${SessionRow} key=${child.id} session=${child} children=${children}
              filter=${filter} memo=${memo} runners=${runners} depth=${depth + 1} />`,
          )}</ul>`
        : null}
    </li>`;
}

export function SessionsView({ store }) {
  const [filter, setFilter] = useState({ status: "", agent: "" });
  const children = store.childrenIndex();
  const memo = new Map();
  const roots = store.roots().filter((s) => shown(s, children, filter, memo));
  const agents = [...new Set([...store.sessions.values()].map((s) => s.agent_name))].sort();
  const runners = [...store.sessions.values()].some((s) => s.runner_id);
  const set = (name) => (event) => setFilter({ ...filter, [name]: event.currentTarget.value });
  return html`
    <main class="page" aria-labelledby="sessions-title">
      <div class="page-head">
        <h1 id="sessions-title">Sessions</h1>
        <div class="filters">
          <label><span class="muted">Status</span>
            <select aria-label="Status filter" value=${filter.status} onChange=${set("status")}>
              <option value="">all</option>
              <option value="active">running or waiting</option>
              ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
            </select></label>
          <label><span class="muted">Agent</span>
            <select aria-label="Agent filter" value=${filter.agent} onChange=${set("agent")}>
              <option value="">all</option>
              ${agents.map((a) => html`<option value=${a}>${a}</option>`)}
            </select></label>
        </div>
      </div>
      ${!store.synced
        ? html`<p class="muted">Loading…</p>`
        : roots.length === 0
          ? html`<p class="empty">${store.sessions.size ? "No session matches the filters." : "No sessions yet: pick an agent and start one with New session."}</p>`
          : html`
            <div class="table" role="region" aria-label="Sessions list">
              <div class=${`row head${runners ? " with-runner" : ""}`} aria-hidden="true">
                <span class="cell title">Title</span><span class="cell status">Status</span>
                <span class="cell agent">Agent</span>${runners ? html`<span class="cell runner">Runner</span>` : null}
                <span class="cell time">Created</span>
              </div>
              <ul class=${`tree root${runners ? " with-runner" : ""}`}>
                ${roots.map((s) => html`<${SessionRow} key=${s.id} session=${s} children=${children}
                  filter=${filter} memo=${memo} runners=${runners} depth=${0} />`)}
              </ul>
            </div>`}
    </main>`;
}

function AgentSpec({ agent }) {
  const [version, setVersion] = useState(agent.version);
  const [spec, setSpec] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setSpec(null);
    api.spec(agent.id, version).then((answer) => setSpec(answer.spec), setError);
  }, [agent.id, version]);
  const versions = Array.from({ length: agent.version }, (_, i) => agent.version - i);
  return html`
    <div class="agent-spec">
      <dl class="facts">
        <dt>id</dt><dd><code>${agent.id}</code></dd>
        <dt>registered</dt><dd>${when(agent.created_at)}</dd>
        <dt>version</dt>
        <dd><select aria-label=${`Version of ${agent.name}`} value=${version}
          onChange=${(e) => setVersion(Number(e.currentTarget.value))}>
          ${versions.map((v) => html`<option value=${v}>${v}${v === agent.version ? " (latest)" : ""}</option>`)}
        </select></dd>
      </dl>
      <${ErrorNote} error=${error} />
      <pre class="spec" tabindex="0" aria-label=${`Spec of ${agent.name}`}>${spec ? pretty(spec) : "…"}</pre>
    </div>`;
}

export function AgentsView() {
  const [agents, setAgents] = useState(null);
  const [open, setOpen] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.agents().then((list) => setAgents(list.data), setError);
  }, []);
  return html`
    <main class="page" aria-labelledby="agents-title">
      <h1 id="agents-title">Agents</h1>
      <${ErrorNote} error=${error} />
      ${agents === null
        ? html`<p class="muted">Loading…</p>`
        : agents.length === 0
          ? html`<p class="empty">No agents are registered (omnigent serve --agents DIR, or POST /v1/agents).</p>`
          : html`<ul class="agents">${agents.map(
              (agent) => html`
                <li key=${agent.id}>
                  <details open=${open === agent.id} onToggle=${(event) => {
                    if (event.currentTarget.open) setOpen(agent.id);
                    else if (open === agent.id) setOpen(null);
                  }}>
                    <summary>
                      <strong>${agent.name}</strong>
                      <span class="badge">v${agent.version}</span>
                      <span class="muted">${agent.harness}${agent.model ? ` · ${agent.model}` : ""}</span>
                      ${agent.description ? html`<span class="desc">${agent.description}</span>` : null}
                    </summary>
                    ${open === agent.id ? html`<${AgentSpec} agent=${agent} />` : null}
                  </details>
                </li>`,
            )}</ul>`}
    </main>`;
}
