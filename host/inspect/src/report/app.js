"use strict";
// Renders the report from the JSON embedded above it. Every text from the bundle goes in
// through text nodes, never as HTML.
//
// A report of several origins (a cluster's run and a fleet's) is a group per origin: each its
// own data, facts and part of the page (ids ending in "-g<N>", scripts with data-group="N"),
// rendered apart, so that web-1 of the cluster and web-1 of the fleet are two rows in two
// groups, never one. A report of one bundle has no group marks.
function renderGroup(dataScript) {
  const group = dataScript.dataset.group;
  const suffix = group === undefined ? "" : "-g" + group;
  const byId = (id) => document.getElementById(id + suffix);
  // This group's scripts of a class.
  const scripts = (cls) => document.querySelectorAll("script." + cls +
    (group === undefined ? ":not([data-group])" : '[data-group="' + group + '"]'));
  const data = JSON.parse(dataScript.textContent);
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

  // Each node's facts: per source, the first document's leaves (the base), and each document
  // as what differs from it, in gzip chunks inflated on first need (report.rs, packed.rs).
  const bases = new Map();
  for (const script of scripts("facts-base")) {
    const base = JSON.parse(script.textContent);
    bases.set(base.source, base.leaves);
  }
  let inflated = null;
  // Node -> its documents' differences: [{source, set: [[path, value]], unset: [path]}].
  function differences() {
    if (inflated === null) {
      inflated = (async () => {
        const byNode = new Map();
        for (const script of scripts("facts-gz")) {
          const binary = atob(script.textContent);
          const bytes = new Uint8Array(binary.length);
          for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
          const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
          for (const d of JSON.parse(await new Response(stream).text())) {
            if (!byNode.has(d.node)) byNode.set(d.node, []);
            byNode.get(d.node).push(d);
          }
        }
        return byNode;
      })();
    }
    return inflated;
  }
  // A document's leaves, [path, value], written as `factbuoy inspect facts` writes paths: the
  // base's, changed or left out as the differences say, then those the base lacks.
  function leavesOf(d) {
    const set = new Map(d.set);
    const unset = new Set(d.unset);
    const out = [];
    for (const [path, value] of bases.get(d.source) || []) {
      if (unset.has(path)) continue;
      if (set.has(path)) {
        out.push([path, set.get(path)]);
        set.delete(path);
      } else {
        out.push([path, value]);
      }
    }
    for (const leaf of set) out.push(leaf);
    return out;
  }
  const drifting = new Set();
  for (const group of data.drift.groups) {
    for (const fact of group.facts) drifting.add(fact.plugin + " " + fact.path);
  }

  // Header.
  if (group === undefined) document.title = "factbuoy report: run " + run.run_id;
  // Which cluster, fleet or host the group's nodes are of.
  if (data.origin) byId("origin-label").append(data.origin.label + ": run " + run.run_id);
  // A run that completed with failed results says so: "complete" alone would look all green.
  const failures = summary.results.filter(failing);
  const badge = run.status === "complete" && failures.length > 0
    ? el("span", { class: "badge failed" }, "complete with " + count(failures.length, "failure"))
    : el("span", { class: "badge " + run.status }, run.status);
  byId("title").append(": run " + run.run_id + " ", badge);
  const plugins = run.plugins.map((p) => p.name + " " + (p.version || "")).join(", ");
  byId("meta").append(
    data.bundle + " · " + count(run.nodes.length, "node") + " · created " + at(run.created) +
    " · last activity " + at(run.last_activity) + " · factbuoy " +
    (run.factbuoy_version || "unknown") + (plugins ? " · plugins: " + plugins : "") +
    " · report generated " + at(data.generated));
  if (run.error) byId("meta").append(el("div", { class: "error" }, run.error));

  // Each node's result per plugin, and the plugins in the status document's order.
  const pluginNames = [];
  const resultsByNode = new Map();
  for (const r of summary.results) {
    if (!pluginNames.includes(r.plugin)) pluginNames.push(r.plugin);
    if (!resultsByNode.has(r.node)) resultsByNode.set(r.node, new Map());
    resultsByNode.get(r.node).set(r.plugin, r);
  }
  const keyCells = (node) => Object.hasOwn(data.key_facts.nodes, node)
    ? data.key_facts.nodes[node] : data.key_facts.labels.map(() => "");
  // The key facts some node has (a fleet without setup's facts has no memory column).
  const kept = data.key_facts.labels.map((_, i) => i)
    .filter((i) => run.nodes.some((node) => keyCells(node)[i] !== ""));
  const labels = kept.map((i) => data.key_facts.labels[i]);
  // A row per node: its key facts, then each plugin's outcome ("-": no result).
  const fleetRows = run.nodes.map((node) => {
    const keys = kept.map((i) => keyCells(node)[i]);
    const results = resultsByNode.get(node) || new Map();
    const outcomes = pluginNames.map((p) => results.has(p) ? outcome(results.get(p)) : "-");
    const cells = [node, ...keys, ...outcomes];
    return { node, cells, search: lower(cells.join(" ")) };
  });
  const columns = ["Node", ...labels, ...pluginNames];
  // Columns whose cells are numbers sort as numbers.
  const numeric = columns.map((_, i) => i > 0 && fleetRows.every((r) => r.cells[i] === "" || !isNaN(Number(r.cells[i]))));

  // The answer first: the results by outcome, each a filter on the node table.
  const kinds = [
    ["passed", (r) => outcome(r) === "passed"],
    ["failed", (r) => outcome(r) === "failed"],
    ["lost or timed out", (r) => ["lost", "timed-out", "interrupted"].includes(outcome(r))],
    ["skipped", (r) => outcome(r) === "skipped"],
    ["with warnings", (r) => (r.warnings || []).length > 0],
  ];
  const band = byId("band");
  band.append(el("span", { class: "band-item" }, el("strong", {}, count(run.nodes.length, "node"))));
  for (const [kind, test] of kinds) {
    const matching = summary.results.filter(test);
    if (matching.length === 0 && kind !== "failed" && kind !== "passed") continue;
    const tone = kind === "passed" ? "passed" : matching.length === 0 ? "muted"
      : kind === "with warnings" ? "warning" : "failed";
    const link = el("a", { href: "#fleet" + suffix, class: "band-item " + tone,
      "data-kind": kind }, count(matching.length, "result") + " " + kind);
    link.addEventListener("click", () => {
      const nodes = new Set(matching.map((r) => r.node));
      setFilter({ label: count(matching.length, "result") + " " + kind, keep: (row) => nodes.has(row.node) });
    });
    band.append(link);
  }

  // Distributions: a bar chart per key fact and per plugin's result, each bar a filter.
  const charts = byId("charts");
  const MAX_BARS = 8;
  const memoryBucket = (mib) => {
    const n = Number(mib);
    if (mib === "" || isNaN(n)) return "";
    let gib = 1;
    while (gib * 1024 < n) gib *= 2;
    return "≤ " + gib + " GiB";
  };
  const chartOf = (title, column, bucket) => {
    const tally = new Map();
    for (const row of fleetRows) {
      const value = bucket(row.cells[column]);
      tally.set(value, (tally.get(value) || 0) + 1);
    }
    let bars = [...tally.entries()].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0]), undefined, { numeric: true }));
    if (bars.length > MAX_BARS) {
      const rest = bars.slice(MAX_BARS - 1);
      const others = new Set(rest.map(([v]) => v));
      bars = [...bars.slice(0, MAX_BARS - 1), [rest.length + " others", rest.reduce((n, [, c]) => n + c, 0), others]];
    }
    const most = Math.max(...bars.map(([, c]) => c));
    const W = 360, H = 20, LABEL = 150;
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("width", W);
    svg.setAttribute("height", bars.length * H);
    svg.setAttribute("role", "img");
    bars.forEach(([value, n, others], i) => {
      const g = document.createElementNS(svg.namespaceURI, "g");
      g.setAttribute("class", "bar");
      g.setAttribute("transform", "translate(0," + i * H + ")");
      const name = value === "" ? "(unknown)" : String(value);
      const text = (x, s, cls) => {
        const t = document.createElementNS(svg.namespaceURI, "text");
        t.setAttribute("x", x);
        t.setAttribute("y", 14);
        if (cls) t.setAttribute("class", cls);
        t.textContent = s;
        return t;
      };
      const label = text(0, name.length > 22 ? name.slice(0, 21) + "…" : name);
      const title = document.createElementNS(svg.namespaceURI, "title");
      title.textContent = name + ": " + count(n, "node");
      const rect = document.createElementNS(svg.namespaceURI, "rect");
      const width = Math.max(2, Math.round((W - LABEL - 60) * n / most));
      rect.setAttribute("x", LABEL);
      rect.setAttribute("y", 3);
      rect.setAttribute("width", width);
      rect.setAttribute("height", H - 6);
      const bad = column >= 1 + labels.length && !["passed", "skipped"].includes(value);
      rect.setAttribute("class", bad ? "bad" : "");
      g.append(title, label, rect, text(LABEL + width + 6, String(n), "n"));
      g.addEventListener("click", () => setFilter({
        label: columns[column] + ": " + name,
        keep: (row) => others ? others.has(bucket(row.cells[column])) : bucket(row.cells[column]) === value,
      }));
      svg.append(g);
    });
    charts.append(el("figure", { class: "chart" }, el("figcaption", {}, title), svg));
  };
  labels.forEach((label, i) => {
    if (label === "Address") return;
    chartOf(label, 1 + i, label.startsWith("Memory") ? memoryBucket : (v) => v);
  });
  pluginNames.forEach((plugin, i) => chartOf(plugin + " result", 1 + labels.length + i, (v) => v));

  // A history's timeline (a report of a directory of bundles): a column per day, its height
  // the facts that changed that day, with the nodes that appeared (green) and stopped
  // reporting (red) below; then the facts that changed most.
  if (data.history) {
    const h = data.history, t = h.timeline;
    byId("history").classList.remove("hidden");
    const body = byId("history-body");
    body.append(el("p", { class: "muted" }, count(t.runs, "run") + " of " + h.dir + " from " +
      at(h.first) + " to " + at(h.last) + " (origin " + h.origin + "); the rest of this page is of the last."));
    const NS = "http://www.w3.org/2000/svg";
    const COLUMN = Math.max(6, Math.min(24, Math.floor(900 / Math.max(1, t.days.length)))), HIGH = 120, LOW = 30;
    const most = Math.max(1, ...t.days.map((d) => d.changes));
    const comings = Math.max(1, ...t.days.map((d) => Math.max(d.appeared, d.stopped)));
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "timeline");
    svg.setAttribute("role", "img");
    svg.setAttribute("width", t.days.length * COLUMN + 40);
    svg.setAttribute("height", HIGH + LOW + 36);
    const shape = (tag, attrs, text) => {
      const s = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) s.setAttribute(k, v);
      if (text !== undefined) s.textContent = text;
      return s;
    };
    t.days.forEach((d, i) => {
      const g = shape("g", { class: "day", transform: "translate(" + i * COLUMN + ",0)" });
      g.append(shape("title", {}, d.date + ": " + count(d.changes, "change") + " on " + count(d.nodes_changed, "node") +
        ", " + count(d.runs, "run") + "; " + d.appeared + " appeared, " + d.stopped + " stopped reporting"));
      const high = Math.round(HIGH * d.changes / most);
      g.append(shape("rect", { class: "changes", x: 1, y: HIGH - high, width: COLUMN - 2, height: Math.max(high, d.changes ? 1 : 0) }));
      const up = Math.round((LOW / 2) * d.appeared / comings), down = Math.round((LOW / 2) * d.stopped / comings);
      if (d.appeared) g.append(shape("rect", { class: "appeared", x: 1, y: HIGH + LOW / 2 - up + 4, width: COLUMN - 2, height: Math.max(up, 1) }));
      if (d.stopped) g.append(shape("rect", { class: "stopped", x: 1, y: HIGH + LOW / 2 + 4, width: COLUMN - 2, height: Math.max(down, 1) }));
      svg.append(g);
    });
    svg.append(shape("text", { x: 0, y: HIGH + LOW + 20 }, t.days.length ? t.days[0].date : ""));
    if (t.days.length > 1) svg.append(shape("text", { x: t.days.length * COLUMN, y: HIGH + LOW + 20, "text-anchor": "end" }, t.days[t.days.length - 1].date));
    svg.append(shape("text", { x: t.days.length * COLUMN + 4, y: 10 }, String(most)));
    body.append(el("figure", { class: "chart" }, el("figcaption", {}, "Facts changed per day; nodes appeared and stopped reporting"), svg));
    if (t.top.length) {
      const table = el("table", { class: "counts", id: "history-top" + suffix },
        el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Fact"), el("th", {}, "Changes"), el("th", {}, "Nodes")));
      for (const f of t.top) {
        table.append(el("tr", {}, el("td", {}, f.plugin), el("td", { class: "path" }, f.path),
          el("td", { class: "number" }, f.changes), el("td", { class: "number" }, f.nodes)));
      }
      body.append(el("h3", {}, "Facts that changed most"), table,
        el("p", { class: "muted" }, "`factbuoy inspect history DIR PATH` lists each change with its run."));
    } else {
      body.append(el("p", {}, "No fact changed, but for those that always do."));
    }
  }

  // The node table: sortable by any column, filtered by a chart, a band link, the search and
  // a box per column,
  // a page at a time so that ten thousand nodes cost a hundred rows of DOM.
  const PAGE = 100;
  const fleet = byId("fleet-table");
  const pager = byId("fleet-pager");
  const filterNote = byId("fleet-filter");
  const sort = { column: 0, descending: false };
  let filter = null;
  let searchHits = null;
  let page = 0;
  // The nodes of the page shown, and what else shows them (the Nodes section, below).
  let pageNodes = [];
  let onPage = () => {};
  const heads = columns.map((c, i) => {
    const th = el("th", { class: "sortable", title: "Sort by " + c }, c);
    th.addEventListener("click", () => {
      sort.descending = sort.column === i ? !sort.descending : false;
      sort.column = i;
      page = 0;
      renderFleet();
    });
    return th;
  });
  // A filter box under each column's head: a row is shown when each column's cell holds what
  // its box holds (any case).
  const columnFilters = columns.map(() => "");
  const filterCells = columns.map((c, i) => {
    const input = el("input", { type: "search", class: "column-filter", placeholder: "filter", "aria-label": "Filter by " + c });
    input.addEventListener("input", () => {
      columnFilters[i] = lower(input.value.trim());
      page = 0;
      renderFleet();
    });
    return el("th", {}, input);
  });
  fleet.append(el("thead", {}, el("tr", {}, ...heads), el("tr", { class: "filters" }, ...filterCells)));
  const fleetBody = el("tbody");
  fleet.append(fleetBody);
  function setFilter(f) {
    filter = f;
    page = 0;
    renderFleet();
  }
  function shownRows() {
    const rows = fleetRows.filter((r) => (!filter || filter.keep(r)) && (!searchHits || searchHits.has(r.node)) &&
      columnFilters.every((f, i) => !f || lower(r.cells[i]).includes(f)));
    const c = sort.column;
    rows.sort((a, b) => {
      const order = numeric[c] ? (Number(a.cells[c]) || 0) - (Number(b.cells[c]) || 0)
        : a.cells[c].localeCompare(b.cells[c], undefined, { numeric: true });
      return (sort.descending ? -order : order) || a.node.localeCompare(b.node, undefined, { numeric: true });
    });
    return rows;
  }
  function renderFleet() {
    const rows = shownRows();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    page = Math.min(page, pages - 1);
    const shown = rows.slice(page * PAGE, (page + 1) * PAGE);
    pageNodes = shown.map((r) => r.node);
    fleetBody.replaceChildren(...shown.map((r) => {
      const tr = el("tr", { class: "node-row", "data-node": r.node },
        ...r.cells.map((c, i) => el("td", { class: i > labels.length ? c : "" }, c)));
      tr.addEventListener("click", () => {
        const details = detailsOf(r.node);
        details.classList.remove("hidden");
        details.open = true;
        details.scrollIntoView();
      });
      return tr;
    }));
    heads.forEach((th, i) => th.dataset.sort = i === sort.column ? (sort.descending ? "descending" : "ascending") : "");
    filterNote.replaceChildren();
    if (filter) {
      const clear = el("button", { type: "button" }, "show all");
      clear.addEventListener("click", () => setFilter(null));
      filterNote.append("Only " + filter.label + " ", clear);
    }
    pager.replaceChildren();
    const first = rows.length === 0 ? 0 : page * PAGE + 1;
    pager.append(rows.length + " of " + count(fleetRows.length, "node") + " shown" +
      (rows.length > PAGE ? "; rows " + first + "–" + Math.min(rows.length, (page + 1) * PAGE) : "") + " ");
    if (pages > 1) {
      const go = (label, to, disabled) => {
        const b = el("button", { type: "button" }, label);
        b.disabled = disabled;
        b.addEventListener("click", () => { page = to; renderFleet(); });
        return b;
      };
      pager.append(go("previous", page - 1, page === 0), " page " + (page + 1) + " of " + pages + " ", go("next", page + 1, page === pages - 1));
    }
    onPage();
  }
  renderFleet();

  // Drift: each group of facts that split the nodes alike, a column per set of nodes (the
  // page holds the first sets, facts and groups, and counts the rest: report.rs, PageDrift).
  const driftBody = byId("drift-body");
  const driftRows = [];
  const drift = data.drift;
  const ignored = drift.ignored;
  driftBody.append(el("p", { class: "muted" },
    drift.group_count === 0
      ? "Every fact compared is the same on every node."
      : count(drift.fact_count, "fact") + (drift.fact_count === 1 ? " differs" : " differ") +
        " between nodes, in " + count(drift.group_count, "group") + "." +
        (drift.group_count > drift.groups.length ? " The first " + drift.groups.length + " groups are shown; factbuoy inspect diff " + data.bundle + " lists them all." : ""),
    " " + count(ignored.facts, "fact") + " that change on their own (" +
    count(ignored.patterns.length, "pattern") +
    ": clocks, load, free memory and space, counters) left out."));
  for (const w of drift.without_facts) {
    driftBody.append(el("p", { class: "muted" }, w.node + " has no " + w.plugins.join(" or ") +
      " facts: left out of their comparison."));
  }
  if (drift.alone_count > 0) {
    driftBody.append(el("p", { class: "muted" }, count(drift.alone_count, "node") + (drift.alone_count === 1 ? " has" : " have") +
      " facts no other node has (an address of its own, a mount only it has), not counted as splits of the fleet:"));
    const list = el("ul");
    for (const a of drift.alone) {
      const item = el("li", {}, a.node + ": " + count(a.facts, a.plugin + " fact") + ", " + a.first.join(", ") + (a.facts > a.first.length ? ", ..." : ""));
      item.dataset.search = lower([a.node, a.plugin, ...a.first].join(" "));
      driftRows.push(item);
      list.append(item);
    }
    if (drift.alone_count > drift.alone.length) list.append(el("li", { class: "muted" }, "and " + (drift.alone_count - drift.alone.length) + " more"));
    driftBody.append(list);
  }
  if (drift.without_count > drift.without_facts.length) {
    driftBody.append(el("p", { class: "muted" }, "and " + (drift.without_count - drift.without_facts.length) + " more nodes without some facts."));
  }
  for (const group of drift.groups) {
    const sets = group.node_sets;
    const more = group.set_count - sets.length;
    const name = (set) => set.size > set.nodes.length ? set.nodes.join(", ") + " and " + (set.size - set.nodes.length) + " more" : set.nodes.join(", ");
    const div = el("div", { class: "group" },
      el("div", {}, count(group.fact_count, "fact") + " split the nodes into " + count(group.set_count, "set")),
      el("ol", { class: "sets", type: "A" }, ...sets.map((set) => el("li", {}, name(set)))));
    if (more > 0) div.append(el("div", { class: "muted" }, "and " + more + " more sets" + (group.set_count === run.nodes.length ? " (one per node)" : "")));
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Fact"),
      ...sets.map((_, i) => el("th", {}, String.fromCharCode(65 + i))))));
    const tbody = el("tbody");
    for (const fact of group.facts) {
      const cells = sets.map((_, i) => fact.absent.includes(i)
        ? el("td", { class: "value drift muted" }, "(absent)")
        : el("td", { class: "value drift" }, show(fact.values[i])));
      const row = el("tr", {}, el("td", {}, fact.plugin), el("td", { class: "path" }, fact.path), ...cells);
      row.dataset.search = lower([fact.plugin, fact.path, ...fact.values.map(show), ...sets.flatMap((s) => s.nodes)].join(" "));
      driftRows.push(row);
      tbody.append(row);
    }
    table.append(tbody);
    div.append(table);
    if (group.fact_count > group.facts.length) {
      div.append(el("div", { class: "muted" }, "and " + (group.fact_count - group.facts.length) + " more facts"));
    }
    driftBody.append(div);
  }

  // Problems, right under the band: every failed pair's error, whole, then every warning
  // (what a passed result could not gather). One reason on many nodes is said once, with its
  // nodes ("systemd-logs on 412 nodes: ..."); a node's own name in it reads NODE.
  const errorsBody = byId("errors-body");
  const errorRows = [];
  const groups = new Map();
  const addProblem = (cls, plugin, node, reason) => {
    const general = node === "" ? reason : reason.split(node).join("NODE");
    const key = JSON.stringify([cls, plugin, general]);
    if (!groups.has(key)) groups.set(key, { cls, plugin, general, nodes: [], reasons: [] });
    groups.get(key).nodes.push(node);
    groups.get(key).reasons.push(reason);
  };
  const recorded = new Set();
  for (const e of summary.errors) {
    addProblem("error", e.plugin, e.node, e.error);
    recorded.add(e.plugin + "\u0000" + e.node);
  }
  // A pair that ended without a result and without an error.json still failed.
  for (const r of failures) {
    if (!recorded.has(r.plugin + "\u0000" + r.node)) addProblem("error", r.plugin, r.node, outcome(r) + ", with no error recorded");
  }
  let errorCount = 0, warningCount = 0;
  for (const r of summary.results) {
    for (const w of r.warnings || []) addProblem("warning", r.plugin, r.node, w);
  }
  for (const g of groups.values()) {
    if (g.cls === "error") errorCount += g.nodes.length; else warningCount += g.nodes.length;
  }
  errorsBody.append(el("p", { class: "muted" },
    errorCount === 0 && warningCount === 0 ? "No errors, no warnings."
      : count(errorCount, "error") + ", " + count(warningCount, "warning") + "."));
  const ordered = [...groups.values()].sort((a, b) =>
    (a.cls === b.cls ? 0 : a.cls === "error" ? -1 : 1) || b.nodes.length - a.nodes.length);
  for (const g of ordered) {
    let row;
    if (g.nodes.length === 1) {
      row = el("div", {}, el("strong", {}, g.plugin + " on " + g.nodes[0] + ": "), el("span", { class: g.cls }, g.reasons[0]));
    } else {
      const names = g.nodes.length > 10 ? g.nodes.slice(0, 10).join(", ") + " and " + (g.nodes.length - 10) + " more" : g.nodes.join(", ");
      row = el("div", {}, el("strong", {}, g.plugin + " on " + count(g.nodes.length, "node") + ": "),
        el("span", { class: g.cls }, g.general), el("div", { class: "muted" }, names));
    }
    row.dataset.search = lower([g.plugin, ...g.nodes, ...g.reasons].join(" "));
    errorRows.push(row);
    errorsBody.append(row);
  }

  // Logs: the journals' entries by priority and unit, and the latest errors.
  const logsBody = byId("logs-body");
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
  for (const script of scripts("table")) {
    const doc = JSON.parse(script.textContent);
    if (!tablesByPlugin.has(doc.plugin)) tablesByPlugin.set(doc.plugin, []);
    tablesByPlugin.get(doc.plugin).push(doc);
  }
  const pluginOf = (source) => source.split("/")[0];
  const otherPlugins = [];
  const addPlugin = (name) => { if (!data.own_views.includes(name) && !otherPlugins.includes(name)) otherPlugins.push(name); };
  run.plugins.forEach((p) => addPlugin(p.name));
  for (const source of bases.keys()) addPlugin(pluginOf(source));
  data.tables.forEach((t) => addPlugin(t.plugin));
  // Node -> the text of its rows in other plugins' tables, for the search.
  const tableText = new Map();
  const pluginRows = [];
  const pluginFacts = [];
  // A plugin's facts across the fleet: each fact's values, and the nodes that have each.
  async function fillPluginFacts(name, place) {
    const MAX_FACT_ROWS = 2000;
    const byFact = new Map();
    for (const [node, docs] of await differences()) {
      for (const doc of docs.filter((d) => pluginOf(d.source) === name)) {
        for (const [path, value] of leavesOf(doc)) {
          const key = JSON.stringify([doc.source, path, show(value)]);
          if (!byFact.has(key)) byFact.set(key, { source: doc.source, path, value: show(value), nodes: [] });
          byFact.get(key).nodes.push(node);
        }
      }
    }
    const factValues = [...byFact.values()].sort((a, b) =>
      a.path.localeCompare(b.path, undefined, { numeric: true }) || a.value.localeCompare(b.value));
    if (factValues.length === 0) return;
    const nodeCount = new Set(factValues.flatMap((f) => f.nodes)).size;
    const rows = factValues.slice(0, MAX_FACT_ROWS).map((f) => {
      const who = f.nodes.length === nodeCount && nodeCount > 1 ? "all " + count(nodeCount, "node")
        : f.nodes.length > 3 ? f.nodes.slice(0, 3).join(", ") + " and " + (f.nodes.length - 3) + " more"
        : f.nodes.join(", ");
      const row = el("tr", { class: drifting.has(f.source + " " + f.path) ? "drift" : "" },
        el("td", { class: "path" }, f.path), el("td", { class: "value" }, f.value), el("td", {}, who));
      row.dataset.search = lower([f.path, f.value, ...f.nodes].join(" "));
      return row;
    });
    place.append(el("h3", {}, "Facts"));
    if (factValues.length > MAX_FACT_ROWS) {
      place.append(el("p", { class: "muted" }, "The first " + MAX_FACT_ROWS + " of " + factValues.length +
        " facts and values; each node's are under Nodes, and factbuoy inspect facts " + data.bundle + " NODE " + name + " prints them."));
    }
    place.append(el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Fact"), el("th", {}, "Value"), el("th", {}, "Nodes"))),
      el("tbody", {}, ...rows)));
    pluginRows.push(...rows);
  }
  const pluginsDiv = byId("plugins");
  for (const name of otherPlugins) {
    const version = (run.plugins.find((p) => p.name === name) || {}).version;
    const outcomes = summary.results.filter((r) => r.plugin === name).map(outcome);
    const tally = [...new Set(outcomes)].map((o) => o + " on " + count(outcomes.filter((x) => x === o).length, "node"));
    const section = el("section", { class: "plugin", "data-plugin": name },
      el("h2", {}, "Plugin " + name + (version ? " " + version : "")),
      el("p", { class: "muted" }, tally.length > 0 ? tally.join(", ") + "." : "No results."));
    // Its facts across the fleet (filled in once the facts are inflated).
    const factsPlace = el("div");
    section.append(factsPlace);
    pluginFacts.push(fillPluginFacts(name, factsPlace));
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
  const nodesBody = byId("nodes-body");
  let query = "";
  async function renderFacts(details) {
    if (details.dataset.rendered) return;
    details.dataset.rendered = "1";
    const node = details.dataset.node;
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Fact"), el("th", {}, "Value"))));
    const tbody = el("tbody");
    for (const doc of (await differences()).get(node) || []) {
      for (const [path, value] of leavesOf(doc)) {
        const row = el("tr", { class: drifting.has(doc.source + " " + path) ? "drift" : "" },
          el("td", {}, doc.source), el("td", { class: "path" }, path), el("td", { class: "value" }, show(value)));
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
  const errorsByNode = new Map();
  for (const e of summary.errors) {
    if (!errorsByNode.has(e.node)) errorsByNode.set(e.node, []);
    errorsByNode.get(e.node).push(e);
  }
  // A node's facts, a <details> made when the node is first shown; the section shows the
  // nodes of the table's page, so a fleet of ten thousand costs a hundred of them.
  const nodeDetails = new Map();
  function detailsOf(node) {
    if (!nodeDetails.has(node)) {
      const outcomes = [...(resultsByNode.get(node) || new Map()).values()]
        .map((r) => r.plugin + " " + outcome(r));
      const details = el("details", { "data-node": node },
        el("summary", {}, node + "  ", el("span", { class: "muted" }, outcomes.join(" · "))), el("div"));
      for (const e of errorsByNode.get(node) || []) {
        details.querySelector("div").append(el("p", {}, el("strong", {}, e.plugin + ": "), el("span", { class: "error" }, e.error)));
      }
      details.addEventListener("toggle", () => { if (details.open) renderFacts(details); });
      nodeDetails.set(node, details);
    }
    return nodeDetails.get(node);
  }
  onPage = () => nodesBody.replaceChildren(...pageNodes.map(detailsOf));
  onPage();

  // Search: nodes whose name, key facts, results or any fact match; drift facts and errors
  // that match; inside an open node, the facts that match.
  // A node matches when one of its own leaves does, or a leaf of the base it kept does.
  async function matchingNodes() {
    const byNode = await differences();
    const baseHits = new Map();
    for (const [source, leaves] of bases) {
      baseHits.set(source, leaves.filter(([p, v]) => lower(p + " " + show(v)).includes(query)).map(([p]) => p));
    }
    const found = new Set();
    for (const [node, docs] of byNode) {
      for (const d of docs) {
        if (d.text === undefined) d.text = lower(d.set.map(([p, v]) => p + " " + show(v)).join("\n"));
        if (d.text.includes(query)) { found.add(node); break; }
        const hits = baseHits.get(d.source) || [];
        if (hits.length === 0) continue;
        if (d.changed === undefined) d.changed = new Set([...d.unset, ...d.set.map(([p]) => p)]);
        if (hits.some((p) => !d.changed.has(p))) { found.add(node); break; }
      }
    }
    for (const [node, text] of tableText) if (text.includes(query)) found.add(node);
    return found;
  }
  // A search opens every node it matches, showing the facts that match, and says how many.
  const search = byId("search");
  const searchCount = el("span", { id: "search-count" + suffix, class: "muted" });
  search.after(searchCount);
  const openedBySearch = new Set();
  // At most this many nodes are opened by a search: their facts are rendered whole.
  const MAX_OPENED = 20;
  let searches = 0;
  async function runSearch() {
    const mine = ++searches;
    query = lower(search.value.trim());
    const inFacts = query === "" ? null : await matchingNodes();
    // A later search has begun: it draws, not this one.
    if (mine !== searches) return;
    searchHits = query === "" ? null
      : new Set(fleetRows.filter((r) => r.search.includes(query) || inFacts.has(r.node)).map((r) => r.node));
    page = 0;
    renderFleet();
    const matches = searchHits ? searchHits.size : 0;
    searchCount.textContent = query === "" ? ""
      : " " + count(matches, "node") + (matches === 1 ? " matches" : " match") +
        (matches > MAX_OPENED ? "; the first " + MAX_OPENED + " are opened below" : "");
    let opened = 0;
    for (const details of pageNodes.map(detailsOf)) {
      const hidden = searchHits !== null && !searchHits.has(details.dataset.node);
      details.classList.toggle("hidden", hidden);
      if (query !== "" && !hidden && !details.open && opened < MAX_OPENED) {
        details.open = true;
        await renderFacts(details);
        openedBySearch.add(details);
      } else if (query === "" && openedBySearch.has(details)) {
        details.open = false;
        openedBySearch.delete(details);
      }
      if (details.open) opened++;
      if (details.dataset.rendered) filterFacts(details);
    }
    for (const row of [...driftRows, ...errorRows, ...logRows, ...pluginRows]) {
      row.classList.toggle("hidden", query !== "" && !row.dataset.search.includes(query));
    }
  }
  search.addEventListener("input", () => { runSearch(); });

  // Done once the facts are in and a search a link carries (report.html#q=kernel) is done.
  return (async () => {
    await Promise.all(pluginFacts);
    if (location.hash.startsWith("#q=")) {
      search.value = decodeURIComponent(location.hash.slice(3));
      await runSearch();
    }
  })();
}

(function () {
  const groups = [...document.querySelectorAll("script.data")];
  const estate = document.getElementById("estate");
  if (estate) {
    // A report of several origins: say so, and link each group by its origin's words.
    document.title = "factbuoy report: " + groups.length + " origins";
    const list = document.createElement("ul");
    for (const script of groups) {
      const data = JSON.parse(script.textContent);
      const link = document.createElement("a");
      link.href = "#origin-g" + script.dataset.group;
      const nodes = data.summary.run.nodes.length;
      link.append(data.origin.label + " (" + nodes + (nodes === 1 ? " node" : " nodes") +
        ", run " + data.summary.run.run_id + ")");
      const item = document.createElement("li");
      item.append(link);
      list.append(item);
    }
    estate.append(list);
  }
  // The page says it is whole once every group is.
  Promise.all(groups.map(renderGroup)).then(() => {
    document.body.dataset.rendered = "ok";
  }).catch((e) => {
    document.body.dataset.rendered = "failed";
    console.error(e);
  });
})();
