// The omnigent web console: routes (#/, #/s/<id>, #/approvals, #/agents), the top bar
// with New session and its agent picker, and keyboard handling. Everything it shows
// comes from the public HTTP API and its event streams; see docs/console.md.

import { api } from "./api.mjs";
import { ApprovalsView } from "./approvals.mjs";
import { AgentsView, SessionsView } from "./lists.mjs";
import { SessionsStore } from "./sessions.mjs";
import { SessionView } from "./session_view.mjs";
import { ErrorNote, html, useStore } from "./ui.mjs";
import { render } from "./vendor/preact.mjs";
import { useEffect, useMemo, useState } from "./vendor/hooks.mjs";

function currentRoute() {
  const path = window.location.hash.replace(/^#/, "") || "/";
  const session = path.match(/^\/s\/([A-Za-z0-9_.-]+)$/);
  if (session) return { view: "session", id: session[1] };
  if (path === "/approvals") return { view: "approvals" };
  if (path === "/agents") return { view: "agents" };
  return { view: "sessions" };
}

function NewSession() {
  const [agents, setAgents] = useState([]);
  const [chosen, setChosen] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api.agents().then((list) => {
      setAgents(list.data);
      if (list.data.length) setChosen(list.data[0].id);
    }, setError);
  }, []);
  async function create() {
    if (!chosen) return;
    setBusy(true);
    setError(null);
    try {
      const session = await api.createSession(chosen);
      window.location.hash = `#/s/${session.id}`;
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }
  return html`
    <div class="new-session">
      <select aria-label="Agent" value=${chosen} onChange=${(e) => setChosen(e.currentTarget.value)}>
        ${agents.length === 0 ? html`<option value="">no agents</option>` : null}
        ${agents.map((agent) => html`<option value=${agent.id}>${agent.name}</option>`)}
      </select>
      <button class="primary" onClick=${create} disabled=${busy || !chosen}>New session</button>
      <${ErrorNote} error=${error} />
    </div>`;
}

function App() {
  const store = useMemo(() => new SessionsStore(), []);
  useStore(store);
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const onHash = () => setRoute(currentRoute());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  useEffect(() => {
    // Escape closes the open detail nearest the focus (a tool call, a terminal, a spec).
    const onKey = (event) => {
      if (event.key !== "Escape") return;
      const focused = document.activeElement;
      const around = focused && focused.closest ? focused.closest("details[open]") : null;
      const open = around || [...document.querySelectorAll("details[open]")].pop();
      if (open) {
        open.open = false;
        const summary = open.querySelector("summary");
        if (summary) summary.focus();
        event.preventDefault();
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);
  const waiting = store.pendingApprovals().length;
  const tab = (view, path, label, extra) =>
    html`<a href=${`#${path}`} aria-current=${route.view === view ? "page" : undefined}>${label}${extra}</a>`;
  return html`
    <div class="shell">
      <header class="top">
        <a class="brand" href="#/"><img src="/console/icon.svg" alt="" width="20" height="20" /> omnigent</a>
        <nav aria-label="Main">
          ${tab("sessions", "/", "Sessions", null)}
          ${tab("approvals", "/approvals", "Approvals", waiting ? html` <span class="count" aria-label=${`${waiting} waiting`}>${waiting}</span>` : null)}
          ${tab("agents", "/agents", "Agents", null)}
        </nav>
        <${NewSession} />
        ${store.connection === "reconnecting" ? html`<span class="badge warn" role="status">reconnecting…</span>` : null}
      </header>
      ${route.view === "session"
        ? html`<${SessionView} key=${route.id} store=${store} sessionId=${route.id} />`
        : route.view === "approvals"
          ? html`<${ApprovalsView} store=${store} />`
          : route.view === "agents"
            ? html`<${AgentsView} />`
            : html`<${SessionsView} store=${store} />`}
    </div>`;
}

const root = document.getElementById("app");
root.textContent = ""; // the boot message
render(html`<${App} />`, root);
