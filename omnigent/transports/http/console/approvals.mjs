// Pending elicitations: one card each, with Approve and Deny (and a form's fields).
// An answer goes to the session that owns the request (target_session_id when it was
// mirrored to an ancestor); the server resolves it once, so a second browser's answer
// is told "already answered", and every browser sees the request leave its list when
// the feed (or the session stream) says it was resolved.

import { api } from "./api.mjs";
import { useState } from "./vendor/hooks.mjs";
import { ErrorNote, href, html, pretty, sessionName, when } from "./ui.mjs";

function fieldsOf(schema) {
  const properties = (schema && schema.properties) || {};
  return Object.entries(properties).map(([name, spec]) => ({
    name,
    type: spec.type || "string",
    title: spec.title || name,
    description: spec.description || "",
    options: spec.enum || null,
    required: (schema.required || []).includes(name),
  }));
}

function readField(field, raw) {
  if (field.type === "boolean") return Boolean(raw);
  if (field.type === "integer") return Number.parseInt(raw, 10);
  if (field.type === "number") return Number.parseFloat(raw);
  return raw;
}

export function ApprovalCard({ request, session, showSession }) {
  const params = request.params || {};
  const owner = params.target_session_id || request.session_id || (session && session.id);
  const fields = fieldsOf(params.requestedSchema);
  const questions = (params.ask_user_question && params.ask_user_question.questions) || [];
  const [values, setValues] = useState({});
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState(null);
  const [error, setError] = useState(null);

  async function answer(action) {
    setBusy(true);
    setError(null);
    try {
      let content;
      if (action === "accept" && (fields.length || questions.length)) {
        content = {};
        for (const field of fields) {
          if (values[field.name] !== undefined && values[field.name] !== "") {
            content[field.name] = readField(field, values[field.name]);
          }
        }
        for (const question of questions) {
          if (values[question.question] !== undefined) content[question.question] = values[question.question];
        }
      }
      const result = await api.resolve(owner, request.elicitation_id, action, content);
      setOutcome(result.resolved ? (action === "accept" ? "approved" : "denied") : "already answered");
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }

  const set = (name) => (event) => {
    const target = event.currentTarget;
    setValues({ ...values, [name]: target.type === "checkbox" ? target.checked : target.value });
  };
  const label = params.tool_name ? `Approval: ${params.tool_name}` : `Question: ${params.message}`;
  const onKey = (event) => {
    if (event.key === "Enter" && event.target.tagName === "INPUT" && !busy) {
      event.preventDefault();
      answer("accept");
    }
  };

  return html`
    <section class="approval" aria-label=${label} onKeyDown=${onKey}>
      <header>
        <strong>${params.message}</strong>
        ${showSession && session
          ? html`<a class="where" href=${href(`/s/${owner}`)}>${sessionName(session)}</a>`
          : null}
        <span class="muted">${when(request.created_at)}</span>
      </header>
      ${params.tool_name
        ? html`<div class="tool-ask"><span class="muted">tool</span> <code>${params.tool_name}</code>${params.policy_name
            ? html` <span class="muted">policy</span> <code>${params.policy_name}</code>`
            : null}</div>`
        : null}
      ${params.command ? html`<pre class="args">${params.command}</pre>` : null}
      ${params.tool_input ? html`<pre class="args">${pretty(params.tool_input)}</pre>` : null}
      ${questions.map(
        (question) => html`
          <fieldset class="question">
            <legend>${question.question}</legend>
            ${(question.options || []).map(
              (option) => html`<label><input type="radio" name=${`${request.elicitation_id}-${question.question}`}
                value=${option.label} onChange=${set(question.question)} /> ${option.label}</label>`,
            )}
          </fieldset>`,
      )}
      ${fields.map(
        (field) => html`
          <label class="field">
            <span>${field.title}${field.required ? " *" : ""}</span>
            ${field.options
              ? html`<select onChange=${set(field.name)}><option value="">—</option>${field.options.map(
                  (option) => html`<option value=${option}>${option}</option>`,
                )}</select>`
              : field.type === "boolean"
                ? html`<input type="checkbox" onChange=${set(field.name)} />`
                : html`<input type=${field.type === "integer" || field.type === "number" ? "number" : "text"}
                    onInput=${set(field.name)} />`}
            ${field.description ? html`<small class="muted">${field.description}</small>` : null}
          </label>`,
      )}
      ${outcome
        ? html`<p class="outcome" role="status">${outcome}</p>`
        : html`<div class="actions">
            <button class="primary" disabled=${busy} onClick=${() => answer("accept")}>Approve</button>
            <button class="danger" disabled=${busy} onClick=${() => answer("decline")}>Deny</button>
          </div>`}
      <${ErrorNote} error=${error} />
    </section>`;
}

export function ApprovalsView({ store }) {
  const pending = store.pendingApprovals();
  return html`
    <main class="page" aria-labelledby="approvals-title">
      <h1 id="approvals-title">Approvals</h1>
      ${!store.synced
        ? html`<p class="muted">Loading…</p>`
        : pending.length === 0
          ? html`<p class="empty">Nothing is waiting for an answer.</p>`
          : html`<div class="cards">${pending.map(
              ({ session, request }) => html`<${ApprovalCard} key=${request.elicitation_id}
                request=${request} session=${session} showSession=${true} />`,
            )}</div>`}
    </main>`;
}
