// RPent operator dashboard: loads a state snapshot, then applies the event stream on top of it.
// Events carry increasing ids; anything at or below the snapshot's last_event_id is already in it.
"use strict";

const S = { spec: null, state: null, lastId: 0, source: null, resyncing: false, buffer: [], frames: {}, dirty: false };
const KINDS = ["session", "component", "task_started", "tool_started", "tool_finished", "planner_text", "finish",
  "toolkit_closed", "counters", "operator_message", "operator_note", "abort_requested", "task_ended", "operator_request",
  "operator_request_closed", "scene_reset"];
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined, credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

// ---- state: the same reducer as rpent/dashboard/state.py ---------------------------------------

function apply(kind, p) {
  const st = S.state;
  const task = st.task;
  if (kind === "session") { st.session = { status: p.status, error: p.error || null }; return; }
  if (kind === "component") {
    let row = st.components.find((c) => c.name === p.name);
    if (!row) { row = { name: p.name, label: p.name, shared: true }; st.components.push(row); }
    row.status = p.status; row.detail = p.detail || "";
    return;
  }
  if (kind === "task_started") {
    st.task = { id: p.task_id, fields: p.fields || {}, planner: p.planner, recipe: p.recipe,
      reset: { status: p.reset ? "running" : "skipped" }, status: "running", started: p.started,
      ended: null, timeline: [], text: "", messages: [], notes: [],
      counters: { tool_calls: 0, errors: 0, turns: null, tokens: null }, finish: null, solved: null, summary: null,
      artifacts: {} };
    st.tasks.push({ id: p.task_id, task: (p.fields || {}).task, status: "running" });
    return;
  }
  if (kind === "operator_request") { st.requests = st.requests.filter((r) => r.id !== p.id).concat([p]); return; }
  if (kind === "operator_request_closed") {
    st.requests = st.requests.filter((r) => r.id !== p.id);
    if (task) task.messages.push(`request ${p.kind}: ${p.outcome}${p.answer ? " (" + p.answer + ")" : ""}`);
    return;
  }
  if (!task || (p.task_id && p.task_id !== task.id)) return;
  if (kind === "tool_started") {
    task.timeline.push({ call_id: p.call_id, tool: p.tool, arguments: p.arguments, status: "running" });
  } else if (kind === "tool_finished") {
    let row = [...task.timeline].reverse().find((r) => r.call_id === p.call_id);
    if (!row) { row = { call_id: p.call_id, tool: p.tool, arguments: p.arguments }; task.timeline.push(row); }
    Object.assign(row, { status: p.error ? "error" : "ok", duration_s: p.duration_s, error: p.error,
      images: p.image_urls || [], clip: p.clip_url, result: p.result });
    task.counters.tool_calls += 1;
    if (p.error) task.counters.errors += 1;
  } else if (kind === "scene_reset") {
    task.reset = { status: p.status, label: p.label, detail: p.detail, error: p.error };
  } else if (kind === "planner_text") {
    task.text = (task.text + (p.text || "")).slice(-200000);
  } else if (kind === "finish") {
    task.finish = p.finish_result;
  } else if (kind === "counters") {
    task.counters.turns = p.turns; task.counters.tokens = p.tokens;
  } else if (kind === "operator_message") {
    task.messages.push("message: " + p.text);
  } else if (kind === "operator_note") {
    task.notes.push(p.text); task.messages.push("note: " + p.text);
  } else if (kind === "abort_requested") {
    task.status = "aborting";
  } else if (kind === "task_ended") {
    const s = p.summary || {};
    Object.assign(task, { status: s.status || "error", ended: p.ended, summary: s, solved: s.solved,
      finish: s.finish_result || task.finish, artifacts: p.artifacts || {} });
    task.counters.turns = s.turns; task.counters.tokens = (s.usage || {}).total_tokens;
    const row = st.tasks.find((r) => r.id === task.id);
    if (row) Object.assign(row, { status: task.status, finish_status: s.finish_status, solved: task.solved,
      disagreement: s.disagreement });
  }
}

// ---- event stream --------------------------------------------------------------------------------

async function loadState() {
  S.state = await api("GET", "/api/state");
  S.lastId = S.state.last_event_id;
  if (!S.state.task) S.state.task = null;
  schedule();
}

