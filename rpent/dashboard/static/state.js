// The dashboard's state reducer: the same as rpent/dashboard/state.py, so a page that applies the
// event stream to a snapshot holds what the server's next snapshot would.
"use strict";

const ACTIVE_CALL = ["running", "awaiting_approval"];

function findRow(task, callId) { return [...task.timeline].reverse().find((r) => r.call_id === callId); }

function latchView(p) {
  if (p.event === "stop") return { latched: true, line: p.line, by: p.by, reason: p.reason };
  return { latched: false, released_by: p.by };
}

function apply(st, kind, p) {
  const task = st.task;
  if (kind === "stop_latch") { st.stop_latch = latchView(p); return; }
  if (kind === "session") { st.session = { status: p.status, error: p.error || null, reason: p.reason || null }; return; }
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
  } else if (kind === "tool_stage") {
    const row = findRow(task, p.call_id);
    if (row && ACTIVE_CALL.includes(row.status)) row.status = p.stage === "awaiting_approval" ? "awaiting_approval" : "running";
  } else if (kind === "tool_finished") {
    let row = findRow(task, p.call_id);
    if (!row) { row = { call_id: p.call_id, tool: p.tool, arguments: p.arguments }; task.timeline.push(row); }
    const status = p.status || (p.error ? "error" : "ok");
    Object.assign(row, { status, status_text: p.status_text, duration_s: p.duration_s, error: p.error,
      images: p.image_urls || [], image_labels: p.image_labels || [], clip: p.clip_url, result: p.result });
    task.counters.tool_calls += 1;
    if (status === "error" || status === "failed") task.counters.errors += 1;
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
      disagreement: s.disagreement, stop_reason: s.stop_reason });
  }
}
