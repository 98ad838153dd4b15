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
    (run.factbuoy_version || "unknown") + (plugins ? " · plugins: " + plugins : "") +
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
      : ((n) => count(n, "fact") + (n === 1 ? " differs" : " differ"))(
        data.drift.groups.reduce((n, g) => n + g.facts.length, 0)) + " between nodes, in " + count(data.drift.groups.length, "group") + ".",
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

  // Logs: the journals' entries by priority and unit, and the latest errors.
  const logsBody = document.getElementById("logs-body");
  const logRows = [];
  const journals = data.journals;
  if (journals.Err !== undefined) {
    logsBody.append(el("p", { class: "error" }, "The journals could not be summarised: " + journals.Err));
  } else if (journals.Ok.nodes.length === 0) {
    logsBody.append(el("p", { class: "muted" }, "No journals in this bundle: systemd-logs did not run, or found none."));
  } else {
    const j = journals.Ok;
    logsBody.append(el("p", { class: "muted" }, count(j.entries, "entry", "entries") + " in the journals of " +
      count(j.nodes.length, "node") + "; " + count(j.error_count, "error") + " (priority err or more severe)."));
    const counts = (head, rows) => el("table", { class: "counts" },
      el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((c, i) =>
        el("td", { class: i === 0 ? "" : "number" }, c))))));
    logsBody.append(el("h3", {}, "By priority"),
      counts(["Priority", "Entries"], j.by_priority.map((p) => [p.priority, p.entries])));
    logsBody.append(el("h3", {}, j.unit_count > j.units.length
      ? "The " + j.units.length + " units that logged most, of " + j.unit_count : "By unit"),
      counts(["Unit", "Entries", "Errors"], j.units.map((u) => [u.unit, u.entries, u.errors])));
    if (j.errors.length > 0) {
      logsBody.append(el("h3", {}, j.error_count > j.errors.length
        ? "The latest " + j.errors.length + " errors, of " + j.error_count : "Errors"));
      const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Node"),
        el("th", {}, "Unit"), el("th", {}, "Priority"), el("th", {}, "Message"))));
      const tbody = el("tbody");
      for (const e of j.errors) {
        const row = el("tr", {}, el("td", {}, at(e.time)), el("td", {}, e.node), el("td", {}, e.unit),
          el("td", {}, e.priority), el("td", { class: "value" }, e.message));
        row.dataset.search = lower([e.node, e.unit, e.priority, e.message].join(" "));
        logRows.push(row);
        tbody.append(row);
      }
      table.append(tbody);
      logsBody.append(table);
    }
  }

  // A section per plugin the page has no view of its own for: its facts and its tables.
  const tablesByPlugin = new Map();
  for (const script of document.querySelectorAll("script.table")) {
    const doc = JSON.parse(script.textContent);
    if (!tablesByPlugin.has(doc.plugin)) tablesByPlugin.set(doc.plugin, []);
    tablesByPlugin.get(doc.plugin).push(doc);
  }
  const pluginOf = (source) => source.split("/")[0];
  const otherPlugins = [];
  const addPlugin = (name) => { if (!data.own_views.includes(name) && !otherPlugins.includes(name)) otherPlugins.push(name); };
  run.plugins.forEach((p) => addPlugin(p.name));
  for (const docs of facts().values()) docs.forEach((d) => addPlugin(pluginOf(d.plugin)));
  data.tables.forEach((t) => addPlugin(t.plugin));
  // Node -> the text of its rows in other plugins' tables, for the search.
  const tableText = new Map();
  const pluginRows = [];
  const pluginsDiv = document.getElementById("plugins");
  for (const name of otherPlugins) {
    const version = (run.plugins.find((p) => p.name === name) || {}).version;
    const outcomes = summary.results.filter((r) => r.plugin === name).map(outcome);
    const tally = [...new Set(outcomes)].map((o) => o + " on " + count(outcomes.filter((x) => x === o).length, "node"));
    const section = el("section", { class: "plugin", "data-plugin": name },
      el("h2", {}, "Plugin " + name + (version ? " " + version : "")),
      el("p", { class: "muted" }, tally.length > 0 ? tally.join(", ") + "." : "No results."));
    // Its facts across the fleet: each fact's values, and the nodes that have each.
    const MAX_FACT_ROWS = 2000;
    const byFact = new Map();
    for (const [node, docs] of facts()) {
      for (const doc of docs.filter((d) => pluginOf(d.plugin) === name)) {
        for (const [path, value] of leaves(doc.facts, "", [])) {
          const key = JSON.stringify([doc.plugin, path, show(value)]);
          if (!byFact.has(key)) byFact.set(key, { source: doc.plugin, path, value: show(value), nodes: [] });
          byFact.get(key).nodes.push(node);
        }
      }
    }
    const factValues = [...byFact.values()].sort((a, b) =>
      a.path.localeCompare(b.path, undefined, { numeric: true }) || a.value.localeCompare(b.value));
    if (factValues.length > 0) {
      const nodeCount = new Set([...byFact.values()].flatMap((f) => f.nodes)).size;
      const rows = factValues.slice(0, MAX_FACT_ROWS).map((f) => {
        const who = f.nodes.length === nodeCount && nodeCount > 1 ? "all " + count(nodeCount, "node")
          : f.nodes.length > 3 ? f.nodes.slice(0, 3).join(", ") + " and " + (f.nodes.length - 3) + " more"
          : f.nodes.join(", ");
        const row = el("tr", { class: drifting.has(f.source + " " + f.path) ? "drift" : "" },
          el("td", { class: "path" }, f.path), el("td", { class: "value" }, f.value), el("td", {}, who));
        row.dataset.search = lower([f.path, f.value, ...f.nodes].join(" "));
        return row;
      });
      section.append(el("h3", {}, "Facts"));
      if (factValues.length > MAX_FACT_ROWS) {
        section.append(el("p", { class: "muted" }, "The first " + MAX_FACT_ROWS + " of " + factValues.length +
          " facts and values; each node's are under Nodes, and factbuoy inspect facts " + data.bundle + " NODE " + name + " prints them."));
      }
      section.append(el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Fact"), el("th", {}, "Value"), el("th", {}, "Nodes"))),
        el("tbody", {}, ...rows)));
      pluginRows.push(...rows);
    }
    // Its tables: a row per row, the node first, then every column any row shown has.
    for (const table of data.tables.filter((t) => t.plugin === name)) {
      const docs = (tablesByPlugin.get(name) || []).filter((d) => d.artifact === table.artifact);
      const columns = [];
      for (const doc of docs) for (const row of doc.rows) for (const c of Object.keys(row)) if (!columns.includes(c)) columns.push(c);
      section.append(el("h3", {}, "Table " + table.artifact + " (" + count(table.rows, "row") +
        (table.row_keys.length > 0 ? ", a row per " + table.row_keys.join(", ") : "") + ")"));
      if (table.shown < table.rows) {
        section.append(el("p", { class: "muted" }, "The first " + table.shown + " rows; all of them: factbuoy inspect sql " +
          data.bundle + " 'SELECT * FROM " + table.sql_table + "'"));
      }
      const tbody = el("tbody");
      for (const doc of docs) {
        for (const row of doc.rows) {
          const cells = columns.map((c) => Object.hasOwn(row, c) ? show(row[c]) : "");
          const tr = el("tr", {}, el("td", {}, doc.node), ...cells.map((c) => el("td", { class: "value" }, c)));
          tr.dataset.search = lower([doc.node, ...cells].join(" "));
          tableText.set(doc.node, (tableText.get(doc.node) || "") + "\n" + tr.dataset.search);
          pluginRows.push(tr);
          tbody.append(tr);
        }
      }
      section.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Node"),
        ...columns.map((c) => el("th", {}, c)))), tbody));
    }
    pluginsDiv.append(section);
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
    for (const [node, text] of tableText) if (text.includes(query)) found.add(node);
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
    for (const row of [...driftRows, ...errorRows, ...logRows, ...pluginRows]) {
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