function onEvent(event) {
  if (S.resyncing) { S.buffer.push(event); return; }
  const id = Number(event.lastEventId);
  if (id && id <= S.lastId) return;  // already in the snapshot
  if (id) S.lastId = id;
  apply(event.type, JSON.parse(event.data));
  schedule();
}

async function resync() {
  // Too far behind the server's ring: reload the snapshot, then replay what arrived meanwhile.
  S.resyncing = true;
  try { await loadState(); } finally {
    S.resyncing = false;
    const pending = S.buffer; S.buffer = [];
    pending.forEach(onEvent);
  }
}

function connect() {
  const source = new EventSource(`/api/events?after=${S.lastId}`);
  S.source = source;
  KINDS.forEach((kind) => source.addEventListener(kind, onEvent));
  source.addEventListener("resync", resync);
  source.addEventListener("frame", (event) => showFrame(JSON.parse(event.data)));
  source.onopen = () => setLink(true);
  source.onerror = () => setLink(false);  // the browser reconnects and sends Last-Event-ID itself
}

function setLink(online) {
  const pill = $("link-status");
  pill.textContent = online ? "live" : "reconnecting";
  pill.className = "pill " + (online ? "online" : "offline");
}

// Latest frame wins: while one picture loads, only the newest counter is remembered.
function showFrame({ channel, n }) {
  const f = S.frames[channel] || (S.frames[channel] = { loading: false, next: 0 });
  f.next = Math.max(f.next, n);
  const img = document.querySelector(`img[data-channel="${channel}"]`);
  if (!img || f.loading) return;
  f.loading = true;
  const shown = f.next;
  const done = (loaded) => {
    f.loading = false;
    if (loaded) img.dataset.frame = String(shown);  // the counter of the picture actually on screen
    if (f.next > shown) showFrame({ channel, n: f.next });
  };
  img.onload = () => done(true);
  img.onerror = () => done(false);
  img.src = `/frames/${encodeURIComponent(channel)}.jpg?v=${shown}`;
}

// ---- rendering -----------------------------------------------------------------------------------

function schedule() {
  if (S.dirty) return;
  S.dirty = true;
  requestAnimationFrame(() => { S.dirty = false; render(); });
}

function pill(node, status) { node.textContent = status; node.className = "pill " + status; }

function render() {
  const st = S.state;
  if (!st) return;
  pill($("session-status"), st.session.status);
  $("components").replaceChildren(...st.components.map((c) => el("tr", { "data-component": c.name },
    el("td", { text: c.label }), el("td", { text: c.shared ? "shared" : "per task", class: "muted" }),
    el("td", {}, el("span", { class: "pill " + c.status, text: c.status })), el("td", { text: c.detail || "" }))));
  $("task-history").replaceChildren(...st.tasks.map((t) => el("li", { text:
    `${t.id}: ${t.status}${t.finish_status ? " / " + t.finish_status : ""}${t.solved === true ? " / solved" : ""}` +
    `${t.disagreement ? " / NOT SOLVED (finish and solved() disagree)" : ""}`, class: t.disagreement ? "error" : null })));
  renderRequests(st.requests);
  const task = st.task;
  const running = task && ["running", "aborting"].includes(task.status);
  $("start-task").disabled = Boolean(running) || st.session.status !== "ready";
  for (const id of ["send-message", "add-note", "abort"]) $(id).disabled = !running;
  const warning = $("disagreement");
  const disagreement = task && task.summary ? task.summary.disagreement : null;
  warning.hidden = !disagreement;
  warning.textContent = disagreement ? "⚠ " + disagreement : "";
  if (!task) return;
  $("task-title").textContent = `${task.id} ${task.fields.task ? "— " + task.fields.task : ""}`;
  pill($("task-status"), task.status);
  $("timeline").tBodies[0].replaceChildren(...task.timeline.map(timelineRow));
  const text = $("planner-text");
  if (text.textContent !== task.text) { text.textContent = task.text; text.scrollTop = text.scrollHeight; }
  $("operator-log").replaceChildren(...task.messages.map((m) => el("li", { text: m })));
  const c = task.counters;
  $("counters").replaceChildren(...[["tool calls", c.tool_calls], ["errors", c.errors], ["turns", c.turns ?? "…"],
    ["tokens", c.tokens ?? "…"]].flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { "data-counter": k, text: String(v) })]));
  const finish = task.finish;
  $("result").replaceChildren(
    el("dl", {},
      el("dt", { text: "finish" }), el("dd", { "data-testid": "finish-status", text: finish ? String(finish.status) : "—" }),
      el("dt", { text: "summary" }), el("dd", { text: finish && finish.summary ? finish.summary : "—" }),
      el("dt", { text: "solved()" }), el("dd", { "data-testid": "solved", text: task.solved === null || task.solved === undefined ? "—" : String(task.solved) }),
      el("dt", { text: "planner" }), el("dd", { "data-testid": "task-planner",
        text: task.planner ? task.planner + (task.recipe ? " " + task.recipe : "") : "—" }),
      el("dt", { text: "reset" }), el("dd", { "data-testid": "reset-status",
        text: task.reset ? task.reset.status + (task.reset.error ? ": " + task.reset.error : "") : "—" }),
      el("dt", { text: "stop" }), el("dd", { text: task.summary ? String(task.summary.stop_reason || "") : "—" }),
      el("dt", { text: "notes" }), el("dd", { text: finish && finish.operator_notes ? finish.operator_notes.join("; ") : "—" })));
  $("artifacts").replaceChildren(...Object.entries(task.artifacts || {}).map(([name, url]) =>
    el("a", { href: url, target: "_blank", "data-artifact": name, text: name })));
}

