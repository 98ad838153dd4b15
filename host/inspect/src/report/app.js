"use strict";
// Renders the report from the JSON embedded above it. Every text from the bundle goes in
// through text nodes, never as HTML.
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const summary = data.summary;
  const run = summary.run;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") e.className = value;
      else e.setAttribute(key, value);
    }
    for (const child of children) {
      e.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return e;
  }
  const show = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  const lower = (s) => String(s).toLowerCase();
  // "1 node", "3 nodes".
  const count = (n, one, many) => n + " " + (n === 1 ? one : (many || one + "s"));
  // RFC 3339 times to the second: "2026-11-26 02:08:30 UTC".
  const at = (t) => t ? String(t).replace("T", " ").replace(/\.\d+/, "").replace(/Z$/, " UTC") : "unknown";
  const outcome = (r) => r.status === "complete" && r.result_status ? r.result_status : r.status;
  // A result that did not pass: it failed, or the pair ended without one (lost, timed out).
  const failing = (r) => !["passed", "skipped"].includes(outcome(r));

  // Each node's facts documents, parsed when first needed.
  let factsByNode = null;
  function facts() {
    if (factsByNode === null) {
      factsByNode = new Map();
      for (const script of document.querySelectorAll("script.facts")) {
        const doc = JSON.parse(script.textContent);
        if (!factsByNode.has(doc.node)) factsByNode.set(doc.node, []);
        factsByNode.get(doc.node).push(doc);
      }
    }
    return factsByNode;
  }
  // Leaves with their paths, written as `factbuoy inspect facts` writes them.
  function leaves(value, path, out) {
    if (value !== null && typeof value === "object" && Object.keys(value).length > 0) {
      if (Array.isArray(value)) {
        value.forEach((item, i) => leaves(item, path + "[" + i + "]", out));
      } else {
        for (const [key, item] of Object.entries(value)) {
          const plain = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key);
          const next = plain
            ? (path === "" ? key : path + "." + key)
            : path + "['" + key.replace(/\\/g, "\\\\").replace(/'/g, "\\'") + "']";
          leaves(item, next, out);
        }
      }
    } else {
      out.push([path, value]);
    }
    return out;
  }
  const drifting = new Set();
  for (const group of data.drift.groups) {
    for (const fact of group.facts) drifting.add(fact.plugin + " " + fact.path);
  }

  // Header.
  document.title = "factbuoy report: run " + run.run_id;
  // A run that completed with failed results says so: "complete" alone would look all green.
  const failures = summary.results.filter(failing);
  const badge = run.status === "complete" && failures.length > 0
    ? el("span", { class: "badge failed" }, "complete with " + count(failures.length, "failure"))
    : el("span", { class: "badge " + run.status }, run.status);
  document.getElementById("title").append(": run " + run.run_id + " ", badge);
  const plugins = run.plugins.map((p) => p.name + " " + (p.version || "")).join(", ");
  document.getElementById("meta").append(
    data.bundle + " · " + count(run.nodes.length, "node") + " · created " + at(run.created) +
    " · last activity " + at(run.last_activity) + " · factbuoy " +
    (run.factbuoy_version || "unknown") + " · plugins: " + plugins +
    " · report generated " + at(data.generated));
  if (run.error) document.getElementById("meta").append(el("div", { class: "error" }, run.error));

  // Fleet table: a row per node, its key facts and each plugin's result.
  const pluginNames = [];
  for (const r of summary.results) if (!pluginNames.includes(r.plugin)) pluginNames.push(r.plugin);
  const fleet = document.getElementById("fleet-table");
  fleet.append(el("thead", {}, el("tr", {}, el("th", {}, "Node"),
    ...data.key_facts.labels.map((l) => el("th", {}, l)),
    ...pluginNames.map((p) => el("th", {}, p)))));
  const body = el("tbody");
  const nodeRows = [];
  for (const node of run.nodes) {
    const keys = Object.hasOwn(data.key_facts.nodes, node)
      ? data.key_facts.nodes[node] : data.key_facts.labels.map(() => "");
    const outcomes = pluginNames.map((plugin) => {
      const o = summary.results.find((r) => r.plugin === plugin && r.node === node);
      return o ? outcome(o) : "-";
    });
    const row = el("tr", { class: "node-row", "data-node": node },
      el("td", {}, node), ...keys.map((k) => el("td", {}, k)),
      ...outcomes.map((o) => el("td", { class: o }, o)));
    row.addEventListener("click", () => {
      const details = document.querySelector('details[data-node="' + CSS.escape(node) + '"]');
      details.open = true;
      details.scrollIntoView();
    });
    row.dataset.search = lower([node, ...keys, ...outcomes].join(" "));
    nodeRows.push(row);
    body.append(row);
  }
  fleet.append(body);

  // Drift: each group of facts that split the nodes alike, a column per set of nodes.
  const driftBody = document.getElementById("drift-body");
  const driftRows = [];
  const ignored = data.drift.ignored;
  driftBody.append(el("p", { class: "muted" },
    data.drift.groups.length === 0
      ? "Every fact compared is the same on every node."
      : count(data.drift.groups.reduce((n, g) => n + g.facts.length, 0), "fact") +
        " differ between nodes, in " + count(data.drift.groups.length, "group") + ".",
    " " + count(ignored.facts, "fact") + " that change on their own (" +
    count(ignored.patterns.length, "pattern") +
    ": clocks, load, free memory and space, counters) left out."));
  for (const w of data.drift.without_facts) {
    driftBody.append(el("p", { class: "muted" }, w.node + " has no " + w.plugins.join(" or ") +
      " facts: left out of their comparison."));
  }
  const MAX_SETS = 6;
  for (const group of data.drift.groups) {
    const sets = group.node_sets.slice(0, MAX_SETS);
    const more = group.node_sets.length - sets.length;
    const name = (set) => set.length > 8 ? set.slice(0, 8).join(", ") + " and " + (set.length - 8) + " more" : set.join(", ");
    const div = el("div", { class: "group" },
      el("div", {}, count(group.facts.length, "fact") + " split the nodes into " + count(group.node_sets.length, "set")),
      el("ol", { class: "sets", type: "A" }, ...sets.map((set) => el("li", {}, name(set)))));
    if (more > 0) div.append(el("div", { class: "muted" }, "and " + more + " more sets (one per node)"));
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Fact"),
      ...sets.map((_, i) => el("th", {}, String.fromCharCode(65 + i))))));
    const tbody = el("tbody");
    for (const fact of group.facts) {
      const cells = sets.map((_, i) => fact.absent.includes(i)
        ? el("td", { class: "value drift muted" }, "(absent)")
        : el("td", { class: "value drift" }, show(fact.values[i])));
      const row = el("tr", {}, el("td", {}, fact.plugin), el("td", { class: "path" }, fact.path), ...cells);
      row.dataset.search = lower([fact.plugin, fact.path, ...fact.values.map(show), ...group.node_sets.flat()].join(" "));
      driftRows.push(row);
      tbody.append(row);
    }
    table.append(tbody);
    div.append(table);
    driftBody.append(div);
  }

  // Errors, whole, then warnings: what a passed result could not gather.
  const errorsBody = document.getElementById("errors-body");
  const errorRows = [];
  const warnings = summary.results.filter((r) => (r.warnings || []).length > 0);
  const warningCount = warnings.reduce((n, r) => n + r.warnings.length, 0);
  errorsBody.append(el("p", { class: "muted" },
    summary.errors.length === 0 && warningCount === 0 ? "No errors, no warnings."
      : count(summary.errors.length, "error") + ", " + count(warningCount, "warning") + "."));
  for (const e of summary.errors) {
    const row = el("div", {}, el("strong", {}, e.plugin + " on " + e.node + ": "), el("span", { class: "error" }, e.error));
    row.dataset.search = lower(e.plugin + " " + e.node + " " + e.error);
    errorRows.push(row);
    errorsBody.append(row);
  }
  for (const r of warnings) {
    for (const w of r.warnings) {
      const row = el("div", {}, el("strong", {}, r.plugin + " on " + r.node + ": "), el("span", { class: "warning" }, w));
      row.dataset.search = lower(r.plugin + " " + r.node + " " + w);
      errorRows.push(row);
      errorsBody.append(row);
    }
  }

  // Nodes: each one's facts, rendered when opened; facts that differ between nodes highlighted.
  const nodesBody = document.getElementById("nodes-body");
  const nodeDetails = [];
  let query = "";
  function renderFacts(details) {
    if (details.dataset.rendered) return;
    details.dataset.rendered = "1";
    const node = details.dataset.node;
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Fact"), el("th", {}, "Value"))));
    const tbody = el("tbody");
    for (const doc of facts().get(node) || []) {
      for (const [path, value] of leaves(doc.facts, "", [])) {
        const row = el("tr", { class: drifting.has(doc.plugin + " " + path) ? "drift" : "" },
          el("td", {}, doc.plugin), el("td", { class: "path" }, path), el("td", { class: "value" }, show(value)));
        row.dataset.search = lower(path + " " + show(value));
        tbody.append(row);
      }
    }
    table.append(tbody);
    details.querySelector("div").append(table);
    filterFacts(details);
  }
  function filterFacts(details) {
    for (const row of details.querySelectorAll("tbody tr")) {
      row.classList.toggle("hidden", query !== "" && !row.dataset.search.includes(query));
    }
  }
  for (const node of run.nodes) {
    const outcomes = summary.results.filter((r) => r.node === node)
      .map((r) => r.plugin + " " + outcome(r));
    const details = el("details", { "data-node": node },
      el("summary", {}, node + "  ", el("span", { class: "muted" }, outcomes.join(" · "))), el("div"));
    for (const e of summary.errors.filter((e) => e.node === node)) {
      details.querySelector("div").append(el("p", {}, el("strong", {}, e.plugin + ": "), el("span", { class: "error" }, e.error)));
    }
    details.addEventListener("toggle", () => { if (details.open) renderFacts(details); });
    nodeDetails.push(details);
    nodesBody.append(details);
  }

  // Search: nodes whose name, key facts, results or any fact match; drift facts and errors
  // that match; inside an open node, the facts that match.
  let nodeText = null;
  function matchingNodes() {
    if (nodeText === null) {
      nodeText = new Map();
      for (const [node, docs] of facts()) {
        nodeText.set(node, lower(docs.map((d) => leaves(d.facts, "", []).map(([p, v]) => p + " " + show(v)).join("\n")).join("\n")));
      }
    }
    const found = new Set();
    for (const [node, text] of nodeText) if (text.includes(query)) found.add(node);
    return found;
  }
  // A search opens every node it matches, showing the facts that match, and says how many.
  const search = document.getElementById("search");
  const searchCount = el("span", { id: "search-count", class: "muted" });
  search.after(searchCount);
  const openedBySearch = new Set();
  search.addEventListener("input", () => {
    query = lower(search.value.trim());
    const inFacts = query === "" ? null : matchingNodes();
    let matches = 0;
    for (const row of nodeRows) {
      const hit = query === "" || row.dataset.search.includes(query) || inFacts.has(row.dataset.node);
      row.classList.toggle("hidden", !hit);
      if (hit) matches++;
    }
    searchCount.textContent = query === "" ? ""
      : " " + count(matches, "node") + (matches === 1 ? " matches" : " match");
    for (const details of nodeDetails) {
      const row = nodeRows.find((r) => r.dataset.node === details.dataset.node);
      const hidden = row.classList.contains("hidden");
      details.classList.toggle("hidden", hidden);
      if (query !== "" && !hidden && !details.open) {
        details.open = true;
        renderFacts(details);
        openedBySearch.add(details);
      } else if (query === "" && openedBySearch.has(details)) {
        details.open = false;
        openedBySearch.delete(details);
      }
      if (details.dataset.rendered) filterFacts(details);
    }
    for (const row of [...driftRows, ...errorRows]) {
      row.classList.toggle("hidden", query !== "" && !row.dataset.search.includes(query));
    }
  });

  // A link can carry a search: report.html#q=kernel.
  if (location.hash.startsWith("#q=")) {
    search.value = decodeURIComponent(location.hash.slice(3));
    search.dispatchEvent(new Event("input"));
  }

  document.body.dataset.rendered = "ok";
})();
