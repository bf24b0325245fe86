// One session's conversation, built from its items and its event stream.
//
// Loading: the snapshot's last_event_id is noted, then every item is read (the history,
// user messages included), then the stream is replayed from the start (?after=0): it
// adds what items do not hold (errors, cancellations, statuses, elicitations) in its
// place, and streams what happens next. Events after the noted id are live: a turn
// that starts then may answer messages another browser sent, so its start reads the
// items after the last one known (once per turn, never a poll). The browser's
// EventSource resumes with Last-Event-ID after a network cut, without gap or repeat.
//
// Entries are immutable objects replaced when they change, so the view re-renders only
// what changed; listeners hear of changes at most once per animation frame.

import { api, listen, SESSION_EVENTS } from "./api.mjs";

let nextKey = 1;

export class Conversation {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.entries = [];
    this.status = null;
    this.error = null;
    this.pending = new Map(); // elicitation id -> request event (this session's and mirrored)
    this.previews = new Map(); // child id -> child summary
    this.inbox = 0;
    this.connection = "connecting";
    this.loadError = null;
    this.version = 0;
    this._byItem = new Map(); // item id -> entry key
    this._byCall = new Map(); // call id -> entry key
    this._cursor = 0; // where the next entry of the replayed/live turn goes
    this._liveFrom = Infinity;
    this._lastItemId = null;
    this._listeners = new Set();
    this._scheduled = false;
    this._source = null;
    this._closed = false;
    this._turnStart = undefined; // where the running turn's input ends
    this._retryAt = undefined; // a read of new items that failed, and where they go
    this._retryAfter = undefined; // the item id that read was after
    this._retryTimer = undefined;
    this._retryDelay = 1000;
    this._online = () => this._retry();
  }

  subscribe(listener) {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  async open() {
    try {
      const snapshot = await api.session(this.sessionId);
      this._liveFrom = snapshot.last_event_id;
      this.status = snapshot.status;
      for (const request of snapshot.pending_elicitations || []) {
        this.pending.set(request.elicitation_id, request);
      }
      const items = await api.items(this.sessionId);
      for (const item of items) this._addItem(item, true);
      this._cursor = this.entries.length;
    } catch (error) {
      this.loadError = error;
      this._changed();
      return;
    }
    if (this._closed) return;
    window.addEventListener("online", this._online);
    this._cursor = 0;
    this._source = listen(
      `/v1/sessions/${encodeURIComponent(this.sessionId)}/stream?after=0`,
      SESSION_EVENTS.concat(["error"]),
      (event) => this._onEvent(event),
      (state) => {
        this.connection = state;
        this._changed();
      },
    );
    this._changed();
  }

  close() {
    this._closed = true;
    clearTimeout(this._retryTimer);
    window.removeEventListener("online", this._online);
    if (this._source) this._source.close();
  }

  // -- entries --------------------------------------------------------------------

  _insert(entry, at) {
    const index = at === undefined ? this._cursor : at;
    this.entries.splice(index, 0, entry);
    if (index <= this._cursor) this._cursor += 1;
    return entry;
  }

  _replace(key, change) {
    const index = this.entries.findIndex((e) => e.key === key);
    if (index < 0) return null;
    const entry = { ...this.entries[index], ...change };
    this.entries[index] = entry;
    return index;
  }

  _indexOf(key) {
    // Recent entries change most: search from the end.
    for (let i = this.entries.length - 1; i >= 0; i -= 1) {
      if (this.entries[i].key === key) return i;
    }
    return -1;
  }

  // An item from the history (known=true) or from a response.output_item.done event.
  _addItem(item, fromHistory) {
    this._lastItemId = item.id || this._lastItemId;
    if (item.type === "function_call_output") {
      const key = this._byCall.get(item.call_id);
      this._byItem.set(item.id, key);
      if (key !== undefined) {
        const index = this._indexOf(key);
        this.entries[index] = { ...this.entries[index], output: item.output };
        this._advanceTo(index);
        return;
      }
      this._insertNew({ kind: "tool", name: "(unknown tool)", call_id: item.call_id, output: item.output }, item, fromHistory);
      return;
    }
    const known = this._byItem.get(item.id);
    if (known !== undefined) {
      const index = this._indexOf(known);
      if (index >= 0) {
        this.entries[index] = { ...this.entries[index], ...fromItem(item), streaming: false };
        this._advanceTo(index);
      }
      return;
    }
    if (item.type === "function_call" && this._byCall.has(item.call_id)) {
      const key = this._byCall.get(item.call_id);
      this._byItem.set(item.id, key);
      const index = this._indexOf(key);
      this.entries[index] = { ...this.entries[index], ...fromItem(item) };
      this._advanceTo(index);
      return;
    }
    this._insertNew(fromItem(item), item, fromHistory);
  }

  _insertNew(fields, item, fromHistory) {
    const entry = { key: nextKey++, ...fields };
    if (item.id) this._byItem.set(item.id, entry.key);
    if (item.call_id && item.type === "function_call") this._byCall.set(item.call_id, entry.key);
    if (item.call_id && item.type === "function_call_output") this._byCall.set(item.call_id, entry.key);
    if (fromHistory) this.entries.push(entry);
    else this._insert(entry);
  }

  _advanceTo(index) {
    if (index + 1 > this._cursor) this._cursor = index + 1;
  }

  // A turn begins: the user messages waiting at the cursor are its input.
  _turnStarted() {
    while (this._cursor < this.entries.length && this.entries[this._cursor].kind === "user") {
      this._cursor += 1;
    }
  }

  // Messages another browser sent reach the history only: read the new items once.
  async _readNewItems(at, after) {
    try {
      const items = await api.items(this.sessionId, after || undefined);
      let added = false;
      for (const item of items) {
        if (this._byItem.has(item.id)) continue;
        if (item.type === "message" && item.role === "user") {
          const fields = fromItem(item);
          if (this._adopt(item, fields.text)) continue;
          const entry = { key: nextKey++, ...fields };
          this._byItem.set(item.id, entry.key);
          // Where the turn that answers it began (what came since is after it).
          this._insert(entry, Math.min(at, this.entries.length));
          added = true;
        }
        this._lastItemId = item.id;
      }
      this._retryDelay = 1000;
      if (added) this._changed();
    } catch {
      // Offline, or the session was deleted (its stream ends too): read them again
      // when the browser is back online, with the next event, or after a while
      // (doubling up to 16 s; only while this read is owed).
      if (this._retryAt === undefined || at < this._retryAt) {
        this._retryAt = at;
        this._retryAfter = after;
      }
      clearTimeout(this._retryTimer);
      this._retryTimer = setTimeout(() => this._retry(), this._retryDelay);
      this._retryDelay = Math.min(this._retryDelay * 2, 16000);
    }
  }

  _retry() {
    if (this._retryAt === undefined || this._closed) return;
    const at = this._retryAt;
    this._retryAt = undefined;
    clearTimeout(this._retryTimer);
    this._readNewItems(at, this._retryAfter);
  }

  // A message this browser is sending: shown at once, at the end (a turn that starts
  // meanwhile takes it as its input); sent() gives it its item id, unsent() drops it.
  sending(text) {
    const entry = { key: nextKey++, kind: "user", text, local: true };
    this.entries.push(entry);
    this._changed();
    return entry.key;
  }

  sent(key, itemId) {
    const index = this._indexOf(key);
    if (index < 0 || this._byItem.get(itemId) === key) return; // adopted already
    if (this._byItem.has(itemId)) {
      this.entries.splice(index, 1); // the history was read first: it is there already
      if (index < this._cursor) this._cursor -= 1;
    } else {
      this.entries[index] = { ...this.entries[index], id: itemId, local: false };
      this._byItem.set(itemId, key);
    }
    this._changed();
  }

  unsent(key) {
    const index = this._indexOf(key);
    if (index < 0) return;
    this.entries.splice(index, 1);
    if (index < this._cursor) this._cursor -= 1;
    this._changed();
  }

  // A user item read from the history that this browser is still sending.
  _adopt(item, text) {
    const index = this.entries.findIndex((e) => e.local && e.text === text);
    if (index < 0) return false;
    this.entries[index] = { ...this.entries[index], id: item.id, local: false };
    this._byItem.set(item.id, this.entries[index].key);
    return true;
  }

  // -- events ---------------------------------------------------------------------

  _onEvent(event) {
    const live = event.event_id > this._liveFrom;
    this._retry();
    switch (event.type) {
      case "session.status":
        this.status = event.status;
        this.error = event.status === "failed" ? event.error || null : null;
        break;
      case "response.created":
        this._turnStarted();
        this._turnStart = this._cursor;
        if (live) this._readNewItems(this._cursor, this._lastItemId);
        break;
      case "response.output_text.delta":
        this._delta(event);
        break;
      case "response.output_item.done":
        this._addItem(event.item, false);
        break;
      case "response.completed":
        this._turnStart = undefined;
        break;
      case "response.failed":
        this._insert({ key: nextKey++, kind: "error", error: event.error || {}, response: event.response?.id });
        this._turnStart = undefined;
        break;
      case "response.cancelled":
        this._insert({ key: nextKey++, kind: "cancelled", response: event.response?.id });
        this._turnStart = undefined;
        break;
      case "response.elicitation_request":
        this.pending.set(event.elicitation_id, event);
        break;
      case "response.elicitation_resolved":
        this.pending.delete(event.elicitation_id);
        break;
      case "session.child_session.updated":
        this.previews.set(event.child.id, event.child);
        break;
      case "session.inbox.updated":
        this.inbox = event.count;
        break;
      case "error":
        this.loadError = event.error || { message: "the stream failed" };
        break;
      default:
        break;
    }
    this._changed();
  }

  _delta(event) {
    const key = this._byItem.get(event.item_id);
    if (key === undefined) {
      const entry = { key: nextKey++, kind: "assistant", text: event.delta, streaming: true };
      this._byItem.set(event.item_id, entry.key);
      this._insert(entry);
      return;
    }
    const index = this._indexOf(key);
    const entry = this.entries[index];
    if (!entry.streaming) return; // already complete (read from the history)
    this.entries[index] = { ...entry, text: entry.text + event.delta };
  }

  _changed() {
    this.version += 1;
    if (this._scheduled) return;
    this._scheduled = true;
    requestAnimationFrame(() => {
      this._scheduled = false;
      for (const listener of this._listeners) listener(this.version);
    });
  }

  // Background tasks, as the conversation shows them: each sys_call_async handle, and
  // how it ended once a delivered inbox line names it.
  backgroundTasks() {
    const tasks = new Map();
    const texts = [];
    for (const entry of this.entries) {
      if (entry.kind === "tool" && entry.name === "sys_call_async" && entry.output) {
        const started = parseJson(entry.output);
        if (started && started.handle_id) {
          tasks.set(started.handle_id, { id: started.handle_id, tool: started.tool, state: "running" });
        }
      }
      if (entry.kind === "user") texts.push(entry.text);
      if (entry.kind === "tool" && entry.name === "sys_read_inbox" && entry.output) texts.push(entry.output);
    }
    for (const text of texts) {
      for (const match of text.matchAll(/task (\S+) (completed|failed|was cancelled)/g)) {
        const task = tasks.get(match[1]);
        if (task) task.state = match[2] === "was cancelled" ? "cancelled" : match[2];
      }
    }
    return [...tasks.values()];
  }
}

function fromItem(item) {
  if (item.type === "message") {
    const text = (item.content || [])
      .map((block) => (block.text !== undefined ? block.text : block.type === "input_image" ? "[image]" : ""))
      .join("");
    return {
      kind: item.role === "user" ? "user" : item.role === "assistant" ? "assistant" : "system",
      text,
      id: item.id,
      incomplete: item.status === "incomplete",
    };
  }
  if (item.type === "function_call") {
    return { kind: "tool", name: item.name, args: item.arguments, call_id: item.call_id, status: item.status, id: item.id };
  }
  // Anything else (reasoning, from harnesses that report it): shown as it came.
  return { kind: "other", type: item.type, body: item, id: item.id };
}

export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