function timelineRow(r) {
  const media = el("td");
  (r.images || []).forEach((url) => media.append(el("a", { href: url, target: "_blank" }, el("img", { src: url, alt: "observation" }))));
  if (r.clip) media.append(el("a", { href: r.clip, target: "_blank", "data-clip": "1", text: "clip" }));
  const args = r.arguments && Object.keys(r.arguments).length ? JSON.stringify(r.arguments) : "";
  return el("tr", { "data-testid": "timeline-row", "data-tool": r.tool, "data-status": r.status },
    el("td", { text: String(r.call_id) }), el("td", { text: r.tool }), el("td", { text: args, title: r.result || "" }),
    el("td", {}, el("span", { class: "pill " + r.status, text: r.status }), r.error ? el("div", { class: "error", text: r.error }) : null),
    el("td", { text: r.duration_s != null ? r.duration_s.toFixed(2) + " s" : "" }), media);
}

function renderRequests(requests) {
  const box = $("requests");
  const open = new Set(requests.map((r) => r.id));
  [...box.children].forEach((child) => { if (!open.has(child.dataset.request)) child.remove(); });
  for (const r of requests) {
    if (box.querySelector(`[data-request="${r.id}"]`)) continue;  // keep what the operator is typing
    const answer = r.kind === "question" ? el("input", { placeholder: "Your answer", "data-testid": "answer-input" }) : null;
    const send = (body) => api("POST", `/api/requests/${encodeURIComponent(r.id)}`, body).catch(showOperatorError);
    const buttons = r.kind === "approval"
      ? [el("button", { "data-testid": "approve", onclick: () => send({ approve: true }), text: "Approve" }),
        el("button", { class: "deny", "data-testid": "deny", onclick: () => send({ approve: false }), text: "Deny" })]
      : [el("button", { "data-testid": "answer", onclick: () => send({ answer: answer.value }), text: "Answer" })];
    box.append(el("div", { class: "request", "data-request": r.id, "data-kind": r.kind, "data-testid": "request" },
      el("p", { text: (r.kind === "approval" ? "Approve motion? " : "Question: ") + r.text }),
      answer, el("div", { class: "row" }, ...buttons)));
  }
}

function showOperatorError(error) { $("operator-error").textContent = error.message; }

// ---- form and operator actions -------------------------------------------------------------------

