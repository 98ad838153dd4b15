// The runs this machine knows (/api/v1/runs), asked again every few seconds so that a new
// run appears without a reload. Texts go in through text nodes, never as HTML.
import { $, el, json } from "/assets/page.js";

(function () {
  const EVERY_MS = 5000;
  // As `factbuoy runs` says it: `complete, 1 failed`, or why it is not known.
  function state(run) {
    if (!run.status) return run.note || "unknown (see its page)";
    const said = run.failed_results ? run.status + ", " + run.failed_results + " failed" : run.status;
    return run.note ? said + " (" + run.note + ")" : said;
  }

  async function refresh() {
    try {
      const { runs } = await json("/api/v1/runs");
      $("banner").classList.add("hidden");
      $("empty").classList.toggle("hidden", runs.length > 0);
      const rows = runs.map((run) => el("tr", {},
        el("td", {}, run.current ? "*" : ""),
        el("td", {}, el("a", { href: "/runs/" + encodeURIComponent(run.run_id) }, run.run_id)),
        el("td", {}, run.kind),
        el("td", {}, run.created || "–"),
        el("td", { class: run.status || "" }, state(run)),
        el("td", { class: "mono" }, run.place)));
      const head = el("tr", {}, ...["", "Run", "Kind", "Created", "State", "Where"].map((h) => el("th", {}, h)));
      $("runs").replaceChildren(...(runs.length ? [head, ...rows] : []));
    } catch (e) {
      $("banner").textContent = "Could not list the runs: " + e.message;
      $("banner").classList.remove("hidden");
    }
  }
  refresh();
  setInterval(refresh, EVERY_MS);
})();
