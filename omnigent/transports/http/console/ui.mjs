// Shared pieces of the console's views: the html tag, hooks, small components.

import { Component, h } from "./vendor/preact.mjs";
import { useEffect, useState } from "./vendor/hooks.mjs";
import htm from "./vendor/htm.mjs";

export const html = htm.bind(h);
export { Component };

// Re-render when a store (SessionsStore, Conversation) says it changed.
export function useStore(store) {
  const [, setVersion] = useState(0);
  useEffect(() => (store ? store.subscribe((version) => setVersion(version)) : undefined), [store]);
  return store;
}

export function StatusBadge({ status, busy }) {
  const shown = status || "unknown";
  const active = ["launching", "running", "waiting"].includes(shown) || busy;
  return html`<span class=${`badge status-${shown}${active ? " active" : ""}`}>${active && shown !== "waiting" ? html`<span class="pulse" aria-hidden="true"></span>` : null}${shown}</span>`;
}

export function when(seconds) {
  if (!seconds) return "";
  const date = new Date(seconds * 1000);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })
    : date.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export function pretty(text) {
  if (text === undefined || text === null) return "";
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function sessionName(session) {
  return session.title || `${session.agent_name} · ${session.id.slice(-6)}`;
}

export function href(route) {
  return `#${route}`;
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return html`<p class="error-note" role="alert">${error.message || String(error)}${error.code ? html` <code>${error.code}</code>` : null}</p>`;
}