function renderForm(spec) {
  $("robot-name").textContent = spec.robot;
  $("planner-name").textContent = spec.planner ? "planner: " + spec.planner : "";
  $("start-task").textContent = spec.task_command || "Start task";
  $("task-fields").replaceChildren(...spec.task_fields.map((f) => {
    const id = "field-" + f.name;
    let input;
    if (f.kind === "choice") {
      input = el("select", { id, name: f.name }, ...f.choices.map((c) => el("option", { value: c, text: c, selected: c === f.default })));
    } else if (f.kind === "bool") {
      input = el("input", { id, name: f.name, type: "checkbox", checked: Boolean(f.default) });
    } else if (f.kind === "text") {
      input = el("textarea", { id, name: f.name, rows: 2 });
      input.value = f.default ?? "";
    } else {
      input = el("input", { id, name: f.name, type: "number", step: f.kind === "int" ? "1" : "any", value: f.default ?? "" });
    }
    return el("div", {}, el("label", { for: id, text: f.label }), input, f.help ? el("div", { class: "muted", text: f.help }) : null);
  }));
  $("frames").replaceChildren(...spec.frame_channels.map((c) => el("figure", {},
    el("img", { "data-channel": c.name, "data-testid": "frame-" + c.name, alt: c.label }),
    el("figcaption", { text: `${c.label} (≤ ${c.max_fps} fps)` }))));
}

function renderRunFields(spec) {
  const planners = spec.planners || [];
  $("planner-select").replaceChildren(...planners.map((p) => el("option", {
    value: p.name, disabled: !p.available, selected: p.name === spec.default_planner, title: p.reason || null,
    text: p.available ? p.name : `${p.name} (not available: ${p.reason})` })));
  const replay = planners.find((p) => p.name === "replay");
  const recipes = replay ? replay.recipes : [];
  $("recipe-select").replaceChildren(...recipes.map((r) => el("option", {
    value: r, selected: r === spec.default_recipe, text: r.split("/").slice(-3).join("/") })));
  if (spec.reset) {
    $("reset-row").hidden = false;
    $("reset-check").checked = Boolean(spec.reset.default);
    $("reset-label").textContent = "Reset before the task: " + spec.reset.label;
  }
  for (const id of ["planner-select", "recipe-select", "reset-check"]) $(id).addEventListener("change", showPreview);
  showPreview();
}

function runChoice() {
  const planner = $("planner-select").value || null;
  const choice = { planner, recipe: planner === "replay" ? ($("recipe-select").value || null) : null };
  if (S.spec.reset) choice.reset = $("reset-check").checked;
  return choice;
}

function showPreview() {
  const c = runChoice();
  $("recipe-row").hidden = c.planner !== "replay";
  $("run-preview").textContent = c.planner
    ? `Will run: planner ${c.planner}${c.recipe ? ", recipe " + c.recipe : ""}` +
      (S.spec.reset ? (c.reset ? ", reset first (" + S.spec.reset.label + ")" : ", no reset") : "")
    : "No planner can run here: see the reasons in the list.";
}

function formValues() {
  const fields = {};
  for (const f of S.spec.task_fields) {
    const input = $("field-" + f.name);
    fields[f.name] = f.kind === "bool" ? input.checked : input.value;
  }
  return fields;
}

function wire() {
  $("task-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("form-error").textContent = "";
    try { await api("POST", "/api/tasks", { fields: formValues(), ...runChoice() }); } catch (error) { $("form-error").textContent = error.message; }
  });
  const textAction = (inputId, path) => async () => {
    const input = $(inputId);
    if (!input.value.trim()) return;
    $("operator-error").textContent = "";
    try { await api("POST", path, { text: input.value }); input.value = ""; } catch (error) { showOperatorError(error); }
  };
  $("send-message").addEventListener("click", textAction("message-input", "/api/task/message"));
  $("add-note").addEventListener("click", textAction("note-input", "/api/task/note"));
  $("abort").addEventListener("click", async () => {
    $("operator-error").textContent = "";
    try { await api("POST", "/api/task/abort", { reason: "operator pressed Abort" }); } catch (error) { showOperatorError(error); }
  });
}

async function boot() {
  try {
    S.spec = await api("GET", "/api/spec");
    renderForm(S.spec);
    renderRunFields(S.spec);
    wire();
    await loadState();
    connect();
  } catch (error) {
    $("form-error").textContent = "dashboard failed to load: " + error.message;
  }
}

boot();
